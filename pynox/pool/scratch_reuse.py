"""Giving a scratch directory that a run left as it was made to a later run.

Making a directory can cost far more than checking one: on ext4 without a journal, a
mkdir passes over every inode freed in the last minutes before it takes one, which makes a
pair of directories (a run's and its out/) cost a millisecond or more on a busy machine,
and removing them another quarter. Most requests write nothing there. Such a directory is
handed to a later run, under a new name (the old one is gone, as a removed one is), when:

- the process of its run has exited (its pidfd polls readable). Fork is denied to every
  program, so no other process holds a descriptor of the directory or a Landlock domain
  that grants it. A session's directory serves several processes in turn, so it is never
  reused (ScratchKeeper.never_reuse);
- it holds nothing but out/, and out/ nothing at all;
- both are the very inodes made for it, with the owner, mode, link count, inode flags and
  extended attributes (ACLs are those) they had then. A program cannot change those (the
  seccomp filter refuses chmod, chown, setxattr and the ioctls that set flags); checking
  them costs a few system calls and keeps a directory someone changed out of reuse;
- both have the access and modification times they had then (after the keeper's own
  listing, so that with relatime a later listing leaves them be). The filter refuses
  utime too, but a program that made and removed a file set the modification time to a
  moment of its choosing, a message for the next run. What is left to see is the inode's
  number and its change time, which the rename sets.

Anything else is removed, as every directory was before.
"""

import errno
import fcntl
import itertools
import os
import select
import struct
from typing import NamedTuple

from pynox.engine import scratch, scratch_removal
from pynox.file_names import OUT_DIR

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# _IOR('f', 1, long), as <linux/fs.h> defines it on 64-bit Linux; the kernel fills an int.
_FS_IOC_GETFLAGS = 0x80086601
# What a file system without inode flags or extended attributes answers.
_UNSUPPORTED = {errno.ENOTTY, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EINVAL}


class Inode(NamedTuple):
    device: int
    number: int
    mode: int
    owner: "tuple[int, int]"
    links: int
    # Access and modification, in ns: a directory whose times changed is not reused.
    times: "tuple[int, int]"
    flags: "int | None"  # None where the file system has no inode flags
    xattrs: "tuple[str, ...]"


class Made(NamedTuple):
    """What a scratch directory and its out/ were when they were made."""

    directory: Inode
    out: Inode


def made(path: str) -> "Made | None":
    """What the scratch directory at path (with its empty out/) is now; None if it cannot be
    read, which keeps it from being reused."""
    looked = _look(path)
    return None if looked is None else looked[0]


def exited(pidfd: int, wait_ms: int = 0) -> bool:
    """Whether the process of pidfd has exited (a zombie, or reaped), waiting up to
    wait_ms for it."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(wait_ms))


def reuse(path: str, as_made: Made) -> "tuple[str, Made] | None":
    """The directory under a new name in the same place, and what it is now, if it is as
    it was made (the caller has seen its run's process exit); else None, and it stays
    where it is. Looked at again after the rename, which sets its change time: with
    relatime, the next listing then sets its access time too, this one rather than the
    next run's."""
    looked = _look(path, as_made)
    if looked is None or looked != (as_made, True):
        return None
    base = os.path.dirname(path)
    renamed = scratch.new_name(base)
    if os.path.lexists(renamed):  # rename() would replace an empty directory there
        return None
    try:
        os.rename(path, renamed)
    except OSError:
        return None
    now = made(renamed)
    if now is None:
        scratch_removal.remove(renamed)  # what its old name leads to is gone already
        return None
    return renamed, now


def _look(path: str, expected: "Made | None" = None) -> "tuple[Made, bool] | None":
    """What the scratch directory at path and its out/ are, and whether they hold nothing
    but out/; None if they cannot be read, or if they are not what `expected` says.

    Against `expected`, the inodes are compared before anything is listed: a run that
    made a great many names there changed its times, and listing them all would cost
    the pool (its loop, when a request takes this one) far more than the check."""
    try:
        fd = os.open(path, _DIR)
    except OSError:
        return None
    try:
        out = os.open(OUT_DIR, _DIR, dir_fd=fd)
        try:
            if expected is not None and Made(_inode(fd), _inode(out)) != expected:
                return None
            empty = _holds_only(fd, OUT_DIR) and _holds_only(out, None)
            return Made(_inode(fd), _inode(out)), empty
        finally:
            os.close(out)
    except OSError:
        return None
    finally:
        os.close(fd)


def _holds_only(fd: int, name: "str | None") -> bool:
    """Whether the directory open at fd holds `name` alone (nothing, for None), read no
    further than the first name past it."""
    with os.scandir(fd) as entries:
        found = [entry.name for entry in itertools.islice(entries, 2)]
    return found == ([] if name is None else [name])


def _inode(fd: int) -> Inode:
    status = os.fstat(fd)
    return Inode(
        status.st_dev,
        status.st_ino,
        status.st_mode,
        (status.st_uid, status.st_gid),
        status.st_nlink,
        (status.st_atime_ns, status.st_mtime_ns),
        _flags(fd),
        tuple(sorted(_xattrs(fd))),
    )


def _flags(fd: int) -> "int | None":
    try:
        answer = fcntl.ioctl(fd, _FS_IOC_GETFLAGS, bytes(8))
    except OSError as exc:
        if exc.errno in _UNSUPPORTED:
            return None
        raise
    flags: int = struct.unpack_from("=I", answer)[0]
    return flags


def _xattrs(fd: int) -> "list[str]":
    try:
        return os.listxattr(fd)
    except OSError as exc:
        if exc.errno in _UNSUPPORTED:
            return []
        raise
