import sys

try:
    {}["k"]
except KeyError:
    err = LookupError("context suppressed")
    print(err.__suppress_context__, file=sys.stderr)
    raise err from None
