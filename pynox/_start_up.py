"""pynox's start-up, which pynox/_start.py runs from this file's compiled code.

It runs in the launcher's script's namespace (`__main__`, where `__file__` is
_start.py's), with the garbage collector already off: pynox's imports make no
cycles, and the collections they would trigger cost ~0.7 ms; pynox turns it back
on (pynox.engine.runner.end_start_up). The interpreter skips `site` (the
sandboxed program never sees site-packages; pynox needs only itself, from the
directory _start.py is in).

The package, and then its start-up module, are loaded from that directory by
name, not looked up: a lookup on sys.path would list lib-dynload and
site-packages (hundreds of names in a busy environment), and one in the package
would list its directory, only to find what is known already. site-packages
still goes on sys.path, for what pynox imports from there later (the pool's
preloads, the MCP SDK).
"""

import sys
from _frozen_importlib import module_from_spec  # loaded with the interpreter
from _frozen_importlib_external import spec_from_file_location

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType


def _load(name: str, path: str, search: "list[str] | None" = None) -> "ModuleType":
    """Runs the module at path as importing name would; search: a package's own path."""
    spec = spec_from_file_location(name, path, submodule_search_locations=search)
    module = module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


_package_dir = __file__[: -len("/_start.py")]
_package = _load("pynox", _package_dir + "/__init__.py", [_package_dir])
_boot = _load("pynox._boot", _package_dir + "/_boot.py")
_package._boot = _boot  # type: ignore[attr-defined]  # as an import of it would
sys.path.append(_package_dir[: -len("/pynox")])
_boot.main()
