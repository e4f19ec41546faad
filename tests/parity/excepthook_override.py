import sys


def hook(kind, value, tb):
    print(f"custom hook: {kind.__name__}: {value}", file=sys.stderr)
    print("frames:", len(__import__("traceback").extract_tb(tb)), file=sys.stderr)


sys.excepthook = hook
print("installed")


def fail():
    raise ValueError("handled by the hook")


fail()
