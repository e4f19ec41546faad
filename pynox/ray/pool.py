"""RayPool: `pynox.Pool`'s calls over Ray actors, each owning a local pool on its node."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

try:
    import ray
    import ray.exceptions
except ImportError:  # pragma: no cover - depends on the environment
    raise ImportError(
        "pynox.ray needs Ray on this machine and on every node: pip install 'pynox[ray]'"
    ) from None

from pynox.api.connection import PoolError
from pynox.api.options import (
    Duration,
    Files,
    Names,
    RunOptions,
    SessionOptions,
    Spec,
    files_field,
    pool_preload,
    pool_warmup,
    strings,
)
from pynox.api.pool import check_close_timeout, find_config
from pynox.api.result import Result, failure
from pynox.api.session import Session, check_session_spec
from pynox.errors import PynoxError
from pynox.limits import DEFAULT_WORKERS
from pynox.ray.actor import NodePool

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from pynox.api.tool import Tool
    from pynox.policy.config import Config

# How long close() lets each actor stop its local pool before it is killed.
CLOSE_GRACE = 10.0
# How long an actor may take to start its local pool before RayPool() gives up.
START_TIMEOUT = 120.0

NO_FILES = (
    "files: a RayPool request does not carry files to its node; put them where the nodes "
    "can read them and grant that with allow_read, or use pynox.Pool"
)

# What a model reads when the pool's replacement actor cannot serve: running again won't help.
CANNOT_START_HINT = "the sandbox service cannot start, not because of your code; tell the user"

RAY_ENDED = (
    "Ray was shut down (or connected anew) since this RayPool was made, and its actors "
    "ended with that connection; create a new RayPool"
)

_generations = itertools.count(1)
# Colours in Ray's messages, and the last line of a Python traceback ("module.Error: text").
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAISED = re.compile(r"(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception): (.+)")


class _Slot:
    """One actor of the pool and what replaced it: requests go to its current actor."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.actor: Any = None
        self.generation = 0
        self.in_flight = 0
        self.sessions: set[str] = set()  # the ids of the sessions pinned here
        # The ready() call of an actor not yet seen to serve, and when it must have.
        self.started: Any = None
        self.deadline = 0.0

    def stalled(self) -> bool:
        """Whether its actor has not been seen to serve by its deadline (the pool's lock held)."""
        return self.started is not None and time.monotonic() > self.deadline


class RayPool:
    """`pynox.Pool` across a Ray cluster: `actors` Ray actors, each a local pool on its node.

    Each actor owns a `pynox.Pool` of `workers` workers (default: [pool].workers of the
    config, else 2) started with `preload`, `warmup` and `package_dirs` (paths on the
    nodes), and the `pynox.toml` found here as `pynox.Pool` finds it (`config`,
    $PYNOX_CONFIG, ./pynox.toml): its text is sent to every actor at creation, and each
    node's pool enforces its [pool.limits] and profiles. `actor_options` go to Ray's
    `.options()` (num_cpus, resources, scheduling_strategy, runtime_env...); num_cpus
    defaults to `workers` when it is given, else 1.

    Ray is connected as `ray.init()` would be when nothing connected it yet. A request
    whose actor dies (its process, or its node) comes back as a PoolError Result and the
    actor is replaced; with retries=1, requests run with idempotent=True are sent once more
    instead. `max_in_flight` bounds the requests `map` keeps sent at once.
    """

    def __init__(
        self,
        actors: int = 2,
        workers: int | None = None,
        preload: Names = None,
        config: str | os.PathLike[str] | None = None,
        *,
        warmup: str | None = None,
        package_dirs: Names = None,
        actor_options: Mapping[str, Any] | None = None,
        max_in_flight: int | None = None,
        retries: int = 0,
    ) -> None:
        _whole("actors", actors, 1)
        if workers is not None:
            _whole("workers", workers, 1)
        if max_in_flight is not None:
            _whole("max_in_flight", max_in_flight, 1)
        if retries not in (0, 1) or isinstance(retries, bool):
            raise ValueError(f"retries={retries!r}: give 0 or 1 (one retry of idempotent runs)")
        if actor_options is not None and not isinstance(actor_options, Mapping):
            raise TypeError("actor_options takes a dict of Ray actor options, like {'num_cpus': 2}")
        self.workers = workers
        self.preload = pool_preload(preload)
        self.warmup = pool_warmup(warmup)
        # Paths on the nodes: each node's pool checks that they exist there.
        self.package_dirs = strings(package_dirs, "package_dirs", "path")
        self.config_path = find_config(config)
        self.retries = retries
        # Parsed first, so that a config that cannot be used is a ValueError that says why.
        self._config = self._parse_config()
        # Each actor's pool has the workers a local pool would: given, else the config's.
        config_workers = self._config.pool.workers if self._config is not None else None
        node_workers = workers or config_workers or DEFAULT_WORKERS
        self.max_in_flight = max_in_flight or 2 * actors * node_workers
        self._config_text = ""
        if self.config_path is not None:
            with open(self.config_path, encoding="utf-8") as file:
                self._config_text = file.read()
            _refuse_relative_paths(self._config_text, self.config_path)
        options: dict[str, Any] = {"num_cpus": workers or 1}
        options.update(actor_options or {})
        options["max_restarts"] = 0  # the pool replaces a dead actor itself
        self._actor_class = ray.remote(NodePool).options(**options)
        self._asks = _asks(options)
        self._lock = threading.Lock()
        self._closed = False
        self._closed_by = "this RayPool is closed; create a new RayPool to run more code"
        self._pid = os.getpid()
        self._slots = [_Slot(index) for index in range(actors)]
        for slot in self._slots:
            self._start(slot)
        self._ray = _ray_connection()  # the actors live as long as it does
        self._finalizer = weakref.finalize(self, _kill_slots, self._slots, self._pid)
        self._finalizer.atexit = False  # at exit, Ray ends the driver's actors itself
        try:
            # What each actor said when it started: its pid, its pool's, its node.
            self.info: list[dict[str, Any]] = ray.get(
                [slot.started for slot in self._slots], timeout=START_TIMEOUT
            )
        except ray.exceptions.GetTimeoutError:
            self.close(timeout=0)
            raise PoolError(
                f"the RayPool's actors did not start within {START_TIMEOUT:.0f} s; the "
                f"cluster may lack what each asks for ({self._asks}): free it, or lower "
                "num_cpus in actor_options"
            ) from None
        except ray.exceptions.RayError as exc:
            self.close(timeout=0)
            raise PoolError(f"the RayPool's actors could not start: {_reason(exc)}") from None
        for slot in self._slots:
            slot.started = None

    # Lifecycle.

    @property
    def closed(self) -> bool:
        return self._closed

    # What its sessions ask of it, as of a `pynox.Pool`: a forked child holds the locks
    # other threads held at the fork, and a Ray driver it did not start.

    def _forked_child(self) -> bool:
        return os.getpid() != self._pid

    def _refuse_in_a_forked_child(self) -> None:
        if self._forked_child():
            raise PoolError("a RayPool cannot be used in a forked child; create one there")

    def close(self, timeout: float = CLOSE_GRACE) -> None:
        """Stops every actor's local pool (waiting up to `timeout` seconds), then the actors.

        Results still pending then are PoolError results. Closing twice is harmless.
        """
        check_close_timeout(timeout)  # before anything closes: not a pool half closed
        if self._forked_child():
            return  # the actors are the parent's, and so is its Ray driver
        with self._lock:
            if self._closed:
                return
            self._closed = True
            actors = [slot.actor for slot in self._slots if slot.actor is not None]
        self._finalizer.detach()
        if self._ray_ended():
            return  # the actors ended with it; a call to them would start Ray anew
        if timeout > 0:
            with contextlib.suppress(ray.exceptions.RayError):
                ray.wait(
                    [actor.shutdown.remote() for actor in actors],
                    num_returns=len(actors),
                    timeout=timeout,
                )
        _kill(actors)

    async def aclose(self, timeout: float = CLOSE_GRACE) -> None:
        """`close` for asyncio: waits for the actors to stop without blocking the event loop."""
        import asyncio

        check_close_timeout(timeout)
        await asyncio.get_running_loop().run_in_executor(None, self.close, timeout)

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> RayPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<pynox.ray.RayPool actors={len(self._slots)} workers={self.workers} {state}>"

    def __reduce__(self) -> tuple[Any, ...]:
        # Not Ray's "Can't get local object 'ActorClass.options...'" when a task is handed
        # a RayPool: its actors and their state belong to the driver that made it.
        raise TypeError(
            "a RayPool cannot be pickled (passed to a Ray task or actor, say): its actors "
            "belong to the process that made it; call it there and pass the code or the "
            "Results instead"
        )

    def _start(self, slot: _Slot) -> None:
        """A new actor in `slot` (the caller holds the lock, or no other thread runs)."""
        slot.generation = next(_generations)
        slot.actor = self._actor_class.remote(
            slot.generation,
            self._config_text,
            self.workers,
            self.preload,
            self.package_dirs,
            self.warmup,
        )
        # Until it answers, requests wait for it only so long: one the cluster cannot place
        # (it lacks what the actor asks for, or shrank) would otherwise hold them for good.
        slot.started = slot.actor.ready.remote()
        slot.deadline = time.monotonic() + START_TIMEOUT

    def _replace(self, slot: _Slot, dead: Any) -> None:
        """The actor `dead` died: kill what is left of it and start another, once."""
        with self._lock:
            if slot.actor is not dead or self._closed:
                return
            self._start(slot)
        _kill([dead])

    def _parse_config(self) -> Config | None:
        if self.config_path is None:
            return None
        from pynox.policy.cache import load_config

        try:
            return load_config(self.config_path)
        except PynoxError as exc:
            raise ValueError(exc.message) from None

    @property
    def python(self) -> str:
        """The Python that runs the code on the nodes, as "3.13" (for tool docstrings)."""
        return str(self.info[0]["python"])

    def _load_config(self) -> Config | None:
        """The config as this machine read it (for tool docstrings); the nodes have its text."""
        return self._config

    # Choosing an actor.

    def _acquire(self, slot: _Slot | None) -> tuple[_Slot, Any, int]:
        """The slot (the least busy when not given), its actor and generation, counted busy."""
        self._refuse_in_a_forked_child()  # before the lock, which the fork may have left held
        with self._lock:
            if not self._closed and self._ray_ended():
                self._closed = True
                self._closed_by = RAY_ENDED
                self._finalizer.detach()
            if self._closed:
                raise PoolError(self._closed_by)
            if slot is None:
                slot = min(self._slots, key=lambda s: (s.stalled(), s.in_flight, len(s.sessions)))
            slot.in_flight += 1
            return slot, slot.actor, slot.generation

    def _ray_ended(self) -> bool:
        """Whether the Ray connection the actors were made on is gone (ray.shutdown(),
        perhaps followed by ray.init() of another): calling them would fail, or start Ray."""
        return _ray_connection() != self._ray

    def _not_started(self, slot: _Slot, actor: Any) -> dict[str, Any] | None:
        """None once `actor` serves, waiting for a replacement until its deadline; else the
        PoolError result of a request that could not be sent to it."""
        with self._lock:
            started, deadline = slot.started, slot.deadline
            if slot.actor is not actor:
                started = None  # replaced since: the request's own call says what became of it
        if started is None:
            return None
        ready, _ = ray.wait([started], timeout=max(0.0, deadline - time.monotonic()))
        if not ready:
            return failure(
                "PoolError",
                f"the Ray actor that replaced a dead one did not start within "
                f"{START_TIMEOUT:.0f} s; the cluster may lack what it asks for ({self._asks}): "
                "free that, or close this RayPool and make one whose actor_options it can meet",
                hint=CANNOT_START_HINT,
            ).raw
        try:
            ray.get(started)
        except ray.exceptions.RayActorError:
            return None  # it died: the request's own call fails, and replaces it
        except ray.exceptions.RayError as exc:  # its local pool could not start
            return failure(
                "PoolError",
                f"the Ray actor that replaced a dead one could not start: {_reason(exc)}",
                hint=CANNOT_START_HINT,
            ).raw
        with self._lock:
            if slot.started is started:
                slot.started = None
        return None

    def _call(self, slot: _Slot, actor: Any, request: dict[str, Any], session: Any) -> Any:
        """The ref of `request` sent to `actor`, or of the result saying it could not be."""
        refused = self._not_started(slot, actor)
        if refused is not None:
            return ray.put(refused)
        return actor.run.remote(request, None if session is None else session.id)

    def _release(self, slot: _Slot) -> None:
        with self._lock:
            slot.in_flight -= 1

    # Running code.

    def run(self, code: str, *, idempotent: bool = False, **options: Unpack[RunOptions]) -> Result:
        """Runs `code` in a fresh sandboxed process on one actor's node; its Result.

        idempotent=True lets a RayPool made with retries=1 send it once more if its actor
        dies before answering.
        """
        return self.run_spec(code, self._spec("run", options), idempotent=idempotent)

    async def arun(
        self, code: str, *, idempotent: bool = False, **options: Unpack[RunOptions]
    ) -> Result:
        """`run` for asyncio: awaits the Result without blocking the event loop."""
        return await self.arun_spec(code, self._spec("arun", options), idempotent=idempotent)

    def map(
        self,
        codes: Iterable[str],
        *,
        idempotent: bool = False,
        max_in_flight: int | None = None,
        **options: Unpack[RunOptions],
    ) -> Iterator[Result]:
        """Runs each program with the same options; their Results, in the order of `codes`.

        At most `max_in_flight` (default: the pool's) are sent and not yet yielded: the next
        program is taken from `codes` only when one is yielded, so a slow consumer or a
        generator of programs holds the rest back. Leaving the loop early cancels the
        requests still running.
        """
        if isinstance(codes, (str, bytes)):  # else each character would run as a program
            raise TypeError(
                "map takes an iterable of programs, not one program as a str; pass a list "
                "such as [code], or call run(code)"
            )
        spec = self._spec("map", options)
        if max_in_flight is not None:
            _whole("max_in_flight", max_in_flight, 1)
        self._may_retry(idempotent, None)  # checked now, not only once a retry is due
        return self._map(iter(codes), spec, max_in_flight or self.max_in_flight, idempotent)

    def session(self, **options: Unpack[SessionOptions]) -> Session:
        """A persistent session held by one actor: every step runs there.

        If that actor dies, the step running then returns a PoolError Result and the next
        one starts a fresh session on its replacement, its Result saying `restarted`.
        """
        spec = Spec.of("session", cast("dict[str, Any]", options))
        check_session_spec(spec)  # first: a TypeError that says what a session takes, as Pool's
        return RaySession(self, self._carried(spec))

    def tool(self, *, session: bool = False, **options: Unpack[SessionOptions]) -> Tool:
        """A plain `run_python(code: str) -> str` for a model, as `pynox.Pool.tool` gives."""
        from pynox.api.tool import make_tool, tool_spec

        spec = self._carried(tool_spec(session, options))
        held = RaySession(self, spec) if session else None
        return make_tool(cast("Any", self), spec, held)

    def _spec(self, caller: str, options: Mapping[str, Any]) -> Spec:
        return self._carried(Spec.of(caller, options))

    def _carried(self, spec: Spec) -> Spec:
        """`spec`, if a request of it can travel to a node: ValueError if not."""
        if spec.functions:
            raise ValueError(
                "functions: host functions run in the caller's process, which a RayPool's "
                "nodes cannot call; use pynox.Pool for programs that need them"
            )
        if spec.files:
            raise ValueError(NO_FILES)
        return spec

    def run_spec(
        self, code: str, spec: Spec, session: Session | None = None, *, idempotent: bool = False
    ) -> Result:
        """Runs code with options already validated (run, sessions and tools end here)."""
        request = spec.request(code)
        slot = session.slot if isinstance(session, RaySession) else None
        for last in self._attempts(idempotent, session):
            chosen, actor, generation = self._acquire(slot)
            try:
                ref = self._call(chosen, actor, request, session)
                try:
                    raw = ray.get(ref)
                except BaseException:  # Ctrl-C while waiting: the run stops too
                    ray.cancel(ref)
                    if session is not None:
                        session._lost()  # as in arun_spec: the node's session ends with it
                    raise
            except ray.exceptions.RayError as exc:
                raw = self._failed(chosen, actor, exc, last=last)
            finally:
                self._release(chosen)
            if raw is not None:
                return self._finish(raw, session, generation)
        raise AssertionError("unreachable: the last attempt returns")

    async def arun_spec(
        self, code: str, spec: Spec, session: Session | None = None, *, idempotent: bool = False
    ) -> Result:
        import asyncio

        request = spec.request(code)
        slot = session.slot if isinstance(session, RaySession) else None
        for last in self._attempts(idempotent, session):
            chosen, actor, generation = self._acquire(slot)
            try:
                if chosen.started is None:  # set only with a new actor: no wait
                    ref = self._call(chosen, actor, request, session)
                else:  # off the event loop: it may wait for a replacement actor to start
                    ref = await asyncio.get_running_loop().run_in_executor(
                        None, self._call, chosen, actor, request, session
                    )
                try:
                    raw = await ref
                except asyncio.CancelledError:
                    ray.cancel(ref)
                    if session is not None:
                        session._lost()  # a cancelled step ends its session
                    raise
            except ray.exceptions.RayError as exc:
                raw = self._failed(chosen, actor, exc, last=last)
            finally:
                self._release(chosen)
            if raw is not None:
                return self._finish(raw, session, generation)
        raise AssertionError("unreachable: the last attempt returns")

    def _attempts(self, idempotent: bool, session: Session | None) -> list[bool]:
        """One flag per attempt: whether it is the last."""
        return [False, True] if self._may_retry(idempotent, session) else [True]

    def _may_retry(self, idempotent: bool, session: Session | None) -> bool:
        """Only when the caller asked for both; session steps are never sent twice."""
        if not isinstance(idempotent, bool):
            raise TypeError("idempotent takes True or False")
        return idempotent and self.retries == 1 and session is None

    def _failed(
        self, slot: _Slot, actor: Any, exc: BaseException, *, last: bool
    ) -> dict[str, Any] | None:
        """The result of a request whose Ray call failed; None to send it again."""
        if not isinstance(exc, ray.exceptions.RayActorError):
            return failure("PoolError", f"the Ray call failed: {_reason(exc)}").raw
        if self._closed:
            return failure("PoolError", "the RayPool was closed while this request ran").raw
        self._replace(slot, actor)
        if not last:
            return None
        return failure(
            "PoolError",
            "the Ray actor running this request died before it answered (its process or its "
            f"node ended: {_reason(exc)}); the program may or may not have run, and a "
            "replacement actor has started",
            hint="run the code again; if this keeps happening, tell the user",
        ).raw

    def _finish(self, raw: dict[str, Any], session: Session | None, generation: int) -> Result:
        result = Result.from_json(raw)
        if session is not None:
            result = session._step_done(result, generation)
        return result

    def _map(
        self, codes: Iterator[str], spec: Spec, limit: int, idempotent: bool
    ) -> Iterator[Result]:
        window: deque[tuple[dict[str, Any], _Slot, Any, int, Any]] = deque()
        try:
            for code in codes:
                request = spec.request(code)
                if len(window) >= limit:
                    yield self._collect(window.popleft(), idempotent)
                window.append(self._send(request, None))
            while window:
                yield self._collect(window.popleft(), idempotent)
        finally:
            for _, slot, _, _, ref in window:
                with contextlib.suppress(Exception):
                    ray.cancel(ref)
                self._release(slot)

    def _send(
        self, request: dict[str, Any], slot: _Slot | None
    ) -> tuple[dict[str, Any], _Slot, Any, int, Any]:
        slot, actor, generation = self._acquire(slot)
        try:
            ref = self._call(slot, actor, request, None)
        except BaseException:
            self._release(slot)
            raise
        return request, slot, actor, generation, ref

    def _collect(
        self, sent: tuple[dict[str, Any], _Slot, Any, int, Any], idempotent: bool
    ) -> Result:
        request, slot, actor, generation, ref = sent
        try:
            raw = ray.get(ref)
        except ray.exceptions.RayError as exc:
            raw = self._failed(slot, actor, exc, last=not self._may_retry(idempotent, None))
        except BaseException:  # Ctrl-C while waiting: the run stops too
            ray.cancel(ref)
            raise
        finally:
            self._release(slot)
        if raw is None:
            return self._collect(self._send(request, None), False)
        return self._finish(raw, None, generation)

    def _close_session(self, session_id: str, wait: bool) -> None:
        if self._forked_child():
            return  # the actors are the parent's, and the lock may be held for good
        if wait:
            self._end_session(session_id, wait=True)
            return
        if not threading.main_thread().is_alive():
            return  # at interpreter exit: Ray ends the driver's actors, sessions with them
        # Perhaps the session's finalizer, which the collector runs in whatever thread
        # allocates, maybe one inside a section holding the pool's lock: taking it there
        # would deadlock, so a thread of its own ends the session (as pynox.Pool's
        # close_collected hands its close off).
        threading.Thread(
            target=self._end_session,
            args=(session_id, False),
            name="pynox-ray-close-session",
            daemon=True,
        ).start()

    def _end_session(self, session_id: str, wait: bool) -> None:
        """Unpins the session and asks the actors that held it to close it."""
        with self._lock:
            if self._closed or self._ray_ended():
                return
            held = [slot for slot in self._slots if session_id in slot.sessions]
            for slot in held:
                slot.sessions.discard(session_id)
            # An actor not yet seen to serve ran no step, so holds no session; and one the
            # cluster cannot place would never answer the close.
            actors = [slot.actor for slot in held if slot.started is None]
        refs = [actor.close_session.remote(session_id) for actor in actors]
        if wait:
            # Until the node's close returns, which waits for the running step as a local
            # close does (its timeout bounds it), or the actor dies: not a grace of its own,
            # after which the step would still hold the session's place on the node.
            with contextlib.suppress(ray.exceptions.RayError):
                ray.wait(refs, num_returns=len(refs))


class RaySession(Session):
    """A session of a RayPool, pinned to the actor that holds it (see `RayPool.session`)."""

    def __init__(self, pool: RayPool, spec: Spec) -> None:
        super().__init__(cast("Any", pool), spec)
        with pool._lock:
            self.slot = min(pool._slots, key=lambda s: (s.stalled(), len(s.sessions), s.in_flight))
            self.slot.sessions.add(self.id)

    def close(self) -> None:
        super().close()
        pool = cast("RayPool", self.pool)
        with pool._lock:
            self.slot.sessions.discard(self.id)

    def _step_spec(self, name: str | None, files: Files = None, timeout: Duration = None) -> Spec:
        # Before the step counts as sent, as Pool refuses its bad arguments: the node would
        # refuse the files only after the request had crossed the cluster.
        if files_field(files):
            raise ValueError(NO_FILES)
        return super()._step_spec(name, files, timeout)

    def stream(self, code: str, *, name: str | None = None, timeout: Duration = None) -> Any:
        raise TypeError("a RayPool session does not stream; use run or arun")

    def astream(self, code: str, *, name: str | None = None, timeout: Duration = None) -> Any:
        raise TypeError("a RayPool session does not stream; use run or arun")


def _kill_slots(slots: list[_Slot], pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child, which has no Ray driver of its own
        _kill([slot.actor for slot in slots])


def _kill(actors: list[Any]) -> None:
    for actor in actors:
        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)


def _reason(exc: BaseException) -> str:
    """What went wrong, in one line. Ray wraps what an actor raised in a header of its own
    (in colour) and the actor's traceback: the actor's own message is the reason, as it
    (RayTaskError.cause) or as the traceback's last line (an actor that failed to start),
    and is kept whole. Else the first line of Ray's message, bounded: they run long."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, Exception) and str(cause):
        return str(cause)
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]
    traceback = any(line.startswith('File "') for line in lines)
    raised = _RAISED.fullmatch(lines[-1]) if traceback else None
    if raised is not None:
        return raised.group(1)
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _ray_connection() -> tuple[str, str] | None:
    """This driver's Ray connection (its job, and the node it joined), None when it has
    none: a job id alone repeats across local instances, which number jobs from 1."""
    if not ray.is_initialized():
        return None
    context = ray.get_runtime_context()
    return context.get_job_id(), context.get_node_id()


def _asks(options: Mapping[str, Any]) -> str:
    keys = ("num_cpus", "num_gpus", "memory", "resources")
    return ", ".join(f"{key}={options[key]!r}" for key in keys if key in options)


def _refuse_relative_paths(text: str, path: str) -> None:
    """ValueError for a relative path in the config: each node reads the text from a
    private file of its own, where the path would name a directory beside that file, not
    the one beside `path` that it names here."""
    from pynox.policy.config import parse_toml
    from pynox.policy.grants import PATH_GRANTS

    document = parse_toml(text, path)  # valid: the config parsed already
    permissions, profiles, pool = (
        document.get(key, {}) for key in ("permissions", "profiles", "pool")
    )
    tables = {"[permissions]": permissions, "[pool]": pool}
    if isinstance(pool, dict):
        tables["[pool.limits]"] = pool.get("limits", {})
    if isinstance(profiles, dict):
        tables.update({f"[profiles.{name}]": table for name, table in profiles.items()})
    for section, table in tables.items():
        for key in PATH_GRANTS:
            values = table.get(key, []) if isinstance(table, dict) else []
            for value in values if isinstance(values, list) else []:
                if isinstance(value, str) and not value.startswith(("/", "~")):
                    raise ValueError(
                        f"{key} in {section} of {path} lists the relative path {value!r}; "
                        "RayPool sends the file's text to the nodes, where it would name "
                        "another directory: write it as an absolute path"
                    )


def _whole(name: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name}={value!r}: give a whole number of at least {least}")
