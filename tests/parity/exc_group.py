import sys

if sys.version_info >= (3, 11):
    def work():
        errors = [ValueError("bad value"), TypeError("bad type")]
        try:
            raise KeyError("inner")
        except KeyError as exc:
            errors.append(exc)
        raise ExceptionGroup("several things failed", [
            *errors, ExceptionGroup("nested", [OSError(2, "No such file")])])

    try:
        work()
    except* TypeError as group:
        print("handled:", [repr(e) for e in group.exceptions])
    print("unreachable")
else:  # the same output on older Pythons is not the point; keep parity
    raise ValueError("bad value")
