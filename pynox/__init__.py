"""Pynox: a Python with the sandbox built in.

`pynox.run(code)` runs code in a sandboxed process and returns a Result; `pynox.tool()` gives
a model a `run_python(code) -> str` tool; `pynox.Pool` and `Pool.session()` give explicit
control. They load on first access, so `import pynox` (and the `pynox` command) stays cheap.
"""

__version__ = "0.1.0"


def _package_dir(init_file: str) -> str:
    # os.path.abspath, without importing os where the path is absolute and normal already,
    # as a run's start gives it (pynox.lean_os says why).
    if not init_file.startswith("/") or any(part in init_file for part in ("/./", "/../", "//")):
        import os

        init_file = os.path.abspath(init_file)
    return init_file[: init_file.rindex("/")] or "/"


# The one place that knows where pynox is installed: what the sandbox lets every run read,
# which frames tracebacks leave out, where the start-up image lies.
PACKAGE_DIR = _package_dir(__file__)


def _signals_ignored() -> "frozenset[int]":
    import _signal

    return frozenset(s for s in _signal.valid_signals() if _signal.getsignal(s) == _signal.SIG_IGN)


# The signals this process's caller ignored, as a shell does SIGINT for a job in the
# background and nohup SIGHUP: read as pynox is first imported, before it sets any handler
# of its own. A program's process gets them back so (pynox.engine.child).
SIGNALS_IGNORED_AT_START = _signals_ignored()

__all__ = [
    "Image",
    "Output",
    "Pool",
    "PoolError",
    "Result",
    "Session",
    "Tool",
    "__version__",
    "arun",
    "run",
    "tool",
]

_LAZY = {
    "run": "pynox.api.shared",
    "arun": "pynox.api.shared",
    "tool": "pynox.api.shared",
    "Pool": "pynox.api.pool",
    "Output": "pynox.api.stream",
    "PoolError": "pynox.api.connection",
    "Result": "pynox.api.result",
    "Image": "pynox.api.result",
    "Session": "pynox.api.session",
    "Tool": "pynox.api.tool",
}

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pynox.api.connection import PoolError
    from pynox.api.pool import Pool
    from pynox.api.result import Image, Result
    from pynox.api.session import Session
    from pynox.api.shared import arun, run, tool
    from pynox.api.stream import Output
    from pynox.api.tool import Tool


def __getattr__(name: str) -> object:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'pynox' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
