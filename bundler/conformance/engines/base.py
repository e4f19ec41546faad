"""What every engine's container can do, after cibuildwheel's OCIContainer."""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Protocol

from bundler.commands import Result

BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
}
# Where hide() looks for the system libraries a cell makes unloadable.
LIBRARY_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")


def copy_local(source: Path, target: Path) -> None:
    """Copies a file or a folder of this machine to target, its folders made as needed
    (for an engine whose container's files are files of this machine)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
    else:
        shutil.copy2(source, target)


class Container(Protocol):
    engine: str  # what ran it, for the report
    root: str  # which root file system or image

    def copy_in(self, source: Path, destination: PurePosixPath) -> None:
        """Copies a file or a folder of this machine to a path in the container."""

    def call(
        self, args: list[str], env: Mapping[str, str] | None = None, cwd: str = "/"
    ) -> Result[str]:
        """Runs a command in the container, output captured, environment BASE_ENV + env."""

    def copy_out(self, source: PurePosixPath, destination: Path) -> None:
        """Copies a file of the container to this machine."""

    def hide(self, patterns: tuple[str, ...]) -> list[str]:
        """Makes the system libraries whose file names match these globs unloadable in
        the container; returns their paths there."""

    def close(self) -> None:
        """Removes the container and what it wrote."""


def delete_libraries(container: Container, patterns: tuple[str, ...]) -> list[str]:
    """hide() for a container whose root file system is its own: deletes the libraries
    whose file names match these globs, and returns their paths."""
    names = " -o ".join(f"-name {shlex.quote(p)}" for p in patterns)
    script = f"find {' '.join(LIBRARY_DIRS)} \\( {names} \\) -print -delete 2>/dev/null"
    done = container.call(["sh", "-c", script])
    return sorted(set(done.stdout.split()))
