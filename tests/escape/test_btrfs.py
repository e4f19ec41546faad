"""btrfs: a directory granted for reading is not a place to make, snapshot, freeze or
delete subvolumes.

btrfs answers these ioctls on a directory opened for reading, checking only the mode
bits a user's own files have; Landlock does not govern them. The probes run on a btrfs
image of their own, mounted with user_subvol_rm_allowed (which lets users delete the
subvolumes they could rmdir), in every probe mode. Mounting needs root, btrfs in the
kernel and mkfs.btrfs (btrfs-progs, which `make conformance-deps` installs).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.probes import PRELUDE, PROBE_MODES, World, make_world, outcomes, run_grants_probe

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

IMAGE_SIZE = 256 << 20  # sparse; mkfs.btrfs wants more than 109 MiB

BTRFS_PROBE = """
import fcntl, struct
def _iow(number, size):  # _IOW(BTRFS_IOCTL_MAGIC, number, size)
    return (1 << 30) | (size << 16) | (0x94 << 8) | number
SNAP_CREATE, SUBVOL_CREATE, SNAP_DESTROY = _iow(1, 4096), _iow(14, 4096), _iow(15, 4096)
SUBVOL_SETFLAGS, SUBVOL_RDONLY = _iow(26, 8), 2
def vol_args(name, fd=0):
    args = bytearray(4096)  # struct btrfs_ioctl_vol_args: a descriptor, then a name
    struct.pack_into("q", args, 0, fd)
    args[8:8 + len(name)] = name.encode()
    return args
def on_directory(path, request, argument):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return fcntl.ioctl(fd, request, argument, True)
    finally:
        os.close(fd)
def snapshot(source, into, name):
    fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return on_directory(into, SNAP_CREATE, vol_args(name, fd))
    finally:
        os.close(fd)
volume = os.path.join(W["ro"], "volume")
attempt("subvolume-in-ro", on_directory, W["ro"], SUBVOL_CREATE, vol_args("made"))
attempt("subvolume-in-script-dir", on_directory, W["app"], SUBVOL_CREATE, vol_args("made"))
attempt("snapshot-into-ro", snapshot, volume, W["ro"], "copy")
attempt("read-only-flag-on-ro-subvolume", on_directory, volume, SUBVOL_SETFLAGS,
        bytearray(struct.pack("Q", SUBVOL_RDONLY)))
attempt("delete-ro-subvolume", on_directory, W["ro"], SNAP_DESTROY, vol_args("volume"))
print("done: ok")
"""

UNSUPPORTED = "OSError ENOTTY"
BTRFS_EXPECTED = {
    "subvolume-in-ro": UNSUPPORTED,
    "subvolume-in-script-dir": UNSUPPORTED,
    "snapshot-into-ro": UNSUPPORTED,
    "read-only-flag-on-ro-subvolume": UNSUPPORTED,
    "delete-ro-subvolume": UNSUPPORTED,
    "done": "ok",
}


def _skip_unless_mountable() -> str:
    """mkfs.btrfs's path, or a skip that says what is missing."""
    if os.geteuid() != 0:
        pytest.skip("mounting a btrfs image needs root")
    if "btrfs" not in Path("/proc/filesystems").read_text():
        pytest.skip("this kernel has no btrfs")
    mkfs = shutil.which("mkfs.btrfs")
    if mkfs is None or shutil.which("btrfs") is None:
        pytest.skip("btrfs-progs is not installed (make conformance-deps installs it)")
    return mkfs


@pytest.fixture(scope="module")
def btrfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A btrfs file system of its own, mounted with user_subvol_rm_allowed."""
    mkfs = _skip_unless_mountable()
    root = tmp_path_factory.mktemp("btrfs")
    image, mountpoint = root / "image", root / "mnt"
    with open(image, "wb") as sparse:
        sparse.truncate(IMAGE_SIZE)
    subprocess.run([mkfs, "-q", str(image)], check=True, capture_output=True)
    mountpoint.mkdir()
    mounted = subprocess.run(
        ["mount", "-o", "loop,user_subvol_rm_allowed", str(image), str(mountpoint)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a btrfs image here: {mounted.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        # Lazily: a pool's processes may still be leaving the directory they ran in.
        subprocess.run(["umount", "--lazy", str(mountpoint)], check=True)
        image.unlink()


@dataclass
class BtrfsRun:
    world: World
    proc: subprocess.CompletedProcess[bytes]
    listing: dict[str, list[str]]


def _listing(w: World) -> dict[str, list[str]]:
    volume = w.ro / "volume"
    return {str(d): sorted(os.listdir(d)) for d in (w.ro, w.app, volume)}


def _read_only(volume: Path) -> str:
    shown = subprocess.run(
        ["btrfs", "property", "get", str(volume), "ro"], check=True, capture_output=True
    )
    return shown.stdout.decode().strip()


@pytest.fixture(scope="module", params=PROBE_MODES)
def btrfs_run(request: pytest.FixtureRequest, btrfs: Path) -> BtrfsRun:
    w = make_world(btrfs / request.param)
    subprocess.run(
        ["btrfs", "subvolume", "create", str(w.ro / "volume")], check=True, capture_output=True
    )
    (w.ro / "volume" / "kept.txt").write_text("the user's data\n")
    w.app.joinpath("probe.py").write_text(PRELUDE + BTRFS_PROBE)
    listing = _listing(w)
    return BtrfsRun(w, run_grants_probe(request.param, w, w.app / "probe.py"), listing)


def test_btrfs_subvolume_ioctls_are_refused(btrfs_run: BtrfsRun) -> None:
    assert btrfs_run.proc.returncode == 0, btrfs_run.proc.stderr.decode(errors="replace")
    assert outcomes(btrfs_run.proc) == BTRFS_EXPECTED


def test_btrfs_nothing_changed(btrfs_run: BtrfsRun) -> None:
    w = btrfs_run.world
    assert _listing(w) == btrfs_run.listing
    assert (w.ro / "volume" / "kept.txt").read_text() == "the user's data\n"
    assert _read_only(w.ro / "volume") == "ro=false"
