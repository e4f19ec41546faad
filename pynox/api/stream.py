"""Streaming runs: a program's output as it writes it, then its Result.

`Pool.stream` and `Pool.astream` send a request with "stream": true and turn the pool's
output events (docs/pool-protocol.md) into `Output` chunks; the last item is the Result.
Leaving early cancels the request, so its worker is free again at once.

The connection's one reader thread delivers every line of the pool, so it never waits for a
slow loop (that loop may itself wait for another result of the same pool): output a loop has
not taken yet is held up to STREAM_BUFFER characters, and what comes beyond is counted in
the next chunk's `skipped` instead of held, each chunk counting for _CHUNK_COST characters
more. What a stream writes while the loop has not taken its last chunk joins that chunk,
so that a program writing a character at a time costs the client its characters, not an
object per write. The Result keeps the output either way.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import AsyncGenerator, Callable, Generator
from typing import TYPE_CHECKING, Any, NamedTuple

from pynox.limits import STREAM_BUFFER

if TYPE_CHECKING:
    from pynox.api.connection import _Connection, _Pending
    from pynox.api.options import Spec
    from pynox.api.pool import Pool
    from pynox.api.result import Result
    from pynox.api.session import Session


class Output(NamedTuple):
    """A piece of a streaming run's output, in the order the program wrote it.

    `skipped` counts the characters of this stream left out just before this chunk because
    the loop fell more than STREAM_BUFFER characters behind (0 when it keeps up).
    """

    stream: str  # "stdout" or "stderr"
    data: str
    skipped: int = 0


_DONE = object()  # the result is there
# What a chunk costs the client beyond its characters (its objects: about 250 bytes here),
# counted against STREAM_BUFFER as characters: a program that alternates between stdout and
# stderr, which no joining helps, makes at most STREAM_BUFFER / _CHUNK_COST chunks wait.
_CHUNK_COST = 256


class _Chunk:
    """Output of one stream on its way to the loop: the pieces that came while the loop had
    not taken it, joined as they come."""

    __slots__ = ("stream", "parts", "cost", "skipped")

    def __init__(self, stream: str, data: str, skipped: int) -> None:
        self.stream = stream
        self.parts = [data]
        self.cost = _CHUNK_COST + len(data)  # what it counts against STREAM_BUFFER
        self.skipped = skipped

    def add(self, data: str) -> None:
        # Joined while the newest piece is as long as the one before (a binary counter):
        # a chunk of n characters is at most log2(n) strings, each character copied at
        # most log2(n) times.
        parts = self.parts
        parts.append(data)
        self.cost += len(data)
        while len(parts) > 1 and len(parts[-1]) >= len(parts[-2]):
            last = parts.pop()
            parts[-1] += last


class _Buffer:
    """Chunks on their way from the reader thread to the loop, bounded in characters."""

    def __init__(self, put: Callable[[object], None]) -> None:
        self._put = put
        self._lock = threading.Lock()
        self._held = 0
        self._skipped = {"stdout": 0, "stderr": 0}
        self._newest: _Chunk | None = None  # the last chunk put, until the loop takes it

    def output(self, message: dict[str, Any]) -> None:  # on the reader thread
        stream, data = message.get("stream"), message.get("data")
        if stream not in self._skipped or not isinstance(data, str):
            return
        with self._lock:
            newest = self._newest
            joins = newest is not None and newest.stream == stream and not self._skipped[stream]
            cost = len(data) if joins else _CHUNK_COST + len(data)
            if self._held + cost > STREAM_BUFFER:
                self._skipped[stream] += len(data)
                return
            self._held += cost
            if joins and newest is not None:
                newest.add(data)
                return
            chunk = self._newest = _Chunk(stream, data, self._skipped[stream])
            self._skipped[stream] = 0
        self._put(chunk)

    def done(self) -> None:  # on the reader thread, after the request's last output event
        with self._lock:
            left = [_Chunk(stream, "", n) for stream, n in self._skipped.items() if n]
            self._held += sum(chunk.cost for chunk in left)
        for chunk in left:
            self._put(chunk)
        self._put(_DONE)

    def take(self, chunk: _Chunk) -> Output:
        """The loop's Output of a chunk it got from the queue: nothing joins it any more."""
        with self._lock:
            if self._newest is chunk:
                self._newest = None
            self._held -= chunk.cost
        return Output(chunk.stream, "".join(chunk.parts), chunk.skipped)


def _cancel(connection: _Connection, pending: _Pending, session: Session | None) -> None:
    connection.cancel(pending)
    if session is not None:
        session._cancelled(pending)


def stream_spec(
    pool: Pool, code: str, spec: Spec, session: Session | None = None
) -> Generator[Output | Result, None, None]:
    request = pool._request(code, spec, session)
    request["stream"] = True
    connection, generation = pool._connection()
    items: queue.SimpleQueue[object] = queue.SimpleQueue()
    buffer = _Buffer(items.put)
    pending = pool._pending(spec)
    pending.on_output = buffer.output
    finished = False
    try:
        future = connection.submit(request, pending)
        future.add_done_callback(lambda _: buffer.done())
        while True:
            item = items.get()
            if item is _DONE:
                finished = True
                yield pool._finish(future.result(), session, generation)
                return
            if isinstance(item, _Chunk):
                yield buffer.take(item)
    finally:
        if not finished:
            _cancel(connection, pending, session)


async def astream_spec(
    pool: Pool, code: str, spec: Spec, session: Session | None = None
) -> AsyncGenerator[Output | Result, None]:
    import asyncio

    request = pool._request(code, spec, session)
    request["stream"] = True
    connection, generation = await pool._aconnection(session)
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[object] = asyncio.Queue()

    def put(item: object) -> None:
        try:
            loop.call_soon_threadsafe(items.put_nowait, item)
        except RuntimeError:
            pass  # the loop closed: nobody reads any more

    buffer = _Buffer(put)
    pending = pool._pending(spec)
    pending.loop = loop
    pending.on_output = buffer.output
    future = connection.submit(request, pending)
    future.add_done_callback(lambda _: buffer.done())
    finished = False
    try:
        while True:
            item = await items.get()
            if item is _DONE:
                finished = True
                yield pool._finish(future.result(), session, generation)
                return
            if isinstance(item, _Chunk):
                yield buffer.take(item)
    finally:
        if not finished:
            _cancel(connection, pending, session)
