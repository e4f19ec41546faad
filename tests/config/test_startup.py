"""What a run pays for a pynox.toml: with the cache filled, a fresh interpreter loads the
configuration without importing a TOML parser (about 20 ms here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.config_files import FULL_EXAMPLE, write_config

import pynox
from pynox.policy.cache import load_config


def test_cached_run_does_not_import_a_toml_parser(project: Path, environ: dict[str, str]) -> None:
    path = write_config(project, FULL_EXAMPLE)
    load_config(path, environ)  # fills the cache
    script = (
        "import sys\n"
        "from pynox.policy.cache import load_config\n"
        f"loaded = load_config({path!r}, {environ!r})\n"
        "assert loaded.permissions.memory == 512 << 20\n"
        "print(sorted(m for m in ('tomllib', 'tomli') if m in sys.modules))\n"
    )
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(pynox.__file__)))
    result = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": package_root},
        # Not the repository's root: -c puts the working directory first on sys.path,
        # where the source tree's pynox (other files, so another cache key) would win.
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "[]"
