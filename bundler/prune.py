"""What a bundle leaves out of the runtime: what a sandboxed program never uses.

Test suites, IDLE, Tk and its Tcl libraries, turtledemo, ensurepip's bundled
wheels, the test-only extension modules, the static libpython, manuals,
helper scripts, whatever site-packages held (the bundle puts pynox there), and
bytecode (the bundle compiles its own).
"""

from __future__ import annotations

import fnmatch
from pathlib import PurePosixPath

# Relative to the runtime root; `*` matches within one path component.
DROPPED = (
    "share",
    "lib/pkgconfig",
    "lib/tcl*",
    "lib/tk*",
    "lib/itcl*",
    "lib/thread*",
    "lib/Tix*",
    "bin/idle*",
    "bin/pydoc*",
    "bin/2to3*",
    "bin/pip*",
    "bin/python*-config",
    "lib/python3.*/test",
    "lib/python3.*/idlelib",
    "lib/python3.*/tkinter",
    "lib/python3.*/turtledemo",
    "lib/python3.*/ensurepip/_bundled",
    "lib/python3.*/lib2to3/tests",
    "lib/python3.*/unittest/test",
    "lib/python3.*/ctypes/test",
    "lib/python3.*/distutils/tests",
    "lib/python3.*/sqlite3/test",
    "lib/python3.*/site-packages/*",
    "lib/python3.*/config-*/*.a",
    "lib/python3.*/config-*/python.o",
    "lib/python3.*/lib-dynload/_test*",
    "lib/python3.*/lib-dynload/_ctypes_test*",
    "lib/python3.*/lib-dynload/_xxtestfuzz*",
    "lib/python3.*/lib-dynload/xxlimited*",
    "lib/python3.*/lib-dynload/_tkinter*",
)
KEPT = ("lib/python3.*/site-packages/README.txt",)


def dropped(relative: PurePosixPath) -> bool:
    if relative.name == "__pycache__" or relative.suffix == ".pyc":
        return True
    text = relative.as_posix()
    depth = len(relative.parts)
    if any(fnmatch.fnmatchcase(text, k) for k in KEPT):
        return False
    return any(
        len(PurePosixPath(pattern).parts) == depth and fnmatch.fnmatchcase(text, pattern)
        for pattern in DROPPED
    )
