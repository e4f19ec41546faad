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
import inspect
import json
import keyword
import os
import subprocess
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, cast

from pynox import units
from pynox.config import Grants
from pynox.errors import PynoxError

if TYPE_CHECKING:
    import asyncio

    from pynox.config import Config

PathArg = str | os.PathLike[str]
Paths = PathArg | Iterable[PathArg] | None
Names = str | Iterable[str] | None
Duration = str | int | float | None
Size = str | int | None
Functions = Mapping[str, Callable[..., Any]] | Iterable[Callable[..., Any]] | None

DEFAULT_NAME = "agent.py"
DEFAULT_TIMEOUT = 30.0  # the pool's own default, when neither request nor config sets one
MAX_REQUEST_LINE = 16 << 20  # the pool refuses longer lines
MAX_HOST_VALUE = 8 << 20  # what one host call can carry back into the sandbox
_READY_TIMEOUT = 120.0  # preloading pandas on a cold disk takes a few seconds, not minutes
_STALL_MARGIN = 15.0  # beyond the longest pending timeout: the pool is stuck
_CLOSE_GRACE = 5.0
_STDERR_KEPT = 16 << 10
# Events the model's code cannot cause, for results the client makes itself.
_POOL_HINT = (
    "the sandbox service failed, not your code; run the code again, and tell the user if "
    "this keeps happening"
)
_CHAIN_LINES = frozenset(
    {
        "During handling of the above exception, another exception occurred:",
        "The above exception was the direct cause of the following exception:",
    }
)
_NOT_EXCEPTIONS = frozenset({"Timeout", "Signal", "PoolError", "RequestError"})


class PoolError(PynoxError):
    """The pool process could not be started or used.

    Raised only where the application must act (the pool does not start, it was closed);
    a pool that dies under running requests gives them Results with an error of this type.
    """


class ErrorInfo(TypedDict):
    """`Result.error`: what went wrong, where, and the hint written for models."""

    type: str
    message: str
    file: str | None
    line: int | None
    path: str | None
    hint: str | None


class SessionInfo(TypedDict, total=False):
    """`Result.session` of a session step."""

    id: str
    step: int
    restarted: bool
    ended: str | None


# --- Result -------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Result:
    """The outcome of one run, as the pool reported it.

    `text` is what a model should read; the other fields are the structured form of the same
    result: the program's exit status (124: timeout, 125: refused or not set up), its output
    (cut at max_output bytes per stream), the error with its file, line and hint, and the
    policy that applied.
    """

    exit: int
    stdout: str = ""
    stderr: str = ""
    error: ErrorInfo | None = None
    duration_ms: int = 0
    policy: dict[str, Any] | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    session: SessionInfo | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def ok(self) -> bool:
        """The program ended with exit status 0 and no error."""
        return self.exit == 0 and self.error is None

    @property
    def truncated(self) -> bool:
        """Either stream was longer than max_output and was cut."""
        return self.stdout_truncated or self.stderr_truncated

    @property
    def text(self) -> str:
        """What the model reads: the output, then the error, its location and the hint."""
        return format_text(self)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        shown = [f"exit={self.exit}", f"ok={self.ok}", f"duration_ms={self.duration_ms}"]
        if self.stdout:
            shown.append(f"stdout={_short(self.stdout)!r}")
        if self.stderr:
            shown.append(f"stderr={_short(self.stderr)!r}")
        if self.error is not None:
            shown.append(f"error={self.error['type']}")
        return f"Result({', '.join(shown)})"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Result:
        """A Result from a result line of the pool (or `pynox --json`)."""
        exit_code = data.get("exit")
        error = data.get("error")
        session = data.get("session")
        policy = data.get("policy")
        duration = data.get("duration_ms")
        return cls(
            exit=exit_code if isinstance(exit_code, int) else 125,
            stdout=_string(data.get("stdout")),
            stderr=_string(data.get("stderr")),
            error=_error_info(error) if isinstance(error, dict) else None,
            duration_ms=round(duration) if isinstance(duration, (int, float)) else 0,
            policy=policy if isinstance(policy, dict) else None,
            stdout_truncated=data.get("stdout_truncated") is True,
            stderr_truncated=data.get("stderr_truncated") is True,
            session=cast("SessionInfo", session) if isinstance(session, dict) else None,
            raw=dict(data),
        )


def failure(kind: str, message: str, hint: str | None = _POOL_HINT) -> Result:
    """A Result the client makes itself: exit 125 and an error of type `kind`."""
    error: ErrorInfo = {
        "type": kind,
        "message": message,
        "file": None,
        "line": None,
        "path": None,
        "hint": hint,
    }
    return Result(exit=125, error=error, raw={"exit": 125, "error": dict(error)})


def _string(value: object) -> str:
    return value if isinstance(value, str) else ""


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _error_info(data: dict[str, Any]) -> ErrorInfo:
    line = data.get("line")
    return {
        "type": _string(data.get("type")) or "Error",
        "message": _string(data.get("message")),
        "file": data.get("file") if isinstance(data.get("file"), str) else None,
        "line": line if isinstance(line, int) and not isinstance(line, bool) else None,
        "path": data.get("path") if isinstance(data.get("path"), str) else None,
        "hint": data.get("hint") if isinstance(data.get("hint"), str) else None,
    }


def format_text(result: Result) -> str:
    """The text of a result: compact, and complete enough for a model to act on."""
    error = result.error
    parts: list[str] = []
    session = result.session or {}
    if session.get("restarted"):
        parts.append(
            "[a new session started: the previous one had ended, so variables and imports "
            "from earlier calls are gone]"
        )
    if result.stdout.strip("\n"):
        parts.append(result.stdout.rstrip("\n"))
    if result.stdout_truncated:
        parts.append(_truncation_note("stdout", result.stdout))
    stderr = _without_report(result.stderr, error)
    if stderr.strip("\n"):
        parts.append(stderr.rstrip("\n"))
    if result.stderr_truncated:
        parts.append(_truncation_note("stderr", result.stderr))
    if error is not None:
        message = error["message"]
        parts.append(f"{error['type']}: {message}" if message else error["type"])
        if error["file"] and error["line"] is not None and error["type"] not in _NOT_EXCEPTIONS:
            parts.append(f"at {error['file']}:{error['line']}")
        hint = error["hint"]
        if hint and hint != message:
            parts.append(f"pynox: {hint}")
    elif result.exit != 0:
        parts.append(f"[exit status {result.exit}]")
    ended = session.get("ended")
    if ended:
        parts.append(
            f"[the session ended ({ended}); the next call starts a fresh one without the "
            "variables and imports of this one]"
        )
    if not parts:
        return "(no output)"
    return "\n".join(parts)


def _truncation_note(stream: str, kept: str) -> str:
    size = len(kept.encode("utf-8", errors="replace"))
    return f"[{stream} truncated: only its first {size} bytes were kept; print less]"


def _without_report(stderr: str, error: ErrorInfo | None) -> str:
    """Standard error without the traceback and hint that `error` already describes."""
    if not stderr or error is None or error["type"] in _NOT_EXCEPTIONS:
        return stderr
    lines = stderr.splitlines(keepends=True)
    while lines and lines[-1].startswith("pynox: "):
        lines.pop()
    headers = [i for i, line in enumerate(lines) if _is_traceback_header(line)]
    if headers:
        start = headers[-1]
        while True:  # walk back over chained exceptions
            before = start - 1
            while before >= 0 and not lines[before].strip():
                before -= 1
            earlier = [i for i in headers if i < before]
            if before < 0 or lines[before].strip() not in _CHAIN_LINES or not earlier:
                break
            start = earlier[-1]
        return "".join(lines[:start])
    # A SyntaxError has no header: its report starts at the last `  File "..."` line.
    files = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    if files and error["type"].endswith("Error"):
        return "".join(lines[: files[-1]])
    return "".join(lines)


def _is_traceback_header(line: str) -> bool:
    text = line.strip().lstrip("+| ")
    return text in (
        "Traceback (most recent call last):",
        "Exception Group Traceback (most recent call last):",
    )


# --- arguments ----------------------------------------------------------------------------


def _paths(value: Paths, what: str, cwd: str) -> list[str]:
    """Absolute paths: relative ones are resolved against the caller's cwd, now."""
    result = []
    for item in _items(value, what, "a path or a list of paths"):
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"{what} takes paths (str or os.PathLike), not {type(item).__name__}")
        text = os.fspath(item)
        if isinstance(text, bytes):
            text = os.fsdecode(text)
        if not text or "\0" in text:
            raise ValueError(f"{what} lists {text!r}, which is not a path")
        result.append(os.path.normpath(os.path.join(cwd, os.path.expanduser(text))))
    return list(dict.fromkeys(result))


def _strings(value: Names, what: str, kind: str) -> list[str]:
    result = []
    for item in _items(value, what, f"a {kind} or a list of them"):
        if not isinstance(item, str):
            raise TypeError(f"{what} takes strings, not {type(item).__name__}")
        if not item or "\0" in item:
            raise ValueError(f"{what} lists {item!r}, which is not a {kind}")
        result.append(item)
    return result


def _items(value: object, what: str, expected: str) -> list[object]:
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [value]
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"{what} takes {expected}, not {type(value).__name__}")
    return list(value)


def _duration(value: Duration, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise TypeError(f"{what} takes a duration like '10s' or a number of seconds")
    try:
        return units.parse_duration(value, what)
    except PynoxError as exc:
        raise ValueError(exc.message) from None


def _size(value: Size, what: str, minimum: int = 0, maximum: int | None = None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"{what} takes a size like '512m' or a number of bytes")
    try:
        return units.parse_size(value, what, minimum, maximum)
    except PynoxError as exc:
        raise ValueError(exc.message) from None


def _name(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"name takes a file name like 'agent.py', not {type(value).__name__}")
    if not value or any(c in value for c in "\0\n\r"):
        raise ValueError(f"name={value!r} is not a file name; give one like 'agent.py'")
    return value


def _profile(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise TypeError("profile takes the name of a [profiles.NAME] table of pynox.toml")
    return value


def _network(value: object) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"allow_network takes True, False or None, not {value!r}")
    return value


def _functions(value: Functions) -> dict[str, Callable[..., Any]]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError("functions takes a dict of name to function, or a list of functions")
    else:
        pairs = [(getattr(f, "__name__", None), f) for f in value]
    result: dict[str, Callable[..., Any]] = {}
    for name, function in pairs:
        if not callable(function):
            raise TypeError(f"functions[{name!r}] is {type(function).__name__}, not callable")
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(
                f"{name!r} cannot be a host function's name: the code imports it with "
                "`from pynox_host import NAME`, so use a Python identifier"
            )
        if name == "HostError" or name.startswith("__"):
            raise ValueError(f"{name!r} is reserved in pynox_host; give the function another name")
        result[name] = function
    return result


def function_signature(function: Callable[..., Any]) -> str:
    """The signature the model sees, like "(query: str, limit: int = 5) -> list[dict]"."""
    for options in ({"eval_str": True}, {}):
        try:
            return str(inspect.signature(function, **options))  # type: ignore[arg-type]
        except Exception:  # noqa: S112 - a NameError in an annotation, or no signature at all
            continue
    return "(...)"


def function_spec(name: str, function: Callable[..., Any]) -> dict[str, str]:
    return {
        "name": name,
        "signature": function_signature(function),
        "doc": inspect.getdoc(function) or "",
    }


class Spec:
    """One validated set of run options: what a request carries besides its code."""

    __slots__ = (
        "name",
        "profile",
        "allow_read",
        "allow_write",
        "package_dirs",
        "allow_env",
        "allow_network",
        "timeout",
        "memory",
        "max_output",
        "max_file_size",
        "args",
        "functions",
        "_limits",
    )

    def __init__(
        self,
        *,
        name: str = DEFAULT_NAME,
        profile: str | None = None,
        allow_read: Paths = None,
        allow_write: Paths = None,
        package_dirs: Paths = None,
        allow_env: Names = None,
        allow_network: bool | None = None,
        timeout: Duration = None,
        memory: Size = None,
        max_output: Size = None,
        max_file_size: Size = None,
        args: Names = None,
        functions: Functions = None,
    ) -> None:
        cwd = os.getcwd()
        self.name = _name(name)
        self.profile = _profile(profile)
        self.allow_read = _paths(allow_read, "allow_read", cwd)
        self.allow_write = _paths(allow_write, "allow_write", cwd)
        self.package_dirs = _paths(package_dirs, "package_dirs", cwd)
        self.allow_env = _strings(allow_env, "allow_env", "variable name")
        self.allow_network = _network(allow_network)
        self.timeout = _duration(timeout, "timeout")
        self.memory = _size(memory, "memory", minimum=units.MIN_MEMORY)
        self.max_output = _size(max_output, "max_output", maximum=units.MAX_OUTPUT_LIMIT)
        self.max_file_size = _size(max_file_size, "max_file_size", minimum=1)
        self.args = _strings(args, "args", "string")
        self.functions = _functions(functions)
        # As the caller wrote them: the pool formats its hints from what it was sent.
        self._limits = {
            "timeout": timeout,
            "memory": memory,
            "max_output": max_output,
            "max_file_size": max_file_size,
        }

    def request(self, code: str, session: str | None = None) -> dict[str, Any]:
        """The request line's fields (without the id)."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str of Python source, not {type(code).__name__}")
        request: dict[str, Any] = {"code": code, "name": self.name}
        if self.profile is not None:
            request["profile"] = self.profile
        for key in ("allow_read", "allow_write", "package_dirs", "allow_env", "args"):
            if getattr(self, key):
                request[key] = getattr(self, key)
        if self.allow_network is not None:
            request["allow_network"] = self.allow_network
        for key, value in self._limits.items():
            if value is not None:
                request[key] = value
        if self.functions:
            request["functions"] = [function_spec(n, f) for n, f in self.functions.items()]
        if session is not None:
            request["session"] = session
        return request

    def grants(self) -> Grants:
        """The request's own grants, for describing the policy it will get."""
        return Grants(
            allow_read=self.allow_read,
            allow_write=self.allow_write,
            package_dirs=self.package_dirs,
            allow_env=self.allow_env,
            allow_network=self.allow_network,
            timeout=self.timeout,
            memory=self.memory,
            max_output=self.max_output,
            max_file_size=self.max_file_size,
        )


def effective_grants(spec: Spec, config: Config | None) -> Grants:
    """What the pool will grant a request: its profile, then its fields, then the limits'
    values for what neither sets (as docs/pool-protocol.md says), then the defaults."""
    grants = spec.grants()
    if spec.profile is not None:
        if config is None:
            raise ValueError(
                f"profile={spec.profile!r} needs a pynox.toml, and the pool has none; pass "
                "config= to Pool, set PYNOX_CONFIG, or run where pynox.toml is"
            )
        try:
            profile = config.profile(spec.profile)
        except PynoxError as exc:
            raise ValueError(exc.message) from None
        grants = profile.merged(grants)
    if config is not None:
        limits = config.pool_limits
        for key in ("timeout", "memory", "max_output", "max_file_size"):
            if getattr(grants, key) is None:
                setattr(grants, key, getattr(limits, key))
    if grants.timeout is None:
        grants.timeout = DEFAULT_TIMEOUT
    if grants.max_output is None:
        grants.max_output = units.DEFAULT_MAX_OUTPUT
    return grants


# --- the connection to one pool process ----------------------------------------------------


@dataclass
class _Pending:
    budget: float  # seconds the pool may take without writing anything
    functions: dict[str, Callable[..., Any]]
    loop: asyncio.AbstractEventLoop | None = None
    future: Future[dict[str, Any]] = field(default_factory=Future)


class _Connection:
    """One `pynox pool` process: the pipes, the threads that serve them, pending requests."""

    def __init__(self, command: list[str], stall_margin: float) -> None:
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # a Ctrl-C for the application is not the pool's
            )
        except OSError as exc:
            raise PoolError(f"cannot start the pool with {command[0]}: {exc}") from None
        self.command = command
        self.stall_margin = stall_margin
        self.info: dict[str, Any] | None = None
        self.failure: str | None = None
        self.closing = False
        self.settled = threading.Event()  # ready, or failed
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._write_lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._next_id = 0
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
            self.fail(f"the pool did not start within {units.format_duration(timeout)}")
        if self.info is None:
            raise PoolError(self.failure or "the pool did not start")

    @property
    def alive(self) -> bool:
        return self.failure is None

    def submit(self, request: dict[str, Any], pending: _Pending) -> Future[dict[str, Any]]:
        future = pending.future
        key = self.request_id()
        try:
            text = json.dumps({"id": key, **request}, separators=(",", ":"), allow_nan=False)
        except ValueError as exc:  # NaN or Infinity: the pool reads RFC 8259 JSON only
            message = f"the request is not JSON ({exc}); send plain, finite JSON data"
            future.set_result(failure("RequestError", message, hint=None).raw)
            return future
        line = (text + "\n").encode()
        if len(line) > MAX_REQUEST_LINE:
            size = units.format_size(MAX_REQUEST_LINE)
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
        if not self._write(line):
            self.fail("the pool stopped reading requests")
        return future

    def send(self, message: dict[str, Any]) -> bool:
        """Writes a line that expects no answer anyone waits for (session close, host reply)."""
        return self._write((json.dumps(message, separators=(",", ":")) + "\n").encode())

    def request_id(self) -> str:
        with self._lock:
            self._next_id += 1
            return str(self._next_id)

    def close(self, grace: float) -> None:
        """Closes standard input (the pool finishes and exits), then kills it after `grace`."""
        self.closing = True
        with self._write_lock:
            try:
                if self.process.stdin is not None:
                    self.process.stdin.close()
            except OSError:
                pass
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self._kill()
        self.fail("the pool was closed while this request ran")

    def fail(self, reason: str) -> None:
        """Marks the pool dead: every pending request gets a PoolError result, now."""
        with self._lock:
            if self.failure is not None:
                return
            self.failure = reason
            pending, self._pending = self._pending, {}
            self._wake.notify_all()
        self.settled.set()
        self._kill()
        result = failure("PoolError", reason).raw
        for item in pending.values():
            _resolve(item.future, result)

    # The pool's side, on the connection's own threads.

    def _write(self, data: bytes) -> bool:
        stdin = self.process.stdin
        if stdin is None:
            return False
        with self._write_lock:
            try:
                stdin.write(data)
                stdin.flush()
            except (OSError, ValueError):
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
            self.fail("the pool was closed while this request ran")
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
            if pending is not None and key is not None:
                threading.Thread(
                    target=self._host_call,
                    args=(key, message, pending),
                    name="pynox-host-call",
                    daemon=True,
                ).start()
            return
        if event is not None or key is None:
            return  # an event this client does not know, or a result for no request of ours
        with self._lock:
            pending = self._pending.pop(key, None)
        if pending is not None:
            _resolve(pending.future, message)

    def _host_call(self, key: str, message: dict[str, Any], pending: _Pending) -> None:
        call = message.get("call")
        name = message.get("function")
        args = message.get("args", [])
        kwargs = message.get("kwargs", {})
        function = pending.functions.get(name) if isinstance(name, str) else None
        reply: dict[str, Any]
        if function is None:
            reply = {"host_error": {"call": call, "message": f"no host function {name!r}"}}
        elif not isinstance(args, list) or not isinstance(kwargs, dict):
            reply = {"host_error": {"call": call, "message": "malformed arguments"}}
        else:
            reply = _call_host(function, str(name), call, args, kwargs, pending.loop)
        self.send({"id": key, **reply})


def _call_host(
    function: Callable[..., Any],
    name: str,
    call: object,
    args: list[Any],
    kwargs: dict[str, Any],
    loop: asyncio.AbstractEventLoop | None,
) -> dict[str, Any]:
    try:
        value = function(*args, **kwargs)
        if inspect.isawaitable(value):
            value = _await(value, loop)
    except BaseException as exc:  # noqa: B036 - whatever the host function does, the call ends
        text = str(exc)
        return {
            "host_error": {
                "call": call,
                "message": f"{type(exc).__name__}: {text}" if text else type(exc).__name__,
            }
        }
    try:
        encoded = json.dumps(value, allow_nan=False)  # the pool reads RFC 8259 JSON only
    except (TypeError, ValueError) as exc:
        return {
            "host_error": {
                "call": call,
                "message": f"{name}() returned a value that is not JSON ({exc})",
            }
        }
    if len(encoded) > MAX_HOST_VALUE:
        return {
            "host_error": {
                "call": call,
                "message": (
                    f"{name}() returned {len(encoded)} bytes of JSON, more than the "
                    f"{units.format_size(MAX_HOST_VALUE)} a call can carry; ask for less"
                ),
            }
        }
    return {"host_result": {"call": call, "value": value}}


def _await(awaitable: Any, loop: asyncio.AbstractEventLoop | None) -> Any:
    import asyncio

    async def wait() -> Any:
        return await awaitable

    if loop is not None and loop.is_running():
        return asyncio.run_coroutine_threadsafe(wait(), loop).result()
    return asyncio.run(wait())


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


class _State:
    """What a Pool's finalizer needs: kept apart so threads never hold the Pool itself."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connection: _Connection | None = None
        self.generation = 0
        self.closed = False
        self.pid = os.getpid()

    def close(self, grace: float = _CLOSE_GRACE) -> None:
        if os.getpid() != self.pid:
            return  # a forked child: the process and its pipes are the parent's
        with self.lock:
            self.closed = True
            connection, self.connection = self.connection, None
        if connection is not None:
            connection.close(grace)


class Pool:
    """A `pynox pool` process that runs code in sandboxed children, shared by all threads.

    `workers` is how many one-shot runs go at once (default: [pool].workers of the config,
    else 2), `preload` lists modules every child starts with, `config` names the pynox.toml
    whose profiles and [pool.limits] apply (default: $PYNOX_CONFIG, then ./pynox.toml).
    The process starts now (with lazy=True: on the first run) and again after it died;
    close() or the end of the interpreter stops it.
    """

    def __init__(
        self,
        workers: int | None = None,
        preload: Names = None,
        config: str | os.PathLike[str] | None = None,
        *,
        lazy: bool = False,
        pynox_command: list[str] | None = None,
    ) -> None:
        if workers is not None and (
            isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
        ):
            raise ValueError(f"workers={workers!r}: give a whole number of at least 1")
        self.workers = workers
        self.preload = _strings(preload, "preload", "module name")
        for module in self.preload:
            if not all(part.isidentifier() for part in module.split(".")):
                raise ValueError(f"preload lists {module!r}, which is not a module name")
        self.config_path = _find_config(config)
        if pynox_command is not None and (
            isinstance(pynox_command, str)
            or not all(isinstance(part, str) for part in pynox_command)
            or not pynox_command
        ):
            raise TypeError("pynox_command takes a list of strings, like ['/usr/bin/pynox']")
        self._command = list(pynox_command) if pynox_command else default_command()
        self._stall_margin = _STALL_MARGIN
        self._ready_timeout = _READY_TIMEOUT
        self._pid = os.getpid()
        self._config: Config | None = None
        self._config_loaded = False
        self._state = _State()
        self._finalizer = weakref.finalize(self, self._state.close, 1.0)
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

    def close(self, timeout: float = _CLOSE_GRACE) -> None:
        """Stops the pool: running requests get `timeout` seconds to finish, then it is killed.

        Results still pending then are PoolError results. Closing twice is harmless.
        """
        self._finalizer.detach()
        self._state.close(timeout)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"pid={self.pid}"
        return f"<pynox.Pool workers={self.workers} {state}>"

    def _start(self) -> _Connection:
        """The live connection, starting the process if there is none (no waiting)."""
        state = self._state
        with state.lock:
            if state.closed:
                raise PoolError("this pool is closed; create a new Pool to run more code")
            if os.getpid() != self._pid:
                raise PoolError("a Pool cannot be used in a forked child; create one there")
            connection = state.connection
            if connection is None or not connection.alive:
                connection = _Connection(self.command, self._stall_margin)
                state.connection = connection
                state.generation += 1
            return connection

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
                from pynox.config import load_config

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
        *,
        name: str = DEFAULT_NAME,
        profile: str | None = None,
        allow_read: Paths = None,
        allow_write: Paths = None,
        package_dirs: Paths = None,
        allow_env: Names = None,
        allow_network: bool | None = None,
        timeout: Duration = None,
        memory: Size = None,
        max_output: Size = None,
        max_file_size: Size = None,
        args: Names = None,
        functions: Functions = None,
    ) -> Result:
        """Runs `code` in a fresh sandboxed process and returns its Result.

        Relative paths are resolved against the current directory now. `functions` maps
        names to callables the code may call with `from pynox_host import NAME`.
        """
        spec = Spec(
            name=name,
            profile=profile,
            allow_read=allow_read,
            allow_write=allow_write,
            package_dirs=package_dirs,
            allow_env=allow_env,
            allow_network=allow_network,
            timeout=timeout,
            memory=memory,
            max_output=max_output,
            max_file_size=max_file_size,
            args=args,
            functions=functions,
        )
        return self.run_spec(code, spec)

    async def arun(
        self,
        code: str,
        *,
        name: str = DEFAULT_NAME,
        profile: str | None = None,
        allow_read: Paths = None,
        allow_write: Paths = None,
        package_dirs: Paths = None,
        allow_env: Names = None,
        allow_network: bool | None = None,
        timeout: Duration = None,
        memory: Size = None,
        max_output: Size = None,
        max_file_size: Size = None,
        args: Names = None,
        functions: Functions = None,
    ) -> Result:
        """`run` for asyncio: awaits the result without blocking the event loop.

        Host functions that are coroutine functions run on this event loop.
        """
        spec = Spec(
            name=name,
            profile=profile,
            allow_read=allow_read,
            allow_write=allow_write,
            package_dirs=package_dirs,
            allow_env=allow_env,
            allow_network=allow_network,
            timeout=timeout,
            memory=memory,
            max_output=max_output,
            max_file_size=max_file_size,
            args=args,
            functions=functions,
        )
        return await self.arun_spec(code, spec)

    def session(
        self,
        *,
        name: str = DEFAULT_NAME,
        profile: str | None = None,
        allow_read: Paths = None,
        allow_write: Paths = None,
        package_dirs: Paths = None,
        allow_env: Names = None,
        allow_network: bool | None = None,
        timeout: Duration = None,
        memory: Size = None,
        max_output: Size = None,
        max_file_size: Size = None,
        functions: Functions = None,
    ) -> Session:
        """A persistent session: one sandboxed process whose globals outlive each step.

        Its permissions are fixed here (relative paths resolved now); nothing starts until
        the first `run`.
        """
        spec = Spec(
            name=name,
            profile=profile,
            allow_read=allow_read,
            allow_write=allow_write,
            package_dirs=package_dirs,
            allow_env=allow_env,
            allow_network=allow_network,
            timeout=timeout,
            memory=memory,
            max_output=max_output,
            max_file_size=max_file_size,
            functions=functions,
        )
        return Session(self, spec)

    def tool(
        self,
        *,
        session: bool = False,
        functions: Functions = None,
        profile: str | None = None,
        name: str = DEFAULT_NAME,
        allow_read: Paths = None,
        allow_write: Paths = None,
        package_dirs: Paths = None,
        allow_env: Names = None,
        allow_network: bool | None = None,
        timeout: Duration = None,
        memory: Size = None,
        max_output: Size = None,
        max_file_size: Size = None,
    ) -> Callable[[str], str]:
        """A plain `run_python(code: str) -> str` for a model, with a docstring written for it.

        The permissions are fixed here, relative paths resolved against the current directory
        now; the function returns the Result's `text`. With session=True every call runs in
        one persistent session.
        """
        if not isinstance(session, bool):
            raise TypeError("session takes True or False")
        spec = Spec(
            name=name,
            profile=profile,
            allow_read=allow_read,
            allow_write=allow_write,
            package_dirs=package_dirs,
            allow_env=allow_env,
            allow_network=allow_network,
            timeout=timeout,
            memory=memory,
            max_output=max_output,
            max_file_size=max_file_size,
            functions=functions,
        )
        from pynox.tool_doc import make_tool

        return make_tool(self, spec, Session(self, spec) if session else None)

    def run_spec(self, code: str, spec: Spec, session: Session | None = None) -> Result:
        """Runs code with options already validated (the other methods end here)."""
        request = spec.request(code, session.id if session is not None else None)
        try:
            connection, generation = self._connection()
        except PoolError:
            if session is not None:
                session._lost()
            raise
        future = connection.submit(request, self._pending(spec))
        message = future.result()
        return self._finish(message, session, generation)

    async def arun_spec(self, code: str, spec: Spec, session: Session | None = None) -> Result:
        import asyncio

        request = spec.request(code, session.id if session is not None else None)
        loop = asyncio.get_running_loop()
        ready = self._state.connection
        try:
            if ready is not None and ready.info is not None and ready.alive:
                connection, generation = ready, self._state.generation
            else:  # starting may take a while: not on the event loop's thread
                connection, generation = await loop.run_in_executor(None, self._connection)
        except PoolError:
            if session is not None:
                session._lost()
            raise
        pending = self._pending(spec)
        pending.loop = loop
        message = await asyncio.wrap_future(connection.submit(request, pending))
        return self._finish(message, session, generation)

    def _pending(self, spec: Spec) -> _Pending:
        try:
            timeout = effective_grants(spec, self._load_config()).timeout
        except ValueError:
            timeout = None  # the pool refuses the request and says why
        return _Pending(budget=timeout or DEFAULT_TIMEOUT, functions=spec.functions)

    def _finish(self, message: dict[str, Any], session: Session | None, generation: int) -> Result:
        result = Result.from_json(message)
        if session is not None:
            result = session._step_done(result, generation)
        return result

    def _close_session(self, session_id: str, wait: bool) -> None:
        connection = self._state.connection
        if (
            os.getpid() != self._pid
            or connection is None
            or not connection.alive
            or connection.info is None
        ):
            return
        if not wait:
            connection.send({"id": connection.request_id(), "close_session": session_id})
            return
        pending = _Pending(budget=_STALL_MARGIN, functions={})
        future = connection.submit({"close_session": session_id}, pending)
        with contextlib.suppress(FutureTimeout):
            future.result(timeout=_STALL_MARGIN * 2)


def _find_config(config: str | os.PathLike[str] | None) -> str | None:
    from pynox.config import find_config_path

    if config is not None and not isinstance(config, (str, os.PathLike)):
        raise TypeError(f"config takes the path of a pynox.toml, not {type(config).__name__}")
    explicit = None if config is None else os.fsdecode(os.fspath(config))
    try:
        path = find_config_path(explicit, os.environ, os.getcwd())
    except PynoxError as exc:
        raise ValueError(exc.message) from None
    return None if path is None else os.path.abspath(path)


# --- Session ------------------------------------------------------------------------------


class Session:
    """A persistent sandboxed process, like a notebook: globals survive between steps.

    A Python error leaves it alive; a timeout, a crash or sys.exit() ends it, and the next
    `run` starts a fresh one (its Result says `session["restarted"]`). Steps run one at a
    time, in order. Close it when done; the pool also closes sessions idle for long.
    """

    def __init__(self, pool: Pool, spec: Spec) -> None:
        self.pool = pool
        self.id = uuid.uuid4().hex
        self._spec = spec
        self._lock = threading.Lock()
        self._steps = 0
        self._alive = False
        self._closed = False
        self._generation: int | None = None
        self._finalizer = weakref.finalize(self, _close_quietly, weakref.ref(pool), self.id)

    @property
    def alive(self) -> bool:
        """True while the session's process holds state: after a step that left it running."""
        return self._alive and not self._closed

    @property
    def steps(self) -> int:
        """How many steps this session object has run."""
        return self._steps

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, code: str, *, name: str | None = None) -> Result:
        """Runs one step in the session and returns its Result."""
        return self.pool.run_spec(code, self._step_spec(name), self)

    async def arun(self, code: str, *, name: str | None = None) -> Result:
        """`run` for asyncio."""
        return await self.pool.arun_spec(code, self._step_spec(name), self)

    def close(self) -> None:
        """Ends the session's process. Closing twice is harmless."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            started = self._generation is not None
        self._finalizer.detach()
        if started:
            self.pool._close_session(self.id, wait=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<pynox.Session {self.id} steps={self.steps} alive={self.alive}>"

    def _step_spec(self, name: str | None) -> Spec:
        if self._closed:
            raise PoolError("this session is closed; start another with pool.session()")
        if name is None or name == self._spec.name:
            return self._spec
        spec = Spec.__new__(Spec)
        for slot in Spec.__slots__:
            setattr(spec, slot, getattr(self._spec, slot))
        spec.name = _name(name)
        return spec

    def _lost(self) -> None:
        self._alive = False

    def _step_done(self, result: Result, generation: int) -> Result:
        with self._lock:
            info = result.session
            restarted = self._generation is not None and self._generation != generation
            if restarted and info is not None and not info.get("restarted"):
                # A new pool process: the session it knew is gone, whatever the new one says.
                info = {**info, "restarted": True}
                result = Result(**{**_fields(result), "session": info})
            self._generation = generation
            self._steps += 1
            self._alive = info is not None and not info.get("ended") and not self._closed
            return result


def _fields(result: Result) -> dict[str, Any]:
    return {name: getattr(result, name) for name in result.__dataclass_fields__}


def _close_quietly(pool_ref: weakref.ref[Pool], session_id: str) -> None:
    pool = pool_ref()
    if pool is not None and not pool.closed:
        with contextlib.suppress(Exception):  # at interpreter exit, anything may be gone
            pool._close_session(session_id, wait=False)
