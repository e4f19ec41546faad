"""`pynox.run`, `pynox.arun` and `pynox.tool`: one pool for the whole process.

The pool is created on first use, its process starts with the first run, and it is closed
when the interpreter exits. A forked child gets a pool of its own on its first use. For
several configurations or an explicit lifecycle, create `pynox.Pool` objects instead.
"""

from __future__ import annotations

import atexit
import os
import threading

from pynox.api.options import RunOptions, SessionOptions, Spec
from pynox.api.pool import Pool
from pynox.api.result import Result

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing_extensions import Unpack

    from pynox.api.tool import Tool

_lock = threading.Lock()
_pool: Pool | None = None
_registered = False


def default_pool() -> Pool:
    """The process's shared pool, created (not yet started) on first use."""
    global _pool, _registered
    with _lock:
        if _pool is None or _pool.closed:
            _pool = Pool(lazy=True)
            if not _registered:
                atexit.register(_close)
                os.register_at_fork(after_in_child=_forget)
                _registered = True
        return _pool


def _close() -> None:
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.close(timeout=1.0)


def _forget() -> None:
    # The parent's pool belongs to the parent: its pipes and threads are not ours.
    global _pool, _lock
    _pool = None
    _lock = threading.Lock()


def run(
    code: str,
    **options: Unpack[RunOptions],
) -> Result:
    """Runs `code` in a fresh sandboxed process of the shared pool; see `Pool.run`.

    Never raises because the sandbox denied something: the Result's `text` says what
    happened. The code runs in the current directory, and relative paths are resolved
    against it, now.
    """
    spec = Spec.of("run", options)
    return default_pool().run_spec(code, spec)


async def arun(
    code: str,
    **options: Unpack[RunOptions],
) -> Result:
    """`run` for asyncio: awaits the Result without blocking the event loop."""
    spec = Spec.of("arun", options)
    return await default_pool().arun_spec(code, spec)


def tool(
    *,
    session: bool = False,
    **options: Unpack[SessionOptions],
) -> Tool:
    """A plain `run_python(code: str) -> str` for a model, on the shared pool.

    Its docstring tells the model what the code may touch, its limits, the host functions in
    `functions` and how errors come back; it returns the Result's `text`. The permissions
    come from `profile` in pynox.toml and the keyword arguments, relative paths resolved
    against the current directory now, where the code runs. session=True keeps one
    persistent session, so variables survive from one call to the next.
    `run_python.run(code)` returns the whole Result instead of its text, images included. It
    runs on the shared pool of the process that calls it: a tool made before a fork (a web
    server or task queue that imports the application, then forks its workers) works in each
    worker.
    """
    from pynox.api.session import Session
    from pynox.api.tool import describe, tool_function, tool_spec

    spec = tool_spec(session, options)
    # The session in use, with the pool it belongs to: a new pool (after a fork) gets a
    # new session, as the session's process was the old pool's.
    steps: list[Session] = []
    steps_lock = threading.Lock()

    def run(code: str) -> Result:
        pool = default_pool()
        if not session:
            return pool.run_spec(code, spec)
        with steps_lock:
            if not steps or steps[0].pool is not pool:
                steps[:] = [Session(pool, spec)]
            step_session = steps[0]
        return step_session.run(code)

    return tool_function(run, describe(default_pool(), spec, session=session))
