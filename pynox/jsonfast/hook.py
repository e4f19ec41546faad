"""Installs pynox.jsonfast.fast_path when, and only when, the program imports json.

`install()` patches json at once if it is imported already (a pool child's
pool server imports it); otherwise it puts a finder first on sys.meta_path that
answers nothing but `json`, takes itself off as json starts to load, and
patches json once it has loaded. A program that never imports json pays for
nothing else; one that does finds json's module, spec and loader as CPython
made them.

`pynox --no-sandbox` runs CPython itself: there the top-level module
`_pynox_json` (sitehook/ in the source tree, armed by pynox-json.pth) puts
its own finder first and hands json's lookup to `find_json_spec`
(see pynox.jsonfast.no_sandbox).
"""

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any


def install() -> None:
    """Never raises: without the fast path, json is simply CPython's."""
    try:
        json = sys.modules.get("json")
        if json is not None:
            _patch(json)
        elif not any(type(finder) is _JsonFinder for finder in sys.meta_path):
            sys.meta_path.insert(0, _JsonFinder())
    except Exception:  # noqa: BLE001 - see above
        pass


def _patch(json: "ModuleType") -> None:
    from pynox.jsonfast.fast_path import patch

    patch(json)


class _JsonFinder:
    """Finds nothing itself: it only notes where json comes from."""

    def find_spec(
        self, name: str, path: object = None, target: object = None
    ) -> "ModuleSpec | None":
        if name != "json" or path is not None:
            return None
        return find_json_spec(self, name, path, target)


def find_json_spec(finder: object, name: str, path: object, target: object) -> "ModuleSpec | None":
    """json's spec from the finders after `finder`, set to patch json once it loads.

    `finder` leaves sys.meta_path as json starts to load.
    """
    for other in sys.meta_path:
        find = getattr(other, "find_spec", None)
        if other is finder or find is None:
            continue
        spec = find(name, path, target)
        if spec is not None:
            break
    else:
        return None
    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
        spec.loader = _PatchingLoader(spec.loader, finder)
    return spec  # type: ignore[no-any-return]


class _PatchingLoader:
    """Puts the real loader back as json loads, then patches what it loaded."""

    def __init__(self, loader: "Any", finder: "Any") -> None:
        self.loader = loader
        self.finder = finder

    def create_module(self, spec: "ModuleSpec") -> "ModuleType | None":
        return self.loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: "ModuleType") -> None:
        spec = module.__spec__
        loader: object = None if spec is None else spec.loader
        if spec is not None and loader is self:
            spec.loader = self.loader
        if module.__dict__.get("__loader__") is self:
            module.__loader__ = self.loader
        try:
            sys.meta_path.remove(self.finder)
        except ValueError:
            pass
        self.loader.exec_module(module)
        install()
