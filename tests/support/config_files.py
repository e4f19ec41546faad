"""pynox.toml files for the configuration tests (tests/config/)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

FULL_EXAMPLE = """
[permissions]
allow_read = ["data"]
allow_write = ["out"]
package_dirs = ["/opt/venv/lib/python3.11/site-packages"]
allow_env = ["API_KEY"]
allow_network = false
timeout = "10s"
memory = "512m"
max_output = 65536
max_file_size = "100m"

[profiles.fetch]
allow_network = true

[pool]
workers = 4
preload = ["pandas"]
max_sessions = 16
session_idle = "10m"

[pool.limits]
allow_read = ["data"]
allow_write = ["out"]
allow_network = false
timeout = "30s"
memory = "1g"
"""


def write_config(directory: Path, text: str, mtime: int | None = None) -> str:
    path = directory / "pynox.toml"
    path.write_text(textwrap.dedent(text))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return os.path.realpath(path)
