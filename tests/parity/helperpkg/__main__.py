import sys

from helperpkg import VERSION, double

print("helperpkg main", __name__, __package__, VERSION, double(21))
print(sys.argv[1:])
print(sys.argv[0].endswith("__main__.py"), sys.path[0] == __import__("os").getcwd())
