"""Framed JSON messages between the pool template and one child.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. The
child's side is untrusted: the template bounds every frame, decodes it as
data only, and drops the child at the first frame that breaks the rules.
"""

import json
import os

# Frames from the template carry a program (up to a 16 MiB request line);
# frames from a child (host calls, reports) are held to CHILD_FRAME.
MAX_FRAME = 32 << 20
CHILD_FRAME = 8 << 20
_HEADER = 4


class ChannelError(Exception):
    """The other side broke the framing or sent something that is not a message."""


def encode(message: dict[str, object], limit: int = MAX_FRAME) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    if len(body) > limit:
        raise ChannelError(f"a message of {len(body)} bytes is over the {limit} limit")
    return len(body).to_bytes(_HEADER, "big") + body


def write_frame(fd: int, data: bytes) -> None:
    """Writes one encoded frame whole (blocking)."""
    while data:
        data = data[os.write(fd, data) :]


def send(fd: int, message: dict[str, object]) -> None:
    write_frame(fd, encode(message))


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def receive(fd: int) -> dict[str, object] | None:
    """Reads one frame (blocking); None when the other side closed the channel."""
    header = _read_exactly(fd, _HEADER)
    if header is None:
        return None
    size = int.from_bytes(header, "big")
    if size > MAX_FRAME:
        raise ChannelError(f"a frame of {size} bytes is over the {MAX_FRAME} limit")
    body = _read_exactly(fd, size)
    if body is None:
        raise ChannelError("the channel closed in the middle of a frame")
    return decode(body)


def decode(body: bytes) -> dict[str, object]:
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ChannelError(f"a frame is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ChannelError("a frame is not a JSON object")
    return message


class FrameReader:
    """Splits a non-blocking byte stream into frames, for the template's loop."""

    def __init__(self, limit: int = CHILD_FRAME) -> None:
        self.buffer = bytearray()
        self.limit = limit

    def feed(self, data: bytes) -> list[dict[str, object]]:
        self.buffer += data
        frames = []
        while len(self.buffer) >= _HEADER:
            size = int.from_bytes(self.buffer[:_HEADER], "big")
            if size > self.limit:
                raise ChannelError(f"a frame of {size} bytes is over the {self.limit} limit")
            if len(self.buffer) < _HEADER + size:
                break
            body = bytes(self.buffer[_HEADER : _HEADER + size])
            del self.buffer[: _HEADER + size]
            frames.append(decode(body))
        return frames
