import sys

sys.setrecursionlimit(100)
depth = 0


def probe(n):
    global depth
    depth = n
    probe(n + 1)


try:
    probe(1)
except RecursionError as exc:
    print("RecursionError:", exc)
print("deepest call:", depth)
