"""The hard limits pynox was started with, where they are lower than what a run asks for.

pynox keeps a host's hard limit that is lower than the run's --memory or --max-file-size
(runtime/limits.c), and no flag raises it: a hint for a program that reached it names that
limit, not a larger flag that would change nothing.
"""

from pynox import _native
from pynox.unit_format import format_size


def below_asked(asked: "int | None", limit: str) -> "str | None":
    """The lowest hard limit in force among those the run's `limit` ("memory" or
    "max_file_size") sets, as format_size writes it, when it is below `asked`; else None."""
    if asked is None:
        return None
    try:
        hard = _native.lowest_hard_limit(limit)
    except OSError:  # unknown: the hint names the flag, as for no such limit
        return None
    if hard is None or hard >= asked:
        return None
    return format_size(hard)
