"""The one sentence with which every pynox command refuses a flag it does not take."""

from pynox.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def closest_flag(given: str, known: "Sequence[str]") -> "str | None":
    """The flag of known that given most likely misspells, if one is close."""
    import difflib  # only on this error path

    close = difflib.get_close_matches(given, list(known), n=1)
    return close[0] if close else None


def flag_refused(
    command: str, given: str, known: "Sequence[str]", takes: "str | None" = None
) -> UsageError:
    """`command` ("pynox pool") does not take `given` (a flag without its value): the
    closest of its flags, `known`, where one is close, else `takes`, what to do to learn
    them, else the flags themselves."""
    close = closest_flag(given, known)
    if close is not None:
        rest = f"did you mean {close}?"
    elif takes is not None:
        rest = takes
    elif len(known) == 1:
        rest = f"it takes only {known[0]}"
    else:
        rest = f"it takes {', '.join(known[:-1])} and {known[-1]}"
    return UsageError(f"{command} does not take {given}; {rest}")
