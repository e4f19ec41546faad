"""sys.argv with arguments of every kind."""
import sys

print(len(sys.argv))
for i, arg in enumerate(sys.argv):
    print(i, repr(arg))
print(sys.orig_argv[-len(sys.argv) + 1:] if len(sys.argv) > 1 else [])
