"""How deeply nested data repr() and json.dumps() take before RecursionError: C code
counts its own nesting (apart from Python calls on 3.12 and 3.13), and a program starts
with the whole budget under python, whatever ran before it."""

import json
import sys


def nested(depth):
    data = 1
    for _ in range(depth):
        data = [data]
    return data


def deepest(encode):
    low, high = 1, 1 << 16  # above any budget of CPython's nested-call count
    while low < high:
        middle = (low + high + 1) // 2
        try:
            encode(nested(middle))
        except RecursionError:
            high = middle - 1
        else:
            low = middle
    return low


if sys.version_info >= (3, 14):
    # 3.14 bounds C recursion by the room left on the C stack, not by a count.
    print("repr and json.dumps nest as deep as the C stack allows")
else:
    print("repr:", deepest(repr))
    print("json.dumps:", deepest(json.dumps))
