"""Run with stderr merged into stdout: the order shows how each stream is buffered."""
import sys

print("out 1")
print("err 1", file=sys.stderr)
print("out 2")
sys.stdout.flush()
print("err 2", file=sys.stderr)
sys.stderr.write("err 3 without newline ")
print("out 3")
sys.stderr.write("err 4\n")
print("out 4", flush=True)
print("out 5")
