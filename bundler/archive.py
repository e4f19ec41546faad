"""Byte-reproducible .tar.gz archives of a directory tree.

The same tree gives the same bytes on any machine: entries sorted by path,
owner and group 0 with empty names, one timestamp for everything, modes reduced
to 0755 (directories and executables) and 0644, no device files or hard links,
and a gzip header with neither a time nor a file name.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import stat
import tarfile
from pathlib import Path
from typing import BinaryIO

from bundler.errors import BundlerError

COMPRESS_LEVEL = 6  # level 9 takes twice as long for 0.5% less


def tree_entries(root: Path) -> list[Path]:
    """Every path under root (root excluded), sorted by its relative POSIX path."""
    found: list[Path] = []
    for directory, dirs, files in os.walk(root):
        base = Path(directory)
        found.extend(base / name for name in dirs + files)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def _member(path: Path, name: str, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(path)
        info.mode = 0o777
    elif stat.S_ISDIR(mode):
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
    elif stat.S_ISREG(mode):
        info.type = tarfile.REGTYPE
        info.size = os.lstat(path).st_size
        info.mode = 0o755 if mode & 0o111 else 0o644
    else:
        raise BundlerError(f"{path} is neither a file, a folder nor a link; remove it")
    return info


class _Output:
    """The archive's file, which keeps its first write error (a full disk) and drops what
    comes after: gzip and tarfile then close without failing again, which would leave
    gzip's buffer to fail once more, noisily, when it is collected."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.error: OSError | None = None

    def write(self, data: bytes) -> int:
        if self.error is None:
            try:
                self.file.write(data)
            except OSError as exc:
                self.error = exc
        return len(data)

    def flush(self) -> None:
        if self.error is None:
            try:
                self.file.flush()
            except OSError as exc:
                self.error = exc


def write_tar_gz(
    root: Path, top: str, output: Path, mtime: int, level: int = COMPRESS_LEVEL
) -> None:
    """Writes root's contents under the top-level folder `top` into output."""
    temporary = output.with_name(output.name + ".tmp")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cannot_write(output, exc) from None
    try:
        with (
            temporary.open("wb") as out,
            gzip.GzipFile(
                filename="", mode="wb", fileobj=(raw := _Output(out)), mtime=0, compresslevel=level
            ) as compressed,
            tarfile.TarFile(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            tar.addfile(_member(root, top, mtime))
            for path in tree_entries(root):
                info = _member(path, f"{top}/{path.relative_to(root).as_posix()}", mtime)
                if info.isreg():
                    with path.open("rb") as file:
                        tar.addfile(info, file)
                else:
                    tar.addfile(info)
        if raw.error is not None:
            raise raw.error
        temporary.replace(output)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)  # never a half-written archive left beside
        if isinstance(exc, OSError) and exc.filename in (None, str(temporary)):
            raise _cannot_write(output, exc) from None  # not reading the tree: writing
        raise


def _cannot_write(output: Path, error: OSError) -> BundlerError:
    """A full or read-only disk where the archive goes."""
    return BundlerError(
        f"cannot write {output} ({error.strerror or error}); make room there, "
        "or write it to another folder"
    )
