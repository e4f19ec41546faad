"""Files in and out of a pool run's scratch directory, through directory descriptors only.

The program owns the scratch directory and may have left anything there (a session's
earlier steps, or a run writing while the pool reads): links, FIFOs, huge sparse files,
names that are not UTF-8, thousands of entries. So nothing here follows a symbolic link
(every open is O_NOFOLLOW, relative to a directory descriptor), a file is written only as a
new inode (whatever held its name is unlinked first, and O_EXCL refuses a link planted in
between), only regular files of one link are read back, without blocking, and every walk,
count and read is bounded (pynox/limits.py). Nothing is read back that the program could
not have read itself: a pool run as root passes over file modes, the program does not.
"""

import base64
import errno
import functools
import os
import stat
from collections.abc import Callable

from pynox.file_names import OUT_DIR
from pynox.limits import (
    MAX_FILE_DEPTH,
    MAX_FILES_OUT,
    MAX_FILES_OUT_BYTES,
    MAX_OUT_ENTRIES,
)
from pynox.pool.request import RequestError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
# What placing a file meets when the file system has no room for it (or the pool's own
# limit on file size, RLIMIT_FSIZE, is smaller): no name would do better.
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
# How many files left out a result names one by one; the rest are counted.
_LEFT_OUT_NAMED = 20
# CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, as bits of /proc/self/status's CapEff.
_PASS_OVER_MODES = (1 << 1) | (1 << 2)
# The extended attribute that holds a file's access ACL.
_ACCESS_ACL = "system.posix_acl_access"
_UNREADABLE = "could not be read (Permission denied)"


def make_out_dir(scratch: str) -> None:
    """The empty out/ a run writes the files it returns into."""
    os.mkdir(os.path.join(scratch, OUT_DIR), 0o700)


def place(scratch: str, files: "dict[str, bytes]", request_id: object) -> None:
    """Writes a request's files (names already checked) into the scratch directory: all of
    them, or, when one cannot be placed, none. A session's earlier steps left files there
    that a refused step must not have replaced.

    Each is first written beside its place under a name of its own, then, once all are
    written, renamed into it: a rename replaces whatever held the name (a link is never
    written through) and fails only where a folder has it, which is checked before.
    """
    try:
        root = os.open(scratch, _DIR)
    except OSError as exc:
        raise RequestError(
            f"cannot place files in the scratch directory: {exc.strerror or exc}", request_id
        ) from None
    made: list[str] = []  # folders made for the files, to remove again if they cannot be
    aside: dict[str, str] = {}  # each name's temporary name, until renamed
    name = ""
    try:
        for name, data in files.items():
            aside[name] = _write_aside(root, name, data, files, made)
        for name in files:
            _refuse_a_folder(root, name)
        for name in files:
            folder, base = _folder_of(root, name)
            try:
                os.rename(aside[name], base, src_dir_fd=folder, dst_dir_fd=folder)
            finally:
                os.close(folder)
            del aside[name]
        made.clear()  # they hold the files now
    except OSError as exc:
        if exc.errno in _NO_ROOM:
            what = "hand in fewer or smaller files, or free space in the pool's TMPDIR"
        else:
            what = "give names that are neither a directory nor under a file or link"
        raise RequestError(
            f"cannot place file {name!r} in the scratch directory: {exc.strerror or exc}; {what}",
            request_id,
        ) from None
    finally:
        for name, temporary in aside.items():
            _remove_in(root, name, temporary, os.unlink)
        for path in reversed(made):
            _remove_in(root, path, None, os.rmdir)
        os.close(root)


# What a file is called while it waits to be renamed into its place: nothing a program
# would have named its own.
_ASIDE = ".pynox-placing-"


def _write_aside(
    root: int, name: str, data: bytes, files: "dict[str, bytes]", made: "list[str]"
) -> str:
    """Writes data as a new file in the folder of name (made if need be, each one made
    listed in made), under a temporary name, which it returns."""
    *directories, _ = name.split("/")
    fd = os.dup(root)
    try:
        for depth, directory in enumerate(directories, 1):
            path = "/".join(directories[:depth])
            if path in files:  # another file of this request: its folder cannot be a file
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
            try:
                os.mkdir(directory, 0o700, dir_fd=fd)
                made.append(path)
            except FileExistsError:
                pass  # opened below: a link or a file there is refused, never followed
            inner = os.open(directory, _DIR, dir_fd=fd)
            os.close(fd)
            fd = inner
        temporary = _ASIDE + os.urandom(6).hex()
        out = os.open(temporary, _NEW_FILE, 0o600, dir_fd=fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
        except OSError:
            os.unlink(temporary, dir_fd=fd)
            raise
        finally:
            os.close(out)
        return temporary
    finally:
        os.close(fd)


def _folder_of(root: int, name: str) -> "tuple[int, str]":
    """A descriptor of the folder name is in, opened without following a link, and the
    last part of name."""
    *directories, base = name.split("/")
    fd = os.dup(root)
    try:
        for directory in directories:
            inner = os.open(directory, _DIR, dir_fd=fd)
            os.close(fd)
            fd = inner
    except OSError:
        os.close(fd)
        raise
    return fd, base


def _refuse_a_folder(root: int, name: str) -> None:
    """OSError if a folder has name: a file cannot be renamed over it."""
    folder, base = _folder_of(root, name)
    try:
        status = os.lstat(base, dir_fd=folder)
    except FileNotFoundError:
        return
    finally:
        os.close(folder)
    if stat.S_ISDIR(status.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))


def _remove_in(root: int, name: str, replaced: "str | None", remove: "Callable[..., None]") -> None:
    """Removes name, or the entry `replaced` of name's folder instead, if it can."""
    try:
        folder, base = _folder_of(root, name)
    except OSError:
        return
    try:
        remove(base if replaced is None else replaced, dir_fd=folder)
    except OSError:
        pass  # not empty (a program put something there meanwhile), or gone
    finally:
        os.close(folder)


# The last line of files_left_out when the result's bounds left files out: what gets them
# all back (a session's out/ is emptied after each step, so they are gone otherwise).
PAST_BOUNDS_ADVICE = (
    "to get every file back, write fewer or smaller files to out/, or pack them into one "
    "compressed archive (zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED))"
)


class Collected:
    """What a run left in out/: files as base64 by path (relative to out/), and what was
    left out, one "path: reason" each."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.left_out: list[str] = []
        self.more_left_out = 0
        self.total = 0
        self.examined = 0
        self.past_bounds = False  # files left out for the result's count or bytes

    def leave_out(self, path: str, reason: str) -> None:
        if len(self.left_out) < _LEFT_OUT_NAMED:
            self.left_out.append(f"{path}: {reason}")
        else:
            self.more_left_out += 1

    def leave_out_past_bounds(self, path: str, reason: str) -> None:
        self.past_bounds = True
        self.leave_out(path, reason)

    def fields(self) -> "dict[str, object]":
        """The result's fields: none when out/ held nothing."""
        if not self.files and not self.left_out:
            return {}
        left_out = list(self.left_out)
        if self.more_left_out:
            left_out.append(f"and {self.more_left_out} more entries")
        if self.past_bounds:
            left_out.append(PAST_BOUNDS_ADVICE)
        return {"files": dict(sorted(self.files.items())), "files_left_out": left_out}


def collect(scratch: str, out_dir: str = OUT_DIR) -> Collected:
    """The regular files under scratch/out/ (or the folder out_dir in scratch, where
    collect_moved put a run's out/), within the bounds of a result.

    Only for a run whose process has ended: the walk holds each folder open as it reads
    it, and a program still running could move that folder to a write grant meanwhile
    (out of a scratch directory, Landlock lets any folder go), then move into it a file
    of the grant it may write but not read, which the walk would read there.
    """
    found = Collected()
    try:
        root = os.open(scratch, _DIR)
    except OSError:
        return found
    try:
        out = os.open(out_dir, _DIR, dir_fd=root)
    except FileNotFoundError:
        return found
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            found.leave_out(OUT_DIR, "not a directory (a link is never followed)")
        else:  # one the program made that its owner may not list (mkdir with 0o300)
            found.leave_out(OUT_DIR, f"could not be read ({exc.strerror})")
        return found
    finally:
        os.close(root)
    try:
        _walk(out, "", 0, found)
    finally:
        os.close(out)
    return found


def _program_may_read(fd: int, info: os.stat_result) -> bool:
    """Whether the program could have read the file open at fd (info: its fstat).

    The program runs as the pool's user without capabilities. A pool run as root passes
    over file modes, and the program could have moved into out/ a file of another user
    that its write grant holds but it may not read (os.rename asks nothing of the file):
    read back by the pool, it would reach the result. So the kernel's check for a
    process without capabilities is made here: the owner's bits, a group's or the
    others'. A file of another user with an access ACL is taken as unreadable: the ACL
    may refuse this user what the bits allow. (No folder of another user reaches out/:
    Landlock refuses moving a folder of a grant into a scratch directory.)
    """
    if not _passes_over_modes():
        return True  # the kernel has just checked the pool as it would the program
    if info.st_uid == os.geteuid():
        return bool(info.st_mode & stat.S_IRUSR)
    if _has_access_acl(fd):
        return False
    if info.st_gid == os.getegid() or info.st_gid in os.getgroups():
        return bool(info.st_mode & stat.S_IRGRP)
    return bool(info.st_mode & stat.S_IROTH)


@functools.cache
def _passes_over_modes() -> bool:
    """Whether the pool may read and list whatever the file modes say (as root does)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
        return bool(int(fields["CapEff"], 16) & _PASS_OVER_MODES)
    except (OSError, KeyError, ValueError):
        return os.geteuid() == 0


def _has_access_acl(fd: int) -> bool:
    try:
        os.getxattr(fd, _ACCESS_ACL)
    except OSError as exc:
        return exc.errno not in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP)
    return True


def _walk(fd: int, prefix: str, depth: int, found: Collected) -> None:
    names = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                if found.examined >= MAX_OUT_ENTRIES:
                    found.leave_out(prefix or ".", f"more than {MAX_OUT_ENTRIES} entries; not read")
                    break
                found.examined += 1
                names.append((entry.name, entry.is_dir(follow_symlinks=False)))
    except OSError as exc:  # the program changes it as the pool reads it
        found.leave_out(prefix or ".", f"could not be listed ({exc.strerror})")
    for name, is_dir in sorted(names):
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            # As python shows such bytes (b"\xff"): U+FFFD would make two names alike.
            shown = os.fsencode(prefix + name).decode("utf-8", errors="backslashreplace")
            found.leave_out(shown, "its name is not UTF-8")
            continue
        path = prefix + name
        if is_dir:
            if depth + 1 >= MAX_FILE_DEPTH:
                found.leave_out(path, f"nested deeper than {MAX_FILE_DEPTH} directories")
                continue
            try:
                inner = os.open(name, _DIR, dir_fd=fd)
            except OSError:
                found.leave_out(path, "not a directory that can be read")
                continue
            try:
                _walk(inner, path + "/", depth + 1, found)
            finally:
                os.close(inner)
        else:
            _read_file(fd, name, path, found)


def _read_file(fd: int, name: str, path: str, found: Collected) -> None:
    try:
        file = os.open(name, _READ, dir_fd=fd)
    except PermissionError:
        found.leave_out(path, _UNREADABLE)  # one the program made with mode 0o200, say
        return
    except OSError:
        found.leave_out(path, "not a regular file (a link, say)")
        return
    try:
        info = os.fstat(file)
        if not stat.S_ISREG(info.st_mode):
            found.leave_out(path, "not a regular file")
            return
        if not _program_may_read(file, info):
            found.leave_out(path, _UNREADABLE)
            return
        if info.st_nlink != 1:
            found.leave_out(path, "linked from elsewhere too (a hard link)")
            return
        # Counted only now: a link or a FIFO past the count is left out for what it is,
        # which fewer files would not change.
        if len(found.files) >= MAX_FILES_OUT:
            found.leave_out_past_bounds(path, f"past the {MAX_FILES_OUT} files a result carries")
            return
        room = MAX_FILES_OUT_BYTES - found.total
        if info.st_size > room:
            found.leave_out_past_bounds(
                path, f"{info.st_size} bytes, past the {MAX_FILES_OUT_BYTES} a result carries"
            )
            return
        data = _read_at_most(file, room + 1)
        if len(data) > room:  # it grew while read
            found.leave_out_past_bounds(
                path, f"past the {MAX_FILES_OUT_BYTES} bytes a result carries"
            )
            return
    except OSError as exc:
        found.leave_out(path, f"could not be read ({exc.strerror})")
        return
    finally:
        os.close(file)
    found.total += len(data)
    found.files[path] = base64.b64encode(data).decode("ascii")


def _read_at_most(fd: int, size: int) -> bytes:
    parts = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            break
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def holds_nothing(scratch: str) -> bool:
    """Whether the run's out/ is an empty folder, or not there: nothing to collect."""
    try:
        root = os.open(scratch, _DIR)
    except OSError:
        return True  # gone: nothing of it can be read
    try:
        out = os.open(OUT_DIR, _DIR, dir_fd=root)
    except FileNotFoundError:
        return True
    except OSError:
        return False  # a link, or unreadable: collect says so
    finally:
        os.close(root)
    try:
        with os.scandir(out) as entries:
            return next(entries, None) is None
    except OSError:
        return False
    finally:
        os.close(out)


def collect_moved(scratch: str, trash: str) -> Collected:
    """The files of out/ of a run whose program may still run (a session's, whose threads
    run between steps), collected once out/ is moved to `trash`, in the pool's own
    directory, where its sandbox reaches nothing: there the program can no longer move
    what the walk reads (see collect). A new empty out/ takes its place, so that the
    next step returns only what it writes."""
    moved, problem = move_out_dir(scratch, trash)
    found = collect(*os.path.split(trash)) if moved else Collected()
    if problem is None:
        return found
    if moved:  # collected, but the program finds no out/ unless it makes one
        found.leave_out(OUT_DIR, f"could not be made again after this step ({problem})")
    else:
        found.leave_out(
            OUT_DIR,
            f"could not be moved out of the program's reach to be read ({problem}); the "
            "next step may return these files",
        )
    return found


def move_out_dir(scratch: str, trash: str) -> "tuple[bool, str | None]":
    """Moves out/ (whatever it is) to `trash` and makes a new empty one: a session's next
    step returns only what it writes. Returns whether there was an out/ to move, and why
    out/ could not be moved or made again, if it could not.

    The session's program may still run (a thread) and act on out/ meanwhile: an out/ it
    makes again between the move and the mkdir is taken as it is (collect never follows
    a link), and what it holds that the pool cannot move fails this step's handling of
    out/ alone, never the pool.
    """
    try:
        root = os.open(scratch, _DIR)
    except OSError as exc:
        return False, exc.strerror or str(exc)
    try:
        try:
            os.rename(OUT_DIR, trash, src_dir_fd=root)
        except FileNotFoundError:
            moved = False
        except OSError as exc:
            return False, exc.strerror or str(exc)
        else:
            moved = True
        try:
            os.mkdir(OUT_DIR, 0o700, dir_fd=root)
        except FileExistsError:
            pass  # the program made one again in between
        except OSError as exc:
            return moved, exc.strerror or str(exc)
    finally:
        os.close(root)
    return moved, None
