"""The three tools `pynox mcp` offers and what each call does.

The permissions are the server owner's (pynox.toml and --profile): a call carries only code
and, for sessions, an id, so no client can widen them. Every argument is checked here, and a
bad one raises `BadCall` with one sentence saying what to send instead.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pynox.api.options import Spec
from pynox.api.session import Session
from pynox.api.tool import TOOL_NAME, describe
from pynox.limits import (
    DEFAULT_MCP_SESSIONS,
    DEFAULT_SESSION_IDLE,
    MAX_FILES_OUT,
    MAX_FILES_OUT_BYTES,
    MAX_MCP_CODE,
)
from pynox.mcp.hints import for_server
from pynox.policy.config import toml_key

if TYPE_CHECKING:
    from pynox.api.pool import Pool
    from pynox.api.result import Result

RUN = TOOL_NAME  # the tool pynox.tool() makes, under the same name
SESSION = "python_session"
CLOSE = "close_python_session"
# Session ids the server hands out: 16 hex digits, unguessable by another client.
_ID_BYTES = 8
_MAX_ID = 64

_CODE = {
    "type": "string",
    "maxLength": MAX_MCP_CODE,
    "description": "The Python program to run, as complete source code that prints its results.",
}
_SESSION_ID = {
    "type": "string",
    "maxLength": _MAX_ID,
    "description": "The session to run in, as an earlier python_session result named it; "
    "leave it out to start a new session.",
}


class BadCall(Exception):
    """A call the tools cannot take: unknown tool, wrong arguments, no such session."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class Reply:
    """What a call gives back: the Result (None for close_python_session) and a note."""

    result: Result | None
    note: str | None = None


@dataclass
class _Open:
    session: Session
    last_used: float = field(default_factory=time.monotonic)
    running: int = 0  # steps under way: a session is never idle while it runs one


class PythonTools:
    """run_python, python_session and close_python_session on one pool, with one policy."""

    def __init__(self, pool: Pool, profile: str | None = None, *, check: bool = True) -> None:
        """check: ask the pool now whether it takes these permissions (ValueError if not),
        which starts it."""
        self.pool = pool
        config = pool._load_config()
        if profile is not None and config is None:
            # Else the server would run without the profile's grants, saying nothing.
            raise ValueError(
                f"--profile={profile} needs a pynox.toml, and none was found; pass --config "
                "with its absolute path (assistants start servers in a directory of their "
                "own), or set PYNOX_CONFIG"
            )
        grants = config.grants_for(profile) if config is not None else None
        # Where this server's permissions are written: what a hint tells the user to change.
        self.table = "[permissions]" if profile is None else f"[profiles.{toml_key(profile)}]"
        self.config_path = config.path if config is not None else None
        options: dict[str, Any] = {}
        if grants is not None:
            options = {name: getattr(grants, name) for name in grants._fields}
        self.spec = Spec(**options)
        if check:
            self._check(profile)
        settings = config.pool if config is not None else None
        self.max_sessions = (
            settings.max_sessions
            if settings is not None and settings.max_sessions is not None
            else DEFAULT_MCP_SESSIONS
        )
        self.session_idle = (
            settings.session_idle
            if settings is not None and settings.session_idle
            else DEFAULT_SESSION_IDLE
        )
        self.sessions: dict[str, _Open] = {}

    def _check(self, profile: str | None) -> None:
        """Refuses permissions the pool refuses (a limit above [pool.limits], a path that
        does not exist): else every call would fail with a refusal that the model reads
        and cannot act on. A pool that cannot start is left to the calls to report."""
        from pynox.api.connection import PoolError

        try:
            result = self.pool.run_spec("pass", self.spec)
        except PoolError:
            return
        if _never_ran(result):
            assert result.error is not None
            source = "[permissions]" if profile is None else f"--profile={profile}"
            raise ValueError(
                f"the pool refuses the permissions of {source}: {result.error['message']}"
            )

    def descriptions(self) -> list[dict[str, Any]]:
        """Name, description and input schema of each tool."""
        # What this server adds to pynox.tool()'s text: the files of out/ go to the client
        # (an application gets them as Result.files), and the session's lifecycle.
        files = (
            "Files the code writes into out/ of its home directory (Path.home() / 'out', "
            "which exists) come back with the result, at most "
            f"{MAX_FILES_OUT} files and {MAX_FILES_OUT_BYTES >> 20} MiB together; the "
            "result names those returned and those left out."
        )
        run_doc = _before_args(describe(self.pool, self.spec, session=False), files)
        session_doc = _before_args(
            describe(self.pool, self.spec, session=True),
            f"{files} Each call returns what it wrote, and out/ is then emptied.",
            "The first call (without session_id) starts a session and its result ends with "
            f"the session_id to pass to the next calls. Close the session with {CLOSE} when "
            f"done; at most {_are_open(self.max_sessions)} at once, and one unused for "
            f"{_seconds(self.session_idle)} is closed.",
        )
        run = _tool(RUN, run_doc, {"code": _CODE}, ["code"])
        if not self.max_sessions:  # [pool] max_sessions = 0: one-shot runs only
            return [run]
        return [
            run,
            _tool(SESSION, session_doc, {"code": _CODE, "session_id": _SESSION_ID}, ["code"]),
            _tool(
                CLOSE,
                "Close a session python_session started, ending its process and its state.",
                {"session_id": {**_SESSION_ID, "description": "The session to close."}},
                ["session_id"],
            ),
        ]

    async def call(self, name: str, arguments: dict[str, Any] | None) -> Reply:
        """Runs one call; raises BadCall for anything the tools cannot take."""
        arguments = {} if arguments is None else arguments
        if name == RUN:
            _only(arguments, {"code"}, name)
            return Reply(
                self._in_server_words(await self.pool.arun_spec(_code(arguments), self.spec))
            )
        if name in (SESSION, CLOSE) and not self.max_sessions:
            raise BadCall(
                f"this server keeps no sessions ([pool] max_sessions = 0); use {RUN}, which "
                "runs each program in a fresh process"
            )
        if name == SESSION:
            _only(arguments, {"code", "session_id"}, name)
            code = _code(arguments)
            requested = arguments.get("session_id")
            opened = requested is None
            if requested is None:
                session_id, entry = await self._open()
            else:
                session_id, entry = requested, await self._find(requested)
            entry.running += 1
            try:
                result = await entry.session.arun(code)
            except BaseException:
                if opened:  # cancelled or failed: the client never learnt the id to close it
                    self._forget(session_id)
                raise
            finally:
                entry.running -= 1
                entry.last_used = time.monotonic()
            if self.sessions.get(session_id) is not entry:  # close_python_session meanwhile
                note = (
                    f"session {session_id} was closed while this call ran; call {SESSION} "
                    "without session_id to start a new one"
                )
                if _never_ran(result):  # queued behind a step: the pool's refusal names
                    raise BadCall(note)  # its own id for the session, which means nothing here
            elif not entry.session.alive and not _never_ran(result):  # its end, or the pool's
                note = f"session_id: {session_id} (its process ended; the next call starts afresh)"
            else:
                note = f"session_id: {session_id}"
            return Reply(self._in_server_words(result), note)
        if name == CLOSE:
            _only(arguments, {"session_id"}, name)
            if "session_id" not in arguments:
                raise BadCall(f"{CLOSE} needs session_id, the id python_session gave")
            entry = await self._find(arguments["session_id"])
            del self.sessions[arguments["session_id"]]
            await _close(entry.session)
            return Reply(None, f"session {arguments['session_id']} closed")
        offered = (
            f"the tools are {RUN}, {SESSION}, {CLOSE}"
            if self.max_sessions
            else f"the tool is {RUN}"
        )
        raise BadCall(f"there is no tool {_shown(name)}; {offered}")

    def _in_server_words(self, result: Result) -> Result:
        """result with its hint naming grants as this server's pynox.toml takes them."""
        return for_server(result, self.table, self.config_path)

    def close(self) -> None:
        for entry in self.sessions.values():
            entry.session.close()
        self.sessions.clear()

    def _forget(self, session_id: str) -> None:
        """Drops a session and closes it in a thread, not awaited: its call is ending, and
        may be ending because it was cancelled."""
        entry = self.sessions.pop(session_id, None)
        if entry is not None:
            asyncio.get_running_loop().run_in_executor(None, entry.session.close)

    async def _open(self) -> tuple[str, _Open]:
        await self._close_idle()
        if len(self.sessions) >= self.max_sessions:
            raise BadCall(
                f"{_are_open(len(self.sessions))}, the most this server allows; close "
                f"one with {CLOSE} first"
            )
        session_id = secrets.token_hex(_ID_BYTES)
        entry = _Open(Session(self.pool, self.spec))
        self.sessions[session_id] = entry
        return session_id, entry

    async def _find(self, session_id: object) -> _Open:
        if not isinstance(session_id, str):
            raise BadCall(f"session_id must be a string, not {_json_type(session_id)}")
        await self._close_idle()
        entry = self.sessions.get(session_id)
        if entry is None:
            raise BadCall(
                f"there is no session {_shown(session_id)} (closed, or unused for "
                f"{_seconds(self.session_idle)}); call {SESSION} without session_id to start "
                "a new one"
            )
        return entry

    async def _close_idle(self) -> None:
        """Closes sessions unused for session_idle, so forgotten ones do not pile up."""
        now = time.monotonic()
        idle = [
            session_id
            for session_id, entry in self.sessions.items()
            if not entry.running and now >= entry.last_used + self.session_idle
        ]
        # All taken out before the first await, so that a concurrent call finds none of
        # them (and closes none twice).
        closing = [self.sessions.pop(session_id) for session_id in idle]
        for entry in closing:
            await _close(entry.session)


async def _close(session: Session) -> None:
    """Session.close waits for the pool's answer: in a thread, not on the event loop."""
    await asyncio.get_running_loop().run_in_executor(None, session.close)


def _before_args(doc: str, *paragraphs: str) -> str:
    """A tool's docstring with paragraphs added to its text, before its Args section."""
    text, _, sections = doc.partition("\n\nArgs:\n")
    return "\n\n".join([text, *paragraphs]) + "\n\nArgs:\n" + sections


def _tool(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return {"name": name, "description": description, "input_schema": schema}


def _never_ran(result: Result) -> bool:
    """Whether the pool refused the request before any process ran its code."""
    return (
        (result.session is None or result.session.get("step") is None)
        and result.error is not None
        and result.error["type"] == "RequestError"
    )


def _only(arguments: dict[str, Any], allowed: set[str], tool: str) -> None:
    extra = sorted(set(arguments) - allowed)
    if extra:
        names = ", ".join(_shown(name) for name in extra[:5])
        raise BadCall(f"{tool} takes only {', '.join(sorted(allowed))}, not {names}")


def _code(arguments: dict[str, Any]) -> str:
    code = arguments.get("code")
    if code is None:
        raise BadCall("code is missing: send the Python program as the string argument code")
    if not isinstance(code, str):
        raise BadCall(f"code must be a string of Python source, not {_json_type(code)}")
    if len(code) > MAX_MCP_CODE:
        raise BadCall(
            f"code has {len(code)} characters, more than the {MAX_MCP_CODE} a call may carry; "
            "send a shorter program (read large data from a file instead)"
        )
    try:
        code.encode("utf-8")
    except UnicodeEncodeError:
        raise BadCall("code is not valid Unicode text (it has a lone surrogate)") from None
    return code


def _are_open(count: int) -> str:
    return "1 session is open" if count == 1 else f"{count} sessions are open"


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _shown(name: object) -> str:
    """A name the client sent, quoted and cut short: it may be anything."""
    text = repr(name) if isinstance(name, str) else _json_type(name)
    return text if len(text) <= 80 else text[:77] + "..."


def _seconds(seconds: float) -> str:
    from pynox.unit_format import format_duration

    return format_duration(seconds)
