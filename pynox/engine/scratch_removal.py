"""Removing a run's scratch directory (pynox.engine.scratch) once the run is over.

Apart from it because a plain run never removes its own: the launcher's helper does
(see scratch.remove_when_gone). A supervisor and the pool import this.
"""

import functools
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def remove(path: "str | None") -> None:
    """Removes a scratch directory and everything the program left in it.

    Through descriptors, never following a link the program planted, so nothing
    outside the directory is touched. Not shutil.rmtree: importing shutil (and the
    compression modules it loads) would cost a supervised run more than the removal.
    """
    if path is None:
        return
    parent, name = os.path.split(path)
    try:
        parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        try:
            fd = _open_directory(parent_fd, name)
        except OSError:
            _unlink(parent_fd, name)  # a file, a link, or gone: unlinked, never followed
            return
        try:
            _empty(fd)
        finally:
            os.close(fd)
        _rmdir(parent_fd, name)
    finally:
        os.close(parent_fd)


_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_directory(parent: int, name: str) -> int:
    """The directory `name` in `parent`, opened to be listed and emptied; OSError if it is
    not one (a link is never followed).

    A program may not chmod, but it may make a directory its owner cannot list
    (os.mkdir(path, 0o300)) and fill it: such a one is given its owner's rights back
    (_give_rights_back), or it and all it holds would stay.
    """
    try:
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
    except PermissionError:
        pass
    _give_rights_back(parent, name)
    return os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)


def _give_rights_back(parent: int, name: str) -> None:
    """Gives the directory `name` in `parent` its owner's rights (0o700), through a
    descriptor of that very directory, never a link; OSError if it cannot."""
    held = os.open(name, _PATH_FLAGS, dir_fd=parent)
    try:
        # An O_PATH descriptor cannot be fchmod-ed; its /proc name leads to its inode.
        os.chmod(f"/proc/self/fd/{held}", 0o700)
    finally:
        os.close(held)


def _move_up(fd: int, name: str, top: int, moved: str) -> bool:
    """Moves the folder `name` of fd into top as `moved`, or removes it there if it is
    empty; whether it was moved.

    A folder that changes parents must be writable by its owner (its ".." changes), and
    a program may make one that is not (os.mkdir(path, 0o500)): such a one is removed
    where it is when empty, else given its owner's rights back first.
    """
    try:
        os.rename(name, moved, src_dir_fd=fd, dst_dir_fd=top)
        return True
    except PermissionError:
        pass
    except OSError:
        return False  # left where it is, and its parent with it
    try:
        os.rmdir(name, dir_fd=fd)
        return False
    except OSError:
        pass
    try:
        _give_rights_back(fd, name)
        os.rename(name, moved, src_dir_fd=fd, dst_dir_fd=top)
    except OSError:
        return False
    return True


def _empty(top: int) -> None:
    """Empties the directory `top`, at any depth, with one more descriptor at a time.

    A program can nest folders deeper than any recursion or any number of open
    descriptors allows. So each folder found below the top level is first moved up
    into `top` (a rename within one file system), where it is emptied the same way,
    then removed: the tree never gets deeper than two levels as it is taken apart.
    """
    emptying = _Emptying(top)
    _remove_listed(top, emptying.found_at_top)
    while emptying.pending:
        folder = emptying.pending.pop()
        try:
            fd = _open_directory(top, folder)
        except OSError:
            _unlink(top, folder)
            continue
        try:
            _remove_listed(fd, functools.partial(emptying.found_below, fd))
        finally:
            os.close(fd)
        _rmdir(top, folder)


class _Emptying:
    """The folders of `top` still to empty, and the names taken there."""

    def __init__(self, top: int) -> None:
        self.top = top
        self.pending: list[str] = []
        self.taken: set[str] = set()
        self.moved = 0

    def found_at_top(self, entry: "os.DirEntry[str]") -> bool:
        """Unlinks what is not a folder; a folder waits its turn. Whether it unlinked."""
        if not entry.is_dir(follow_symlinks=False):
            return _unlink(self.top, entry.name)
        if entry.name not in self.taken:
            self.pending.append(entry.name)
            self.taken.add(entry.name)
        return False

    def found_below(self, fd: int, entry: "os.DirEntry[str]") -> bool:
        """Unlinks what is not a folder, and moves a folder up to top to wait its turn.
        Whether the entry left fd."""
        if not entry.is_dir(follow_symlinks=False):
            return _unlink(fd, entry.name)
        while f"{_MOVED}{self.moved}" in self.taken:
            self.moved += 1
        name = f"{_MOVED}{self.moved}"
        if not _move_up(fd, entry.name, self.top, name):
            return not _exists(fd, entry.name)  # an empty one is removed where it is
        self.taken.add(name)
        self.pending.append(name)
        return True


_MOVED = ".pynox-removing-"  # the names folders get as they are moved up


def _remove_listed(fd: int, remove: "Callable[[os.DirEntry[str]], bool]") -> None:
    """Calls remove on each entry of the directory as it is listed, never holding the
    listing whole: a program may leave a million names (hard links cost no inode).
    Removing entries while listing may make the kernel pass over some, so the directory
    is listed again until a listing removes nothing."""
    while True:
        removed = False
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    removed = remove(entry) or removed
        except OSError:
            return
        if not removed:
            return


def _exists(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _unlink(fd: int, name: str) -> bool:
    """Unlinks name, never following it; whether it was."""
    try:
        os.unlink(name, dir_fd=fd)
    except OSError:
        return False
    return True


def _rmdir(fd: int, name: str) -> None:
    try:
        os.rmdir(name, dir_fd=fd)
    except OSError:
        pass  # not empty: something in it could not be removed
