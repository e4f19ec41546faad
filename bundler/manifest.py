"""MANIFEST.json: what a bundle is for and the sha256 of every file in it.

Top-level scalar fields are written one per line ("key": value), so that
install.sh can read them with sed; the file list comes last.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bundler.archive import tree_entries
from bundler.digest import sha256_file

NAME = "MANIFEST.json"
KERNEL_FOR_SANDBOX = "6.2"  # Landlock ABI 3, the sandbox's floor


def file_table(root: Path) -> tuple[dict[str, str], dict[str, str]]:
    """({path: sha256} of regular files, {path: target} of symbolic links)."""
    files: dict[str, str] = {}
    links: dict[str, str] = {}
    for path in tree_entries(root):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            links[relative] = os.readlink(path)
        elif path.is_file():
            files[relative] = sha256_file(path)
    return files, links


def write(root: Path, fields: dict[str, Any]) -> Path:
    files, links = file_table(root)
    document = {**fields, "links": links, "files": files}
    path = root / NAME
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return path
