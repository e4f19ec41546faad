"""What a run gives back through the API: Result, its error, and the text a model reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypedDict, cast

from pynox.errors import EXIT_SETUP_FAILURE
from pynox.left_out import is_left_out_line
from pynox.policy.grants import SESSION_NOTE

if TYPE_CHECKING:
    pass

# Events the model's code cannot cause, for results the client makes itself.
_POOL_HINT = (
    "the sandbox service failed, not your code; run the code again, and tell the user if "
    "this keeps happening"
)
# When the application itself closed the pool under a request: running again cannot help.
CLOSED_POOL_HINT = (
    "the application closed the sandbox service while the code ran; the code was not at "
    "fault, and this service cannot run it again"
)
_CHAIN_LINES = frozenset(
    {
        "During handling of the above exception, another exception occurred:",
        "The above exception was the direct cause of the following exception:",
    }
)
# How python's report of an exception group starts (traceback.TracebackException's).
_GROUP_HEADER = "  + Exception Group Traceback (most recent call last):"
_NOT_EXCEPTIONS = frozenset({"Timeout", "Signal", "PoolError", "RequestError", "Cancelled"})


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


@dataclass(frozen=True)
class Image:
    """An image a run drew (a matplotlib figure): `Result.images`."""

    mime: str
    width: int
    height: int
    data: bytes = field(repr=False)

    def __repr__(self) -> str:
        return f"Image({self.mime}, {self.width}x{self.height}, {len(self.data)} bytes)"


def _images(value: object) -> tuple[Image, ...]:
    """The images of a result line; entries that are not well-formed are left out."""
    import binascii

    images = []
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        mime, width, height, data = (item.get(k) for k in ("mime", "width", "height", "data"))
        if not (isinstance(mime, str) and isinstance(data, str)):
            continue
        if not (type(width) is int and type(height) is int):
            continue
        try:
            images.append(Image(mime, width, height, binascii.a2b_base64(data)))
        except (binascii.Error, ValueError):
            continue
    return tuple(images)


# --- Result -------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Result:
    """The outcome of one run, as the pool reported it.

    `text` is what a model should read; the other fields are the structured form of the same
    result: the program's exit status (124: timeout, 125: refused or not set up), its output
    (past max_output bytes per stream, its head and tail), the error with its file, line and
    hint, and the policy that applied. For code (not scripts), `value` is the repr of its
    last expression, as a notebook shows it (None when the code does not end with one, or
    it is None); `images` are the figures it drew with matplotlib, as PNGs.
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
    value: str | None = None
    images: tuple[Image, ...] = ()
    # What the run wrote into out/ of its scratch directory, by path relative to out/;
    # and what of it was left out, one "path: reason" each.
    files: dict[str, bytes] = field(default_factory=dict)
    files_left_out: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def ok(self) -> bool:
        """The program ended with exit status 0 and no error."""
        return self.exit == 0 and self.error is None

    @property
    def truncated(self) -> bool:
        """Either stream was longer than max_output: its middle was left out."""
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
        if self.value is not None:
            shown.append(f"value={_short(self.value)!r}")
        if self.images:
            shown.append(f"images={len(self.images)}")
        if self.error is not None:
            shown.append(f"error={self.error['type']}")
        return f"Result({', '.join(shown)})"

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str | bytes) -> Result:
        """A Result from a result line of the pool (or `pynox --json`): the line as text,
        such as `json.dumps(result.raw)` stored earlier, or the object it decodes to."""
        if isinstance(data, (str, bytes, bytearray)):
            import json  # only for a stored line: a Result the pool sent is decoded already

            data = json.loads(data)
        if not isinstance(data, Mapping):
            raise TypeError(
                f"Result.from_json takes a result as the JSON text of an object or the dict "
                f"it decodes to, not {type(data).__name__}; pass json.dumps(result.raw) or "
                "result.raw"
            )
        exit_code = data.get("exit")
        error = data.get("error")
        session = data.get("session")
        policy = data.get("policy")
        duration = data.get("duration_ms")
        return cls(
            exit=exit_code if isinstance(exit_code, int) else EXIT_SETUP_FAILURE,
            stdout=_string(data.get("stdout")),
            stderr=_string(data.get("stderr")),
            error=_error_info(error) if isinstance(error, dict) else None,
            duration_ms=round(duration) if isinstance(duration, (int, float)) else 0,
            policy=policy if isinstance(policy, dict) else None,
            stdout_truncated=data.get("stdout_truncated") is True,
            stderr_truncated=data.get("stderr_truncated") is True,
            session=cast("SessionInfo", session) if isinstance(session, dict) else None,
            value=data.get("value") if isinstance(data.get("value"), str) else None,
            images=_images(data.get("images")),
            files=_files(data.get("files")),
            files_left_out=_strings(data.get("files_left_out")),
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
    return Result(
        exit=EXIT_SETUP_FAILURE, error=error, raw={"exit": EXIT_SETUP_FAILURE, "error": dict(error)}
    )


def _string(value: object) -> str:
    return value if isinstance(value, str) else ""


def _files(value: object) -> dict[str, bytes]:
    """The result's {path: base64} as {path: bytes}; an entry that is not base64 is skipped."""
    if not isinstance(value, dict):
        return {}
    import base64
    import binascii

    files = {}
    for name, encoded in value.items():
        if isinstance(name, str) and isinstance(encoded, str):
            try:
                files[name] = base64.b64decode(encoded, validate=True)
            except (ValueError, binascii.Error):
                continue
    return files


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


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
    parts += _shown(result)
    if result.files:
        listed = ", ".join(f"out/{name} ({len(data)} bytes)" for name, data in result.files.items())
        parts.append(f"[files returned: {listed}]")
    if result.files_left_out:
        parts.append(f"[files not returned: {'; '.join(result.files_left_out)}]")
    if error is not None:
        message = error["message"]
        summary = f"{error['type']}: {message}" if message else error["type"]
        parts.append(_as_reported(result.stderr, error["type"], summary) or summary)
        if error["file"] and error["line"] is not None and error["type"] not in _NOT_EXCEPTIONS:
            parts.append(f"at {error['file']}:{error['line']}")
        hint = error["hint"]
        if hint and hint != message:
            parts.append(f"pynox: {hint}")
    elif result.exit != 0:
        parts.append(f"[exit status {result.exit}]")
    ended = session.get("ended")
    if ended:
        parts.append(session_ended_note(str(ended)))
    if not parts:
        return "(no output)"
    # Each lone surrogate as its escape (\ud800), as python prints it on stderr: the
    # program chooses its messages (`raise ValueError("\ud800")`), and a model API, or
    # an MCP client's JSON, cannot carry such a character.
    return "\n".join(parts).encode("utf-8", "backslashreplace").decode("utf-8")


def for_model(result: Result) -> Result:
    """result as a model that runs code in a session reads it: its hint without the note
    that says to close the session and start one with the grant or limit it names, which
    only the application can do (the model is told to ask the user for it)."""
    error = result.error
    if error is None or not error["hint"] or not error["hint"].endswith(SESSION_NOTE):
        return result
    hint = error["hint"].removesuffix(SESSION_NOTE)
    # The pynox: line after the traceback says what the hint says, there too.
    line = f"pynox: {error['hint']}\n"
    at = result.stderr.rfind(line)
    stderr = result.stderr
    if at >= 0:
        stderr = f"{stderr[:at]}pynox: {hint}\n{stderr[at + len(line) :]}"
    raw = {**result.raw, "stderr": stderr} if "stderr" in result.raw else result.raw
    if isinstance(raw.get("error"), dict):  # Result.from_json(raw) gives this Result again
        raw = {**raw, "error": {**raw["error"], "hint": hint}}
    return replace(result, stderr=stderr, error={**error, "hint": hint}, raw=raw)


def session_ended_note(how: str) -> str:
    """What a model is told when its session ended (timeout, crash, exit, cancelled)."""
    return (
        f"[the session ended ({how}); the next call starts a fresh one without the "
        "variables and imports of this one]"
    )


def _shown(result: Result) -> list[str]:
    """The value (a multi-line repr starts on a line of its own) and a line per image."""
    lines = []
    if result.value is not None:
        separator = "\n" if "\n" in result.value else " "
        lines.append(f"Out:{separator}{result.value}")
    for number, image in enumerate(result.images, 1):
        kind = image.mime.rpartition("/")[2].upper()
        lines.append(f"[image {number}: {image.width}x{image.height} {kind}]")
    return lines


def _truncation_note(stream: str, text: str) -> str:
    """What of a cut stream its text kept: its start and end around the line that says how
    much was left out, or, under a limit too small for that line, its start alone."""
    lines = text.split("\n")
    at = next((n for n, line in enumerate(lines) if is_left_out_line(line)), None)
    if at is None:
        kept = "only its start was kept"
    else:
        start, end = any(lines[:at]), any(lines[at + 1 :])
        kept = {
            (True, True): "its middle was left out, its start and end kept",
            (True, False): "only its start was kept",
            (False, True): "only its end was kept",
            (False, False): "all of it was left out",
        }[start, end]
    return f"[{stream} truncated: {kept}; print less]"


def _without_report(stderr: str, error: ErrorInfo | None) -> str:
    """Standard error without the traceback and hint that `error` already describes."""
    if not stderr or error is None or error["type"] in _NOT_EXCEPTIONS:
        return stderr
    lines = stderr.splitlines(keepends=True)
    headers = [i for i, line in enumerate(lines) if _is_traceback_header(line)]
    if headers:
        start = headers[-1]
        if lines[start].rstrip("\n") == _GROUP_HEADER:
            # `error` names the group alone: its report is all that says what is in it.
            return "".join(_without_hint_line(lines, start, error))
        while True:  # walk back over chained exceptions
            before = start - 1
            while before >= 0 and not lines[before].strip():
                before -= 1
            earlier = [i for i in headers if i < before]
            if before < 0 or lines[before].strip() not in _CHAIN_LINES or not earlier:
                break
            start = earlier[-1]
        last = headers[-1]
        return "".join(lines[:start] + _after_traceback(lines[last + 1 :], error))
    while lines and lines[-1].startswith("pynox: "):
        lines.pop()
    # A SyntaxError has no header: its report starts at the last `  File "..."` line.
    files = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    if files and error["type"].endswith("Error"):
        return "".join(lines[: files[-1]])
    # Nor does one about the code as a whole (a NUL in it): its report is the one line.
    if lines and lines[-1].rstrip("\n") == f"{error['type']}: {error['message']}":
        lines.pop()
    return "".join(lines)


def _without_hint_line(lines: list[str], start: int, error: ErrorInfo) -> list[str]:
    """lines without pynox's hint line, the first after `start`, which `error` holds."""
    kept = list(lines)
    if error["hint"]:
        at = next((i for i in range(start, len(kept)) if kept[i].startswith("pynox: ")), None)
        if at is not None:
            del kept[at]
    return kept


def _after_traceback(lines: list[str], error: ErrorInfo) -> list[str]:
    """What the program wrote after a traceback whose lines below its header are given:
    python writes the traceback before it runs the atexit handlers and waits for the
    threads still running, whose output stays; pynox's hint line after the traceback goes.
    Nothing when the traceback does not end as the error says (the rest is all report,
    then)."""
    at = 0
    while at < len(lines) and lines[at].startswith(" "):
        at += 1  # its frames, each line indented
    kind = error["type"]
    if at == len(lines) or not (lines[at].rstrip("\n") == kind or lines[at].startswith(f"{kind}:")):
        return []
    message = error["message"]
    shown = f"{kind}: {message}\n" if message else f"{kind}\n"
    at += len(shown.splitlines())  # split as stderr was: at "\r" too
    return _without_hint_line(lines[at:], 0, error)


def _as_reported(stderr: str, kind: str, summary: str) -> str | None:
    """The error's summary as python printed it at the end of its report, with what
    python adds to its line: a suggestion ("Did you mean: 'print'?", 3.12's "Did you
    forget to import 'sys'?"). None where no report ends with it (a SyntaxError's
    message names the file and line its report shows apart). What follows the error's
    lines (its notes, 3.11 on; what atexit handlers and threads wrote) stays in stderr's
    part of the text (_after_traceback)."""
    if kind in _NOT_EXCEPTIONS or not summary:
        return None
    first, _, rest = summary.partition("\n")
    for line in reversed(stderr.splitlines()):
        if line.startswith(first):
            return line + (f"\n{rest}" if rest else "")
        if _is_traceback_header(line) or line.startswith("  File "):
            return None  # the report's frames: the error is not where it ends
    return None


def _is_traceback_header(line: str) -> bool:
    """Whether line starts a traceback of its own, not one of an exception group's
    sub-exceptions, which is part of the group's display (indented further)."""
    return line.rstrip("\n") in ("Traceback (most recent call last):", _GROUP_HEADER)


# --- arguments ----------------------------------------------------------------------------
