"""Unpacking a verified runtime archive, refusing members that would land outside.

The check is made on the member list before anything is written, so it cannot
depend on what extraction leaves on disk: no name is absolute or climbs with
`..`, no member is a device, and no path, link target or hard-link target goes
through a symbolic link of the archive (a link to a folder, then a name below it,
could otherwise reach anywhere), and no hard link names a symbolic link (it would
become a copy of that link in another folder, where its target leads elsewhere).
With no path through a link, where each link leads is plain path arithmetic.
"""

from __future__ import annotations

import errno
import posixpath
import shutil
import tarfile
import zlib
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from bundler.digest import sha256_fileobj
from bundler.errors import BundlerError


def _stays_inside(parts: tuple[str, ...], links: set[PurePosixPath]) -> bool:
    """Whether a path of the archive, from its root, stays inside it without going
    through one of its symbolic links (only the last part may be a link)."""
    folders: list[str] = []
    for index, part in enumerate(parts):
        if part == "..":
            if not folders:
                return False
            folders.pop()
        elif part not in ("", "."):
            folders.append(part)
            if index < len(parts) - 1 and PurePosixPath(*folders) in links:
                return False
    return True


def _refuse_escapes(members: list[tarfile.TarInfo], archive: Path) -> None:
    links = {PurePosixPath(m.name) for m in members if m.issym()}
    # A hard link to a symbolic link is extracted as a copy of that link, whose relative
    # target then counts from the hard link's folder: refused, it has no use in a runtime.
    # (tarfile finds a hard link's target by its normalized name, as here.)
    hard_to_link = [
        m for m in members if m.islnk() and PurePosixPath(posixpath.normpath(m.linkname)) in links
    ]
    counts = Counter(PurePosixPath(m.name) for m in members)
    for member in members:
        path = PurePosixPath(member.name)
        bad = path.is_absolute() or ".." in path.parts or member.isdev()
        bad = bad or not _stays_inside(path.parts, links)
        # A second entry of a link's name would be written through the link.
        bad = bad or (path in links and counts[path] > 1)
        bad = bad or member in hard_to_link
        if member.issym() or member.islnk():
            target = PurePosixPath(member.linkname)
            # A symbolic link is relative to its folder, a hard link to the archive's root.
            base = path.parent.parts if member.issym() else ()
            bad = bad or target.is_absolute() or not _stays_inside(base + target.parts, links)
        if bad:
            raise BundlerError(
                f"{archive} holds {member.name!r}, which leads outside the folder it unpacks "
                "into; refusing it: give a runtime archive as python-build-standalone released it"
            )


def _refuse_changed(file: BinaryIO, archive: Path, sha256: str) -> None:
    """The bytes about to be unpacked are the ones checked: read from the same open file,
    so that a file swapped in after the check is never what gets unpacked."""
    actual = sha256_fileobj(file)
    file.seek(0)
    if actual != sha256:
        raise BundlerError(
            f"{archive} changed after it was checked: its sha256 is now {actual}, not "
            f"{sha256}; refusing it: make sure nothing else writes to it, and run again"
        )


# What reading a damaged or cut-short archive raises (tarfile, gzip, zlib, the file).
DAMAGED = (tarfile.TarError, EOFError, zlib.error, OSError)


def damaged(archive: Path, exc: BaseException, doing: str = "unpack") -> BundlerError:
    """One sentence for an archive that is no whole .tar.gz (exc is one of DAMAGED)."""
    # tarfile's "r:*" lists each compression it tried, a line each: the first says it.
    reason = str(exc).splitlines()[0].rstrip(":") if str(exc) else type(exc).__name__
    return BundlerError(
        f"cannot {doing} {archive}: {reason}; give a python-build-standalone .tar.gz whole"
    )


def unpack(archive: Path, destination: Path, sha256: str | None = None) -> None:
    """Extracts a .tar.gz into a fresh destination folder; with sha256, only if its bytes
    still have that checksum."""
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    try:
        with archive.open("rb") as file:
            if sha256:
                _refuse_changed(file, archive, sha256)
            with tarfile.open(fileobj=file, mode="r:*") as tar:
                members = tar.getmembers()
                _refuse_escapes(members, archive)
                if hasattr(tarfile, "fully_trusted_filter"):
                    tar.extractall(destination, members=members, filter="fully_trusted")
                else:  # pragma: no cover - CPython without extraction filters
                    tar.extractall(destination, members=members)
                _read_to_the_end(tar)
    except DAMAGED as exc:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            raise  # the destination's disk, not the archive: the caller knows what to say
        raise damaged(archive, exc) from None


def _read_to_the_end(tar: tarfile.TarFile) -> None:
    """tarfile takes a damaged header for the archive's end, and gzip checks its CRC only
    at the stream's end: reading on to it refuses a damaged archive (bytes flipped by a
    disk or a copy) that would otherwise unpack in part, without a word."""
    stream = tar.fileobj
    if stream is not None:
        while stream.read(1024 * 1024):
            pass
