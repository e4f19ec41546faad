"""`import pynox` stays cheap: a fresh interpreter imports the package and nothing else
until an API name is used."""

from __future__ import annotations

import subprocess
import sys


def test_import_pynox_stays_cheap() -> None:
    code = "import pynox, sys; print(sorted(m for m in sys.modules if m.startswith('pynox')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['pynox']"
    code = "import pynox; print(pynox.Pool.__module__, pynox.run.__module__, 'tool' in dir(pynox))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["pynox.api.pool", "pynox.api.shared", "True"]
