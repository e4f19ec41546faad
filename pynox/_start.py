"""What the launcher runs: `python -I -S SITE-PACKAGES/pynox/_start.py ARGUMENTS`.

A file rather than `python -c`: from 3.13 on, CPython registers -c code with linecache, an
import that every run would pay for. A script is compiled anew on every run, never cached,
and compiling pynox's start-up cost ~0.4 ms of each: this one turns the garbage collector
off and runs the start-up (pynox/_start_up.py) from its compiled file.
"""

import gc

gc.disable()
from _frozen_importlib_external import SourceFileLoader  # noqa: E402 - after the collector is off

_start_up = SourceFileLoader("pynox._start_up", __file__[:-9] + "_start_up.py")
exec(_start_up.get_code(_start_up.name))  # type: ignore[arg-type]  # noqa: S102
