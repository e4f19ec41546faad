"""Following a hint: the grants a `pynox:` hint line names, as flags to run with."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable

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


# Flags whose value is a path the hint names: it must exist, or granting it fails.
_PATH_FLAGS = ("--allow-read", "--allow-write", "--package-dir")


def follow(
    run: Callable[[list[str]], subprocess.CompletedProcess[bytes]],
    grants: list[str],
    steps: int = 4,
) -> tuple[subprocess.CompletedProcess[bytes], list[str]]:
    """Runs with grants, adding each hint's grants, until the run succeeds.

    Returns the successful run and the hint lines seen on the way. A hint that names a
    grant already given, or a path that does not exist, fails the test.
    """
    hints: list[str] = []
    for _ in range(steps):
        proc = run(grants)
        if proc.returncode == 0:
            return proc, hints
        line = hint_line(proc.stderr)
        hints.append(line)
        added = hinted_flags(proc.stderr)
        assert not set(added) & set(grants), f"the hint repeats a grant given: {line}"
        for flag in added:
            name, _, value = flag.partition("=")
            if name in _PATH_FLAGS:
                assert os.path.exists(value), f"the hint names a missing path: {line}"
        grants = grants + added
    raise AssertionError(f"still failing after following {hints}")


def follow_code(
    cwd: str | os.PathLike[str], code: str, grants: list[str], **kwargs: object
) -> tuple[subprocess.CompletedProcess[bytes], list[str]]:
    """`pynox -c code` in cwd, with grants, followed hint by hint (follow) until it works."""
    from support.commands import pynox

    return follow(lambda flags: pynox(*flags, "-c", code, cwd=cwd, **kwargs), grants)
