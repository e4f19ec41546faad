"""Write grants of folders under /dev, searched for devices only where one may open."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from support.commands import PYNOX

from pynox.policy import bind_mounts
from pynox.policy.bind_mounts import Mount

# Run as root in a mount namespace of its own: a tmpfs mounted with the options $2 at $1
# (a folder of /dev/shm), a loop device's node made in it ($1/device, or in $1/sub on a
# tmpfs of its own mounted with the options $3, when $3 is given).
IN_A_FOLDER_OF_DEV = """\
set -e
mount -t tmpfs -o "$2" none "$1"
holder="$1"
if [ -n "$3" ]; then mkdir "$1/sub"; mount -t tmpfs -o "$3" none "$1/sub"; holder="$1/sub"; fi
touch "$holder/a" "$holder/b"
ln -s /dev/null "$holder/link"
mknod "$holder/device" b 7 0
shift 3
exec "$@"
"""


def in_a_folder_of_dev(folder: str, options: str, inner: str = "") -> list[str]:
    """The command that runs the rest of its command line in IN_A_FOLDER_OF_DEV."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    script = ["unshare", "--mount", "--propagation", "private", "sh", "-c", IN_A_FOLDER_OF_DEV]
    script += ["sh", folder, options, inner]
    probe = subprocess.run([*script, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs and make a device node here: {probe.stderr.decode()}")
    return script


@pytest.fixture
def dev_folder() -> object:
    folder = tempfile.mkdtemp(dir="/dev/shm")
    yield folder
    shutil.rmtree(folder)


def test_a_nodev_folder_of_dev_is_granted_and_opens_no_device(dev_folder: str) -> None:
    """Where every mount is nodev, the kernel opens no device node, whatever its mode:
    such a folder of /dev (/dev/shm, as systemd and container runtimes mount it) is
    granted without listing what it holds, and the node in it stays shut."""
    script = in_a_folder_of_dev(dev_folder, "nodev")
    code = f"""
try:
    open({dev_folder + "/device"!r}, "wb")
except PermissionError:
    print("refused by the kernel")
"""
    proc = subprocess.run(
        [*script, PYNOX, f"--allow-write={dev_folder}", "-c", code], capture_output=True
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"refused by the kernel\n", b"")


@pytest.mark.parametrize(
    ("options", "inner"),
    [("rw", ""), ("nodev", "rw")],
    ids=["devices-open", "a-mount-inside-opens-devices"],
)
def test_a_folder_of_dev_where_a_device_opens_is_searched(
    dev_folder: str, options: str, inner: str
) -> None:
    """A folder of /dev not mounted nodev, or holding a mount that is not, is searched
    (regular files, links and folders told apart by the listing alone), and the disk's
    node found in it refused."""
    script = in_a_folder_of_dev(dev_folder, options, inner)
    device = f"{dev_folder}/sub/device" if inner else f"{dev_folder}/device"
    proc = subprocess.run(
        [*script, PYNOX, f"--allow-write={dev_folder}", "-c", "pass"], capture_output=True
    )
    assert (proc.returncode, proc.stdout) == (125, b""), proc.stderr
    assert proc.stderr.decode().startswith(
        f"pynox: cannot grant writing {dev_folder}: it holds {device}, a block device"
    ), proc.stderr


def test_devices_open_unless_every_mount_reached_is_nodev() -> None:
    listing = [
        Mount("0:5", "/", "/dev"),
        Mount("0:6", "/", "/dev/shm", devices_open=False),
        Mount("0:7", "/", "/dev/shm/a/b"),
        Mount("0:8", "/", "/dev/shm/c", devices_open=False),
    ]
    assert bind_mounts.opens_devices("/dev", listing)
    assert bind_mounts.opens_devices("/dev/shm", listing)  # /dev/shm/a/b opens them
    assert bind_mounts.opens_devices("/dev/shm/a", listing)
    assert not bind_mounts.opens_devices("/dev/shm/c", listing)
    assert not bind_mounts.opens_devices("/dev/shm/d", listing)
    assert bind_mounts.opens_devices("/dev/shm/d", [])  # no mount known: searched


def test_nodev_is_read_from_the_mounts_own_options() -> None:
    """nodev is an option of the mount, not of its file system: a file system's options
    that say it name no such thing."""
    line = (
        b"30 24 0:27 / /dev/shm rw,nosuid,nodev,relatime - tmpfs tmpfs rw\n"
        b"31 24 0:28 / /dev/mqueue rw,relatime - mqueue mqueue rw,nodev\n"
    )
    shm, mqueue = bind_mounts._parsed(line)
    assert (shm.point, shm.devices_open) == ("/dev/shm", False)
    assert (mqueue.point, mqueue.devices_open) == ("/dev/mqueue", True)


def test_a_device_among_many_files_of_dev_is_found(dev_folder: str) -> None:
    """The listing's type spares the stat of each regular file: a device node among
    them is still looked at, and refused."""
    from pynox.policy import trusted

    for index in range(50):
        Path(dev_folder, f"file{index}").touch()
    os.symlink("/dev/null", f"{dev_folder}/null-link")  # a link, not followed: no device
    assert trusted.device_refusal(dev_folder) is None
    try:
        os.mknod(f"{dev_folder}/disk", stat.S_IFBLK | 0o600, os.makedev(7, 0))
    except OSError as exc:
        pytest.skip(f"no device node can be made here: {exc}")
    refusal = trusted.device_refusal(dev_folder)
    assert refusal is not None and refusal[0] == f"{dev_folder}/disk"
