import sys

name = input("name? ")
age = input()
print(f"hello {name}, {int(age) + 1} next year")
rest = sys.stdin.read()
print(repr(rest))
try:
    input("more? ")
except EOFError as exc:
    print("EOFError", repr(exc))
