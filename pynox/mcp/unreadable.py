"""Answers for the stdio lines the SDK cannot read, which it would otherwise drop.

The SDK's stdio transport hands the server an exception for a line that is not a JSON-RPC
message (not JSON, a lone surrogate such as \\ud800 in a string, a shape it does not know),
and the server only logs it: a client that sent a request on that line would wait for its
answer forever. JSON-RPC 2.0 answers such a line with an error, under the request's id when
it can be read, else null.

A request whose id MCP does not allow (null, a fraction, a boolean, an array) is worse off:
the SDK reads it as a notification, which gets no answer by design. Those are answered too,
from the line (or the HTTP request's body) itself, before the SDK sees it.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
from types import TracebackType
from typing import IO, Any

import anyio
import mcp_types as types
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


class AnsweringBadIds:
    """Standard input's lines, less the requests whose id MCP does not allow: each of
    those is answered on the write stream (given by `attach`, once the transport runs)."""

    def __init__(self, lines: IO[str]) -> None:
        self._lines = lines
        self._write_stream: WriteStream[SessionMessage] | None = None
        self._attached = anyio.Event()

    def attach(self, write_stream: WriteStream[SessionMessage]) -> None:
        self._write_stream = write_stream
        self._attached.set()

    def __aiter__(self) -> AnsweringBadIds:
        return self

    async def __anext__(self) -> str:
        while True:
            # Abandoned when cancelled (SIGINT): a read of a client that sends nothing
            # would otherwise hold the server until its standard input closes.
            line = await anyio.to_thread.run_sync(self._lines.readline, abandon_on_cancel=True)
            if not line:
                raise StopAsyncIteration
            error = reply_to_bad_id(line)
            if error is None:
                return line
            await self._attached.wait()
            assert self._write_stream is not None
            await self._write_stream.send(SessionMessage(error))


class AnsweringBadIdsOverHttp:
    """The streamable HTTP app, but for a POST whose body is a request with an id MCP does
    not take: that is answered 400 with the error stdio gives, where the SDK would take it
    for a notification and answer 202 Accepted, with no response ever to come. A body past
    `limit` bytes goes on to the app unread, which refuses it as too large."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self._app = app
        self._limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self._app(scope, receive, send)
            return
        received: list[Message] = []
        size, whole = 0, False
        while size <= self._limit:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request":  # the client left: the app sees it
                break
            size += len(message.get("body", b""))
            if not message.get("more_body", False):
                whole = True
                break
        if whole:
            error = _bad_id_in(b"".join(m.get("body", b"") for m in received))
            if error is not None:
                body = error.model_dump_json(by_alias=True, exclude_unset=True).encode()
                headers = [(b"content-type", b"application/json")]
                headers.append((b"content-length", str(len(body)).encode()))
                await send({"type": "http.response.start", "status": 400, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return

        async def replay() -> Message:
            return received.pop(0) if received else await receive()

        await self._app(scope, replay, send)


def _bad_id_in(body: bytes) -> types.JSONRPCError | None:
    try:
        return reply_to_bad_id(body.decode("utf-8"))
    except UnicodeDecodeError:  # not JSON: the SDK answers it
        return None


def standard_input() -> IO[str]:
    """Standard input read as the SDK's transport reads it (UTF-8, with bytes that are not
    UTF-8 replaced), from a duplicate of descriptor 0, which then reads /dev/null as the
    SDK leaves it: nothing else in this process reads the client's messages."""
    wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return io.TextIOWrapper(os.fdopen(wire, "rb"), encoding="utf-8", errors="replace")


class AnsweringUnreadable:
    """The transport's read stream without the lines it could not read: each of those is
    answered on the write stream instead of reaching the server."""

    def __init__(
        self,
        inner: ReadStream[SessionMessage | Exception],
        write_stream: WriteStream[SessionMessage],
    ) -> None:
        self._inner = inner
        self._write_stream = write_stream

    @property
    def last_context(self) -> object:
        """The sender's context, which the SDK reads from its own streams."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            await self._write_stream.send(SessionMessage(reply_to_unreadable(item)))

    def __aiter__(self) -> AnsweringUnreadable:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AnsweringUnreadable:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


def reply_to_unreadable(problem: Exception) -> types.JSONRPCError:
    """The error that answers a line the transport could not read as a message."""
    errors: list[Any] = problem.errors() if isinstance(problem, ValidationError) else []
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":
        detail = str(first.get("ctx", {}).get("error", "it is not JSON"))
        error = types.ErrorData(
            code=PARSE_ERROR,
            message=f"the line is not JSON this server can read ({detail}); send each "
            "message as one line of UTF-8 JSON whose strings are valid Unicode, with no lone "
            "surrogate such as \\ud800",
        )
    else:
        error = types.ErrorData(
            code=INVALID_REQUEST,
            message="the line is not a JSON-RPC 2.0 message; send an object with "
            '"jsonrpc": "2.0", a "method" and, for a request, an "id"',
        )
    # A line that is JSON but no message the SDK knows: some error of the union it tried
    # holds the whole object as its input (a field missing from it, say).
    inputs = [first.get("input")] + [
        found.get("input") for found in errors[1:] if isinstance(found.get("input"), dict)
    ]
    found_id = next((i for i in map(_request_id, inputs) if i is not None), None)
    return types.JSONRPCError(jsonrpc="2.0", id=found_id, error=error)


def reply_to_bad_id(line: str) -> types.JSONRPCError | None:
    """The error that answers a request whose id is neither a string nor an integer, or
    None for any other line (the SDK reads it, or answers it as unreadable)."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    found = message["id"]
    if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
        return None
    shown = json.dumps(found)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    error = types.ErrorData(
        code=INVALID_REQUEST,
        message=f"the request's id {shown} is not a string or an integer, the only ids MCP "
        'takes; send the request again with an id such as "id": 1',
    )
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=error)


def _request_id(line: object) -> int | str | None:
    """The id of the request on the line, if Python's own JSON parser can find one (it
    takes lone surrogates and NaN, which the SDK's refuses)."""
    message = line
    if isinstance(line, str):
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # nested past the interpreter's own limit
            return None
    if not isinstance(message, dict):
        return None
    found = message.get("id")
    if isinstance(found, str) and not found.isascii():
        try:
            found.encode()
        except UnicodeEncodeError:
            return None  # an id that cannot be written back
    if isinstance(found, bool) or not isinstance(found, (int, str)):
        return None
    return found
