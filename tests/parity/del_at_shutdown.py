import sys


class Resource:
    def __init__(self, name):
        self.name = name

    def __del__(self):
        print(f"__del__ {self.name}")
        sys.stdout.flush()


temporary = Resource("temporary")
del temporary
GLOBAL = Resource("global, at shutdown")
print("main ends")
