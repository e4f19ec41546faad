"""Framed JSON messages between the pool server and one child.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON
(RFC 8259: no NaN or Infinity, see pynox.strict_json). The child's side is
untrusted: the pool server bounds every frame in size (CHILD_FRAME), items
(CHILD_ITEMS) and nesting (CHILD_DEPTH), decodes it as data only, and drops the
child at the first frame that breaks the rules.
"""

import os

from pynox import strict_json

# Frames from the pool server carry a program (up to a 16 MiB request line);
# frames from a child (host calls, reports) are held to CHILD_FRAME bytes and
# CHILD_DEPTH levels of nesting (the frame's own object is the first level).
MAX_FRAME = 32 << 20
CHILD_FRAME = 8 << 20
CHILD_DEPTH = 100
# Decoding costs the single-threaded pool server time and memory per item, not per
# byte: 8 MiB of `[],` is 2.8 million lists (about a second, every other request
# waiting). A child's frame holds at most CHILD_ITEMS items (array elements, object
# members, arrays and objects), counted before it is decoded: ~0.1 s at most here.
CHILD_ITEMS = 1 << 18
_HEADER = 4


class ChannelError(Exception):
    """The other side broke the framing or sent something that is not a message."""


class OverBound(ChannelError):
    """A child went past a bound of the protocol; the message names the bound."""


def small_int(value: object, low: int, high: int) -> bool:
    """Whether a frame's field is an integer from low to high."""
    return type(value) is int and low <= value <= high


def encode(
    message: dict[str, object],
    limit: int = MAX_FRAME,
    max_depth: "int | None" = None,
    max_items: "int | None" = None,
) -> bytes:
    """The frame of message; ValueError (TypeError) for what is not JSON (NaN, a set, ...)."""
    body = strict_json.dumps(message, max_depth).encode()
    if len(body) > limit:
        raise ChannelError(f"a message of {len(body)} bytes is over the {limit} limit")
    if max_items is not None and more_items_than(body, max_items):
        raise ChannelError(_too_many_items("a message", max_items))
    return len(body).to_bytes(_HEADER, "big") + body


def encode_read(message: dict[str, object]) -> bytes:
    """The frame of a message of the pool server, whose values a request line held (loads()
    read them) or the server made: each character written as itself, in UTF-8, as the line
    may have held it, so that the program of the longest line fits in a frame. Escaped, a
    character of two bytes takes six: 12 MiB of such code made a frame over MAX_FRAME."""
    body = strict_json.dumps_read(message)
    if len(body) > MAX_FRAME:
        raise ChannelError(f"a message of {len(body)} bytes is over the {MAX_FRAME} limit")
    return len(body).to_bytes(_HEADER, "big") + body


def _too_many_items(what: str, limit: int) -> str:
    return (
        f"{what} holds more than {limit} items (array elements, object members, "
        "arrays and objects together)"
    )


_PIECE = 1 << 16


def _brackets_and_commas(text: bytes) -> int:
    return text.count(b",") + text.count(b"[") + text.count(b"{")


def more_items_than(body: bytes, limit: int) -> bool:
    """Whether the JSON text body holds more than limit items, told without decoding it.

    Each item but the first of its array or object follows a comma, and each array and
    object opens with a bracket: their count never exceeds the items. Counted over the
    whole text first (in C, a few milliseconds for 8 MiB); only when that is over the
    limit are the strings taken out, for their commas and brackets do not count.
    """
    if _brackets_and_commas(body) <= limit:
        return False
    # Without its escaped backslashes, then its escaped quotes, every quote left opens
    # or closes a string (in valid JSON; a text that is not fails to decode at its first
    # fault, having cost no more than the part before it, which this counts right).
    plain = body.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in body else body
    if plain.count(b'"') > 4 * limit:
        return True  # each item holds at most two strings (a member: its key, its value)
    # A piece at a time, so that its parts (one per string) stay few in memory.
    count, inside = 0, False
    for start in range(0, len(plain), _PIECE):
        parts = plain[start : start + _PIECE].split(b'"')
        count += _brackets_and_commas(b"".join(parts[inside::2]))  # those outside strings
        inside ^= len(parts) % 2 == 0  # an odd number of quotes in the piece
    return count > limit


def write_frame(fd: int, data: bytes) -> None:
    """Writes one encoded frame whole (blocking)."""
    while data:
        data = data[os.write(fd, data) :]


def send(fd: int, message: dict[str, object]) -> None:
    try:
        frame = encode(message)
    except (TypeError, ValueError) as exc:
        raise ChannelError(f"a message is not JSON: {exc}") from None
    write_frame(fd, frame)


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


def decode(body: bytes, max_depth: "int | None" = None) -> dict[str, object]:
    try:
        message = strict_json.loads(body, max_depth)
    except ValueError as exc:
        raise ChannelError(f"a frame is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ChannelError("a frame is not a JSON object")
    return message


class FrameReader:
    """Splits a non-blocking byte stream into frames, for the pool server's loop."""

    def __init__(
        self, limit: int = CHILD_FRAME, max_depth: int = CHILD_DEPTH, max_items: int = CHILD_ITEMS
    ) -> None:
        self.buffer = bytearray()
        self.limit = limit
        self.max_depth = max_depth
        self.max_items = max_items

    def feed(self, data: bytes) -> list[tuple[dict[str, object], int]]:
        """The frames data completes, each with the size of its body in bytes."""
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
            if more_items_than(body, self.max_items):
                raise ChannelError(_too_many_items("a frame", self.max_items))
            frames.append((decode(body, self.max_depth), size))
        return frames
