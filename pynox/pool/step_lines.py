"""The file names of a session's steps, and how many steps' lines linecache keeps.

Tracebacks, warnings and `inspect.getsource` find a line by its code's file name, as
python finds a file's. Python's REPL names each input apart (`<python-input-3>`) so that
a function an earlier input defined still shows its own lines; a step the client did
not name is named after its number the same way. A name in angle brackets is never
looked for on disk, so a step whose lines were let go of shows none rather than a file
of that name. Unlike the REPL, a session may run for thousands of steps: only the
latest steps' lines are kept.
"""

import linecache

# The latest steps whose lines are kept, at most so many, and so many bytes of source in
# memory together; the step that runs is always kept, whatever its size.
MAX_STEPS_KEPT = 1000
MAX_SOURCE_KEPT = 16 * 1024 * 1024

# The names whose lines a step put in linecache, oldest first, with their source's size
# in memory, and those sizes' sum (kept as it changes: a step should not add up 1,000).
kept: "dict[str, int]" = {}
_kept_size = 0


def keep(name: str, size: int) -> None:
    """A step of that name is about to put its lines in linecache: the oldest steps'
    lines are let go of past the bounds (a name given to several steps keeps the
    latest's lines, as python shows a file's latest)."""
    global _kept_size
    total = _kept_size - kept.pop(name, 0) + size
    kept[name] = size
    while len(kept) > 1 and (len(kept) > MAX_STEPS_KEPT or total > MAX_SOURCE_KEPT):
        oldest = next(iter(kept))
        total -= kept.pop(oldest)
        linecache.cache.pop(oldest, None)
    _kept_size = total
