"""Copies of the installed pynox in virtual environments of their own, for tests that
change what an installation holds without touching the one the rest of the suite uses."""

from __future__ import annotations

import shutil
from pathlib import Path

import pynox
from support.commands import PYNOX, python
from support.paths import TESTS

PACKAGE = Path(pynox.__file__).parent
# What a bundle adds beside the package: json.dump's fast path under --no-sandbox.
SITE_HOOK = TESTS.parent / "sitehook"


def installation(directory: Path, image: bool = True, site_hook: bool = False) -> Path:
    """A virtual environment of this interpreter in directory with a copy of the installed
    pynox (the package and the launcher), without its start-up image unless image, and
    with the site hook a bundle carries if site_hook; returns its launcher."""
    venv = directory / "venv"
    proc = python("-m", "venv", "--without-pip", str(venv))
    assert proc.returncode == 0, proc.stderr
    site = next(venv.glob("lib/python*/site-packages"))
    ignored = () if image else ("*.image",)
    shutil.copytree(PACKAGE, site / "pynox", ignore=shutil.ignore_patterns(*ignored))
    if site_hook:
        # The folder holds just the files a bundle adds (bundler.assemble.SITE_HOOK_FILES).
        for hook in SITE_HOOK.iterdir():
            if hook.is_file():
                shutil.copyfile(hook, site / hook.name)
    shutil.copy2(PYNOX, venv / "bin" / "pynox")
    return venv / "bin" / "pynox"
