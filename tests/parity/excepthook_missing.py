import sys

del sys.excepthook
print("no hook")
raise LookupError("shown all the same")
