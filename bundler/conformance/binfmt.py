"""Running aarch64 binaries on an x86_64 machine: qemu-user-static through binfmt_misc."""

from __future__ import annotations

import os
from pathlib import Path

from bundler import commands
from bundler.conformance import tools
from bundler.conformance.errors import Missing
from bundler.host import host_arch

BINFMT = Path("/proc/sys/fs/binfmt_misc")
CONF = Path("/usr/lib/binfmt.d/qemu-aarch64.conf")


def ensure_aarch64() -> str:
    """How aarch64 binaries run here (a sentence for the report), or Missing why they cannot."""
    if host_arch() == "aarch64":
        return "natively"
    entry = BINFMT / "qemu-aarch64"
    if entry.exists() and entry.read_text().startswith("enabled"):
        return f"under qemu-user through binfmt ({_interpreter(entry)})"
    tools.ensure("qemu-aarch64-static", "qemu-user-static")
    if os.geteuid() != 0:
        raise Missing("binfmt_misc has no qemu-aarch64 entry, and registering one needs root")
    if not (BINFMT / "register").exists():
        commands.run(["mount", "-t", "binfmt_misc", "binfmt_misc", BINFMT], check=False)
    if not (BINFMT / "register").exists():
        raise Missing(f"binfmt_misc cannot be mounted on {BINFMT} (a container without it?)")
    if not CONF.exists():
        raise Missing(f"{CONF} is missing (reinstall qemu-user-static)")
    line = CONF.read_text().strip()
    try:
        (BINFMT / "register").write_text(line + "\n")
    except OSError as exc:
        raise Missing(f"cannot register qemu-aarch64 with binfmt_misc: {exc.strerror}") from exc
    return f"under qemu-user through binfmt ({_interpreter(entry)}, registered now)"


def _interpreter(entry: Path) -> str:
    for line in entry.read_text().splitlines():
        if line.startswith("interpreter "):
            return line.split(" ", 1)[1]
    return "qemu"
