"""Compiling the bundle's Python files ahead of time, reproducibly.

A sandboxed run cannot write __pycache__, so without bytecode every run would
compile the standard library it imports. The .pyc files use the
unchecked-hash mode (PEP 552): valid wherever the tree is copied or moved,
whatever the files' timestamps. PYTHONHASHSEED=0, one process, a fixed environment
and, for CPython 3.10 and 3.11, a normalization of marshal's reference flags (see
pyc_normalize) keep the bytes the same from one build to the next.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bundler import commands
from bundler.commands import CommandFailed
from bundler.pyc_normalize import normalize_tree


def _probe(python: str) -> tuple[str | None, str]:
    """(the CPython minor of an interpreter, ""), or (None, why it does not run here)."""
    code = "import sys; print('%d.%d' % sys.version_info[:2])"
    try:
        done = commands.run([python, "-I", "-c", code], capture=True, check=False, timeout=60)
    except CommandFailed as exc:
        return None, exc.message
    if done.returncode == 0:
        return done.stdout.strip(), ""
    said = (done.stdout + done.stderr).strip().splitlines()
    return None, said[-1] if said else f"exit status {done.returncode}"


def why_not_running(python: Path) -> str:
    """Why an interpreter does not run here, in a few words ("" when it runs)."""
    return _probe(str(python))[1]


def compiler_for(own: Path, minor: str) -> str | None:
    """The runtime's own interpreter if it runs here, else a local CPython of the same minor."""
    for candidate in (str(own), shutil.which(f"python{minor}")):
        if candidate and _probe(candidate)[0] == minor:
            return candidate
    return None


# The one environment of both: PYTHONHASHSEED=0, and nothing of the caller's.
ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0"}

# compileall with the cyclic garbage collector off: when a collection runs depends on
# how much the process allocated (longer paths, more allocations), and what it frees
# changes reference counts, which marshal turns into different bytes (FLAG_REF).
COMPILEALL = (
    "import gc, sys, compileall; gc.disable(); sys.argv[0] = 'compileall'; "
    "sys.exit(int(not compileall.main()))"
)


def compile_tree(python: str, minor: str, root: Path, folders: list[Path]) -> None:
    # Not -I: isolated mode would ignore PYTHONHASHSEED, and hash randomization changes
    # the bytes (set constants, interned strings). One process (-j 1), files in sorted
    # order, and the same small environment (the caller's would change what the process
    # allocates, so what it holds) keep them the same from one build to the next; -B keeps
    # the imports of compileall itself from leaving timestamp-based files behind.
    command = [
        python, "-B", "-S", "-s", "-c", COMPILEALL, "-f", "-q", "-j", "1",
        "--invalidation-mode", "unchecked-hash", "-s", str(root), *map(str, folders),
    ]  # fmt: skip
    commands.run(command, env=ENV, failure="compiling the bundle's Python files failed")
    for folder in folders:
        normalize_tree(folder, minor)


def write_boot_image(python: str, package: Path) -> None:
    """pynox's start-up image (pynox/_boot.py), made by the bundle's CPython minor.

    Made here and never at run time: nothing a sandboxed run writes may become code
    that a later run executes. The same hash seed and environment as compile_tree keep
    its bytes the same from one build to the next.
    """
    cache = package / "__pycache__"
    cache.mkdir(exist_ok=True)
    command = [python, "-B", "-S", "-s", "-m", "pynox._boot", "--write-image", str(cache)]
    commands.run(
        command, env=ENV, cwd=package.parent, failure="writing pynox's start-up image failed"
    )
