"""Making .pyc files of CPython 3.10 and 3.11 the same bytes from one build to the next.

marshal flags an object for back-references (FLAG_REF) when its reference count
is above one at the moment it is written. Before CPython 3.12 made interned
strings immortal, that count depends on what else the compiling process still
holds, so the same source could give different bytes. The object graph is the
same; only which objects carry the flag, and so the numbering of the
back-references, differs. This rewrites a marshal stream into one canonical
form: the flag stays only on objects that a back-reference actually points to,
numbered in the order marshal itself numbers them.
"""

from __future__ import annotations

import struct
from pathlib import Path

FLAG_REF = 0x80
HEADER = 16  # magic, flags, and hash or mtime and size

# Code objects: how many 32-bit integers, then objects, then integers, then objects.
CODE_LAYOUTS = {
    "3.10": ((6, 8), (1, 1)),  # argcount..flags; code..name; firstlineno; linetable
    "3.11": ((5, 8), (1, 2)),  # argcount..flags; code..qualname; firstlineno; 2 tables
}
NEEDS_NORMALIZING = tuple(CODE_LAYOUTS)

NO_PAYLOAD = set(b"0NFTS.")
SIZED_I32 = set(b"stuaA")  # 32-bit length, then that many bytes
SIZED_U8 = set(b"zZ")  # 8-bit length, then that many bytes


class MarshalError(Exception):
    pass


class _Node:
    """One object of the stream: where its type byte is and whether it is flagged."""

    __slots__ = ("flagged", "position", "referenced")

    def __init__(self, position: int, flagged: bool) -> None:
        self.position = position
        self.flagged = flagged
        self.referenced = False


class _Reader:
    def __init__(self, data: bytes, minor: str) -> None:
        self.data = data
        self.at = 0
        self.layout = CODE_LAYOUTS[minor]
        self.nodes: list[_Node] = []  # every object, in stream order
        self.refs: list[_Node] = []  # flagged objects, in marshal's numbering order
        self.uses: list[tuple[int, int]] = []  # (position of an 'r', index it names)

    def i32(self) -> int:
        value: int = struct.unpack_from("<i", self.data, self.at)[0]
        self.at += 4
        return value

    def u8(self) -> int:
        value = self.data[self.at]
        self.at += 1
        return value

    def skip(self, count: int) -> None:
        if count < 0 or self.at + count > len(self.data):
            raise MarshalError("truncated marshal data")
        self.at += count

    def read(self) -> None:
        position = self.at
        code = self.u8()
        kind, flagged = code & ~FLAG_REF, bool(code & FLAG_REF)
        if kind == ord("r"):
            self.uses.append((position, self.i32()))
            return
        node = _Node(position, flagged)
        self.nodes.append(node)
        if flagged:  # numbered before its contents, as marshal does
            self.refs.append(node)
        if kind in NO_PAYLOAD:
            return
        if kind == ord("i"):
            self.skip(4)
        elif kind == ord("g"):
            self.skip(8)
        elif kind == ord("y"):
            self.skip(16)
        elif kind == ord("l"):
            self.skip(2 * abs(self.i32()))
        elif kind in SIZED_I32:
            self.skip(self.i32())
        elif kind in SIZED_U8:
            self.skip(self.u8())
        elif kind == ord(")"):
            for _ in range(self.u8()):
                self.read()
        elif kind in b"([<>":
            for _ in range(self.i32()):
                self.read()
        elif kind == ord("{"):
            while self.data[self.at] != ord("0"):
                self.read()
                self.read()
            self.at += 1
        elif kind == ord("c"):
            (ints, objects), (more_ints, more_objects) = self.layout
            self.skip(4 * ints)
            for _ in range(objects):
                self.read()
            self.skip(4 * more_ints)
            for _ in range(more_objects):
                self.read()
        else:
            raise MarshalError(f"unexpected marshal type {chr(kind)!r} at {position}")


def normalize_marshal(data: bytes, minor: str) -> bytes:
    """The canonical form of one marshalled object (a module's code object)."""
    reader = _Reader(data, minor)
    reader.read()
    if reader.at != len(data):
        raise MarshalError("trailing bytes after the marshalled object")
    for _, index in reader.uses:
        reader.refs[index].referenced = True
    renumbered: dict[int, int] = {}
    for node in reader.refs:
        if node.referenced:
            renumbered[id(node)] = len(renumbered)
    out = bytearray(data)
    for node in reader.nodes:
        if node.flagged and not node.referenced:
            out[node.position] &= ~FLAG_REF
    for position, index in reader.uses:
        target = reader.refs[index]
        struct.pack_into("<i", out, position + 1, renumbered[id(target)])
    return bytes(out)


def normalize_pyc(path: Path, minor: str) -> None:
    raw = path.read_bytes()
    fixed = raw[:HEADER] + normalize_marshal(raw[HEADER:], minor)
    if fixed != raw:
        path.write_bytes(fixed)


def normalize_tree(folder: Path, minor: str) -> int:
    """Normalizes every .pyc under folder for CPython `minor`; returns how many changed."""
    if minor not in CODE_LAYOUTS:
        return 0
    changed = 0
    for path in sorted(folder.rglob("*.pyc")):
        before = path.read_bytes()
        normalize_pyc(path, minor)
        changed += path.read_bytes() != before
    return changed
