import os
import sys

print("running a directory application")
print(__name__, os.path.basename(__file__), sys.argv)
print(sys.path[0] == os.path.dirname(os.path.abspath(__file__)))
