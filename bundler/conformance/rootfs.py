"""Root file systems made with debootstrap, cached under the user's cache folder.

A root is built into a `.partial` folder beside its final place and renamed when
debootstrap has finished and the marker is written, so an interrupted build is
never taken for a complete one; the next run removes what it left.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from bundler import commands, log
from bundler.commands import CommandFailed
from bundler.conformance import binfmt, tools
from bundler.conformance.errors import Missing
from bundler.paths import cache_dir

MARKER = ".pynox-rootfs"
MIRROR = os.environ.get("PYNOX_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def rootfs_cache() -> Path:
    return cache_dir() / "rootfs"


def debian(suite: str, arch: str, include: tuple[str, ...] = ()) -> tuple[Path, str]:
    """The cached root (made now if missing) and how it was had, for the report."""
    name = f"debian-{suite}-{arch}"
    final = rootfs_cache() / name
    packages = f" --include={','.join(include)}" if include else ""
    spec = f"debootstrap --variant=minbase --arch={arch}{packages} {suite}"
    if (final / MARKER).is_file() and (final / MARKER).read_text().strip() == spec:
        return final, f"{spec}, cached in {final}"
    debootstrap = tools.ensure("debootstrap", "debootstrap")
    if os.geteuid() != 0:
        raise Missing(f"no cached {final}, and debootstrap needs root to make it")
    if arch == "arm64":
        binfmt.ensure_aarch64()  # debootstrap's second stage runs the root's programs
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(final.parent, name)
    partial = final.parent / f"{name}.partial.{os.getpid()}"
    command = [debootstrap, "--variant=minbase", f"--arch={arch}"]
    command += [f"--include={','.join(include)}"] if include else []
    started = time.monotonic()
    log.step(f"making {final} ({spec} {MIRROR}); cached for later runs")
    try:
        commands.run([*command, suite, partial, MIRROR], timeout=3600)
    except CommandFailed as failed:
        _remove(partial)
        raise Missing(f"debootstrap {suite} {arch} failed: {failed.last_line}") from None
    _finish(partial)
    (partial / MARKER).write_text(spec + "\n")
    if final.exists():
        _remove(final)
    partial.rename(final)
    return final, f"{spec}, made in {time.monotonic() - started:.0f}s into {final}"


def _finish(root: Path) -> None:
    """What the suite expects of a machine that debootstrap leaves out; drops the .debs."""
    hostname = root / "etc" / "hostname"
    if not hostname.exists():
        hostname.write_text("pynox-conformance\n")
    for deb in (root / "var" / "cache" / "apt" / "archives").glob("*.deb"):
        deb.unlink()


def _remove_stale(parent: Path, name: str) -> None:
    for partial in parent.glob(f"{name}.partial.*"):
        pid = partial.name.rsplit(".", 1)[-1]
        if pid.isdigit() and Path(f"/proc/{pid}").exists():
            continue  # another run is building it
        _remove(partial)


def _remove(root: Path) -> None:
    """Removes a root, unmounting first what debootstrap may have left mounted in it."""
    prefix = str(root.resolve()) + "/"
    with open("/proc/self/mountinfo") as mounts:
        points = [line.split()[4] for line in mounts]
    for point in sorted((p for p in points if p.startswith(prefix)), reverse=True):
        commands.run(["umount", "-l", point], check=False)
    shutil.rmtree(root, ignore_errors=True)
