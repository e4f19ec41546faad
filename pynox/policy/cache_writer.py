"""Writing an entry of one of pynox's caches (pynox.policy.cache), after a miss.

Apart from the cache's reading, which every run in a project with a pynox.toml does:
only a run that parsed the file (and imported the TOML reader to) writes, or one that
asked the interpreter's OpenSSL where it reads its configuration
(pynox.policy.openssl_dirs).
"""

import marshal
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Entries kept at most; the ones written longest ago go first.
_MAX_ENTRIES = 256


# What writing can raise: it fails quietly, as reading a bad entry does.
_FAILED = (OSError, ValueError)


def write_entry(entry: str, stored: "tuple[Any, ...]", root: str, suffix: str) -> None:
    """Writes `stored` as the cache's `entry` (a name ending in `suffix`, in a directory
    under the cache's `root`: see pynox.policy.cache), then prunes that directory."""
    temporary = f"{entry}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        raw = marshal.dumps(stored)
        _make_private_dirs(root, os.path.dirname(entry))
        descriptor = os.open(
            temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
        )
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(descriptor, view) :]
        finally:
            os.close(descriptor)
        os.replace(temporary, entry)
    except _FAILED:
        _remove(temporary)
        return
    _prune(os.path.dirname(entry), suffix)


def _prune(directory: str, suffix: str) -> None:
    """Drops entries whose file (a pynox.toml, an interpreter) is gone, and the oldest
    beyond _MAX_ENTRIES.

    Runs only after a cache miss wrote an entry, so a cache of projects and
    temporary directories that come and go does not grow without end.
    """
    try:
        names = [name for name in os.listdir(directory) if name.endswith(suffix)]
    except OSError:
        return
    kept: list[tuple[float, str]] = []
    for name in names:
        entry = os.path.join(directory, name)
        # The file's path, as pynox.policy.cache names its entry after it.
        named_after = name[: -len(suffix)].replace("%2F", "/").replace("%25", "%")
        try:
            os.stat(named_after)
            kept.append((os.stat(entry).st_mtime, entry))
        except OSError:
            _remove(entry)
    kept.sort()
    for _, entry in kept[: max(0, len(kept) - _MAX_ENTRIES)]:
        _remove(entry)


def _make_private_dirs(root: str, directory: str) -> None:
    """Create root and each directory down to `directory` as 0700, but never root's parents.

    Creating parents could conjure up a missing HOME (say HOME=/nonexistent under root).
    """
    parts = os.path.relpath(directory, root).split(os.sep)
    for depth in range(len(parts) + 1):
        try:  # noqa: SIM105 - contextlib.suppress would cost an import
            os.mkdir(os.path.join(root, *parts[:depth]), 0o700)
        except FileExistsError:
            pass


def _remove(path: str) -> None:
    try:  # noqa: SIM105 - as above, no contextlib
        os.unlink(path)
    except OSError:
        pass  # already gone, or not ours to remove: either way nothing to undo
