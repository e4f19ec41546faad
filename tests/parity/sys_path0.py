import os
import sys

print(sys.path[0])
print(sys.path[0] == os.path.dirname(os.path.abspath(__file__)))
print(os.getcwd() == sys.path[0])
print(os.path.basename(sys.argv[0]))
