"""Where the bundler finds the project, its data and its cache."""

from __future__ import annotations

import errno
import os
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
