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

from pynox._boot import main  # noqa: E402 - after the working directory left sys.path

main()
