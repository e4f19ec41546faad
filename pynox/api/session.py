"""A session: one sandboxed process whose variables live from one step to the next."""

from __future__ import annotations

import contextlib
import threading
import uuid
import weakref
from typing import TYPE_CHECKING, Any

from pynox.api.connection import PoolError
from pynox.api.options import (
    Duration,
    Files,
    Spec,
    checked_name,
    effective_grants,
    files_field,
    step_timeout,
)
from pynox.api.result import Result
from pynox.api.stream import Output, astream_spec, stream_spec

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Generator

    from pynox.api.connection import _Pending
    from pynox.api.pool import Pool


class Session:
    """A persistent sandboxed process, like a notebook: globals survive between steps.

    A Python error leaves it alive; a timeout, a crash or sys.exit() ends it, and the next
    `run` starts a fresh one (its Result says `session["restarted"]`). Steps run one at a
    time, in order. Close it when done; the pool also closes sessions idle for long.
    """

    def __init__(self, pool: Pool, spec: Spec) -> None:
        check_session_spec(spec)
        self.pool = pool
        self.id = uuid.uuid4().hex
        self._spec = spec
        self._lock = threading.Lock()
        self._steps = 0
        self._alive = False
        self._closed = False
        self._sent = False  # a step went to the pool, which may hold the session since
        self._generation: int | None = None
        # Whether the pool process numbered a step of this session 1: every session the
        # pool starts begins there, so a second step 1 means a new one (steps that run at
        # once, from threads, may come back in any order, each number but once).
        self._pool_began = False
        # Whether a step gave a timeout of its own: the session's process takes its policy
        # from the step that starts it, so steps that give none then name the session's.
        self._own_timeouts = False
        # Bumped by every change of _alive: the pool's answer to a cancelled step sets it
        # only if nothing newer has (see _cancelled).
        self._status = 0
        self._finalizer = weakref.finalize(self, _close_quietly, weakref.ref(pool), self.id)

    @property
    def alive(self) -> bool:
        """True while the session's process holds state: after a step that left it running,
        in a pool not closed since (closing the pool ends its sessions). The pool also closes
        a session idle for its session_idle, which this cannot see: the next step's Result
        then says session["restarted"]."""
        return self._alive and not self._closed and not self.pool.closed

    @property
    def steps(self) -> int:
        """How many steps this session object has run."""
        return self._steps

    @property
    def closed(self) -> bool:
        return self._closed

    def run(
        self,
        code: str,
        *,
        name: str | None = None,
        files: Files = None,
        timeout: Duration = None,
    ) -> Result:
        """Runs one step in the session and returns its Result.

        `files` are placed in the session's scratch directory before the step runs; the
        step's Result.files are what it wrote into out/ there (moved out of it). `timeout`
        is this step's own limit (the session's when left out), the one limit a step may
        change, as a timed-out step's hint says."""
        return self.pool.run_spec(code, self._step_spec(name, files, timeout), self)

    async def arun(
        self,
        code: str,
        *,
        name: str | None = None,
        files: Files = None,
        timeout: Duration = None,
    ) -> Result:
        """`run` for asyncio. Cancelling its task stops the step and ends the session."""
        return await self.pool.arun_spec(code, self._step_spec(name, files, timeout), self)

    def stream(
        self, code: str, *, name: str | None = None, timeout: Duration = None
    ) -> Generator[Output | Result, None, None]:
        """Runs one step as `Pool.stream` runs code: its output as it comes, then its Result.

        Leaving early stops the step and ends the session, as a timeout does.
        """
        return stream_spec(self.pool, code, self._step_spec(name, timeout=timeout), self)

    def astream(
        self, code: str, *, name: str | None = None, timeout: Duration = None
    ) -> AsyncGenerator[Output | Result, None]:
        """`stream` for asyncio."""
        return astream_spec(self.pool, code, self._step_spec(name, timeout=timeout), self)

    def close(self) -> None:
        """Ends the session's process. Closing twice is harmless."""
        if self.pool._forked_child():
            return  # the process is the parent's pool's; and a lock may be held for good
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sent = self._sent
        self._finalizer.detach()
        if sent:  # a step still running finishes first; the pool then ends the session
            self.pool._close_session(self.id, wait=True)

    async def aclose(self) -> None:
        """`close` for asyncio: a step still running finishes first, off the event loop."""
        import asyncio

        await asyncio.get_running_loop().run_in_executor(None, self.close)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<pynox.Session {self.id} steps={self.steps} alive={self.alive}>"

    def __reduce__(self) -> tuple[Any, ...]:
        raise TypeError(
            "a Session cannot be pickled: its process belongs to this process's pool; start "
            "a session where the code runs"
        )

    def _step_spec(self, name: str | None, files: Files = None, timeout: Duration = None) -> Spec:
        self.pool._refuse_in_a_forked_child()
        # Checked before the session counts as sent: a bad argument sends nothing.
        seconds = step_timeout(timeout)
        with self._lock:
            if self._closed:
                raise PoolError("this session is closed; start another with pool.session()")
            self._sent = True
            self._own_timeouts = self._own_timeouts or timeout is not None
            if timeout is None and self._own_timeouts and self._spec.timeout is None:
                timeout = seconds = self._session_timeout()
        if (name is None or name == self._spec.name) and files is None and timeout is None:
            return self._spec
        spec = Spec.__new__(Spec)
        for slot in Spec.__slots__:
            setattr(spec, slot, getattr(self._spec, slot))
        if name is not None:
            spec.name = checked_name(name)
        spec.files = files_field(files)
        if timeout is not None:
            spec.timeout = seconds
            spec._limits = {**self._spec._limits, "timeout": timeout}
        return spec

    def _session_timeout(self) -> float | None:
        """The timeout the session's own options come to (its profile's, [pool.limits]',
        or the default), as the pool would grant them."""
        try:
            return effective_grants(self._spec, self.pool._load_config()).timeout
        except ValueError:  # a profile the pool cannot apply: it refuses the step itself
            return None

    def _lost(self) -> None:
        with self._lock:
            self._alive = False
            self._status += 1

    def _cancelled(self, pending: _Pending) -> None:
        """A step of this session was cancelled. A running step ends the session; one still
        queued never ran, and leaves it as it was. The pool's answer to the step says which,
        later, on the connection's reader thread: until then the session counts as lost."""
        if pending.key is None:  # never sent: the pool knows nothing of it
            return
        with self._lock:
            was_alive = self._alive
            self._alive = False
            self._status += 1
            status = self._status

        def answered(message: dict[str, Any]) -> None:
            info = message.get("session")
            with self._lock:
                if status != self._status or not isinstance(info, dict):
                    return  # a later step has said more, or the pool never had the session
                ran = info.get("step") is not None
                self._alive = (not info.get("ended") if ran else was_alive) and not self._closed

        pending.on_answer = answered
        if pending.answer is not None:  # it came before the line above
            answered(pending.answer)

    def _step_done(self, result: Result, generation: int) -> Result:
        with self._lock:
            info = result.session
            step = info.get("step") if info is not None else None
            new_pool = self._generation is not None and self._generation != generation
            # A new pool process never knew the session; a pool that closed it (idle for
            # session_idle) started a new one at step 1.
            restarted = new_pool or (step == 1 and self._pool_began)
            if restarted and info is not None and not info.get("restarted"):
                # The session the pool knew is gone, whatever the new one says.
                info = {**info, "restarted": True}
                # raw too: Result.from_json(result.raw) gives this Result again.
                raw = {**result.raw, "session": info}
                result = Result(**{**_fields(result), "session": info, "raw": raw})
            self._steps += 1
            # A refused step (code too long, not Unicode, queued as its session closed)
            # never reached the session: the process and the pool it knew are as they
            # were, restarted or alive.
            error = result.error
            refused = step is None and error is not None and error["type"] == "RequestError"
            if not refused:
                if new_pool:
                    self._pool_began = False
                self._generation = generation
                self._pool_began = self._pool_began or step == 1
                self._alive = info is not None and not info.get("ended") and not self._closed
                self._status += 1
            # Closed while this step ran: a close that reached the pool before the step
            # found nothing to close, and the step then started the session; so close it
            # again (a pool that did close it refuses this one, harmlessly).
            reopened = self._closed and info is not None and not info.get("ended")
        if reopened:
            self.pool._close_session(self.id, wait=False)
        return result


def check_session_spec(spec: Spec) -> None:
    """Refuses what a session cannot take: its process starts once, with no files of its
    own and the pool's sys.argv of one entry (the pool would drop args unsaid)."""
    if spec.files:
        raise TypeError("a session takes files with each step: session.run(code, files=...)")
    if spec.args:
        raise TypeError(
            "a session takes no args: its sys.argv is only its name; hand data to a step "
            "in its code or with session.run(code, files=...)"
        )


def _fields(result: Result) -> dict[str, Any]:
    return {name: getattr(result, name) for name in result.__dataclass_fields__}


def _close_quietly(pool_ref: weakref.ref[Pool], session_id: str) -> None:
    pool = pool_ref()
    if pool is not None and not pool.closed:
        with contextlib.suppress(Exception):  # at interpreter exit, anything may be gone
            pool._close_session(session_id, wait=False)
