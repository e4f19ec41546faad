"""Where the bundler finds the project, its data and its cache."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bundler.errors import BundlerError

PROJECT = Path(__file__).resolve().parent.parent


def dist_config_dir() -> Path:
    """dist-config/, or the folder PYNOX_DIST_CONFIG names (tests use their own pins)."""
    override = os.environ.get("PYNOX_DIST_CONFIG")
    return Path(override) if override else PROJECT / "dist-config"


def cache_dir() -> Path:
    """The user's cache for pynox: $XDG_CACHE_HOME/pynox, else ~/.cache/pynox."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pynox"


def made_cache(folder: Path) -> Path:
    """A cache folder about to be written, made if missing; one sentence where it cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cache_failure("make the cache folder", folder, exc) from None
    return folder


def cache_failure(doing: str, path: Path, error: OSError) -> BundlerError:
    """One sentence for a cache that cannot be written or read: a full or read-only disk,
    or a folder of another user, is not fixed by another mirror or another try."""
    room = "make room there, or " if error.errno in (errno.ENOSPC, errno.EDQUOT) else ""
    return BundlerError(
        f"cannot {doing} {path} ({error.strerror or error}); "
        f"{room}set XDG_CACHE_HOME to a folder you may write to"
    )


def runtimes_cache() -> Path:
    return cache_dir() / "runtimes"


def wheels_cache() -> Path:
    return cache_dir() / "wheels"


# A disk that is full or read-only: no other input would do better.
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


@contextlib.contextmanager
def room_for_work(work: Path, hint: str) -> Iterator[None]:
    """One sentence, not a traceback, when the work folder's disk cannot take the build
    (copytree gathers every file it could not copy into one enormous Error)."""
    try:
        yield
    except OSError as exc:
        if exc.errno in _NO_ROOM:
            reason = exc.strerror
        elif isinstance(exc, shutil.Error):
            found = [os.strerror(e) for e in _NO_ROOM if os.strerror(e) in str(exc)]
            if not found:
                raise
            reason = found[0]
        else:
            raise
        raise BundlerError(
            f"cannot build in {work} ({reason}); make room there, or {hint}"
        ) from None


@contextlib.contextmanager
def scratch_folder(prefix: str) -> Iterator[Path]:
    """A new folder in TMPDIR for a build, removed after it; a disk there without room
    for the build is named, with what to do."""
    parent = Path(tempfile.gettempdir())
    with (
        room_for_work(parent, "set TMPDIR to a folder on a disk with more room"),
        tempfile.TemporaryDirectory(prefix=prefix, dir=parent) as folder,
    ):
        yield Path(folder)
