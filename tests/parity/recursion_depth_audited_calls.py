"""Calls that raise an audit event (id(), open()) at the deepest frame the recursion
limit allows: under python they cost no frame of their own, so the program reaches
the same depth as without them."""

import sys

sys.setrecursionlimit(100)
depth = 0


def probe(n, call):
    global depth
    call()
    depth = n
    probe(n + 1, call)


def take_id():
    id(probe)


def read_self():
    with open(__file__, "rb") as source:
        source.read(1)


for name, call in [("id", take_id), ("open", read_self)]:
    depth = 0
    try:
        probe(1, call)
    except RecursionError as exc:
        print(name, "RecursionError:", exc)
    print(name, "deepest call:", depth)
