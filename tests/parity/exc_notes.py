import sys


class AppError(Exception):
    def __str__(self):
        return "line one\nline two of a multi-line message"


err = AppError()
if sys.version_info >= (3, 11):
    err.add_note("a note added by the program")
    err.add_note("a second note")
print("raising")
raise err
