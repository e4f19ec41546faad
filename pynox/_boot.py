"""Start-up of the `pynox` command: its hot modules from one file instead of thirteen.

Importing a module costs a cold process about 0.1 ms beyond running its code
(finding it, stat calls, opening and reading its .pyc). A run needs the same
thirteen modules every time, so their code objects live in one file beside the
.pyc files, `__pycache__/_boot.<cache tag>.image`, loaded with one read.

The image is made when the wheel or bundle is built (`python _boot.py
--write-image DIRECTORY`, with the interpreter it is for), never at run time:
nothing a run writes may be code a later run executes before its sandbox
exists. Each entry records its source's size; a source of another size, another
interpreter version or a damaged file makes the image unused, and the modules
import as usual. The code objects name their files as compiled in the build;
loading points them at the sources where they are now, as importlib does for a
.pyc, so that tracebacks name the installed files wherever the prefix moved.

The finder serves only pynox's own modules and leaves sys.meta_path before
the program runs (see `leave`), so the program never sees it.
"""

import marshal
import os
import sys
from _frozen_importlib import ModuleSpec
from _frozen_importlib_external import MAGIC_NUMBER
from _imp import _fix_co_filename  # type: ignore[attr-defined]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import CodeType, ModuleType

# Every plain run imports these; the image holds nothing else.
HOT_MODULES = (
    "pynox.errors",
    "pynox.cli",
    "pynox.cmdline",
    "pynox.grants",
    "pynox.config_location",
    "pynox.program",
    "pynox.policy",
    "pynox.system_paths",
    "pynox.runner",
    "pynox.child",
    "pynox.access_log",
    "pynox.sandbox",
    "pynox.json_hook",
)

_PACKAGE_DIR = os.path.dirname(__file__)
_IMAGE = os.path.join(_PACKAGE_DIR, "__pycache__", f"_boot.{sys.implementation.cache_tag}.image")


class _ImageFinder:
    """Finds pynox's hot modules in the image; every other import goes on as usual."""

    def __init__(self, codes: "dict[str, CodeType]") -> None:
        self.codes = codes

    def find_spec(
        self,
        name: str,
        path: "Sequence[str] | None" = None,
        target: "ModuleType | None" = None,
    ) -> "ModuleSpec | None":
        if name not in self.codes:
            return None
        spec = ModuleSpec(name, self, origin=_source_path(name))  # type: ignore[arg-type]
        spec.has_location = True  # so the module gets __file__, as when imported
        return spec

    def create_module(self, spec: "ModuleSpec") -> None:
        return None  # the default module object

    def exec_module(self, module: "ModuleType") -> None:
        exec(self.codes[module.__name__], module.__dict__)  # noqa: S102 - pynox's own code


_finder: "_ImageFinder | None" = None


def main() -> None:
    """Runs the pynox command, from the image when there is a valid one."""
    global _finder
    codes = _load_image()
    if codes is not None:
        _finder = _ImageFinder(codes)
        sys.meta_path.insert(0, _finder)
    from pynox import cli

    cli.main()


def started() -> None:
    """Ends pynox's start-up: the program, or a pool's requests, get a plain interpreter.

    Called once pynox has imported what it runs with, before any program runs.
    The launcher starts pynox with the garbage collector off (its imports make
    no cycles) and the image's finder on sys.meta_path; both go back to what
    python starts with.
    """
    global _finder
    import gc

    gc.freeze()  # pynox's objects stay alive: keep collections off them
    gc.enable()
    if _finder is not None:
        try:
            sys.meta_path.remove(_finder)
        except ValueError:
            pass
        _finder = None


def _source_path(name: str) -> str:
    return os.path.join(_PACKAGE_DIR, name.rpartition(".")[2] + ".py")


def _source_size(name: str) -> int:
    return os.stat(_source_path(name)).st_size


def _load_image() -> "dict[str, CodeType] | None":
    try:
        with open(_IMAGE, "rb") as image:
            magic, entries = marshal.loads(image.read())
        if magic != MAGIC_NUMBER or set(entries) != set(HOT_MODULES):
            return None
        codes = {}
        for name, (size, code) in entries.items():
            if size != _source_size(name):
                return None
            codes[name] = marshal.loads(code)
            _fix_co_filename(codes[name], _source_path(name))
        return codes
    except Exception:  # noqa: BLE001 - a missing or unusable image means importing as usual
        return None


def write_image(directory: str) -> str:
    """Compiles the hot modules' sources into an image in `directory`; returns its path.

    For the build only: the same sources always give the same bytes when run with
    PYTHONHASHSEED=0 (set and frozenset constants keep their order).
    """
    import gc

    gc.disable()  # collections change reference counts, which marshal writes (FLAG_REF)
    entries = {}
    for name in HOT_MODULES:
        with open(_source_path(name), "rb") as source:
            text = source.read()
        # Without docstrings (as `python -OO` compiles): nothing reads them there,
        # and the image loads faster. These modules have no asserts. The file name
        # is fixed up when the image loads (see _load_image).
        relative = "pynox/" + os.path.basename(_source_path(name))
        code = compile(text, relative, "exec", dont_inherit=True, optimize=2)
        entries[name] = (len(text), marshal.dumps(code))
    path = os.path.join(directory, os.path.basename(_IMAGE))
    with open(path, "wb") as image:
        image.write(marshal.dumps((MAGIC_NUMBER, entries)))
    return path


if __name__ == "__main__":
    # python pynox/_boot.py --write-image DIRECTORY (the build's step; see the docstring)
    if sys.argv[1:2] != ["--write-image"] or len(sys.argv) != 3:
        sys.exit("usage: python _boot.py --write-image DIRECTORY")
    print(write_image(sys.argv[2]))
