"""The timestamp every archive entry gets: SOURCE_DATE_EPOCH, else the last commit's."""

from __future__ import annotations

import os

from bundler import commands
from bundler.errors import BundlerError
from bundler.paths import PROJECT


def source_date_epoch() -> int:
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if value:
        if not value.isdigit():
            raise BundlerError(f"SOURCE_DATE_EPOCH must be whole seconds since 1970, not {value!r}")
        return int(value)
    try:
        done = commands.run(["git", "-C", PROJECT, "log", "-1", "--format=%ct"], capture=True)
        return int(done.stdout.strip())
    except (BundlerError, ValueError):
        raise BundlerError(
            "cannot tell the build's timestamp: set SOURCE_DATE_EPOCH or build from a git checkout"
        ) from None
