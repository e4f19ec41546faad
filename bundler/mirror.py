"""PYNOX_PBS_MIRROR: a URL or a folder laid out like the release (TAG/NAME)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from bundler.download import printable
from bundler.errors import BundlerError

ENV = "PYNOX_PBS_MIRROR"


def mirror_base(value: str | None = None) -> str | None:
    """The mirror as a base URL (http, https or file), or None when there is none."""
    value = value if value is not None else os.environ.get(ENV)
    if not value:
        return None
    try:
        parts = urlsplit(value)
        if parts.scheme in ("http", "https"):
            parts.port  # noqa: B018 - raises ValueError for a port that is no port
            if not parts.hostname:
                raise ValueError("it names no host")
    except ValueError as exc:
        # Not echoed: a URL that does not parse cannot be shown without its password.
        raise BundlerError(
            f"{ENV} is not a valid URL ({printable(str(exc))}); give it as "
            "http(s)://HOST[:PORT]/PATH, a file:// URL or a folder laid out as TAG/NAME"
        ) from None
    if parts.scheme in ("http", "https", "file"):
        return value.rstrip("/")
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise BundlerError(
            f"{ENV} names {value}, which is not a folder or a URL; "
            "point it at a folder laid out as TAG/NAME or at an http(s):// or file:// URL"
        )
    return folder.resolve().as_uri()


def mirror_url(base: str, tag: str, name: str) -> str:
    from urllib.parse import quote

    return f"{base}/{quote(tag)}/{quote(name)}"
