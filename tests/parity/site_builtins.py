"""What site adds to builtins for the interactive shell, worded by this CPython's own site."""

print(repr(copyright).splitlines()[0])
print(repr(credits))
print(repr(help))
print(repr(exit), repr(quit), sep="\n")
print(repr(license))
credits()
license()  # pages the license text; "q" on stdin ends it after the first page
print(type(credits).__name__, type(license).__name__)
