"""A program that adopts the user's locale, as command-line tools commonly do.

python runs with LANG=C.UTF-8 here, so setlocale(LC_ALL, "") keeps UTF-8 and
open() decodes the data file; the locale must not silently become "C" (ASCII).
"""
import locale

print(locale.setlocale(locale.LC_ALL, ""))
print(locale.getpreferredencoding(False))
with open("data.txt") as f:
    print(f.encoding, f.read().splitlines()[1])
