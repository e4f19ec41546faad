"""What the launcher runs: `python -I -S SITE-PACKAGES/pynox/_start.py ARGUMENTS`.

A file rather than `python -c`: from 3.13 on, CPython registers -c code with
linecache, an import that every run would pay for. The interpreter skips
`site` (the sandboxed program never sees site-packages; pynox needs only
itself, from the directory this file is in). The garbage collector stays off
while pynox starts: its imports make no cycles, and the collections they
would trigger cost ~0.7 ms; pynox turns it back on (pynox.engine.runner.end_start_up).
"""

import gc

gc.disable()
import sys  # noqa: E402 - after the collector is off

sys.path.append(__file__[: -len("/pynox/_start.py")])
del gc, sys
__import__("pynox._boot")._boot.main()
