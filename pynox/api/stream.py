"""Streaming runs: a program's output as it writes it, then its Result.

`Pool.stream` and `Pool.astream` send a request with "stream": true and turn the pool's
output events (docs/pool-protocol.md) into `Output` chunks; the last item is the Result.
Leaving early cancels the request, so its worker is free again at once.
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pynox.api.connection import _Connection, _Pending
    from pynox.api.options import Spec
    from pynox.api.pool import Pool
    from pynox.api.result import Result
    from pynox.api.session import Session


class Output(NamedTuple):
    """A piece of a streaming run's output, in the order the program wrote it."""

    stream: str  # "stdout" or "stderr"
    data: str


_DONE = object()  # the result is there


def _chunk(message: dict[str, Any]) -> Output | None:
    stream, data = message.get("stream"), message.get("data")
    if stream in ("stdout", "stderr") and isinstance(data, str):
        return Output(stream, data)
    return None


def _cancel(connection: _Connection, pending: _Pending, session: Session | None) -> None:
    connection.cancel(pending)
    if session is not None:
        session._lost()  # a cancelled step ends its session


def stream_spec(
    pool: Pool, code: str, spec: Spec, session: Session | None = None
) -> Iterator[Output | Result]:
    request = spec.request(code, session.id if session is not None else None)
    request["stream"] = True
    connection, generation = pool._connection()
    items: queue.SimpleQueue[object] = queue.SimpleQueue()
    pending = pool._pending(spec)
    pending.on_output = lambda message: items.put(_chunk(message))
    future = connection.submit(request, pending)
    # Resolved on the reader thread after the request's last output event: it comes last.
    future.add_done_callback(lambda _: items.put(_DONE))
    finished = False
    try:
        while True:
            item = items.get()
            if item is _DONE:
                finished = True
                yield pool._finish(future.result(), session, generation)
                return
            if isinstance(item, Output):
                yield item
    finally:
        if not finished:
            _cancel(connection, pending, session)


async def astream_spec(
    pool: Pool, code: str, spec: Spec, session: Session | None = None
) -> AsyncIterator[Output | Result]:
    import asyncio

    request = spec.request(code, session.id if session is not None else None)
    request["stream"] = True
    connection, generation = await pool._aconnection(session)
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[object] = asyncio.Queue()

    def put(item: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody reads any more
            loop.call_soon_threadsafe(items.put_nowait, item)

    pending = pool._pending(spec)
    pending.loop = loop
    pending.on_output = lambda message: put(_chunk(message))
    future = connection.submit(request, pending)
    future.add_done_callback(lambda _: put(_DONE))
    finished = False
    try:
        while True:
            item = await items.get()
            if item is _DONE:
                finished = True
                yield pool._finish(future.result(), session, generation)
                return
            if isinstance(item, Output):
                yield item
    finally:
        if not finished:
            _cancel(connection, pending, session)
