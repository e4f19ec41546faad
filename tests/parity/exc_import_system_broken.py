import sys

print("before")
sys.meta_path.clear()  # no module can be imported from here on
print(1 / 0)
