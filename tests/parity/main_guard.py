"""Behaves differently when imported and when run."""
import sys


def main(argv):
    print("running as main with", argv)
    return 0


print("module body runs with __name__ =", __name__)
if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
