# An object that only the failed function's frame holds, with a __del__ that uses a module
# global: python frees it with the error, before it empties the modules, so it runs whole
# (fileinput's backup removal, tempfile's clean-up and a log's last flush are such).
import os


class Closer:
    def __del__(self):
        print("closed", os.path.join("work", "resource"))


def work():
    resource = Closer()  # noqa: F841 - held by this frame only
    raise ValueError("the work failed")


work()
