import sys

print("exiting with 3")
sys.stdout.flush()
sys.exit(3)
