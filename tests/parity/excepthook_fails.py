import sys


def hook(kind, value, tb):
    print(f"hook saw {kind.__name__}", file=sys.stderr)
    try:
        {}["missing"]
    except KeyError:
        raise RuntimeError("the hook itself failed")


sys.excepthook = hook
print("installed")


def fail():
    raise ValueError("for the hook")


fail()
