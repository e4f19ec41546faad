"""Following a hint: the grants a `pynox:` hint line names, as flags to run with."""

from __future__ import annotations

import re

# A flag with its value, as hints write them: --allow-read=/some/path
_FLAG = re.compile(r"(--[a-z-]+(?:=\S+)?)")


def hint_line(stderr: bytes | str) -> str:
    """The last `pynox:` line of a run's stderr: the hint that follows the traceback."""
    text = stderr.decode() if isinstance(stderr, bytes) else stderr
    lines = [line for line in text.splitlines() if line.startswith("pynox: ")]
    assert lines, f"no hint in:\n{text}"
    return lines[-1]


def hinted_flags(stderr: bytes | str) -> list[str]:
    """The flags a hint tells the user to add (what follows "grant it with")."""
    line = hint_line(stderr)
    _, found, grants = line.partition(" with ")
    assert found, f"the hint names no grant: {line}"
    flags = [flag.rstrip(".,;") for flag in _FLAG.findall(grants)]
    assert flags, f"the hint names no grant: {line}"
    return flags
