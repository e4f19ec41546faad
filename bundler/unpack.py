"""Unpacking a verified runtime archive, refusing members that would land outside."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path, PurePosixPath

from bundler.errors import BundlerError


def _check(member: tarfile.TarInfo, archive: Path) -> None:
    path = PurePosixPath(member.name)
    bad = path.is_absolute() or ".." in path.parts
    if member.issym() or member.islnk():
        target = PurePosixPath(member.linkname)
        # A symbolic link is relative to its folder, a hard link to the archive's root.
        base = path.parent if member.issym() else PurePosixPath()
        bad = bad or target.is_absolute() or _escapes(base / target)
    if member.isdev():
        bad = True
    if bad:
        raise BundlerError(f"{archive} holds {member.name!r}, which points outside it; refusing it")


def _escapes(path: PurePosixPath) -> bool:
    depth = 0
    for part in path.parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return True
    return False


def unpack(archive: Path, destination: Path) -> None:
    """Extracts a .tar.gz into a fresh destination folder."""
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            for member in members:
                _check(member, archive)
            if hasattr(tarfile, "fully_trusted_filter"):
                tar.extractall(destination, members=members, filter="fully_trusted")
            else:  # pragma: no cover - CPython without extraction filters
                tar.extractall(destination, members=members)
    except (tarfile.TarError, EOFError, OSError) as exc:
        # tarfile's "r:*" lists each compression it tried, a line each: the first says it.
        reason = str(exc).splitlines()[0].rstrip(":") if str(exc) else type(exc).__name__
        raise BundlerError(
            f"cannot unpack {archive}: {reason}; give a python-build-standalone .tar.gz whole"
        ) from None
