"""What a run's start-up needs of `os`, without importing `os`.

`import os` costs about 2.7 ms of CPU here, a sixth of a whole sandboxed run of a tiny
script: it creates the abstract classes of `_collections_abc` and imports `stat` and
`posixpath`. `python` pays that in `site`, which pynox's start skips. The system calls
themselves are in `posix`, which every interpreter loads as it starts; this module adds
the few things `os` and `os.path` write in Python on top of them, as they do for
POSIX paths given as str.

The environment: os.environ keeps its entries in posix.environ itself (bytes, encoded
with the file system's encoding), and changes the process's own with putenv and
unsetenv. The functions here do both, so a program that imports `os` later finds the
environment pynox left.

Code that runs after the start (the pool, the API, error paths) imports `os` as usual.
"""

import posix
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from types import ModuleType

    _MappingBase = Mapping[str, str]
else:
    _MappingBase = object  # importing collections.abc would cost every run's start

SEP = "/"
DEVNULL = "/dev/null"
SEEK_CUR = 1  # os defines it in Python; posix does not
_FILE_TYPE = 0o170000  # the S_IFMT bits of st_mode
_REGULAR_FILE = 0o100000
_DIRECTORY = 0o040000
_SYMBOLIC_LINK = 0o120000

_ENCODING = sys.getfilesystemencoding()
_ERRORS = sys.getfilesystemencodeerrors()


def fsencode(name: str) -> bytes:
    return name.encode(_ENCODING, _ERRORS)


def fsdecode(name: bytes) -> str:
    return name.decode(_ENCODING, _ERRORS)


def join(path: str, *parts: str) -> str:
    """os.path.join: an absolute part starts the path again."""
    for part in parts:
        if part.startswith(SEP):
            path = part
        elif not path or path.endswith(SEP):
            path += part
        else:
            path += SEP + part
    return path


def dirname(path: str) -> str:
    """os.path.dirname: everything before the last slash, without trailing slashes
    (unless that is all there is)."""
    head = path[: path.rfind(SEP) + 1]
    if head and head != SEP * len(head):
        head = head.rstrip(SEP)
    return head


def basename(path: str) -> str:
    return path[path.rfind(SEP) + 1 :]


def isabs(path: str) -> bool:
    return path.startswith(SEP)


def normpath(path: str) -> str:
    """os.path.normpath: no "." or empty parts, each ".." takes the part before it away
    (none above the root), and one leading slash, or two (POSIX leaves what two mean to
    the system; three or more are one)."""
    slashes = len(path) - len(path.lstrip(SEP))
    if slashes > 2:
        slashes = 1
    parts: list[str] = []
    for part in path.split(SEP):
        if part in ("", "."):
            continue
        if part != ".." or (not slashes and not parts) or (parts and parts[-1] == ".."):
            parts.append(part)
        elif parts:
            parts.pop()
    return SEP * slashes + SEP.join(parts) or "."


def abspath(path: str) -> str:
    return normpath(path if isabs(path) else join(getcwd(), path))


_REMOVED = " (deleted)"


def getcwd() -> str:
    """The working directory; when it was removed (python runs there all the same), the
    path the kernel keeps for it, where nothing can be found any more."""
    try:
        return posix.getcwd()
    except FileNotFoundError:
        pass
    try:
        where = posix.readlink("/proc/self/cwd")
    except OSError:
        from pynox.errors import PolicyError

        raise PolicyError(
            "the working directory was removed, and /proc does not say where it was; "
            "change to a directory that exists"
        ) from None
    return where[: -len(_REMOVED)] if where.endswith(_REMOVED) else where


def expanduser(path: str) -> str:
    """os.path.expanduser, which a path that starts with "~" takes from os itself (the
    home directory from HOME or the user database)."""
    if not path.startswith("~"):
        return path
    import os

    return os.path.expanduser(path)


def is_regular_file(mode: int) -> bool:
    """stat.S_ISREG."""
    return mode & _FILE_TYPE == _REGULAR_FILE


def is_directory(mode: int) -> bool:
    """stat.S_ISDIR."""
    return mode & _FILE_TYPE == _DIRECTORY


def is_link(mode: int) -> bool:
    """stat.S_ISLNK."""
    return mode & _FILE_TYPE == _SYMBOLIC_LINK


def _mode(path: str) -> int:
    try:
        return posix.stat(path).st_mode
    except (OSError, ValueError):  # ValueError: a NUL in the path, where os.path says False
        return 0


def isfile(path: str) -> bool:
    return is_regular_file(_mode(path))


def isdir(path: str) -> bool:
    return is_directory(_mode(path))


def realpath(path: str) -> str:
    """os.path.realpath: the C library's realpath(3) through pynox._native where it is
    loaded and the path resolves, or where only plain names at its end do not exist (a
    file to be written: a pynox.toml, say, or a system file in a directory this machine
    lacks); os.path.realpath itself for the rest (a loop of links, no permission, a
    ".." after a missing name), which it resolves as far as it can."""
    native = sys.modules.get("pynox._native")
    if native is not None:
        resolved: str | None = native.real_path(path)
        if resolved is not None:
            return resolved
        missing: list[str] = []
        directory = path
        while True:
            directory, _, name = directory.rpartition(SEP)
            if not directory or name in ("", ".", "..") or _lexists(join(directory, name)):
                break
            missing.insert(0, name)
            resolved = native.real_path(directory)
            if resolved is not None:
                # What os.path.realpath makes of names not there: kept as they are.
                return join(resolved, *missing)
    import os

    return os.path.realpath(path)


def _lexists(path: str) -> bool:
    """Whether anything has that name, a link that leads nowhere included."""
    try:
        posix.lstat(path)
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True  # not known to be missing: os.path.realpath decides
    return True


def stdlib_dir() -> str:
    """Where the standard library is: os.py's directory. encodings is loaded with every
    interpreter, from that directory (3.10 has no sys._stdlib_dir)."""
    known: str | None = getattr(sys, "_stdlib_dir", None)
    if known:
        return known
    return dirname(dirname(sys.modules["encodings"].__file__ or ""))


def getenv(name: str) -> str | None:
    value = posix.environ.get(fsencode(name))
    return None if value is None else fsdecode(value)


def setenv(name: str, value: str) -> None:
    """os.environ[name] = value."""
    posix.putenv(name, value)
    posix.environ[fsencode(name)] = fsencode(value)


def popenv(name: str) -> str | None:
    """os.environ.pop(name, None)."""
    value = posix.environ.pop(fsencode(name), None)
    if value is None:
        return None
    posix.unsetenv(name)
    return fsdecode(value)


class Environment(_MappingBase):
    """The environment as it is at each read, decoded as os.environ decodes it.

    Only the variables read are decoded. Decoding all of them would copy every value,
    secrets included, into memory that no wipe reaches: the program could then find
    them in its own process, long after the environment was emptied
    (sandbox.scrub_environment overwrites only posix.environ's bytes).
    """

    __slots__ = ()

    def __getitem__(self, name: str) -> str:
        return fsdecode(posix.environ[fsencode(name)])

    def get(self, name: str, default: "str | None" = None) -> "str | None":  # type: ignore[override]
        value = posix.environ.get(fsencode(name))
        return default if value is None else fsdecode(value)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and fsencode(name) in posix.environ

    def __iter__(self) -> "Iterator[str]":
        return iter([fsdecode(name) for name in posix.environ])

    def __len__(self) -> int:
        return len(posix.environ)


def environment() -> Environment:
    """The environment, read as it is when looked up (see Environment)."""
    return Environment()


def import_deferring_os(name: str) -> "ModuleType":
    """Imports the module `name`, whose own `import os` binds a stand-in that imports
    `os` at its first use, when `os` is not imported yet.

    Only for a module whose other imports are already loaded: the stand-in is in
    sys.modules while it is imported, and any other module imported then would bind it
    too. It leaves sys.modules before this returns, so the program imports `os` itself.
    """
    if "os" in sys.modules:
        __import__(name)
        return sys.modules[name]

    # Made here, not as the module is imported: a class costs every run's start-up
    # about 20 us, and only `python -m` needs this one. A module: `types` costs an import.
    class OsOnFirstUse(type(sys)):  # type: ignore[misc]
        """The first attribute read imports `os`, and `os` answers every read."""

        def __getattr__(self, attribute: str) -> object:
            if sys.modules.get("os") is self:  # read while the import still runs
                del sys.modules["os"]
            import os

            return getattr(os, attribute)

    stand_in = OsOnFirstUse("os")
    sys.modules["os"] = stand_in
    try:
        __import__(name)
    finally:
        if sys.modules.get("os") is stand_in:
            del sys.modules["os"]
    return sys.modules[name]
