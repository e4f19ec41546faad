"""The names the dynamic loader opened this process's shared libraries by.

/proc/self/maps gives where a library ends up, every symbolic link resolved; the loader
opened it by another name (/lib/x86_64-linux-gnu/libblas.so.3, which leads through
/etc/alternatives/libblas.so.3 to the file), and a later run opens it by that name
again. The loader keeps each name in its list of loaded objects, which the executable's
DT_DEBUG entry points at (struct r_debug, as debuggers find it): read here from
/proc/self/mem, which needs no library of its own (ctypes would load libffi, and cost
a run's start-up more than all of this).

Nothing here trusts what it reads beyond its bounds: a list that cannot be read, a
loop, or an executable without DT_DEBUG (a static one) gives fewer names, never an
error.
"""

import posix
import sys

from pynox import lean_os

_WORD = 8 if sys.maxsize > 2**32 else 4
_AT_PHDR, _AT_PHENT, _AT_PHNUM = 3, 4, 5  # the auxiliary vector's keys
_PT_DYNAMIC, _PT_PHDR = 2, 6  # program header types
_DT_NULL, _DT_DEBUG = 0, 21  # dynamic section tags
_MAX_OBJECTS = 4096  # a list longer than this is no list to follow (a loop)
_MAX_NAME = 4096  # PATH_MAX
_MAX_DYNAMIC = 1024  # entries of the executable's dynamic section


def loader_names() -> "list[str]":
    """The name each shared library was opened by, as the loader keeps it (absolute, or
    relative to the working directory it was opened in); empty where not found."""
    try:
        memory = posix.open("/proc/self/mem", posix.O_RDONLY | posix.O_CLOEXEC)
    except OSError:
        return []
    try:
        return _names(memory)
    except (OSError, ValueError):
        return []
    finally:
        posix.close(memory)


def _names(memory: int) -> "list[str]":
    debug = _debug_address(memory)
    names: list[str] = []
    namespaces = 0
    while debug and namespaces < _MAX_OBJECTS:
        namespaces += 1
        # struct r_debug: int r_version; struct link_map *r_map; then r_brk, r_state,
        # r_ldbase and, from version 2 on (glibc 2.35), r_next: the next namespace's.
        version = _word(memory, debug) & 0xFFFFFFFF
        link = _word(memory, debug + _WORD)
        for _ in range(_MAX_OBJECTS):
            if not link:
                break
            # struct link_map: l_addr, l_name, l_ld, l_next, l_prev.
            name = _string(memory, _word(memory, link + _WORD))
            if name:
                names.append(lean_os.fsdecode(name))
            link = _word(memory, link + 3 * _WORD)
        debug = _word(memory, debug + 5 * _WORD) if version >= 2 else 0
    return names


def _debug_address(memory: int) -> int:
    """Where the loader's struct r_debug is: the value of the executable's DT_DEBUG,
    found through its program headers (the auxiliary vector says where they are)."""
    with open("/proc/self/auxv", "rb") as auxv:
        vector = auxv.read()
    values: dict[int, int] = {}
    for at in range(0, len(vector) - 2 * _WORD + 1, 2 * _WORD):
        values[_int(vector[at : at + _WORD])] = _int(vector[at + _WORD : at + 2 * _WORD])
    headers, size, count = (
        values.get(_AT_PHDR, 0),
        values.get(_AT_PHENT, 0),
        values.get(_AT_PHNUM, 0),
    )
    if not headers or size < 8 or count > 256:
        return 0
    table = posix.pread(memory, size * count, headers)
    # Elf64_Phdr: p_type, p_flags, p_offset, p_vaddr, ...; Elf32_Phdr: p_type, p_offset,
    # p_vaddr, ...
    address_at = 16 if _WORD == 8 else 8
    found: dict[int, int] = {}  # a header type: the first such header's address
    for at in range(0, len(table) - size + 1, size):
        kind = _int(table[at : at + 4])
        found.setdefault(kind, _int(table[at + address_at : at + address_at + _WORD]))
    if _PT_PHDR not in found or _PT_DYNAMIC not in found:
        return 0
    bias = headers - found[_PT_PHDR]  # where a position-independent executable was put
    dynamic = posix.pread(memory, 2 * _WORD * _MAX_DYNAMIC, bias + found[_PT_DYNAMIC])
    for at in range(0, len(dynamic) - 2 * _WORD + 1, 2 * _WORD):
        tag = _int(dynamic[at : at + _WORD])
        if tag == _DT_NULL:
            break
        if tag == _DT_DEBUG:
            return _int(dynamic[at + _WORD : at + 2 * _WORD])
    return 0


def _word(memory: int, address: int) -> int:
    data = posix.pread(memory, _WORD, address)
    if len(data) != _WORD:
        raise ValueError("short read")
    return _int(data)


def _string(memory: int, address: int) -> bytes:
    """The NUL-terminated string at address, read a page at most at a time: a read
    across the end of a mapping fails."""
    if not address:
        return b""
    text = b""
    while len(text) < _MAX_NAME:
        chunk = posix.pread(memory, 4096 - (address + len(text)) % 4096, address + len(text))
        end = chunk.find(b"\0")
        if end >= 0:
            return text + chunk[:end]
        if not chunk:
            break
        text += chunk
    return b""  # no end found: not a name


def _int(data: bytes) -> int:
    return int.from_bytes(data, sys.byteorder)
