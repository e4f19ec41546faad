"""The Python client of `pynox pool`: Pool, Session and Result.

A Pool owns one `pynox pool` process and speaks its JSON Lines protocol (docs/pool-protocol.md)
over the process's standard input and output. Any number of threads, and asyncio tasks through
`arun`, share it: requests carry ids, one reader thread hands each result to the future waiting
for it, and host functions run in threads of their own. Nothing here raises because the sandbox
denied something: a denial, a timeout or a dead pool comes back as a Result whose `text` says
what happened. Bad arguments of the API itself raise TypeError or ValueError at once.

Imported on first use of `pynox.Pool`, `pynox.run` or `pynox.tool`, never by the command.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import weakref
from collections.abc import AsyncGenerator, Generator
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

from pynox import units
from pynox.api.connection import (
    CLOSE_GRACE,
    READY_TIMEOUT,
    STALL_MARGIN,
    PoolError,
    _Connection,
    _Pending,
    default_command,
)
from pynox.api.options import (
    Names,
    Paths,
    RunOptions,
    SessionOptions,
    Spec,
    caller_cwd,
    effective_grants,
    pool_package_dirs,
    pool_preload,
    pool_warmup,
)
from pynox.api.result import Result
from pynox.api.session import Session
from pynox.api.stream import Output, astream_spec, stream_spec
from pynox.errors import PynoxError
from pynox.limits import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from pynox.api.tool import Tool
    from pynox.policy.config import Config


class _State:
    """What a Pool's finalizer needs: kept apart so threads never hold the Pool itself."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connection: _Connection | None = None
        self.generation = 0
        self.closed = False
        self.pid = os.getpid()

    def close(self, grace: float = CLOSE_GRACE) -> None:
        connection = self._mark_closed()
        if connection is not None:
            connection.close(grace)

    def close_collected(self, grace: float) -> None:
        """The finalizer's close. The collector runs it in whatever thread allocates, maybe
        one of the connection's own holding its locks (the reader taking a result, a writer):
        so the pool is told to finish there, and a thread of its own waits for that."""
        connection = self._mark_closed()
        if connection is None:
            return
        connection.end_input()
        if not threading.main_thread().is_alive():
            # At interpreter exit (atexit runs finalizers): no thread would outlive this one.
            connection.close(grace)
            return
        threading.Thread(
            target=connection.close, args=(grace,), name="pynox-pool-close", daemon=True
        ).start()

    def _mark_closed(self) -> _Connection | None:
        """Marks the pool closed and takes its connection, for the caller to close; None when
        it has none, or in a forked child, whose process and pipes are the parent's."""
        if os.getpid() != self.pid:
            return None
        with self.lock:
            self.closed = True
            connection, self.connection = self.connection, None
        return connection


class Pool:
    """A `pynox pool` process that runs code in sandboxed children, shared by all threads.

    `workers` is how many one-shot runs go at once (default: [pool].workers of the config,
    else 2), `preload` lists modules every child starts with, `warmup` is code that readies
    them (run once after preloading and again in each child before its request, as host code;
    see pynox.pool.warmup), `package_dirs` lists directories
    of installed packages (a site-packages) that preload imports from and every run may
    import from, with no grant of its own (relative paths resolved against the current
    directory now), `config` names the pynox.toml whose profiles and [pool.limits] apply
    (default: $PYNOX_CONFIG, then ./pynox.toml).
    The process starts now (with lazy=True: on the first run) and again after it died;
    close() or the end of the interpreter stops it.
    """

    def __init__(
        self,
        workers: int | None = None,
        preload: Names = None,
        config: str | os.PathLike[str] | None = None,
        *,
        warmup: str | None = None,
        package_dirs: Paths = None,
        lazy: bool = False,
        pynox_command: list[str] | None = None,
    ) -> None:
        if workers is not None and (
            isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
        ):
            raise ValueError(f"workers={workers!r}: give a whole number of at least 1")
        if workers is not None and workers > units.LARGEST_COUNT:
            # Not shown: repr() cannot write an int of more than 4300 digits.
            raise ValueError("workers is more than any machine can run; give a number like 4")
        if not isinstance(lazy, bool):
            raise TypeError(f"lazy takes True or False, not {type(lazy).__name__} {lazy!r}")
        self.workers = workers
        self.preload = pool_preload(preload)
        self.warmup = pool_warmup(warmup)
        self.package_dirs = pool_package_dirs(package_dirs)
        self.config_path = find_config(config)
        # Where ./pynox.toml was looked for: the pool process starts there, whenever it
        # starts, so that it reads no other (see _start).
        self._directory = caller_cwd()
        if pynox_command is not None and (
            isinstance(pynox_command, str)
            or not all(isinstance(part, str) for part in pynox_command)
            or not pynox_command
        ):
            raise TypeError("pynox_command takes a list of strings, like ['/usr/bin/pynox']")
        self._command = list(pynox_command) if pynox_command else default_command()
        # The default command (pynox installed beside this interpreter, or -m pynox) runs
        # this interpreter; another may run any Python.
        self._runs_this_python = not pynox_command
        self._stall_margin = STALL_MARGIN
        self._ready_timeout = READY_TIMEOUT
        self._pid = os.getpid()
        self._config: Config | None = None
        self._config_loaded = False
        self._state = _State()
        self._finalizer = weakref.finalize(self, self._state.close_collected, 1.0)
        if not lazy:
            self._start()

    # Lifecycle.

    @property
    def command(self) -> list[str]:
        """The command line that starts the pool process."""
        command = [*self._command, "pool"]
        if self.config_path is not None:
            command += ["--config", self.config_path]
        if self.workers is not None:
            command += ["--workers", str(self.workers)]
        for module in self.preload:
            command += ["--preload", module]
        if self.warmup is not None:
            command += ["--warmup", self.warmup]
        for directory in self.package_dirs:
            command += ["--package-dir", directory]
        return command

    @property
    def closed(self) -> bool:
        return self._state.closed

    @property
    def pid(self) -> int | None:
        """The pool process's id while it runs."""
        connection = self._state.connection
        if connection is None or not connection.alive:
            return None
        info = connection.info or {}
        pid = info.get("pid")
        return pid if isinstance(pid, int) else connection.process.pid

    @property
    def info(self) -> dict[str, Any] | None:
        """The pool's `ready` line (pynox and Python versions, workers, pid), once started."""
        connection = self._state.connection
        return None if connection is None else connection.info

    @property
    def python(self) -> str:
        """The Python that runs the pool's code, as "3.13": its `ready` line says, once it
        started. A pool of another `pynox_command` is started now to learn it; unstarted, the
        default command's is this interpreter."""
        info = self.info
        if info is None and not self._runs_this_python:
            with contextlib.suppress(PoolError):  # one that cannot start says so when used
                info = self._connection()[0].info
        version = info.get("python") if info is not None else None
        if isinstance(version, str) and version:
            return ".".join(version.split(".")[:2])
        return f"{sys.version_info[0]}.{sys.version_info[1]}"

    def close(self, timeout: float = CLOSE_GRACE) -> None:
        """Stops the pool: running requests get `timeout` seconds to finish, then it is killed.

        Results still pending then are PoolError results. Closing twice is harmless.
        """
        check_close_timeout(timeout)
        self._finalizer.detach()
        self._state.close(timeout)

    async def aclose(self, timeout: float = CLOSE_GRACE) -> None:
        """`close` for asyncio: waits for running requests without blocking the event loop."""
        import asyncio

        check_close_timeout(timeout)
        await asyncio.get_running_loop().run_in_executor(None, self.close, timeout)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Pool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"pid={self.pid}"
        return f"<pynox.Pool workers={self.workers} {state}>"

    def __reduce__(self) -> tuple[Any, ...]:
        # Not "cannot pickle '_thread.lock' object": say what to do instead.
        raise TypeError(
            "a Pool cannot be pickled: its pool process belongs to this process; make a Pool "
            "where the code runs (pynox.run and pynox.tool make one in each process)"
        )

    def _start(self) -> _Connection:
        """The live connection, starting the process if there is none (no waiting)."""
        self._refuse_in_a_forked_child()
        state = self._state
        with state.lock:
            if state.closed:
                raise PoolError("this pool is closed; create a new Pool to run more code")
            connection = state.connection
            if connection is None or not connection.alive:
                # Started where the caller is now, a pool without --config would take the
                # pynox.toml there, which requests of a pool elsewhere may have written.
                # The working directory itself is inherited, even if it was removed.
                cwd = None if caller_cwd() == self._directory else self._directory
                if cwd is not None and not os.path.isdir(cwd):
                    raise PoolError(
                        f"cannot start the pool process in {cwd}, where this Pool was made "
                        "and looked for pynox.toml: that directory no longer exists; make a "
                        "new Pool where the application is now"
                    )
                connection = _Connection(self.command, self._stall_margin, cwd)
                state.connection = connection
                state.generation += 1
            return connection

    def _forked_child(self) -> bool:
        """Whether this process was forked from the one that made the pool."""
        return os.getpid() != self._pid

    def _refuse_in_a_forked_child(self) -> None:
        # Before any lock: one that another thread held at the fork stays held in the child.
        if self._forked_child():
            raise PoolError("a Pool cannot be used in a forked child; create one there")

    def _connection(self) -> tuple[_Connection, int]:
        """The connection, ready for requests; raises PoolError if the pool cannot start."""
        connection = self._start()
        generation = self._state.generation
        connection.wait_ready(self._ready_timeout)
        return connection, generation

    def _load_config(self) -> Config | None:
        """The parsed pynox.toml the pool uses, or None when it has none."""
        if not self._config_loaded:
            if self.config_path is not None:
                from pynox.policy.cache import load_config

                try:
                    self._config = load_config(self.config_path)
                except PynoxError as exc:
                    raise ValueError(exc.message) from None
            self._config_loaded = True
        return self._config

    # Running code.

    def run(
        self,
        code: str,
        **options: Unpack[RunOptions],
    ) -> Result:
        """Runs `code` in a fresh sandboxed process and returns its Result.

        The code runs in the current directory, and relative paths are resolved against
        it, now. `functions` maps names to callables the code may call with
        `from pynox_host import NAME`. `files` ({relative path: bytes}) are placed in the
        run's scratch directory (its HOME) before the code starts; what it writes into out/
        there comes back as Result.files.
        """
        spec = Spec.of("run", options)
        return self.run_spec(code, spec)

    async def arun(
        self,
        code: str,
        **options: Unpack[RunOptions],
    ) -> Result:
        """`run` for asyncio: awaits the result without blocking the event loop.

        Host functions that are coroutine functions run on this event loop.
        """
        spec = Spec.of("arun", options)
        return await self.arun_spec(code, spec)

    def session(
        self,
        **options: Unpack[SessionOptions],
    ) -> Session:
        """A persistent session: one sandboxed process whose globals outlive each step.

        Its permissions are fixed here (relative paths resolved now); nothing starts until
        the first `run`.
        """
        spec = Spec.of("session", options)
        return Session(self, spec)

    def tool(
        self,
        *,
        session: bool = False,
        **options: Unpack[SessionOptions],
    ) -> Tool:
        """A plain `run_python(code: str) -> str` for a model, with a docstring written for it.

        The permissions are fixed here, relative paths resolved against the current directory
        now, where the code runs; the function returns the Result's `text`. With
        session=True every call runs in one persistent session.
        """
        from pynox.api.tool import make_tool, tool_spec

        spec = tool_spec(session, options)
        return make_tool(self, spec, Session(self, spec) if session else None)

    def _request(self, code: str, spec: Spec, session: Session | None) -> dict[str, Any]:
        """The request line's fields for code run with spec (in session)."""
        return spec.request(code, session.id if session is not None else None, self._directory)

    def run_spec(self, code: str, spec: Spec, session: Session | None = None) -> Result:
        """Runs code with options already validated (the other methods end here)."""
        request = self._request(code, spec, session)
        try:
            connection, generation = self._connection()
        except PoolError:
            if session is not None:
                session._lost()
            raise
        pending = self._pending(spec)
        try:
            message = connection.submit(request, pending).result()
        except BaseException:  # Ctrl-C while waiting: the run stops too
            connection.cancel(pending)
            if session is not None:
                session._cancelled(pending)
            raise
        return self._finish(message, session, generation)

    async def arun_spec(self, code: str, spec: Spec, session: Session | None = None) -> Result:
        import asyncio

        request = self._request(code, spec, session)
        connection, generation = await self._aconnection(session)
        pending = self._pending(spec)
        pending.loop = asyncio.get_running_loop()
        try:
            message = await asyncio.wrap_future(connection.submit(request, pending))
        except asyncio.CancelledError:
            # The task was cancelled: so is the request, and its worker is free again.
            connection.cancel(pending)
            if session is not None:
                session._cancelled(pending)
            raise
        return self._finish(message, session, generation)

    async def _aconnection(self, session: Session | None) -> tuple[_Connection, int]:
        """`_connection` for asyncio: starting may take a while, not on the loop's thread."""
        import asyncio

        ready = self._state.connection
        try:
            if ready is not None and ready.info is not None and ready.alive:
                return ready, self._state.generation
            return await asyncio.get_running_loop().run_in_executor(None, self._connection)
        except PoolError:
            if session is not None:
                session._lost()
            raise

    def stream(
        self,
        code: str,
        **options: Unpack[RunOptions],
    ) -> Generator[Output | Result, None, None]:
        """Runs `code` as `run` does, yielding its output as it is written, then its Result.

        Each chunk is an `Output(stream, data)`, `stream` being "stdout" or "stderr"; the last
        item is the Result (whose stdout and stderr hold the output again, up to max_output).
        Leaving the loop early (break, close()) cancels the run.
        """
        return stream_spec(self, code, Spec.of("stream", options))

    def astream(
        self,
        code: str,
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[Output | Result, None]:
        """`stream` for asyncio: `async for item in pool.astream(code)`.

        Leaving it early (break, aclose(), the task cancelled) cancels the run.
        """
        return astream_spec(self, code, Spec.of("astream", options))

    def _pending(self, spec: Spec) -> _Pending:
        try:
            config = self._load_config()
        except ValueError:  # the file broke since the pool read it: the pool decides
            return _Pending(budget=DEFAULT_TIMEOUT, functions=spec.functions)
        try:
            timeout = effective_grants(spec, config).timeout
        except ValueError as exc:
            # A profile the pool cannot apply: refused here, in the API's words (config=,
            # not the command's --config), as the pool would refuse it.
            return _Pending(budget=DEFAULT_TIMEOUT, functions={}, refusal=str(exc))
        return _Pending(budget=timeout or DEFAULT_TIMEOUT, functions=spec.functions)

    def _finish(self, message: dict[str, Any], session: Session | None, generation: int) -> Result:
        result = Result.from_json(message)
        if session is not None:
            result = session._step_done(result, generation)
        return result

    def _close_session(self, session_id: str, wait: bool) -> None:
        connection = self._state.connection
        if (
            self._forked_child()
            or connection is None
            or not connection.alive
            or connection.info is None
        ):
            return
        if not wait or connection.waits_for_me(session_id):
            # From a host function the session's own step waits for (through other runs,
            # perhaps), which cannot end while this waits: the pool closes the session once
            # the step has ended. send_soon, as this may be the session's finalizer.
            connection.send_soon({"id": connection.request_id(), "close_session": session_id})
            return
        # A pool that no longer knows the session (it restarted, or refused the session's
        # first step) answers with a control_error, which ends the wait too. Else it answers
        # once the session's process has exited, after its running step: so the wait lasts
        # as long as that step may, and the session's place is free when it ends.
        running = connection.step_budget(session_id)
        pending = _Pending(budget=STALL_MARGIN, functions={}, control=True)
        future = connection.submit({"close_session": session_id}, pending)
        with contextlib.suppress(FutureTimeout):
            future.result(timeout=running + STALL_MARGIN * 2)


def find_config(config: str | os.PathLike[str] | None) -> str | None:
    """The absolute path of the pynox.toml a pool started with `config` reads, or None:
    the file given, else the one $PYNOX_CONFIG or the working directory names."""
    from pynox.policy.config import find_config_path

    if config is not None and not isinstance(config, (str, os.PathLike)):
        raise TypeError(f"config takes the path of a pynox.toml, not {type(config).__name__}")
    explicit = None if config is None else os.fsdecode(os.fspath(config))
    try:
        path = find_config_path(explicit, os.environ, caller_cwd(), given_as="config")
    except PynoxError as exc:
        raise ValueError(exc.message) from None
    # Absolute, and never normalized: in link/../pynox.toml, ".." leaves where the link
    # leads, as the kernel reads it and as `pynox pool --config` takes it.
    return path


def check_close_timeout(timeout: object) -> None:
    """Checked before anything closes: a bad timeout must not leave the pool half closed."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise ValueError(f"timeout={timeout!r}: give a number of seconds of at least 0")
