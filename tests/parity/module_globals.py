"""The docstring of the main module."""
import sys

print(__name__)
print(__file__)
print(__doc__)
print(list(globals()))
print(type(__builtins__).__name__, __builtins__.__name__)
print(type(__loader__).__name__, __loader__.name, __loader__.path == __file__)
print(__spec__, __package__, __cached__)
print(__annotations__)
x: int = 5
print(__annotations__)
print(sys.modules["__main__"] is sys.modules[__name__])
print(globals() is sys.modules["__main__"].__dict__)
print(sys.argv[0])
