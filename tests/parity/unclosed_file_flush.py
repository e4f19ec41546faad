"""A file written but never closed: python flushes it when the program ends.

The corpus may not write files (no write grant), so the file is a second
descriptor of stdout; a file in a granted directory behaves the same.
"""
import os

out = open(os.dup(1), "w")
out.write("written to an unclosed file, flushed at exit\n")
log = open(os.dup(2), "w", buffering=1 << 16)
log.write("an unclosed log on stderr\n")


def main():
    print("main() defines a function, so the module's globals form a cycle")


main()
