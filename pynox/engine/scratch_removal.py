"""Removing a run's scratch directory (pynox.engine.scratch) once the run is over.

Apart from it because a plain run never removes its own: the launcher's helper does
(see scratch.remove_when_gone). A supervisor and the pool import this.
"""

import os


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
        _remove_entry(parent_fd, name, 0)
    finally:
        os.close(parent_fd)


_MAX_DEPTH = 2000  # past that, what is left is left: the recursion must end


def _remove_entry(parent_fd: int, name: str, depth: int) -> None:
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd
        )
    except OSError:
        # A file, a link, or gone: unlinked, never followed.
        try:
            os.unlink(name, dir_fd=parent_fd)
        except OSError:
            pass
        return
    try:
        if depth < _MAX_DEPTH:
            with os.scandir(fd) as entries:
                names = [entry.name for entry in entries]
            for entry in names:
                _remove_entry(fd, entry, depth + 1)
    except OSError:
        pass
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=parent_fd)
    except OSError:
        pass
