import atexit
import sys


class LateFailure:
    """A callable with a stable repr: CPython prints the callback's repr."""

    def __call__(self):
        print("handler raising")
        raise ValueError("an exception inside an atexit handler")

    def __repr__(self):
        return "<LateFailure>"


atexit.register(print, "runs after the failing handler")
atexit.register(LateFailure())
print("main done")
sys.exit(2)
