import sys

print("about to fail")
sys.exit("fatal: the message goes to stderr")
