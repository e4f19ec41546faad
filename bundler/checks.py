"""Checking built binaries against their target: architecture, C library, glibc floor.

Each binary is read with bundler.elf (pyelftools); `file`'s description is
added to the report when `file` is installed, for a person to read.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from bundler import commands, elf
from bundler.config import Target
from bundler.errors import BundlerError


@dataclass(frozen=True)
class BinaryReport:
    path: Path
    machine: str
    libc: str
    glibc_max: str | None
    description: str

    def line(self) -> str:
        glibc = f", needs GLIBC_{self.glibc_max}" if self.glibc_max else ""
        return f"{self.path.name}: {self.machine}, {self.libc}{glibc}; file: {self.description}"


def describe(path: Path) -> str:
    tool = shutil.which("file")
    if tool is None:
        return "(file is not installed)"
    done = commands.run([tool, "-b", path], capture=True, check=False)
    return done.stdout.strip() or done.stderr.strip()


def version_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def check_binary(path: Path, target: Target, glibc_cap: str | None) -> BinaryReport:
    """Fails unless the binary is for the target's CPU and C library (and glibc cap)."""
    info = elf.read(path)
    if info is None:
        raise BundlerError(f"{path} is not a 64-bit ELF file; the build is broken")
    if info.machine != target.arch:
        raise BundlerError(f"{path} is built for {info.machine}, not {target.arch}")
    if target.libc == "gnu" and info.libc == "musl" or target.libc == "musl" and info.libc == "gnu":
        raise BundlerError(f"{path} links {info.libc}'s C library, not {target.libc}'s")
    glibc = info.glibc_max
    if glibc_cap and glibc and version_key(glibc) > version_key(glibc_cap):
        raise BundlerError(f"{path} needs GLIBC_{glibc}, above the target's floor {glibc_cap}")
    return BinaryReport(path, info.machine, info.libc, glibc, describe(path))


def highest_glibc(paths: list[Path]) -> str | None:
    """The highest GLIBC_ version any of these ELF files needs."""
    best: tuple[int, ...] = ()
    for path in paths:
        info = elf.read(path) if elf.is_elf(path) else None
        if info and info.glibc_max and version_key(info.glibc_max) > best:
            best = version_key(info.glibc_max)
    return ".".join(map(str, best)) if best else None
