"""The MCP server: the tools of `pynox.mcp.tools` on the SDK's low-level Server.

A call the tools refuse (unknown tool, wrong arguments, code too long) is an MCP error
(invalid params) with one sentence; a run that failed, a denial included, is a tool result
with isError set, whose text is the Result's, so the model reads the error and its hint.
"""

from __future__ import annotations

import base64
import mimetypes
import signal
import socket
import urllib.parse
from typing import Any, cast

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from pynox import __version__
from pynox.errors import PynoxError
from pynox.mcp.tools import BadCall, PythonTools, Reply

NAME = "pynox"


def build_server(tools: PythonTools) -> Server[Any]:
    listed = types.ListToolsResult(
        tools=[types.Tool(**description) for description in tools.descriptions()]
    )

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listed

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            reply = await tools.call(params.name, params.arguments)
        except BadCall as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=exc.message) from None
        except PynoxError as exc:  # the pool could not start: the server owner must act
            raise MCPError(code=types.INTERNAL_ERROR, message=exc.message) from None
        return tool_result(reply)

    sessions = ", python_session for state kept across calls" if tools.max_sessions else ""
    return Server(
        NAME,
        version=__version__,
        instructions=(
            f"Runs Python in a kernel-enforced sandbox: run_python for one program{sessions}. "
            "Each tool's description says what the code may touch."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def tool_result(reply: Reply) -> types.CallToolResult:
    """The Result's text (as pynox.tool() gives it), its images, the files it wrote into
    out/ (which the text names as returned), then the reply's note."""
    content: list[types.ContentBlock] = []
    result = reply.result
    if result is not None:
        content.append(types.TextContent(text=result.text))
        for image in result.images:
            content.append(
                types.ImageContent(
                    data=base64.b64encode(image.data).decode("ascii"), mime_type=image.mime
                )
            )
        content += [_file_resource(name, data) for name, data in result.files.items()]
    if reply.note is not None:
        content.append(types.TextContent(text=reply.note))
    return types.CallToolResult(content=content, is_error=result is not None and not result.ok)


def _file_resource(name: str, data: bytes) -> types.EmbeddedResource:
    """A file of out/ as an embedded resource named pynox:out/NAME: text when it is UTF-8,
    else base64."""
    uri = "pynox:out/" + urllib.parse.quote(name)
    mime = mimetypes.guess_type(name)[0]
    contents: types.TextResourceContents | types.BlobResourceContents
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        blob = base64.b64encode(data).decode("ascii")
        contents = types.BlobResourceContents(
            uri=uri, mime_type=mime or "application/octet-stream", blob=blob
        )
    else:
        contents = types.TextResourceContents(uri=uri, mime_type=mime or "text/plain", text=text)
    return types.EmbeddedResource(resource=contents)


async def serve_stdio(server: Server[Any]) -> None:
    """Serves until the client closes standard input; KeyboardInterrupt on Ctrl-C."""
    from mcp.server.stdio import stdio_server

    from pynox.mcp.unreadable import AnsweringBadIds, AnsweringUnreadable, standard_input

    lines = AnsweringBadIds(standard_input())
    interrupted = anyio.Event()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_cancel_on_ctrl_c, group.cancel_scope, interrupted)
            async with stdio_server(cast("anyio.AsyncFile[str]", lines)) as (
                read_stream,
                write_stream,
            ):
                lines.attach(write_stream)
                answering = AnsweringUnreadable(read_stream, write_stream)
                await server.run(answering, write_stream, server.create_initialization_options())
            group.cancel_scope.cancel()  # served: Ctrl-C is no longer this loop's to take
    except BaseException as exc:
        if not _only_broken_pipes(exc):
            raise
        # The client closed its end of standard output (it went away): nothing can reach
        # it any more, so the server ends as when standard input closes.
    if interrupted.is_set():
        raise KeyboardInterrupt


async def _cancel_on_ctrl_c(scope: anyio.CancelScope, interrupted: anyio.Event) -> None:
    """Cancels the server's scope at the first SIGINT. asyncio's own handling (cancelling
    the main task from a handler the main thread runs between two instructions) left the
    server running now and then while a call was under way; a signal handler of the loop
    also wakes it through its wake-up pipe, whichever thread the kernel gave the signal."""
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            interrupted.set()
            scope.cancel()
            return


def _only_broken_pipes(exc: BaseException) -> bool:
    """Whether exc is BrokenPipeError, or a group (of groups) of nothing else."""
    inner = getattr(exc, "exceptions", None)  # an exception group (builtin from 3.11)
    if inner is None:
        return isinstance(exc, BrokenPipeError)
    return all(_only_broken_pipes(each) for each in inner)


def listen(host: str, port: int) -> socket.socket:
    """The socket --http serves on, bound here so that a port in use or a name that does
    not resolve is an OSError the command can put in one sentence (uvicorn would log it
    and exit with a status of its own)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


async def serve_http(server: Server[Any], host: str, sock: socket.socket) -> None:
    """Streamable HTTP at http://HOST:PORT/mcp on `sock` (from `listen`); the SDK guards
    loopback hosts against DNS rebinding (only loopback Host and Origin headers are taken)."""
    import uvicorn
    from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

    from pynox.mcp.unreadable import AnsweringBadIdsOverHttp

    app = server.streamable_http_app(host=host)
    answering = AnsweringBadIdsOverHttp(app, DEFAULT_MAX_REQUEST_BODY_SIZE)
    config = uvicorn.Config(answering, host=host, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])
