"""One `pynox pool` process and its JSON Lines protocol, as the API's Pool drives it.

Requests carry ids; one reader thread hands each result to the future waiting for it,
and host functions run in threads of their own (docs/pool-protocol.md).
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Generator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pynox import strict_json, unit_format
from pynox.errors import PynoxError
from pynox.limits import MAX_LINE

if TYPE_CHECKING:
    import asyncio


from pynox.api.result import CLOSED_POOL_HINT, failure

MAX_HOST_VALUE = 8 << 20  # what one host call can carry back into the sandbox
# Characters of a host function's exception message the program's HostError gets: far
# within a protocol line (MAX_LINE) however JSON escapes them, and more than a model reads.
MAX_HOST_ERROR = 64 << 10
READY_TIMEOUT = 120.0  # preloading pandas on a cold disk takes a few seconds, not minutes
STALL_MARGIN = 15.0  # beyond the longest pending timeout: the pool is stuck
CLOSE_GRACE = 5.0
_STDERR_KEPT = 16 << 10
_CLOSED = "the pool was closed while this request ran"
_END_OF_INPUT = b""  # put on _Connection._soon by close: the input is closed there
# Held back while a line is written (_signals_held): Ctrl-C's. Each signal held costs a
# few microseconds a line (the mask comes back as a set of enums), so not every one.
_HELD_SIGNALS = {signal.SIGINT}


class PoolError(PynoxError):
    """The pool process could not be started or used.

    Raised only where the application must act (the pool does not start, it was closed);
    a pool that dies under running requests gives them Results with an error of this type.
    """


# --- the connection to one pool process ----------------------------------------------------


@dataclass
class _Pending:
    budget: float  # seconds the pool may take without writing anything
    functions: dict[str, Callable[..., Any]]
    loop: asyncio.AbstractEventLoop | None = None
    future: Future[dict[str, Any]] = field(default_factory=Future)
    key: str | None = None  # the request's id, once submitted
    # Called on the reader thread with each output event of a streaming request.
    on_output: Callable[[dict[str, Any]], None] | None = None
    # The result as it came, and a call made with it on the reader thread: a caller that
    # stopped waiting (a cancelled step) still learns what became of the request.
    answer: dict[str, Any] | None = None
    on_answer: Callable[[dict[str, Any]], None] | None = None
    # Host calls answered with a value the pool has not yet shown it took, by call number:
    # the function's name. A control_error for the request means the pool refused the
    # line, and the call still waits (_refused_answers).
    answered: dict[object, str] = field(default_factory=dict)
    # A control line waited on (close_session): a control_error answers it as a result does.
    control: bool = False
    # Why the client refuses the request itself, without sending it (an unknown profile).
    refusal: str | None = None
    session: str | None = None  # the session whose step this is, if any
    # The context variables of the call that made the request: its host functions see
    # them, as a task or asyncio.to_thread would (a request id, a user, a tracing span).
    context: contextvars.Context = field(default_factory=contextvars.copy_context)
    # The request of the same pool whose host function asked for this one, if any: the
    # chain of requests that wait, each for the next (_Connection.deadlock).
    caller: _Pending | None = None


# The request whose host function this thread runs (its coroutine too: asyncio copies the
# context into the task it makes). Code run from there in the same pool may have to wait
# for that request, which waits for the function: _Connection.deadlock says when it must.
_host_caller: contextvars.ContextVar[tuple[_Connection, _Pending] | None] = contextvars.ContextVar(
    "pynox_host_caller", default=None
)


# Every live connection of this process, for _release_pipes_in_child.
_connections: weakref.WeakSet[_Connection] = weakref.WeakSet()


def _release_pipes_in_child() -> None:
    """After a fork: the child's copies of the parent's pool pipes point at /dev/null.

    Left open, a forked worker (a web server's, a task queue's) holds the pool's standard
    input open, so the pool outlives its application and close() waits for its grace; and
    whatever the child flushes there at exit would land among the parent's requests.
    """
    for connection in list(_connections):
        connection.release_pipes()


os.register_at_fork(after_in_child=_release_pipes_in_child)


class _Connection:
    """One `pynox pool` process: the pipes, the threads that serve them, pending requests."""

    def __init__(self, command: list[str], stall_margin: float, cwd: str | None = None) -> None:
        try:
            self.process = subprocess.Popen(
                command,
                cwd=cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # a Ctrl-C for the application is not the pool's
            )
        except OSError as exc:
            raise PoolError(f"cannot start the pool with {command[0]}: {exc}") from None
        _connections.add(self)
        self.command = command
        self.stall_margin = stall_margin
        self.info: dict[str, Any] | None = None
        self.failure: str | None = None
        self.closing = False
        self.settled = threading.Event()  # ready, or failed
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._write_lock = threading.Lock()
        # Lines send_soon could not write at once: the holder of _write_lock writes them.
        self._soon: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._pending: dict[str, _Pending] = {}
        self._ids = itertools.count(1)
        self._progress = time.monotonic()
        self._stderr = bytearray()
        self._stderr_done = threading.Event()
        for target, label in (
            (self._read, "reader"),
            (self._drain_stderr, "stderr"),
            (self._watch, "watchdog"),
        ):
            threading.Thread(target=target, name=f"pynox-pool-{label}", daemon=True).start()

    # The public side, called from any thread.

    def wait_ready(self, timeout: float) -> None:
        if not self.settled.wait(timeout):
            self.fail(f"the pool did not start within {unit_format.format_duration(timeout)}")
        if self.info is None:
            raise PoolError(self.failure or "the pool did not start")

    @property
    def alive(self) -> bool:
        return self.failure is None

    def submit(self, request: dict[str, Any], pending: _Pending) -> Future[dict[str, Any]]:
        future = pending.future
        if pending.refusal is not None:
            future.set_result(failure("RequestError", pending.refusal, hint=None).raw)
            return future
        pending.session = request.get("session")
        pending.caller = self._calling()
        deadlock = self.deadlock(pending.session)
        if deadlock is not None:
            future.set_result(failure("RequestError", deadlock, hint=None).raw)
            return future
        key = pending.key = self.request_id()
        try:
            text = json.dumps({"id": key, **request}, separators=(",", ":"), allow_nan=False)
        except ValueError as exc:  # NaN or Infinity: the pool reads RFC 8259 JSON only
            message = f"the request is not JSON ({exc}); send plain, finite JSON data"
            future.set_result(failure("RequestError", message, hint=None).raw)
            return future
        line = (text + "\n").encode()
        if len(line) > MAX_LINE:
            size = unit_format.format_size(MAX_LINE)
            message = (
                f"the request is {len(line)} bytes, more than the {size} the pool reads; "
                "send shorter code and pass data through files or host functions"
            )
            future.set_result(failure("RequestError", message, hint=None).raw)
            return future
        with self._lock:
            if self.failure is not None:
                future.set_result(failure("PoolError", self.failure).raw)
                return future
            if not self._pending:
                self._progress = time.monotonic()  # the clock of an idle pool starts now
            self._pending[key] = pending
            self._wake.notify_all()
        sent = False
        try:
            with self._writing():
                written = self._write_held(line)
                sent = True
        except BaseException:
            # Ctrl-C before the line went out, or once it had (never in between): nobody
            # waits for this request, so it must not hold a worker, nor look pending to the
            # watchdog, which would stop the pool as stuck.
            with self._lock:
                self._pending.pop(key, None)
            if sent:
                self.send({"id": key, "control": "cancel"})
            raise
        if not written:
            self.fail("the pool stopped reading requests")
        return future

    def deadlock(self, session: str | None) -> str | None:
        """Why a run (a step of `session`, else a one-shot run) asked for from a host function
        of this pool would wait forever for the request that called the function; None when
        it would not."""
        waiting = self._waiting()
        if not waiting:
            return None
        if session is not None and session == waiting[0].session:
            return (
                "a host function cannot run a step of the session whose step called it: that "
                "step waits for the function to return, and steps run one at a time; run the "
                "code in another session or with pool.run"
            )
        if session is not None and any(session == request.session for request in waiting):
            return (
                "a host function cannot run a step of a session whose step waits, through "
                "other host functions, for this one to return: steps run one at a time; run "
                "the code in another session or with pool.run"
            )
        # Each waiting one-shot run holds a worker until it ends: with all of them held so,
        # this run would never start.
        workers = self.info.get("workers") if self.info else None
        held = sum(1 for request in waiting if request.session is None)
        if session is None and workers == 1 and held:
            return (
                "a host function cannot run code in its own pool while the pool's one worker "
                "runs the request that called it; make the pool with workers=2 or more, or "
                "run the code in a session"
            )
        if session is None and isinstance(workers, int) and held >= workers:
            return (
                f"a host function cannot run code in its own pool while all {workers} of its "
                "workers run requests that wait for this function to return (host functions "
                "that run code whose host functions run code); make the pool with more "
                "workers, nest fewer runs, or run the code in a session"
            )
        return None

    def step_budget(self, session: str) -> float:
        """The longest budget of `session`'s pending steps (0 with none): a running step ends
        within its own, counted from its start."""
        with self._lock:
            return max(
                (p.budget for p in self._pending.values() if p.session == session), default=0
            )

    def waits_for_me(self, session: str) -> bool:
        """Whether a step of `session` waits for the host function this thread runs, in
        this pool, directly or through runs that the functions of its step asked for."""
        return any(request.session == session for request in self._waiting())

    def _waiting(self) -> list[_Pending]:
        """The requests waiting, each for a host function that waits for the next: the one
        that called this thread's function, the one whose function asked for that, ..."""
        waiting = []
        calling = self._calling()
        while calling is not None and not calling.future.done():
            waiting.append(calling)
            calling = calling.caller
        return waiting

    def _calling(self) -> _Pending | None:
        """The request of this pool whose host function this thread (or its coroutine) runs,
        while that request waits for it."""
        caller = _host_caller.get()
        # A task the function left behind (its context copied) may outlive the request.
        if caller is None or caller[0] is not self or caller[1].future.done():
            return None
        return caller[1]

    def cancel(self, pending: _Pending) -> None:
        """Asks the pool to end a request whose result nobody waits for any more.

        It takes no lock the thread may hold, as send_soon: the collector closing a stream
        left unfinished calls it, in whatever thread it runs.
        """
        if pending.key is not None and pending.key in self._pending:  # one atomic look
            self.send_soon({"id": pending.key, "control": "cancel"})

    def send(self, message: dict[str, Any]) -> bool:
        """Writes a line that expects no answer anyone waits for (session close, host reply)."""
        return self._write(_line(message))

    def send_soon(self, message: dict[str, Any]) -> None:
        """`send` for a finalizer, which the collector runs in whatever thread allocates, one
        in the middle of a write, say: it takes no lock that thread may hold. The line goes
        out now if no write is under way, else as soon as the one under way ends."""
        self._soon.put(_line(message))  # a SimpleQueue's put is safe from finalizers
        self._flush_soon()

    def release_pipes(self) -> None:
        """Points this process's descriptors of the pool's pipes at /dev/null (in a forked
        child): the file objects stay valid, and nothing the child does reaches the pool."""
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
                with contextlib.suppress(OSError, ValueError):  # closed already
                    if pipe is not None:
                        os.dup2(null, pipe.fileno(), inheritable=False)
        finally:
            os.close(null)

    def request_id(self) -> str:
        return str(next(self._ids))  # atomic, with no lock: send_soon's callers need one

    def end_input(self) -> None:
        """Closes standard input, after the lines before it: the pool finishes and exits.

        As send_soon does, it takes no lock: a Pool's finalizer calls it, in whatever thread
        the collector runs, maybe one in the middle of a write (which then closes it as it
        ends)."""
        self.closing = True
        self._soon.put(_END_OF_INPUT)
        self._flush_soon()

    def close(self, grace: float) -> None:
        """Closes standard input (the pool finishes and exits), then kills it after `grace`."""
        self.end_input()
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self._kill()
        self.fail(_CLOSED, CLOSED_POOL_HINT)

    def fail(self, reason: str, hint: str | None = None) -> None:
        """Marks the pool dead: every pending request gets a PoolError result, now (with
        `hint`, else the one for a pool that failed)."""
        with self._lock:
            if self.failure is not None:
                return
            self.failure = reason
            pending, self._pending = self._pending, {}
            self._wake.notify_all()
        self.settled.set()
        self._kill()
        made = failure("PoolError", reason) if hint is None else failure("PoolError", reason, hint)
        result = made.raw
        for item in pending.values():
            _resolve(item.future, result)

    # The pool's side, on the connection's own threads.

    def _write(self, data: bytes) -> bool:
        with self._writing():
            return self._write_held(data)

    @contextlib.contextmanager
    def _writing(self) -> Generator[None, None, None]:
        """Holds _write_lock, and Ctrl-C back (_signals_held), for writing whole lines; and
        writes those send_soon left before and while it held them."""
        try:
            with self._write_lock, _signals_held():
                self._write_soon_lines()
                yield
        finally:
            self._flush_soon()

    def _flush_soon(self) -> None:
        """Writes the lines send_soon left, unless a write is under way: its end does."""
        while not self._soon.empty():
            if not self._write_lock.acquire(blocking=False):
                return
            try:
                with _signals_held():
                    self._write_soon_lines()
            finally:
                self._write_lock.release()

    def _write_soon_lines(self) -> None:
        # Only the holder of _write_lock takes from the queue: what is there stays there.
        while not self._soon.empty():
            line = self._soon.get_nowait()
            if line != _END_OF_INPUT:
                self._write_held(line)
            elif self.process.stdin is not None:
                with contextlib.suppress(OSError):
                    self.process.stdin.close()

    def _write_held(self, data: bytes) -> bool:
        """Writes whole lines, within _writing; False if the pool no longer reads them."""
        stdin = self.process.stdin
        if stdin is None:
            return False
        try:
            stdin.write(data)
            stdin.flush()
        except (OSError, ValueError):
            # What the pipe did not take stays in the file's buffer, and its finalizer would
            # flush it again and print the error on the application's stderr: closing drops
            # it (the flush fails once more, the descriptor is closed all the same).
            with contextlib.suppress(OSError, ValueError):
                stdin.close()
            return False
        return True

    def _kill(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            for raw in stdout:
                if not raw.endswith(b"\n"):
                    break  # the pool died in the middle of a line
                self._progress = time.monotonic()
                try:
                    message = json.loads(raw)
                except ValueError:
                    message = None
                if not isinstance(message, dict):
                    shown = raw[:200].decode("utf-8", errors="replace").rstrip()
                    self.fail(f"the pool wrote a line that is not a JSON object: {shown!r}")
                    return
                self._dispatch(message)
        except (OSError, ValueError):
            pass
        # Each pipe is closed by the thread that reads it, once at its end: a host
        # function still running keeps this object alive, but no descriptor of it.
        with contextlib.suppress(OSError):
            stdout.close()
        self._stderr_done.wait(2)
        try:
            status = self.process.wait(5)
        except subprocess.TimeoutExpired:
            status = None
        said = self._stderr.decode("utf-8", errors="replace").strip()
        if len(said) > 2000:
            said = "..." + said[-2000:]
        if self.closing:
            self.fail(_CLOSED, CLOSED_POOL_HINT)
            return
        state = "exited" if self.info is None else "exited while requests were running"
        how = f" with status {status}" if status is not None else ""
        self.fail(f"the pool {state}{how}" + (f": {said}" if said else ""))

    def _drain_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        try:
            while True:
                chunk = os.read(stderr.fileno(), 65536)
                if not chunk:
                    break
                self._stderr += chunk
                del self._stderr[:-_STDERR_KEPT]
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(OSError):
                stderr.close()
            self._stderr_done.set()

    def _watch(self) -> None:
        """Fails the pool when it has pending requests and has said nothing for too long.

        Each running request ends within its timeout, so some line arrives at least that
        often while anything is pending, however long the queue.
        """
        with self._lock:
            while self.failure is None:
                if not self._pending or self.info is None:
                    self._wake.wait(None if self.info is not None else 1.0)
                    continue
                budget = max(p.budget for p in self._pending.values()) + self.stall_margin
                silent = time.monotonic() - self._progress
                if silent < budget:
                    self._wake.wait(min(budget - silent, 1.0) + 0.01)
                    continue
                break
            else:
                return
        self.fail(
            f"the pool wrote nothing for {silent:.0f}s while requests were running; it was stopped"
        )

    def _dispatch(self, message: dict[str, Any]) -> None:
        event = message.get("event")
        if event == "ready":
            self.info = message
            self.settled.set()
            with self._lock:
                self._progress = time.monotonic()
                self._wake.notify_all()
            return
        key = message.get("id")
        key = str(key) if isinstance(key, (str, int)) and not isinstance(key, bool) else None
        if event == "host_call":
            with self._lock:
                pending = self._pending.get(key) if key is not None else None
                if pending is not None:
                    # pynox_host makes one call at a time: the one before was taken.
                    pending.answered.clear()
            if pending is not None and key is not None:
                # A copy each: one context cannot be entered by two threads at once.
                threading.Thread(
                    target=pending.context.copy().run,
                    args=(self._host_call, key, message, pending),
                    name="pynox-host-call",
                    daemon=True,
                ).start()
            return
        if event == "output" and key is not None:
            with self._lock:
                pending = self._pending.get(key)
            if pending is not None and pending.on_output is not None:
                pending.on_output(message)
            return
        if event == "control_error" and key is not None:
            with self._lock:
                pending = self._pending.get(key)
                if pending is not None and pending.control:
                    del self._pending[key]
            if pending is not None and pending.control:
                _resolve(pending.future, message)
            else:
                self._refused_answers(key, message.get("message"))
            return
        if event is not None or key is None:
            return  # an event this client does not know, or a result for no request of ours
        with self._lock:
            pending = self._pending.pop(key, None)
        if pending is not None:
            pending.answer = message
            if pending.on_answer is not None:
                pending.on_answer(message)
            _resolve(pending.future, message)

    def _refused_answers(self, key: str, said: object) -> None:
        """The pool refused a line about request `key`: if it held a host function's value,
        the call it answers still waits in the program, which gets a HostError instead."""
        with self._lock:
            pending = self._pending.get(key)
            if pending is None or not pending.answered:
                return
            answered, pending.answered = pending.answered, {}
        reason = said if isinstance(said, str) else "no reason given"
        for call, name in answered.items():
            error = f"the pool refused the value {name}() returned: {reason}"
            self.send({"id": key, "host_error": {"call": call, "message": error}})

    def _host_call(self, key: str, message: dict[str, Any], pending: _Pending) -> None:
        _host_caller.set((self, pending))  # in this call's own copy of the context
        call = message.get("call")
        name = message.get("function")
        args = message.get("args", [])
        kwargs = message.get("kwargs", {})
        function = pending.functions.get(name) if isinstance(name, str) else None
        if function is None:
            answer = _host_error(call, f"no host function {name!r}")
        elif not isinstance(args, list) or not isinstance(kwargs, dict):
            answer = _host_error(call, "malformed arguments")
        else:
            answer = _call_host(function, str(name), call, args, kwargs, pending)
            if answer.startswith('"host_result"') and isinstance(call, int):
                with self._lock:
                    pending.answered[call] = str(name)
        self._write(f'{{"id":{json.dumps(key)},{answer}}}\n'.encode())


def _call_host(
    function: Callable[..., Any],
    name: str,
    call: object,
    args: list[Any],
    kwargs: dict[str, Any],
    pending: _Pending,
) -> str:
    """The control line's answer to one call of `pending`'s program, as JSON text:
    `"host_result": {...}` with the function's value, or `"host_error": {...}`."""
    try:
        value = function(*args, **kwargs)
        if inspect.isawaitable(value):
            value = _await(value, pending.loop, pending.future)
    except BaseException as exc:  # noqa: B036 - whatever the host function does, the call ends
        return _host_error(call, _describe(exc))
    try:
        # Written and read back as the pool will read it (RFC 8259 JSON only): NaN, an
        # integer beyond a double and a dict with two keys that JSON writes alike ({1: 2,
        # "1": 3}) are refused here, where the waiting call can be told, not by the pool.
        # The line then carries this text, not the value written again: a value another
        # thread changes meanwhile, or whose own methods fail the second time, would leave
        # the call unanswered until its timeout.
        encoded = strict_json.dumps(value)
        strict_json.loads(encoded, unique_keys=True)
    except Exception as exc:  # noqa: BLE001 - the value's own methods run here too
        # A dict subclass's items() or a list subclass's __iter__ may raise anything: the
        # call must still end, or the program waits for it until its timeout.
        # json's own errors and strict_json's (NotFinite lives in readable_json) say it
        # all; an error of the value's own code is named with its type.
        ours = ("builtins", strict_json.__name__, strict_json.NotFinite.__module__)
        plain = type(exc).__module__ in ours
        reason = str(exc) if plain and isinstance(exc, (TypeError, ValueError)) else _describe(exc)
        return _host_error(call, f"{name}() returned a value that is not JSON ({reason})")
    if len(encoded) > MAX_HOST_VALUE:
        return _host_error(
            call,
            f"{name}() returned {len(encoded)} bytes of JSON, more than the "
            f"{unit_format.format_size(MAX_HOST_VALUE)} a call can carry; ask for less",
        )
    return f'"host_result":{{"call":{json.dumps(call)},"value":{encoded}}}'


def _host_error(call: object, message: str) -> str:
    return f'"host_error":{json.dumps({"call": call, "message": message}, separators=(",", ":"))}'


def _describe(exc: BaseException) -> str:
    """What the program's HostError says of an exception from a host function; one whose
    str() fails itself still ends the call."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - the exception's own __str__ is the host's code
        text = ""
    if len(text) > MAX_HOST_ERROR:
        text = f"{text[:MAX_HOST_ERROR]}... ({len(text) - MAX_HOST_ERROR} more characters)"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _await(
    awaitable: Any, loop: asyncio.AbstractEventLoop | None, ended: Future[dict[str, Any]]
) -> Any:
    """The value of an async host function, awaited on `loop` (the caller's, while it runs)
    or on a loop of its own. Cancelled once its request has `ended` (done, timed out,
    cancelled, its pool gone): nothing could take its value then, and it would hold a task
    and this thread as long as it ran on, forever if it waits for what never comes."""
    import asyncio

    async def until_ended() -> Any:
        task = asyncio.ensure_future(awaitable)
        here = asyncio.get_running_loop()

        def cancel(_: object) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: the task is over
                here.call_soon_threadsafe(task.cancel)

        ended.add_done_callback(cancel)
        return await task

    if loop is not None and loop.is_running():
        return asyncio.run_coroutine_threadsafe(until_ended(), loop).result()
    return asyncio.run(until_ended())


@contextlib.contextmanager
def _signals_held() -> Generator[None, None, None]:
    """Holds Ctrl-C (SIGINT) back from the main thread, where Python runs its handler, until
    the block ends: a KeyboardInterrupt in the middle of a line would leave the pool half of
    it, which it would read with the next line as one bad line, and the request of that
    next line would never be answered. A pool that reads nothing is stopped by the
    watchdog, which ends the wait."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def _resolve(future: Future[dict[str, Any]], message: dict[str, Any]) -> None:
    if not future.done():
        # InvalidStateError: an asyncio caller cancelled it in between.
        with contextlib.suppress(Exception):
            future.set_result(message)


# --- Pool ---------------------------------------------------------------------------------


def default_command() -> list[str]:
    """`pynox` beside this interpreter, else this interpreter with `-m pynox`.

    Never with the working directory on sys.path (-P, or -I before 3.11): the pool
    imports before it confines a child, and requests may write there.
    """
    beside = os.path.join(os.path.dirname(sys.executable), "pynox")
    if os.access(beside, os.X_OK) and not os.path.isdir(beside):
        return [beside]
    safe_path = "-P" if sys.version_info >= (3, 11) else "-I"
    return [sys.executable, safe_path, "-m", "pynox"]
