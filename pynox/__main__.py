"""`python -m pynox`: the same command as the `pynox` launcher.

`python -m` puts the working directory first on sys.path. Nothing pynox imports
before a program is confined may come from there (a program granted that
directory could have left a module in it), so it goes before anything else is
imported; `python -I -m pynox` and `python -P -m pynox` never add it.
"""

import os
import sys

_ADDED_WORKING_DIRECTORY = not (sys.flags.isolated or getattr(sys.flags, "safe_path", False))
try:
    _WORKING_DIRECTORY = os.getcwd()
except OSError:  # removed: nothing can be imported from it any more
    _WORKING_DIRECTORY = ""
if _ADDED_WORKING_DIRECTORY and sys.path and sys.path[0] in ("", _WORKING_DIRECTORY):
    del sys.path[0]


def _start_again_without_inspect() -> None:
    """python -i, or PYTHONINSPECT set: pynox has no interactive interpreter, and under
    inspect CPython shows the SystemExit that ends a program's process as an error, with
    pynox's frames and exit status 1, where `python app.py` ends with the program's
    status. So pynox starts again without it, as the `pynox` launcher (python -I) starts:
    the same interpreter flags but -i, the same environment but PYTHONINSPECT."""
    import subprocess

    flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
    environ = os.environ.copy()
    environ.pop("PYTHONINSPECT", None)
    argv = [sys.executable, *flags, "-m", "pynox", *sys.argv[1:]]
    try:
        os.execve(sys.executable, argv, environ)
    except OSError:
        pass  # run on as started: the program still runs, only its end differs


if sys.flags.inspect:
    _start_again_without_inspect()

from pynox._boot import main  # noqa: E402 - after the working directory left sys.path

main()
