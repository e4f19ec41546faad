"""Just enough of ELF to check and relocate what the bundler ships.

Reads 64-bit little-endian ELF files (x86_64 and aarch64): the machine, the
program interpreter (glibc's or musl's loader, or none for a static binary),
DT_NEEDED, DT_RUNPATH/DT_RPATH and the symbol versions the file needs from its
libraries. It can also rewrite a RUNPATH in place when the new value fits in
the old one's bytes, which keeps the file otherwise identical.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = b"\x7fELF"
MACHINES = {62: "x86_64", 183: "aarch64", 3: "i386", 40: "arm"}
PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
DT_NULL, DT_NEEDED, DT_STRTAB, DT_RPATH, DT_RUNPATH = 0, 1, 5, 15, 29
DT_VERNEED = 0x6FFFFFFE
DT_VERNEEDNUM = 0x6FFFFFFF
ET_EXEC, ET_DYN = 2, 3


@dataclass
class ElfFile:
    path: Path
    machine: str
    kind: str  # "executable" or "shared object"
    interpreter: str | None
    needed: list[str] = field(default_factory=list)
    runpath: str | None = None  # DT_RUNPATH, or DT_RPATH when that is what the file has
    runpath_tag: int | None = None
    versions: set[str] = field(default_factory=set)  # e.g. {"GLIBC_2.17", "GLIBC_2.28"}
    _runpath_offset: int | None = None

    @property
    def libc(self) -> str:
        """gnu or musl; `static` for an executable without a loader, `none` for a library
        that needs no C library at all."""
        if self.interpreter is not None:
            return "musl" if "musl" in self.interpreter else "gnu"
        if "libc.so.6" in self.needed:
            return "gnu"
        if any(n == "libc.so" or n.startswith("libc.musl") for n in self.needed):
            return "musl"
        return "static" if self.kind == "executable" else "none"

    @property
    def glibc_max(self) -> str | None:
        """The highest GLIBC_x.y symbol version the file needs, or None."""
        found = [
            _version_key(v[6:]) for v in self.versions if re.fullmatch(r"GLIBC_\d+(\.\d+)*", v)
        ]
        return ".".join(map(str, max(found))) if found else None


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(4) == MAGIC
    except OSError:
        return False


def read(path: Path) -> ElfFile | None:
    """The ELF facts of a file, or None if it is not a 64-bit little-endian ELF file."""
    data = path.read_bytes()
    if data[:4] != MAGIC or data[4] != 2 or data[5] != 1:
        return None
    (e_type, e_machine, _, _, e_phoff, _, _, _, e_phentsize, e_phnum) = struct.unpack_from(
        "<HHIQQQIHHH", data, 16
    )
    segments = [
        struct.unpack_from("<IIQQQQQQ", data, e_phoff + i * e_phentsize) for i in range(e_phnum)
    ]
    # (vaddr, offset, filesz) of each loaded segment
    loads: list[tuple[int, int, int]] = [(s[3], s[2], s[5]) for s in segments if s[0] == PT_LOAD]

    def offset_of(vaddr: int) -> int:
        for start, offset, size in loads:
            if start <= vaddr < start + size:
                return vaddr - start + offset
        raise ValueError(f"address {vaddr:#x} is in no loaded segment")

    def string(offset: int) -> str:
        end = data.index(b"\0", offset)
        return data[offset:end].decode("utf-8", "replace")

    interpreter = None
    dynamic: list[tuple[int, int]] = []
    for p_type, _, p_offset, _, _, p_filesz, _, _ in segments:
        if p_type == PT_INTERP:
            interpreter = data[p_offset : p_offset + p_filesz].rstrip(b"\0").decode()
        elif p_type == PT_DYNAMIC:
            for i in range(p_filesz // 16):
                tag, value = struct.unpack_from("<qQ", data, p_offset + i * 16)
                if tag == DT_NULL:
                    break
                dynamic.append((tag, value))
    info = ElfFile(
        path=path,
        machine=MACHINES.get(e_machine, f"machine {e_machine}"),
        kind="executable" if e_type == ET_EXEC or interpreter else "shared object",
        interpreter=interpreter,
    )
    tags = dict(dynamic)
    if DT_STRTAB not in tags:
        return info
    strtab = offset_of(tags[DT_STRTAB])
    info.needed = [string(strtab + v) for t, v in dynamic if t == DT_NEEDED]
    for tag in (DT_RUNPATH, DT_RPATH):
        if tag in tags:
            info.runpath = string(strtab + tags[tag])
            info.runpath_tag = tag
            info._runpath_offset = strtab + tags[tag]
            break
    if DT_VERNEED in tags:
        entry = offset_of(tags[DT_VERNEED])
        for _ in range(tags.get(DT_VERNEEDNUM, 0)):
            _, count, _, aux_offset, next_offset = struct.unpack_from("<HHIII", data, entry)
            aux = entry + aux_offset
            for _ in range(count):
                _, _, _, name, aux_next = struct.unpack_from("<IHHII", data, aux)
                info.versions.add(string(strtab + name))
                if not aux_next:
                    break
                aux += aux_next
            if not next_offset:
                break
            entry += next_offset
    return info


def rewrite_runpath_in_place(info: ElfFile, value: str) -> bool:
    """Overwrites the RUNPATH string if `value` fits in its bytes; False if it does not."""
    if info._runpath_offset is None or info.runpath is None:
        return False
    old = info.runpath.encode()
    new = value.encode()
    if len(new) > len(old):
        return False
    with info.path.open("r+b") as file:
        file.seek(info._runpath_offset)
        file.write(new + b"\0" * (len(old) - len(new)))
    info.runpath = value
    return True
