#!/usr/bin/env python3
# A script with a shebang line, run as `python shebang.py`.
import sys

print("shebang is just a comment:", sys.argv[0])
print(open(__file__).readline().rstrip())
