import atexit
import sys


def hook(kind, value, tb):
    print(f"hook saw {kind.__name__}, exits with 5", file=sys.stderr)
    raise SystemExit(5)


atexit.register(print, "atexit runs")
sys.excepthook = hook
raise ValueError("never shown")
