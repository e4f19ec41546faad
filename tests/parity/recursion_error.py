import sys

sys.setrecursionlimit(60)


def descend(n):
    return descend(n + 1)


descend(0)
