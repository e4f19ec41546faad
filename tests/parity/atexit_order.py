import atexit
import sys


def handler(name, *, sep=":"):
    print("atexit", name, sep, "end")


atexit.register(handler, "first")
atexit.register(handler, "second", sep="=")


@atexit.register
def third():
    print("atexit third", file=sys.stderr)


def removed():
    print("never printed")


atexit.register(removed)
atexit.unregister(removed)
print("main ends")
