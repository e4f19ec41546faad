"""A program that closes its own stdout (as json.tool does with its output file)."""
import sys

print("last line before closing")
sys.stdout.close()
print("stderr still works", file=sys.stderr)
