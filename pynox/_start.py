"""What the launcher runs: `python -I -S SITE-PACKAGES/pynox/_start.py ARGUMENTS`.

A file rather than `python -c`: from 3.13 on, CPython registers -c code with
linecache, an import that every run would pay for. The interpreter skips
`site` (the sandboxed program never sees site-packages; pynox needs only
itself, from the directory this file is in). The garbage collector stays off
while pynox starts: its imports make no cycles, and the collections they
would trigger cost ~0.7 ms; pynox turns it back on (pynox.engine.runner.end_start_up).

The package is loaded from this file's directory by name, not looked up on
sys.path: the lookup would list lib-dynload and site-packages (hundreds of
names in a busy environment) only to find what is known already. site-packages
still goes on sys.path, for what pynox imports from there later (the pool's
preloads, the MCP SDK).
"""

import gc

gc.disable()
import sys  # noqa: E402 - after the collector is off
from _frozen_importlib import module_from_spec  # noqa: E402 - loaded with the interpreter
from _frozen_importlib_external import spec_from_file_location  # noqa: E402

_package_dir = __file__[: -len("/_start.py")]
_spec = spec_from_file_location(
    "pynox", _package_dir + "/__init__.py", submodule_search_locations=[_package_dir]
)
_package = module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules["pynox"] = _package
_spec.loader.exec_module(_package)  # type: ignore[union-attr]
sys.path.append(_package_dir[: -len("/pynox")])
del gc, sys, module_from_spec, spec_from_file_location, _package_dir, _spec, _package
__import__("pynox._boot")._boot.main()
