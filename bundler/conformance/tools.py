"""Host tools a cell needs. Only checked here: `make conformance-deps` installs them."""

from __future__ import annotations

import shutil

from bundler.conformance.errors import Unprepared


def ensure(command: str, package: str) -> str:
    """The path of COMMAND, or Unprepared naming the package that has it."""
    found = shutil.which(command) or shutil.which(command, path="/usr/sbin:/sbin")
    if not found:
        raise Unprepared(
            f"{command} is not installed (the {package} package): run `make conformance-deps`"
        )
    return found
