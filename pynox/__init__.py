"""Pynox: a Python with the sandbox built in.

`pynox.run(code)` runs code in a sandboxed process and returns a Result; `pynox.tool()` gives
a model a `run_python(code) -> str` tool; `pynox.Pool` and `Pool.session()` give explicit
control. They load on first access, so `import pynox` (and the `pynox` command) stays cheap.
"""

__version__ = "0.1.0"

__all__ = ["Pool", "PoolError", "Result", "Session", "__version__", "arun", "run", "tool"]

_LAZY = {
    "run": "pynox.api",
    "arun": "pynox.api",
    "tool": "pynox.api",
    "Pool": "pynox.client",
    "PoolError": "pynox.client",
    "Result": "pynox.client",
    "Session": "pynox.client",
}

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pynox.api import arun, run, tool
    from pynox.client import Pool, PoolError, Result, Session


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
