"""landlock.c: refused without a recent enough Landlock; with it, reads and writes
exactly as granted, and nothing else (devices, sockets, renames out of a grant)."""

from __future__ import annotations

import errno
import os
import socket
import sys
import termios
from pathlib import Path
from typing import Any

import pytest
from support.sandboxed_child import (
    PY_READ,
    errno_of,
    fake_errno,
    landlock_abi,
    needs_landlock,
    read_file,
    run_sandboxed,
    sandboxed,
    write_file,
)

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only"),
    pytest.mark.usefixtures("confinement"),  # each test confines in one call, then in two
]


def test_old_or_missing_landlock_fails_with_a_reason() -> None:
    if landlock_abi() >= 3:
        pytest.skip("this kernel's Landlock is new enough")
    report = run_sandboxed(lambda _: None)
    assert not report["applied"]
    assert "Landlock" in report["error"] and "--no-sandbox" in report["error"]


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (errno.ENOSYS, "this kernel has no Landlock"),
        (errno.EOPNOTSUPP, "Landlock is disabled in this kernel"),
    ],
)
def test_kernel_without_landlock_fails_with_a_reason(answer: int, words: str) -> None:
    report = run_sandboxed(
        lambda _: None, setup=lambda: fake_errno({"landlock_create_ruleset": answer})
    )
    assert report["rc"] == -1
    assert report["error"].startswith(words)
    assert "Linux 6.2 or newer with Landlock enabled" in report["error"]
    assert report["error"].endswith("--no-sandbox runs without it")


@needs_landlock
def test_granted_reads_work(tree: Path) -> None:
    def body(_: Any) -> Any:
        return [read_file(tree / "ro" / "f.txt"), sorted(os.listdir(tree / "ro"))]

    assert sandboxed(body, read=[tree / "ro"]) == ["ro", ["f.txt"]]


@needs_landlock
def test_granted_single_file_read(tree: Path) -> None:
    def body(_: Any) -> Any:
        return [
            read_file(tree / "ro" / "f.txt"),
            errno_of(os.listdir, tree / "ro"),
            errno_of(write_file, tree / "ro" / "f.txt"),
        ]

    assert sandboxed(body, read=[tree / "ro" / "f.txt"]) == ["ro", errno.EACCES, errno.EACCES]


@needs_landlock
def test_ungranted_read_is_denied(tree: Path) -> None:
    def body(_: Any) -> Any:
        return [errno_of(read_file, tree / "other" / "f.txt"), errno_of(os.listdir, tree / "other")]

    assert sandboxed(body, read=[tree / "ro"]) == [errno.EACCES, errno.EACCES]


@needs_landlock
def test_read_only_dir_cannot_be_written(tree: Path) -> None:
    ro = tree / "ro"

    def body(_: Any) -> Any:
        return {
            "create": errno_of(write_file, ro / "new.txt"),
            "overwrite": errno_of(write_file, ro / "f.txt"),
            "append": errno_of(lambda: open(ro / "f.txt", "a").close()),
            "truncate": errno_of(os.truncate, ro / "f.txt", 0),
            "unlink": errno_of(os.unlink, ro / "f.txt"),
            "mkdir": errno_of(os.mkdir, ro / "d"),
            "symlink": errno_of(os.symlink, "f.txt", ro / "l"),
        }

    result = sandboxed(body, read=[ro])
    assert result == dict.fromkeys(result, errno.EACCES)
    assert (ro / "f.txt").read_text() == "ro"


@needs_landlock
def test_write_only_dir_cannot_be_read(tree: Path) -> None:
    wo = tree / "wo"

    def body(_: Any) -> Any:
        write_file(wo / "new.txt", "written")
        return {
            "read": errno_of(read_file, wo / "f.txt"),
            "list": errno_of(os.listdir, wo),
            "read_own": errno_of(read_file, wo / "new.txt"),
        }

    assert sandboxed(body, write=[wo]) == dict.fromkeys(("read", "list", "read_own"), errno.EACCES)
    assert (wo / "new.txt").read_text() == "written"


@needs_landlock
def test_granted_dir_is_fully_writable(tree: Path) -> None:
    rw = tree / "rw"

    def body(_: Any) -> Any:
        write_file(rw / "a.txt", "a")
        os.rename(rw / "a.txt", rw / "b.txt")
        os.mkdir(rw / "sub")
        os.rename(rw / "b.txt", rw / "sub" / "b.txt")  # REFER within the grant
        os.symlink("b.txt", rw / "sub" / "link")
        os.mkfifo(rw / "fifo")
        os.truncate(rw / "f.txt", 1)
        with open(rw / "f.txt", "r+") as f:
            f.write("z")
        text = read_file(rw / "sub" / "link")
        os.unlink(rw / "fifo")
        os.unlink(rw / "sub" / "link")
        os.unlink(rw / "sub" / "b.txt")
        os.rmdir(rw / "sub")
        return [text, read_file(rw / "f.txt"), sorted(os.listdir(rw))]

    assert sandboxed(body, read=[rw], write=[rw]) == ["a", "z", ["f.txt"]]


@needs_landlock
def test_write_dir_grants_no_devices_or_sockets(tree: Path) -> None:
    rw = tree / "rw"

    def body(_: Any) -> Any:
        return [
            errno_of(os.mknod, rw / "null", 0o600 | 0o020000, os.makedev(1, 3)),
            # AF_UNIX is refused by seccomp before Landlock's MAKE_SOCK matters.
            errno_of(socket.socket, socket.AF_UNIX),
        ]

    assert sandboxed(body, read=[rw], write=[rw]) == [errno.EACCES, errno.EPERM]


@needs_landlock
def test_creating_outside_the_grants_is_denied(tree: Path) -> None:
    outside = tree.parent / f"{tree.name}-outside.txt"

    def body(_: Any) -> Any:
        return [
            errno_of(write_file, tree / "other" / "new.txt"),
            errno_of(os.mkdir, tree / "other" / "d"),
            errno_of(write_file, outside),
        ]

    assert sandboxed(body, write=[tree / "rw"]) == [errno.EACCES] * 3
    assert not outside.exists()


@needs_landlock
def test_rename_into_an_ungranted_dir_is_denied(tree: Path) -> None:
    def body(_: Any) -> Any:
        return [
            errno_of(os.rename, tree / "rw" / "f.txt", tree / "ro" / "moved.txt"),
            errno_of(os.rename, tree / "rw" / "f.txt", tree / "other" / "moved.txt"),
            errno_of(os.link, tree / "rw" / "f.txt", tree / "other" / "linked.txt"),
        ]

    result = sandboxed(body, read=[tree / "ro", tree / "rw"], write=[tree / "rw"])
    assert result == [errno.EACCES] * 3
    assert (tree / "rw" / "f.txt").exists()


@needs_landlock
def test_truncate_needs_a_write_grant(tree: Path) -> None:
    target = tree / "ro" / "f.txt"

    def body(_: Any) -> Any:
        return [
            errno_of(os.truncate, target, 0),
            errno_of(os.open, target, os.O_RDONLY | os.O_TRUNC),
        ]

    assert sandboxed(body, read=[tree / "ro"]) == [errno.EACCES, errno.EACCES]
    assert target.read_text() == "ro"


@needs_landlock
def test_write_grant_on_a_file(tree: Path) -> None:
    target = tree / "wo" / "f.txt"

    def body(_: Any) -> Any:
        with open(target, "a") as f:
            f.write("+")
        return [errno_of(read_file, target), errno_of(os.truncate, target, 1)]

    assert sandboxed(body, write=[target]) == [errno.EACCES, 0]
    assert target.read_text() == "w"


@needs_landlock
def test_dev_null_when_granted_read_and_write() -> None:
    def body(_: Any) -> Any:
        with open("/dev/null", "wb") as f:
            f.write(b"discarded")
        with open("/dev/null", "rb") as f:
            data = f.read()
        with open("/dev/null", "r+b") as f:
            f.write(b"x")
        return data.decode()

    assert sandboxed(body, read=["/dev/null"], write=["/dev/null"]) == ""


@needs_landlock
def test_dev_null_when_not_granted() -> None:
    assert sandboxed(lambda _: errno_of(read_file, "/dev/null")) == errno.EACCES


@needs_landlock
def test_device_ioctls_are_not_granted() -> None:
    if landlock_abi() < 5:
        pytest.skip("LANDLOCK_ACCESS_FS_IOCTL_DEV needs ABI 5")
    master, slave = os.openpty()
    path = os.ttyname(slave)

    def body(_: Any) -> Any:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        return [errno_of(termios.tcgetattr, fd), os.write(fd, b"ok")]

    try:
        assert sandboxed(body, read=[path], write=[path]) == [errno.EACCES, 2]
    finally:
        os.close(master)
        os.close(slave)


@needs_landlock
def test_stdlib_imports_work_when_granted() -> None:
    def body(_: Any) -> Any:
        import importlib

        sys.modules.pop("colorsys", None)
        return importlib.import_module("colorsys").rgb_to_hsv(1.0, 0.0, 0.0)[2]

    assert sandboxed(body, read=PY_READ) == 1.0
