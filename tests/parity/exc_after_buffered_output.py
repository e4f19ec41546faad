"""Run with stderr merged into stdout: python flushes the output a script buffered
before it prints the traceback that ends it."""
import sys

print("buffered line 1")
sys.stderr.write("stderr line\n")
print("buffered line 2")


def fail():
    raise ValueError("after output")


fail()
