import sys

sys.excepthook = None
print("hook is None")
raise LookupError("shown after the hook's TypeError")
