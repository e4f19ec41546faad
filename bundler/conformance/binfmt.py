"""Running aarch64 binaries on an x86_64 machine: qemu-user-static through binfmt_misc.

What this process registers (and mounts) it undoes in release(), which the runner calls
when it ends: a run leaves binfmt_misc as it found it.
"""

from __future__ import annotations

import os
from pathlib import Path

from bundler import commands
from bundler.conformance import tools
from bundler.conformance.errors import Missing
from bundler.host import host_arch

BINFMT = Path("/proc/sys/fs/binfmt_misc")
CONF = Path("/usr/lib/binfmt.d/qemu-aarch64.conf")
_registered: list[Path] = []  # entries this process registered
_mounted: list[Path] = []  # binfmt_misc mounts this process made


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
        if (BINFMT / "register").exists():
            _mounted.append(BINFMT)
    if not (BINFMT / "register").exists():
        raise Missing(f"binfmt_misc cannot be mounted on {BINFMT} (a container without it?)")
    if not CONF.exists():
        raise Missing(f"{CONF} is missing (reinstall qemu-user-static)")
    line = CONF.read_text().strip()
    try:
        (BINFMT / "register").write_text(line + "\n")
    except OSError as exc:
        raise Missing(f"cannot register qemu-aarch64 with binfmt_misc: {exc.strerror}") from exc
    _registered.append(entry)
    return f"under qemu-user through binfmt ({_interpreter(entry)}, registered for this run)"


def release() -> list[str]:
    """Unregisters the entries this process registered and unmounts what it mounted;
    what was undone, one sentence each."""
    undone = []
    while _registered:
        entry = _registered.pop()
        try:
            entry.write_text("-1\n")  # binfmt_misc's "remove this entry"
            undone.append(f"unregistered {entry.name}")
        except OSError as exc:
            undone.append(f"could not unregister {entry.name}: {exc.strerror}")
    while _mounted:
        point = _mounted.pop()
        commands.run(["umount", point], check=False)
        undone.append(f"unmounted {point}")
    return undone


def _interpreter(entry: Path) -> str:
    for line in entry.read_text().splitlines():
        if line.startswith("interpreter "):
            return line.split(" ", 1)[1]
    return "qemu"
