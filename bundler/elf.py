"""The ELF facts the bundler checks and relocates, read with pyelftools.

The machine, the program interpreter (glibc's or musl's loader, or none for a
static binary), DT_NEEDED, DT_RUNPATH/DT_RPATH, DT_SONAME and the symbol
versions the file needs from its libraries. A RUNPATH can also be rewritten in
place when the new value fits in the old one's bytes, which keeps the file
otherwise identical (patchelf does the rest, see relocate.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSegment
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection
from elftools.elf.segments import InterpSegment

MAGIC = b"\x7fELF"
MACHINES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64", "EM_386": "i386", "EM_ARM": "arm"}


@dataclass
class ElfFile:
    path: Path
    machine: str
    kind: str  # "executable" or "shared object"
    interpreter: str | None
    needed: list[str] = field(default_factory=list)
    soname: str | None = None
    runpath: str | None = None  # DT_RUNPATH, or DT_RPATH when that is what the file has
    runpath_tag: str | None = None
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
    if not is_elf(path):
        return None
    with path.open("rb") as file:
        try:
            elf = ELFFile(file)
        except ELFError:
            return None
        if elf.elfclass != 64 or not elf.little_endian:
            return None
        interpreter = None
        dynamic: DynamicSegment | None = None
        for segment in elf.iter_segments():
            if isinstance(segment, InterpSegment):
                interpreter = segment.get_interp_name()
            elif isinstance(segment, DynamicSegment) and dynamic is None:
                dynamic = segment
        machine = str(elf["e_machine"])
        info = ElfFile(
            path=path,
            machine=MACHINES.get(machine, machine),
            kind="executable" if elf["e_type"] == "ET_EXEC" or interpreter else "shared object",
            interpreter=interpreter,
        )
        if dynamic is None:
            return info
        strtab = next(
            (t.entry.d_val for t in dynamic.iter_tags() if t.entry.d_tag == "DT_STRTAB"), None
        )
        for tag in dynamic.iter_tags():
            kind = tag.entry.d_tag
            if kind not in ("DT_NEEDED", "DT_SONAME", "DT_RUNPATH", "DT_RPATH"):
                continue
            # pyelftools gives a string tag's value as the attribute named after it.
            text = str(getattr(tag, kind[3:].lower()))
            if kind == "DT_NEEDED":
                info.needed.append(text)
            elif kind == "DT_SONAME":
                info.soname = text
            elif info.runpath_tag != "DT_RUNPATH":  # RUNPATH wins over RPATH, as in ld.so
                info.runpath = text
                info.runpath_tag = kind
                if strtab is not None:
                    info._runpath_offset = _file_offset(elf, strtab) + tag.entry.d_val
        for section in elf.iter_sections():
            if isinstance(section, GNUVerNeedSection):
                for _, auxiliaries in section.iter_versions():
                    info.versions.update(aux.name for aux in auxiliaries)
    return info


def _file_offset(elf: ELFFile, address: int) -> int:
    """Where in the file a virtual address of a loaded segment is."""
    offsets = list(elf.address_offsets(address))
    if not offsets:
        raise ValueError(f"address {address:#x} is in no loaded segment")
    return int(offsets[0])


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
