"""Arms json.dump's fast path in `pynox --no-sandbox` runs (see pynox/jsonfast/hook.py).

`pynox --no-sandbox` runs CPython itself. The launcher names its own process
in PYNOX_JSON_FAST_PATH (CPython keeps the pid, exec does not change it);
pynox-json.pth, beside this module in site-packages, imports it when that
variable is set. `install()` takes the variable away before the program
starts and, if this very process was named, puts a finder first on
sys.meta_path that answers nothing but `json`.

This is a top-level module of its own, not part of the pynox package, so
that a program that never imports json pays for this one small import: the
pynox package, and pynox.jsonfast.hook, load only when json does.
"""

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

STARTUP_VARIABLE = "PYNOX_JSON_FAST_PATH"


# Where pynox is: beside this module. By the time json is imported, sys.path
# may start with the program's own directory, which could hold a `pynox`.
_SITE_DIR = os.path.dirname(__file__)


class _Armed:
    """Stands first on sys.meta_path until json loads; pynox.jsonfast.hook does the rest."""

    def find_spec(
        self,
        name: str,
        path: "Sequence[str] | None" = None,
        target: "ModuleType | None" = None,
    ) -> "ModuleSpec | None":
        if name != "json" or path is not None:
            return None
        try:
            if not _import_pynox():
                return None  # another `pynox` came first: json without the fast path
            from pynox.jsonfast.hook import find_json_spec

            return find_json_spec(self, name, path, target)
        except Exception:  # noqa: BLE001 - import json must work, with or without us
            return None


def _import_pynox() -> bool:
    """Imports the pynox package from beside this module; False if another one is loaded."""
    package = sys.modules.get("pynox")
    if package is None:
        sys.path.insert(0, _SITE_DIR)
        try:
            package = __import__("pynox")
        finally:
            if sys.path and sys.path[0] is _SITE_DIR:
                del sys.path[0]
    origin = getattr(package, "__file__", None) or ""
    return os.path.dirname(os.path.dirname(origin)) == _SITE_DIR


def install() -> None:
    """Never raises: without the fast path, json is simply CPython's."""
    try:
        value = os.environ.get(STARTUP_VARIABLE)
        if value is None or value != str(os.getpid()):
            return  # a variable left from another process: not ours to act on
        del os.environ[STARTUP_VARIABLE]
        posix_environ = getattr(sys.modules.get("posix"), "environ", None)
        if isinstance(posix_environ, dict):
            posix_environ.pop(os.fsencode(STARTUP_VARIABLE), None)
        if "json" in sys.modules:  # a .pth before this one imported it
            if _import_pynox():
                from pynox.jsonfast import hook as json_hook

                json_hook.install()
        else:
            sys.meta_path.insert(0, _Armed())
    except Exception:  # noqa: BLE001, S110 - see the docstring of install
        pass
