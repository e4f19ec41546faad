"""Start-up of the `pynox` command: its hot modules from one file instead of thirteen.

Importing a module costs a cold process about 0.1 ms beyond running its code
(finding it, stat calls, opening and reading its .pyc). A run needs the same
thirteen modules every time, so the first run writes their code objects into
one file beside the .pyc files, `__pycache__/_boot.<cache tag>.image`, and
later runs load them with one read. Like a .pyc, each entry records its
source's modification time and size; a changed source, another interpreter
version or a damaged file makes the image unused (and rewritten), and the
modules import as usual. Where the package directory is not writable there is
simply no image.

The finder serves only pynox's own modules and leaves sys.meta_path before
the program runs (see `leave`), so the program never sees it.
"""

import marshal
import os
import sys
from _frozen_importlib import ModuleSpec
from _frozen_importlib_external import MAGIC_NUMBER

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
_stale = False


def main() -> None:
    """Runs the pynox command, from the image when there is a valid one."""
    global _finder, _stale
    codes = _load_image()
    if codes is None:
        _stale = True
    else:
        _finder = _ImageFinder(codes)
        sys.meta_path.insert(0, _finder)
    from pynox import cli

    cli.main()


def started() -> None:
    """Ends pynox's start-up: the program, or a pool's requests, get a plain interpreter.

    Called once pynox has imported what it runs with, before any program runs
    (and before the sandbox, which would forbid writing the image). The
    launcher starts pynox with the garbage collector off (its imports make no
    cycles) and the image's finder on sys.meta_path; both go back to what
    python starts with.
    """
    global _finder, _stale
    import gc

    gc.freeze()  # pynox's objects stay alive: keep collections off them
    gc.enable()
    if _finder is not None:
        try:
            sys.meta_path.remove(_finder)
        except ValueError:
            pass
        _finder = None
    if _stale:
        _stale = False
        _write_image()


def _source_path(name: str) -> str:
    return os.path.join(_PACKAGE_DIR, name.rpartition(".")[2] + ".py")


def _source_stamp(name: str) -> "tuple[int, int]":
    status = os.stat(_source_path(name))
    return int(status.st_mtime), status.st_size & 0xFFFFFFFF  # what a .pyc records


def _load_image() -> "dict[str, CodeType] | None":
    try:
        with open(_IMAGE, "rb") as image:
            magic, entries = marshal.loads(image.read())
        if magic != MAGIC_NUMBER or set(entries) != set(HOT_MODULES):
            return None
        codes = {}
        for name, (stamp, code) in entries.items():
            if stamp != _source_stamp(name):
                return None
            codes[name] = marshal.loads(code)
        return codes
    except Exception:  # noqa: BLE001 - a missing or unusable image means importing as usual
        return None


def _write_image() -> None:
    """Compiles the hot modules' sources into a new image; quietly gives up if it cannot."""
    cache_dir = os.path.dirname(_IMAGE)
    writable = cache_dir if os.path.isdir(cache_dir) else _PACKAGE_DIR
    if sys.dont_write_bytecode or not os.access(writable, os.W_OK):
        return  # as CPython writes no .pyc here; don't compile for nothing on every run
    temporary = f"{_IMAGE}.{os.getpid()}.tmp"
    try:
        entries = {}
        for name in HOT_MODULES:
            stamp = _source_stamp(name)
            with open(_source_path(name), "rb") as source:
                # Without docstrings (as `python -OO` compiles): nothing reads them
                # there, and the image loads faster. These modules have no asserts.
                code = compile(
                    source.read(), _source_path(name), "exec", dont_inherit=True, optimize=2
                )
            entries[name] = (stamp, marshal.dumps(code))
        os.makedirs(cache_dir, exist_ok=True)
        with open(temporary, "xb") as image:
            image.write(marshal.dumps((MAGIC_NUMBER, entries)))
        os.replace(temporary, _IMAGE)
    except Exception:  # noqa: BLE001 - the image only saves time; runs work without it
        try:
            os.unlink(temporary)
        except OSError:
            pass
