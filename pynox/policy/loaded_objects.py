"""What the dynamic loader loaded into this process, as it keeps it itself.

/proc/self/maps gives where a library ends up, every symbolic link resolved; the loader
opened it by another name (/lib/x86_64-linux-gnu/libblas.so.3, which leads through
/etc/alternatives/libblas.so.3 to the file), and looked for it in the folders the
RUNPATH of the library that needs it names before the one it was found in: a later run
opens it by that name, and looks in those folders, again. The loader keeps both in its
list of loaded objects, which the executable's DT_DEBUG entry points at (struct
r_debug, as debuggers find it): read here from /proc/self/mem, which needs no library
of its own (ctypes would load libffi, and cost a run's start-up more than all of this).

Nothing here trusts what it reads beyond its bounds: a loop gives fewer objects, and an
executable without DT_DEBUG (a static one) none. A list that cannot be read is an error:
what it would have named is then not known, and no write grant can be checked against it.
"""

import posix
import sys

from pynox import lean_os

_WORD = 8 if sys.maxsize > 2**32 else 4
_AT_PHDR, _AT_PHENT, _AT_PHNUM = 3, 4, 5  # the auxiliary vector's keys
_PT_DYNAMIC, _PT_PHDR = 2, 6  # program header types
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_SONAME = 0, 1, 5, 14  # dynamic tags
_DT_RPATH, _DT_DEBUG, _DT_RUNPATH = 15, 21, 29
_MAX_OBJECTS = 4096  # a list longer than this is no list to follow (a loop)
_MAX_NAME = 4096  # PATH_MAX
_PAGE = 4096  # the smallest a mapping ends on
_MAX_DYNAMIC = 256  # entries of a dynamic section read (some 40 in a library)


class LoadedObject:
    """A shared library (or the executable, named "") as the loader keeps it: the name it
    opened it by (absolute, or relative to the working directory it was opened in), and
    the folders its DT_RUNPATH or DT_RPATH has the loader look in first for what it
    needs, as written ($ORIGIN and all); with links asked for (loaded_objects), the
    names of the libraries it needs (DT_NEEDED) and its own (DT_SONAME), else empty."""

    __slots__ = ("name", "needed", "search", "soname")

    def __init__(self, name: str, search: "list[str]", needed: "list[str]", soname: str) -> None:
        self.name = name
        self.search = search
        self.needed = needed
        self.soname = soname


MEMORY = "/proc/self/mem"


def loaded_objects(links: bool = False) -> "list[LoadedObject]":
    """What the dynamic loader loaded into this process; empty without a loader's list.
    links: also which libraries each object needs, and its own name as they name it
    (a few more reads per object). Raises OSError where this process's memory (MEMORY,
    /proc/self/auxv) cannot be read."""
    memory = posix.open(MEMORY, posix.O_RDONLY | posix.O_CLOEXEC)
    try:
        return _objects(memory, links)
    except ValueError:  # a short read in the middle of the list
        raise OSError(
            0, "the dynamic loader's list of what it loaded ends unread", MEMORY
        ) from None
    finally:
        posix.close(memory)


def runpath_folders(objects: "list[LoadedObject]") -> "list[str]":
    """The folders the RUNPATH (or RPATH) of each loaded object names, where the loader
    looks for the libraries that object needs before the folder it found them in: a
    library left in one would be taken first by the next run that loads the object.
    $ORIGIN is the folder of the name the object was opened by (the loader resolves no
    link of it), or the interpreter's for the executable."""
    from pynox.policy.system_paths import as_loader_reads

    cwd = lean_os.getcwd()
    folders: dict[str, None] = {}
    for item in objects:
        if item.name:
            if "/" not in item.name:
                continue  # the kernel's vDSO, which needs nothing
            origin = lean_os.dirname(lean_os.join(cwd, item.name))
        else:
            origin = None  # the executable: as_loader_reads takes the interpreter's folder
        for folder in item.search:
            folders.setdefault(lean_os.join(cwd, as_loader_reads(folder, origin)))
    return list(folders)


def needed_by(names: "list[str]", objects: "list[LoadedObject]") -> "list[LoadedObject]":
    """The objects (loaded_objects with links) opened by these names, and every one they
    need, and those need in turn: each found by the name the libraries that need it know
    it by (its DT_SONAME, else the last part of the name it was opened by)."""
    by_name: dict[str, LoadedObject] = {}
    for item in objects:
        by_name.setdefault(item.name, item)  # "": the executable, first in the list
    for item in objects:
        if "/" in item.name:
            by_name.setdefault(lean_os.basename(item.name), item)
        if item.soname:
            by_name.setdefault(item.soname, item)
    found: dict[str, LoadedObject] = {}
    pending = [by_name[name] for name in names if name in by_name]
    # A name the loader was given otherwise (through another link): found by identity.
    missing = [name for name in names if name not in by_name]
    if missing:
        pending += _same_files(missing, objects)
    while pending:
        item = pending.pop(0)
        if item.name in found:
            continue
        found[item.name] = item
        pending += [by_name[name] for name in item.needed if name in by_name]
    return list(found.values())


def _same_files(paths: "list[str]", objects: "list[LoadedObject]") -> "list[LoadedObject]":
    """The objects whose files are those at paths."""
    wanted = {identity for identity in map(_file_identity, paths) if identity is not None}
    return [item for item in objects if "/" in item.name and _file_identity(item.name) in wanted]


def _file_identity(path: str) -> "tuple[int, int] | None":
    try:
        status = posix.stat(path)
    except (OSError, ValueError):
        return None
    return status.st_dev, status.st_ino


def _objects(memory: int, links: bool = False) -> "list[LoadedObject]":
    debug = _debug_address(memory)
    objects: list[LoadedObject] = []
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
            base, name, dynamic, link = (_word(memory, link + at * _WORD) for at in range(4))
            try:
                search, needed, soname = _dynamic_names(memory, base, dynamic, links)
            except (OSError, ValueError):
                search, needed, soname = [], [], ""
            objects.append(
                LoadedObject(lean_os.fsdecode(_string(memory, name)), search, needed, soname)
            )
        debug = _word(memory, debug + 5 * _WORD) if version >= 2 else 0
    return objects


def _dynamic_names(
    memory: int, base: int, dynamic: int, links: bool
) -> "tuple[list[str], list[str], str]":
    """The folders of an object's DT_RUNPATH and DT_RPATH, from its dynamic section, and
    with links, the names of its DT_NEEDED entries and of its DT_SONAME."""
    if not dynamic:
        return [], [], ""
    entries = _read(memory, dynamic, 2 * _WORD * _MAX_DYNAMIC)
    strings, offsets, needed, soname = 0, [], [], -1
    for at in range(0, len(entries) - 2 * _WORD + 1, 2 * _WORD):
        tag, value = _int(entries[at : at + _WORD]), _int(entries[at + _WORD : at + 2 * _WORD])
        if tag == _DT_NULL:
            break
        if tag == _DT_STRTAB:
            strings = value
        elif tag in (_DT_RPATH, _DT_RUNPATH):
            offsets.append(value)
        elif links and tag == _DT_NEEDED:
            needed.append(value)
        elif links and tag == _DT_SONAME:
            soname = value
    if not strings:
        return [], [], ""
    if strings < base:
        strings += base  # where the loader leaves the section as it was (read-only ones)
    text = b":".join(_string(memory, strings + offset) for offset in offsets)
    search = [lean_os.fsdecode(folder) for folder in text.split(b":") if folder]
    names = [lean_os.fsdecode(_string(memory, strings + offset)) for offset in needed]
    own = lean_os.fsdecode(_string(memory, strings + soname)) if soname >= 0 else ""
    return search, [name for name in names if name], own


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
    dynamic = _read(memory, bias + found[_PT_DYNAMIC], 2 * _WORD * _MAX_DYNAMIC)
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
    """The NUL-terminated string at address (empty where there is none)."""
    text = _read(memory, address, _MAX_NAME, until=b"\0") if address else b""
    end = text.find(b"\0")
    return text[:end] if end >= 0 else b""


def _read(memory: int, address: int, size: int, until: bytes = b"") -> bytes:
    """Up to size bytes from address, a page at most at a time, up to the end of its
    mapping (a read across it fails), or a page holding until."""
    data = b""
    while len(data) < size:
        at = address + len(data)
        try:
            chunk = posix.pread(memory, min(_PAGE - at % _PAGE, size - len(data)), at)
        except OSError:
            break
        data += chunk
        if not chunk or (until and until in chunk):
            break
    return data


def _int(data: bytes) -> int:
    return int.from_bytes(data, sys.byteorder)
