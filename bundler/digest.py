"""sha256 of files, and the `{hex}  {name}` files that carry them."""

from __future__ import annotations

import contextlib
import hashlib
import re
from pathlib import Path
from typing import BinaryIO

from bundler.errors import BundlerError

HEX64 = re.compile(r"[0-9a-f]{64}")


def sha256_file(path: Path) -> str:
    with path.open("rb") as file:
        return sha256_fileobj(file)


def sha256_fileobj(file: BinaryIO) -> str:
    """The sha256 of what is left to read in an open file."""
    digest = hashlib.sha256()
    for block in iter(lambda: file.read(1024 * 1024), b""):
        digest.update(block)
    return digest.hexdigest()


def normalize(value: str, where: str) -> str:
    """A checksum given by a person: 64 hex digits, any case, `sha256:` prefix allowed."""
    text = value.strip().lower().removeprefix("sha256:")
    if not HEX64.fullmatch(text):
        raise BundlerError(
            f"{where} is {value!r}, which is not a sha256; give the 64 hex digits of one"
        )
    return text


def write_sums(path: Path) -> Path:
    """Writes PATH.sha256 in sha256sum's format and returns its path."""
    out = path.with_name(path.name + ".sha256")
    try:
        out.write_text(f"{sha256_file(path)}  {path.name}\n", encoding="ascii")
    except OSError as exc:  # the archive took the disk's last room
        with contextlib.suppress(OSError):
            out.unlink(missing_ok=True)  # an empty .sha256 would vouch for nothing
        raise BundlerError(
            f"cannot write {out} ({exc.strerror or exc}); make room there, and run again"
        ) from None
    return out
