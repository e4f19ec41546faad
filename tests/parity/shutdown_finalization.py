"""What runs at interpreter shutdown, and in which order: CPython's finalization."""
import sys, weakref, io, os


class R:
    def __init__(self, name):
        self.name = name

    def __del__(self):
        print("del", self.name, type(sys).__name__)


def helper():
    return 1


first = R("first")
second = R("second")
_private = R("_private")
last = R("last")


class Node:
    def __init__(self, name):
        self.name = name
        self.other = None

    def __del__(self):
        print("cycle del", self.name)


a, b = Node("a"), Node("b")
a.other, b.other = b, a
del a, b


def gen():
    try:
        yield 1
    finally:
        print("generator finally at shutdown")


g = gen()
next(g)
obj = R("finalized-obj")
weakref.finalize(obj, print, "weakref.finalize callback")
out = io.BufferedWriter(io.FileIO(os.dup(1), "w"))
out.write(b"buffered bytes flushed at shutdown\n")
text = io.TextIOWrapper(io.BufferedWriter(io.FileIO(os.dup(1), "w")))
text.write("text wrapper flushed at shutdown\n")
print("main ends")
