import sys

for i in range(20000):
    print(f"line {i:05d} " + "x" * (i % 17))
print("stderr tail", file=sys.stderr)
sys.stderr.write("e" * 70000 + "\n")
