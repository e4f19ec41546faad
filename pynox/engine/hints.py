"""Hints written for models: after a denial, the one grant that would allow it.

The child classifies what was denied (a kind and the path it concerns); the
text is made from that classification only, by pynox.engine.hint_text, in the
child for the line it prints and in the supervisor for the result, so a program
cannot put words of its own into a result's hint.
"""

import contextlib
import errno
import os
import sys

from pynox.engine.access_log import (
    ACCESS_LOG,
    FCNTL_EVENTS,
    HOST_CA_VARIABLES,
    HOST_HAS_TERMINAL,
    HOST_NO_PROXY,
    HOST_PROXY_VARIABLES,
    LISTING_EVENTS,
    PROCESS_MODULES,
    XATTR_READ_EVENTS,
)
from pynox.engine.exception_parts import (
    args_of,
    called_names,
    chain,
    context_of,
    errno_of,
    innermost,
    innermost_module,
    local_in,
    members,
    passes_through,
)
from pynox.engine.hint_style import OUTPUT_FOLDER
from pynox.engine.hint_text import GRANTED_SUFFIX, running_python_version
from pynox.engine.library_errors import (
    denied_in_message,
    duckdb_database,
    lost_memory_error,
    no_system_certificates,
    polars_temporary_folder,
    readable,
    size_in_message,
)
from pynox.engine.limit_hints import (
    limit_beyond_machine,
    open_files_allowed,
    physical_memory,
    processes_limit_reached,
    thread_stack_size,
)
from pynox.engine.native_end import inherited_limit_below
from pynox.policy.grants import is_loader_variable, is_variable_name
from pynox.policy.path_grant import real_path
from pynox.unit_format import format_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from pynox.policy.resolve import Policy

_METADATA_EVENTS = frozenset(
    {
        "os.chmod",
        "os.chown",
        "os.utime",
        "os.setxattr",
        "os.removexattr",
        "shutil.copymode",
        "shutil.copystat",
    }
)
# Operations that change a directory's entries: Landlock checks the directory.
_ENTRY_EVENTS = frozenset(
    {"os.mkdir", "os.remove", "os.rmdir", "os.rename", "os.link", "os.symlink", "shutil.rmtree"}
)
# Operations that write to the file they name.
_FILE_WRITE_EVENTS = frozenset({"os.truncate"})

_DENIED_ERRNOS = frozenset({errno.EACCES, errno.EPERM})


def _nearest_existing_dir(path: str) -> str:
    directory = os.path.dirname(path) or "/"
    while directory != "/" and not os.path.isdir(directory):
        directory = os.path.dirname(directory)
    return directory


def _is_write_open(args: "tuple[Any, ...]") -> bool:
    mode = args[1] if len(args) > 1 else None
    flags = args[2] if len(args) > 2 else 0
    if isinstance(mode, str):
        return any(letter in mode for letter in "wax+")
    if isinstance(flags, int):
        # Not O_APPEND: alone (O_RDONLY is 0) it opens for reading.
        return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC))
    return False


def _is_read_write_open(args: "tuple[Any, ...]") -> bool:
    """An open that reads the file it writes: "w+b" (Pillow, and so matplotlib's PNGs),
    "r+", "a+", or O_RDWR (SQLite)."""
    mode = args[1] if len(args) > 1 else None
    flags = args[2] if len(args) > 2 else 0
    if isinstance(mode, str):
        return "+" in mode
    return isinstance(flags, int) and flags & os.O_ACCMODE == os.O_RDWR


def _covering(path: str, roots: list[str]) -> str | None:
    """The granted directory or file that path lies in, if any."""
    for root in roots:
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return root
    return None


def _event_path(args: "tuple[Any, ...]") -> str | None:
    if args and isinstance(args[0], (str, bytes, os.PathLike)):
        return os.path.abspath(os.fsdecode(args[0]))
    return None


def _classify_file(
    path: str, event: "tuple[str, tuple[Any, ...]] | None", policy: "Policy | None"
) -> tuple[str | None, str | None]:
    name, args = event if event is not None else ("", ())
    if _event_path(args) != path:
        # Another call's event, which says nothing of this one: a C library's call raises
        # none, and what the program did after the refusal (a with block's
        # TemporaryDirectory removed as the error unwound it) comes later.
        name, args = "", ()
    there = os.path.lexists(path)
    if name in _METADATA_EVENTS:
        return "metadata", path
    if name == "open" and _is_read_write_open(args):
        return _read_write(path, policy)
    if name:
        writing = (name == "open" and _is_write_open(args)) or name in _ENTRY_EVENTS
        writing = writing or name in _FILE_WRITE_EVENTS
    else:
        # A path that is there and readable must have been refused for writing; one
        # that is not there, for making it (reading it would have failed with ENOENT).
        # One that a folder above it refuses to look up was refused reaching it.
        writing = readable(path) if there else not _unreachable(path)
    if not writing:
        # Read back from a write tree: the tree is what to grant, not one file of it.
        write_tree = _covering(os.path.realpath(path), policy.writes()) if policy else None
        target = path if write_tree is None else write_tree
        listing = name in LISTING_EVENTS or (not name and os.path.isdir(path))
        return _missing_or_unpermitted("list" if listing else "read", target, path, policy)
    if name in _ENTRY_EVENTS or not there:
        return _missing_or_unpermitted("entries", _nearest_existing_dir(path), path, policy)
    return _missing_or_unpermitted("write", path, path, policy)


def _missing_or_unpermitted(
    kind: str, target: str, path: str, policy: "Policy | None"
) -> tuple[str | None, str | None]:
    """_only_missing's answer; for a file granted already and refused all the same, the
    kind that says the file system's own permissions refuse this user, when they do: the
    grant does not help, and python run by root would not have been refused."""
    found, named = _only_missing(kind, target, policy)
    if found is None and kind in _UNPERMITTED:
        real = _own_process_link(real_path(target))
        if _refused_to_user(kind, real, path):
            return _UNPERMITTED[kind] + GRANTED_SUFFIX, real
    return found, named


def _read_write(path: str, policy: "Policy | None") -> tuple[str | None, str | None]:
    """A file opened to be both written and read: what of the two is missing.

    Writes never imply reads, so a file created in a write tree cannot be read back
    until the tree is granted for reading too: that tree, which exists, is what to
    name (not the file, which may not exist yet, and not the write grant, given).
    """
    real = os.path.realpath(path)
    write_tree = _covering(real, policy.writes()) if policy is not None else None
    if write_tree is not None:
        return _only_missing("read", write_tree, policy)
    # Neither granted: both, on what exists (the file, or the directory to create it in).
    target = path if os.path.lexists(path) else _nearest_existing_dir(path)
    if policy is not None and _covering(os.path.realpath(target), policy.reads()):
        return _only_missing("entries" if target != path else "write", target, policy)
    return "read_write", target


def _only_missing(kind: str, target: str, policy: "Policy | None") -> tuple[str | None, str | None]:
    """The hint, unless it would name a grant the run has already: then none.

    A grant that is present and still refused means something else stood in the
    way (a link out of the tree, a file system's own permissions): naming the
    grant again would send the model round in a circle.
    """
    # What the sandbox decides on, and what a grant resolves to.
    real = _own_process_link(real_path(target))
    if policy is not None:
        granted = policy.reads() if kind in ("read", "list") else policy.writes()
        if _covering(real, granted) is not None:
            return None, None
    return kind, real


def _own_process_link(path: str) -> str:
    """path with the program's own /proc entry named by /proc/self, as psutil and the like
    name it by the process id (/proc/PID/statm), and /proc/net leads to it: that id is
    another in the next run, and a grant of /proc/self names the program's own entry in
    every run."""
    own = f"/proc/{os.getpid()}"
    if path == own or path.startswith(own + "/"):
        path = "/proc/self" + path[len(own) :]
    if path.startswith(_OWN_NET + "/"):
        # The kernel makes the files of /proc/self/net anew at every lookup, so a grant
        # of one of them never matches: the folder's does.
        return _OWN_NET
    return path


_OWN_NET = "/proc/self/net"


def _undumpable_entry(kind: str, path: str | None) -> str | None:
    """path named from /proc/self, when it is an entry of the program's own process that
    the kernel gave root because the sandbox made the process undumpable, and that only
    its owner may open as kind would (environ, auxv, mem, io), for a user who is not
    root; else None (maps, status: a grant is what they need)."""
    if path is None or os.geteuid() == 0:
        return None
    named = _own_process_link(os.path.realpath(path))
    if not named.startswith("/proc/self/"):
        return None
    reading = kind.startswith(("read", "list")) and not kind.startswith("read_write")
    try:
        if os.stat(path).st_uid != 0 or os.access(path, os.R_OK if reading else os.W_OK):
            return None
    except (OSError, ValueError):
        return None
    return named


def _underlying(exc: BaseException) -> BaseException:
    """The OS error a denial hides behind, or exc itself.

    urllib's URLError keeps the socket's error as its `reason`; a program that
    turns a PermissionError into its own exception leaves it as the cause or
    context, which the traceback shows above its own.
    """
    current: BaseException | None = exc
    for _ in range(8):
        if current is None:
            break
        if isinstance(current, OSError) and current.errno is not None:
            return current
        reason = getattr(current, "reason", None) if isinstance(current, OSError) else None
        if isinstance(reason, BaseException):
            current = reason
        else:
            current = current.__cause__ or current.__context__
    return exc


def _refused_listing(policy: "Policy | None") -> tuple[str | None, str | None]:
    """The folder the program listed last of those it was refused listing, and which
    its grants do not cover: ("unlisted", that folder), or ("unremoved", that folder)
    when shutil.rmtree listed it to remove it; else (None, None). Only asked once the
    program failed, so a run that never fails pays for no listing here."""
    for listed, removing in reversed(list(ACCESS_LOG.listed.items())):  # listing adds to it
        folder = os.path.abspath(listed)
        try:
            with os.scandir(folder):
                continue
        except PermissionError:
            kind, target = _only_missing("list", folder, policy)
            if kind is not None:
                return ("unremoved" if removing else "unlisted"), target
        except (OSError, ValueError):  # not a folder, or gone; a NUL in the path
            continue
    return None, None


def _sqlite_database(
    database: str, policy: "Policy | None"
) -> tuple[str | None, str | None, str | None]:
    """SQLite reports no errno. A database that exists outside the write grants was
    refused for reading: granting that is enough to query it, unless it keeps a
    write-ahead log, which readers write too. Otherwise SQLite creates it and reads it
    back, with its journal beside it: the hint is the one for a file opened to be
    written and read."""
    if os.path.lexists(database) and (
        policy is None or _covering(os.path.realpath(database), policy.writes()) is None
    ):
        if _write_ahead_logged(database):
            kind, target = _sqlite_folder(database, policy)
        else:
            kind, target = _only_missing("read", database, policy)
    else:
        kind, target = _read_write(database, policy)
    return kind, target, database


def _write_ahead_logged(database: str) -> bool:
    """Whether database is in WAL mode, as far as can be told without reading it when it
    is not readable: its log or shared-memory file beside it, or else its header (the
    read and write format versions, bytes 18 and 19, are 2 for WAL)."""
    if os.path.lexists(database + "-wal") or os.path.lexists(database + "-shm"):
        return True
    try:
        with open(database, "rb") as file:
            header = file.read(20)
    except OSError:
        return False
    return header.startswith(b"SQLite format 3\0") and header[18:20] == b"\2\2"


def _sqlite_folder(database: str, policy: "Policy | None") -> tuple[str | None, str | None]:
    """What the folder of a database needs: SQLite makes its write-ahead log, shared
    memory and journal there, and reads them back, whether the program writes or only
    reads a WAL database (DuckDB its write-ahead log, see _duckdb_database)."""
    folder = os.path.dirname(database)
    real = os.path.realpath(folder)
    read_granted = policy is not None and _covering(real, policy.reads()) is not None
    write_granted = policy is not None and _covering(real, policy.writes()) is not None
    if read_granted:
        return _only_missing("write", folder, policy)
    if write_granted:
        return _only_missing("read", folder, policy)
    return "read_write", real_path(folder)


def _sqlite_read_only(
    exc: BaseException, event: "tuple[str, tuple[Any, ...]] | None"
) -> str | None:
    """The database of a sqlite3.connect() that opened it read-only, because it could
    read the file but not write it or its folder, and then had to write: a WAL database
    even to query it, any database to change it. None when the file's own mode is what
    forbids writing: no grant helps then."""
    database = _sqlite_failure(exc, event, "attempt to write a readonly database")
    if database is None or not os.path.isfile(database):
        return None
    if not os.access(database, os.W_OK) or not os.access(os.path.dirname(database), os.W_OK):
        return None  # access() sees the file's mode and owner, not the sandbox
    return database


def _raised_in_process_module(exc: BaseException) -> bool:
    """Whether the innermost frame of exc's traceback is multiprocessing's own."""
    module = innermost_module(exc)
    if module is None:
        return False
    return any(module == name or module.startswith(name + ".") for name in PROCESS_MODULES)


def _refused_starting_a_process(exc: BaseException) -> bool:
    """Whether exc was raised by the call with which the program last tried to start a
    process (os.fork, os.execv, os.posix_spawn, os.system: ACCESS_LOG.process_call), not
    by something it did after catching that refusal."""
    call = ACCESS_LOG.process_call
    if call is None:
        return False
    hook = type(ACCESS_LOG).__call__.__code__  # os.system's refusal is raised by the hook
    tb, entry = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code is not hook:
            entry = tb
        tb = tb.tb_next
    if entry is None:
        return False
    frame_id, code, offset = call
    frame = entry.tb_frame
    return id(frame) == frame_id and frame.f_code is code and entry.tb_lasti == offset


def _from_thread_pool(exc: BaseException) -> bool:
    """Whether exc was raised while a multiprocessing ThreadPool was being made
    (multiprocessing.dummy.Pool makes one too): its workers are threads, but it takes
    multiprocessing locks all the same."""
    pool = sys.modules.get("multiprocessing.pool")
    thread_pool = getattr(pool, "ThreadPool", None)
    init = getattr(thread_pool, "__init__", None)
    code = getattr(init, "__code__", None)
    if code is None:
        return False
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return True
        tb = tb.tb_next
    return False


def _sqlite_open_failure(
    exc: BaseException, event: "tuple[str, tuple[Any, ...]] | None"
) -> str | None:
    """The database path of a sqlite3.connect() that could not open its file."""
    return _sqlite_failure(exc, event, "unable to open")


def _dbm_error(exc: BaseException) -> bool:
    """Whether exc is dbm.sqlite3's error, which it raises from SQLite's."""
    return type(exc).__module__ == "dbm.sqlite3" and type(exc).__name__ == "error"


def _empty_file(path: str) -> bool:
    """Whether path is an empty regular file: dbm.sqlite3 makes one before it connects,
    and dbm.open() cannot tell what kind of database it is once the connection failed."""
    try:
        return os.path.isfile(path) and os.path.getsize(path) == 0
    except OSError:
        return False


def _sqlite_failure(
    exc: BaseException, event: "tuple[str, tuple[Any, ...]] | None", message: str
) -> str | None:
    """The database path of the last sqlite3.connect(), if exc is SQLite's error saying
    message about it, or an error raised from one: dbm.sqlite3's (what dbm and shelve use
    from Python 3.13 on), SQLAlchemy's OperationalError."""
    found = None
    for error in chain(exc):
        if type(error).__module__ == "sqlite3" and type(error).__name__ == "OperationalError":
            found = error
            break
    if found is None:
        return None
    exc = found
    if event is None or event[0] != "sqlite3.connect" or message not in str(exc):
        return None
    path = _event_path(event[1])
    if path is None:
        return None
    named = os.fsdecode(event[1][0])
    if named.startswith(":memory:"):
        return None
    if named.startswith("file:"):
        # connect("file:data/notes.db?mode=ro", uri=True), the usual way to open it read-only
        file = _sqlite_uri_path(named)
        return None if file is None else os.path.abspath(file)
    return path


def _sqlite_uri_path(uri: str) -> str | None:
    """The file a SQLite URI names (https://sqlite.org/uri.html), or None for an
    in-memory or temporary database or one on another host."""
    from urllib.parse import parse_qs, unquote

    rest, _, query = uri[len("file:") :].partition("#")[0].partition("?")
    if "memory" in parse_qs(query).get("mode", []):
        return None
    if rest.startswith("//"):
        authority, slash, rest = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            return None
        rest = slash + rest
    # %E9 is the byte SQLite opens, not U+FFFD: as os.fsdecode spells a name's bytes.
    path = unquote(rest, errors="surrogateescape")
    return None if path in ("", ":memory:") else path


def classify(
    exc: BaseException,
    event: "tuple[str, tuple[Any, ...]] | None",
    policy: "Policy | None" = None,
    cwd: str | None = None,
    named: "Callable[[], list[tuple[str, str]]] | None" = None,
) -> tuple[str | None, str | None, str | None]:
    """What the exception is about: (hint kind, the grant's value, the denied path).

    With the run's policy, a hint never names a grant the run already has; with the
    directory pynox ran in and `named` (which gives what the environment pynox started
    with names that no write grant may reach: pynox.policy.trusted.named_by_environment,
    asked only for a write hint), never a write grant pynox would refuse.

    The exception is the program's: its class may make reading an attribute (errno,
    filename, __cause__) raise. Such an exception gets no hint, and keeps its report.
    """
    try:
        kind, target, path = None, None, None
        for member in members(exc):  # a group's hint: that of the first error that has one
            kind, target, path = _classify(member, event, policy)
            if kind is not None:
                break
        if kind is None and not isinstance(exc, ImportError):
            # Nothing refused this error itself: it may come from a folder that looked
            # empty because listing it was refused (glob.glob() finding no file, and then
            # nothing to concatenate, or no first file to open). An import that failed
            # has hints of its own (pynox.engine.report), on where the module is.
            kind, target = _refused_listing(policy)
    except Exception:  # noqa: BLE001 - raised by the program's code, read as an attribute
        return None, None, None
    # A link's folder the program could be granted writing, unless pynox refuses that.
    linked = kind == "link_unwritable" and target is not None
    if linked and not _write_grantable(str(target), cwd, named, policy):
        return "link_copy", target, path
    writable = kind
    if cwd is not None and kind in _WRITE_KINDS and target is not None:
        writable = _where_writable(kind, target, cwd, named() if named is not None else [])
    own = _undumpable_entry(kind, path or target) if kind in _OPENING_KINDS else None
    if own is not None:
        return "own_undumpable", own, path
    # What no grant may ever reach is said first; the user's permissions come next, before
    # a folder to make beside what cannot be granted (which this user may not make).
    if writable == "trusted_write":
        return writable, target, path
    if kind in _UNPERMITTED and target is not None and _refused_to_user(kind, target, path):
        return _UNPERMITTED[kind], target, path
    kind = writable
    if kind in _WRITE_KINDS and target is not None and _holds_scratch(target, policy):
        kind = "read_write_beside_scratch" if kind == "read_write" else "write_beside_scratch"
    return kind, target, path


def _write_grantable(
    folder: str,
    cwd: str | None,
    named: "Callable[[], list[tuple[str, str]]] | None",
    policy: "Policy | None",
) -> bool:
    """Whether pynox would grant writing folder (see _where_writable, _holds_scratch)."""
    if _holds_scratch(folder, policy):
        return False
    refused = named() if named is not None else []
    return cwd is None or _where_writable("write", folder, cwd, refused) == "write"


def _holds_scratch(folder: str, policy: "Policy | None") -> bool:
    """Whether folder holds the run's scratch directory, and so those of the runs beside
    it (the caller's TMPDIR), or /tmp, where runs without TMPDIR make theirs: a grant
    there would open theirs to the program (and the command line refuses it)."""
    if policy is None or policy.scratch is None:
        return False
    from pynox.engine import scratch

    holders = {
        os.path.dirname(os.path.realpath(policy.scratch)),
        os.path.realpath(scratch.FALLBACK_BASE),
    }
    return any(
        holder == folder or holder.startswith(folder.rstrip("/") + "/") for holder in holders
    )


# Hints that name a write grant, which pynox may refuse (see _where_writable).
_WRITE_KINDS = frozenset({"write", "entries", "read_write"})

# Hints that name a grant, by the kind that says instead that the file system's own
# permissions refuse this user the same, so that no grant alone would help; with
# GRANTED_SUFFIX, the grant is there already.
_UNPERMITTED = {
    "read": "read_unpermitted",
    "list": "list_unpermitted",
    "unlisted": "list_unpermitted",
    "unremoved": "list_unpermitted",
    "write": "write_unpermitted",
    "entries": "entries_unpermitted",
    "read_write": "read_write_unpermitted",
}

# Hints about opening a file, which an entry of the program's own /proc may get instead.
_OPENING_KINDS = frozenset(
    {"read", "list", "write", "entries", "read_write"}
    | set(_UNPERMITTED.values())
    | {kind + GRANTED_SUFFIX for kind in _UNPERMITTED.values()}
)


def _refused_to_user(kind: str, target: str, path: str | None) -> bool:
    """Whether the file system refuses this user what the hint of `kind` would grant on
    target, granted or not: access() asks the file modes, ACLs and mount flags, never
    Landlock, for this process, which holds no capabilities (not even as root)."""
    if kind == "read":
        # The file refused, not the write tree the hint names (read back from it).
        subject, mode = path or target, os.R_OK
    elif kind in ("write", "read_write") and not os.path.isdir(target):
        subject, mode = target, os.W_OK | (os.R_OK if kind == "read_write" else 0)
    elif kind in ("write", "entries", "read_write"):
        subject, mode = target, os.W_OK | os.X_OK  # making and removing what it holds
    else:
        subject, mode = target, os.R_OK
    try:
        if os.access(subject, mode):
            return False
    except ValueError:  # a NUL in the path
        return False
    return os.path.lexists(subject) or _unreachable(subject)


def _unreachable(path: str) -> bool:
    """Whether a folder above path refuses this user to look it up (searching a folder is
    not Landlock's to refuse: only the file modes refuse it)."""
    try:
        os.lstat(path)
    except PermissionError:
        return True
    except (OSError, ValueError):
        return False
    return False


def _open_files_kind(policy: "Policy | None") -> str | None:
    """The hint kind of too many open files: "open_files" when the limit reached is the one
    --memory set; None for a lower one pynox was started with (or the program set itself),
    under which python fails alike and no larger --memory helps."""
    if policy is None or policy.memory is None:
        return None
    if os.sysconf("SC_OPEN_MAX") < open_files_allowed(policy.memory):  # the soft limit
        return None
    return "open_files"


def _classify(
    exc: BaseException,
    event: "tuple[str, tuple[Any, ...]] | None",
    policy: "Policy | None",
) -> tuple[str | None, str | None, str | None]:
    if isinstance(exc, MemoryError):
        asked = policy.memory if policy is not None else None
        below = inherited_limit_below(asked, "memory")
        if below is not None:
            return "memory_inherited", below, None
        wanted = _memory_wanted(exc, policy)
        if wanted == "":
            return "memory_beyond", None, None
        if wanted is None and asked is not None and limit_beyond_machine(asked):
            return "memory_machine", None, None
        return ("memory", None, None) if wanted is None else ("memory_for", wanted, None)
    if policy is not None and policy.memory is not None and lost_memory_error(exc):
        return "memory", None, None
    if isinstance(exc, RuntimeError) and exc.args == ("can't start new thread",):
        # threading's word for a stack that could not be mapped, under a memory
        # limit because the limit counts it (no hint without one), or for a limit on
        # processes reached, which counts threads (ulimit -u).
        if policy is not None and policy.memory is not None:
            processes = processes_limit_reached()
            if processes is not None:
                return "thread_processes", processes, None
        below = inherited_limit_below(policy.memory if policy else None, "memory")
        return (
            ("thread_stacks", thread_stack_size(), None)
            if below is None
            else ("thread_stacks_inherited", below, None)
        )
    database = _sqlite_open_failure(exc, event)
    if database is not None:
        kind, target, path = _sqlite_database(database, policy)
        if kind == "read" and _dbm_error(exc) and _empty_file(database):
            kind = "dbm_read_back"
        return kind, target, path
    database = _sqlite_read_only(exc, event)
    if database is not None:
        kind, target = _sqlite_folder(database, policy)
        return kind, target, database
    if _user_not_found(exc):
        kind, target = _only_missing("read", _PASSWD, policy)
        return ("user_name" if kind is not None else None), target, target
    if _group_not_found(exc):
        kind, target = _only_missing("read", _GROUP, policy)
        return ("group_name" if kind is not None else None), target, target
    if _terminal_not_passed(exc, policy):
        return "terminal_type", "TERM", None
    variable, granted = _variable_not_passed(exc, policy)
    if variable is not None:
        return ("environment_variable_unset" if granted else "environment_variable"), variable, None
    raised = _raised_limit(exc, event, policy)
    if raised is not None:
        return raised, None, None
    variable = _ca_variable_not_passed(exc, policy)
    if variable is not None:
        return "ca_variable", variable, None
    variable = _proxy_variable_not_passed(exc, policy)
    if variable is not None:
        return "proxy_variable", variable, None
    offline = policy is not None and not policy.allow_network
    if offline and (no_system_certificates(exc) or _no_dual_stack(exc)):
        return "network", None, None
    if polars_temporary_folder(exc):
        return "polars_temporary_folder", None, None
    named = denied_in_message(exc)
    if named is not None:
        error, denied, call = named
        database = duckdb_database(error, denied)
        if database is not None:
            kind, target = _sqlite_folder(database, policy)
        elif call is not None or os.path.lexists(denied):
            kind, target = _classify_file(denied, call, policy)
        else:  # refused making it: a file not there is not refused reading
            kind, target = _only_missing("entries", os.path.dirname(denied), policy)
        return kind, target, denied
    image = _unread_by_opencv(exc)
    if image is not None:
        kind, target = _classify_file(image, ("open", (image, "rb")), policy)
        return kind, target, image
    exc = _underlying(exc)
    if not isinstance(exc, OSError) or _is_tls_error(exc):
        return None, None, None
    kind, target, path = _classify_os_error(exc, event, policy)
    if kind == "network" and policy is not None and policy.allow_network:
        return None, None, path  # granted already: something else refused it
    return kind, target, path


# The most strings of a frame looked at for a file OpenCV was refused.
_MAX_NAMED = 256


def _unread_by_opencv(exc: BaseException) -> str | None:
    """The file OpenCV was refused, when the program failed on what it read in its place:
    cv2.imread() and cv2.VideoCapture say nothing of a file they cannot open (imread
    returns None), and the program fails later, on an empty image (cv2.error's
    "!_src.empty()") or on None ("'NoneType' object has no attribute 'shape'"). The file
    is one the failing frame names, by a constant of its code or a variable, that is there
    and cannot be opened."""
    if sys.modules.get("cv2") is None:
        return None
    kind = type(exc)
    said = args_of(exc)
    message = said[0] if len(said) == 1 and type(said[0]) is str else ""
    empty = kind.__module__ == "cv2" and kind.__name__ == "error" and "empty()" in message
    if not empty and not (kind is AttributeError and message.startswith("'NoneType' object")):
        return None
    tb = innermost(exc)
    if tb is None:
        return None
    frame = tb.tb_frame
    # Exact strings only: a program's own str subclass would run its code here.
    named = [c for c in frame.f_code.co_consts if type(c) is str]
    named += [v for v in frame.f_locals.values() if type(v) is str]
    for value in named[:_MAX_NAMED]:
        if not value or len(value) > 4096 or "\0" in value:
            continue
        path = os.path.abspath(value)
        if os.path.isfile(path) and not readable(path):
            return path
    return None


def _memory_wanted(exc: MemoryError, policy: "Policy | None") -> str | None:
    """The memory limit to suggest when the failed allocation says its size (numpy's
    "Unable to allocate 2.98 GiB for an array"), so that one step is enough: the limit
    plus that size, rounded up to a power of two of MiB. None when doubling the limit
    is enough; "" when more than this machine has would not be."""
    size = None
    with contextlib.suppress(Exception):  # a property of numpy's, computed when read
        size = getattr(exc, "_total_size", None)
    if size is None:
        size = size_in_message(exc)
    if policy is None or policy.memory is None or not isinstance(size, int) or size <= 0:
        return None
    wanted = 1 << 20
    while wanted < policy.memory + size:
        wanted <<= 1
    machine = physical_memory()
    if machine is not None and wanted > machine:
        return ""
    return format_size(wanted) if wanted > 2 * policy.memory else None


# Where the C library finds a user's name when the environment has none.
_PASSWD = "/etc/passwd"


def _user_not_found(exc: BaseException) -> bool:
    """Whether exc is, or comes from, pwd.getpwuid() not finding the program's own user:
    what getpass.getuser() falls back on without LOGNAME or USER in the environment (it
    raises that KeyError up to Python 3.12, and an OSError from it since 3.13). In the
    sandbox /etc/passwd is not readable, so no user is found. Another uid may be in no
    file at all: reading one would not be sure to help."""
    return _not_found(exc, {f"getpwuid(): uid not found: {os.getuid()}"})


# Where the C library finds a group's name.
_GROUP = "/etc/group"


def _group_not_found(exc: BaseException) -> bool:
    """Whether exc is, or comes from, grp.getgrgid() not finding one of the program's own
    groups or root's (pathlib's Path.group() of its own files, say): /etc/group is as
    private as /etc/passwd, and not readable either. Another gid may be in no file at
    all, as for _user_not_found."""
    gids = {0, os.getgid(), os.getegid(), *os.getgroups()}
    return _not_found(exc, {f"getgrgid(): gid not found: {gid}" for gid in gids})


def _not_found(exc: BaseException, messages: "set[str]") -> bool:
    """Whether exc, or an error it came from, is a KeyError saying one of messages."""
    current: BaseException | None = exc
    for _ in range(4):
        if current is None:
            return False
        said = current.args[0] if isinstance(current, KeyError) and current.args else None
        if isinstance(said, str) and len(current.args) == 1 and said in messages:
            return True
        current = current.__cause__ or current.__context__
    return False


# What curses.setupterm() (and so curses.initscr()) says without a terminal type, or with
# initscr's stand-in "unknown": without TERM, and without the terminal descriptions
# TERM would choose among.
_NO_TERMINAL = frozenset(
    {"setupterm: could not find terminal", "setupterm: could not find terminfo database"}
)


def _terminal_not_passed(exc: BaseException, policy: "Policy | None") -> bool:
    """Whether exc is curses finding no terminal in a run that was not passed TERM, which
    is set where pynox runs: passing it lets curses find the terminal's description."""
    if policy is None or not HOST_HAS_TERMINAL or "TERM" in policy.allow_env:
        return False
    kind = type(exc)
    if kind.__module__ != "_curses" or kind.__name__ != "error":
        return False
    args = args_of(exc)
    return len(args) == 1 and isinstance(args[0], str) and args[0] in _NO_TERMINAL


def _variable_not_passed(exc: BaseException, policy: "Policy | None") -> "tuple[str | None, bool]":
    """The variable os.environ[name] found missing, when the run could be granted it: the
    program's environment holds only what it was granted, and whether the variable is set
    where pynox runs is not asked here, where the program could read the answer. With it,
    whether the run was granted it: then it was not set where pynox (or the pool) started,
    which the program's own environment already says."""
    if type(exc) is not KeyError or policy is None:
        return None, False
    args = args_of(exc)
    entry = innermost(exc)
    if len(args) != 1 or not isinstance(args[0], str) or entry is None:
        return None, False
    if entry.tb_frame.f_code is not type(os.environ).__getitem__.__code__:
        return None, False
    name = args[0]
    if not is_variable_name(name) or is_loader_variable(name):
        return None, False
    return name, name in policy.allow_env


# The services and protocols tables, which only a run with the network reads
# (pynox.policy.system_paths), by what socket's look-ups say when they find nothing.
_NETWORK_TABLES = {
    "service/proto not found": "/etc/services",  # getservbyname
    "port/proto not found": "/etc/services",  # getservbyport
    "protocol not found": "/etc/protocols",  # getprotobyname
}


def _network_table_closed(exc: OSError) -> bool:
    """Whether exc is socket.getservbyname(), getservbyport() or getprotobyname() finding
    nothing in a table that exists but that a run without the network cannot read."""
    args = args_of(exc)
    said = args[0] if exc.errno is None and len(args) == 1 else None
    table = _NETWORK_TABLES.get(said) if isinstance(said, str) else None
    return table is not None and os.path.exists(table)


def _where_writable(kind: str, target: str, cwd: str, named: "list[tuple[str, str]]") -> str:
    """kind, or the kind that says why target cannot be granted for writing and what can.

    pynox refuses a write grant that reaches what later runs trust
    (pynox.policy.trusted): the pynox.toml of the directory it runs in, whether or
    not one exists, its installation and the interpreter's, OpenSSL's directories,
    system files, and what the environment it ran in names (named: taken before this
    process's was emptied). A folder that only holds such a path has folders inside it
    that can be granted; a path that is or lies inside one has none.
    """
    from pynox.policy import trusted

    # What pynox imported before the sandbox is not told apart from the program's
    # imports here: those homes are left out rather than refused wrongly.
    # OpenSSL's directories as the trusted side found them, else as this process can.
    openssl = trusted.openssl_entries(remember=False)
    refused = trusted.configuration([], cwd, {}) + trusted.resolve(
        named + trusted.installed() + openssl
    )
    refusal = trusted.write_refusal(target, refused)
    if refusal is None:
        return "trusted_write" if trusted.device_refusal(target) is not None else kind
    _, held, covers = refusal
    inside = target.rstrip("/") + "/" + OUTPUT_FOLDER
    if (
        covers
        and target != "/"
        and os.path.isdir(target)
        and (os.path.isdir(inside) or not os.path.lexists(inside))
        and trusted.write_refusal(inside, refused) is None
    ):
        holds = "config" if held in trusted.CONFIGURATION else "trusted"
        return f"{'read_write' if kind == 'read_write' else 'write'}_beside_{holds}"
    return "trusted_write"


def _is_tls_error(exc: OSError) -> bool:
    """Whether exc is the ssl module's: a certificate that did not verify, a peer that
    does not speak TLS. Its errno (1, EPERM, for most) is OpenSSL's, never a denial."""
    ssl = sys.modules.get("_ssl")  # imported if the program met TLS at all
    return ssl is not None and isinstance(exc, ssl.SSLError)


# What resource.setrlimit() says when a limit would pass its hard limit: the hard limit
# itself (EPERM), or the soft one (EINVAL).
_RAISE_MESSAGES = frozenset(
    {"not allowed to raise maximum limit", "current limit exceeds maximum limit"}
)


def _raised_limit(
    exc: BaseException, event: "tuple[str, tuple[Any, ...]] | None", policy: "Policy | None"
) -> str | None:
    """The hint kind when exc is resource.setrlimit(), or prlimit() of the program's own
    process, refusing to raise a limit past what pynox set (runtime/limits.c): the core
    size always, the memory limits and open files under --memory, the file size under
    --max-file-size. None for a limit pynox left as the host set it (python would fail
    alike), and for a soft limit above a hard one the program chose itself (a hard limit
    as getrlimit() gave it is pynox's)."""
    resource = sys.modules.get("resource")
    if resource is None or policy is None or event is None:
        return None
    if event[0] == "resource.setrlimit":
        arguments = event[1]
    elif event[0] == "resource.prlimit" and event[1][:1] in ((0,), (os.getpid(),)):
        arguments = event[1][1:]  # (pid, resource, limits)
    else:
        return None
    # CPython's own errors, read without calling code of the program's: setrlimit's
    # ValueError, or prlimit's PermissionError for the hard limit.
    said = type(exc) is ValueError and len(exc.args) == 1 and exc.args[0] in _RAISE_MESSAGES
    past_hard = type(exc) is PermissionError and exc.errno == errno.EPERM
    if not (said or (past_hard and event[0] == "resource.prlimit")):
        return None
    which, limits = (*arguments, None, None)[:2]
    if not (type(limits) is tuple and len(limits) == 2 and all(type(n) is int for n in limits)):
        return None
    soft, hard, current = (
        float("inf") if n == resource.RLIM_INFINITY else n
        for n in (*limits, resource.getrlimit(which)[1])
    )
    if soft > hard and hard != current:
        return None  # soft above a hard limit of the program's own: refused anywhere
    if which == resource.RLIMIT_CORE:
        return "core_limit"
    if policy.memory is not None and which == resource.RLIMIT_NOFILE:
        return "open_files_limit"
    if policy.memory is not None and which == resource.RLIMIT_STACK and current < policy.memory:
        # Capped at the stack limit it started with, which no larger --memory raises.
        return "stack_limit"
    memory_limits = (resource.RLIMIT_DATA, resource.RLIMIT_AS, resource.RLIMIT_STACK)
    if policy.memory is not None and which in memory_limits:
        return "memory_limits"
    if policy.max_file_size is not None and which == resource.RLIMIT_FSIZE:
        return "file_size_limit"
    return None


def _ca_variable_not_passed(exc: BaseException, policy: "Policy | None") -> str | None:
    """The CA variable a certificate that did not verify was probably meant to verify
    with: set where pynox runs, one the failed client reads, not passed to the run
    (allow_env), and naming a file or directory outside the default CA store, which the
    run reads once passed the variable (pynox.policy.ca_store). One inside that store,
    which every run granted the network reads, would most likely bring no CA it lacks."""
    ssl = sys.modules.get("_ssl")
    if ssl is None or policy is None or not policy.allow_network or not HOST_CA_VARIABLES:
        return None
    try:
        errors = chain(exc)
        if not any(isinstance(error, ssl.SSLCertVerificationError) for error in errors):
            return None
        modules = [type(error).__module__ for error in errors]
        requests = any(isinstance(m, str) and m.startswith("requests.") for m in modules)
    except Exception:  # noqa: BLE001 - the program's classes may run code of its own here
        return None
    from pynox.policy.ca_store import ca_store_reads
    from pynox.policy.system_paths import OPENSSL_CA_VARIABLES, REQUESTS_CA_VARIABLES

    # requests verifies with its own (certifi's bundle without them), everything else with
    # OpenSSL's defaults.
    for name in REQUESTS_CA_VARIABLES if requests else OPENSSL_CA_VARIABLES:
        value = HOST_CA_VARIABLES.get(name)
        if value is None or name in policy.allow_env:
            continue
        # A relative one is the working directory's, with a ".." after a link taken from
        # where the link leads, as OpenSSL opens it (os.path.abspath would take it from
        # beside the link).
        if os.path.exists(value) and _covering(os.path.realpath(value), ca_store_reads()) is None:
            return name
    return None


# What socket.create_server(dualstack_ipv6=True) says when socket.has_dualstack_ipv6()
# could not make an IPv6 socket: as the sandbox refuses one without the network.
_NO_DUAL_STACK = ("dualstack_ipv6 not supported on this platform",)


def _no_dual_stack(exc: BaseException) -> bool:
    """Whether exc is socket.create_server refusing dualstack_ipv6."""
    return (
        type(exc) is ValueError
        and args_of(exc) == _NO_DUAL_STACK
        and innermost_module(exc) == "socket"
    )


# The modules of the errors of HTTP clients that send requests through the proxy the
# environment names (urllib.request's, and requests' and httpx's through it; httpx names
# its public errors' module "httpx").
_PROXY_CLIENT_ERRORS = ("urllib.error", "requests.exceptions", "httpx")
# Those that also take ALL_PROXY for a request of any scheme, as urllib itself does not.
_ALL_PROXY_CLIENTS = ("requests.", "httpx")
# What connecting directly fails with where only a proxy leads out: a name that does not
# resolve, a network or host out of reach, a connection that never answers.
_UNREACHED_ERRNOS = frozenset({errno.ENETUNREACH, errno.EHOSTUNREACH})


def _proxy_variable_not_passed(exc: BaseException, policy: "Policy | None") -> str | None:
    """The proxy variable a connection that failed would have gone through under python:
    set where pynox runs, read by the client that failed for its URL's scheme, not passed
    to a run granted the network (nor another that client reads for that scheme), and
    with no NO_PROXY where pynox runs that sends the URL's host directly; the failure one
    that a proxy's absence makes. A program's own socket reads no proxy variable: python
    would fail alike."""
    if policy is None or not policy.allow_network or not HOST_PROXY_VARIABLES:
        return None
    sockets = _sockets()
    if sockets is None:
        return None
    try:
        errors = chain(exc)
        modules = [m for m in (type(error).__module__ for error in errors) if isinstance(m, str)]
        if not any(m.startswith(_PROXY_CLIENT_ERRORS) for m in modules):
            return None
        reads_all_proxy = any(m.startswith(_ALL_PROXY_CLIENTS) for m in modules)
        url = _request_url(errors)
        unreached = any(
            isinstance(error, (sockets.gaierror, TimeoutError))
            or (isinstance(error, OSError) and errno_of(error) in _UNREACHED_ERRNOS)
            for error in errors
        )
    except Exception:  # noqa: BLE001 - the program's classes may run code of its own here
        return None
    if not unreached:
        return None
    scheme, host = _scheme_and_host(url)
    # Each scheme's own variable: https_proxy leaves an http request direct, and the
    # other way round; ALL_PROXY for any scheme, by the clients that read it.
    read = {f"{scheme}_proxy"} if scheme else {"http_proxy", "https_proxy"}
    if reads_all_proxy:
        read.add("all_proxy")
    if any(name.lower() in read for name in policy.allow_env):
        return None  # passed: the client went through it, or the failure is another's
    if host is not None and _sent_directly(host):
        return None
    names = [name for name in HOST_PROXY_VARIABLES if name.lower() in read]
    return names[0] if names else None


def _request_url(errors: "list[BaseException]") -> str | None:
    """The URL the failed request asked for, where its error tells: requests' and httpx's
    carry their request, urllib's do_open had it."""
    for error in errors:
        request = getattr(error, "request", None)
        url = getattr(request, "url", None) if request is not None else None
        if url is None:
            request = local_in(error, "urllib.request", "do_open", "req")
            url = getattr(request, "full_url", None) if request is not None else None
        if url is not None:
            return str(url)
    return None


def _scheme_and_host(url: str | None) -> "tuple[str | None, str | None]":
    """The scheme of url ("http", "https", else None) and its host, with its port if it
    names one ("example.com:8080"), as NO_PROXY's entries may."""
    if url is None:
        return None, None
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme not in ("http", "https"):
        return None, None
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    host = authority.rpartition("@")[2].lower()
    return scheme, host or None


def _sent_directly(host: str) -> bool:
    """Whether NO_PROXY where pynox runs sends a request for host (with its port, if any)
    directly. The clients agree on a name the host is or ends with at a dot, its port too
    if the entry gives one; they differ on the rest, taken here as the widest of them: a
    name with a leading dot names the host itself too (not for httpx), "*" goes for every
    host (for urllib and requests only as the whole value), and so does a network that
    holds the host's address (for requests). A client that would go direct under python
    fails there alike, and a hint naming a proxy variable would be followed in vain."""
    name = host[1:].partition("]")[0] if host.startswith("[") else host.rpartition(":")[0]
    name = name or host  # no port
    entries = [entry.strip().lower() for entry in HOST_NO_PROXY.split(",")]
    for entry in entries:
        entry = (entry.partition("://")[2] or entry).lstrip(".")  # httpx's "http://host"
        if entry == "*" or any(
            entry and (shown == entry or shown.endswith("." + entry)) for shown in (host, name)
        ):
            return True
    if "/" not in HOST_NO_PROXY:
        return False
    import ipaddress  # only for a NO_PROXY that names networks

    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    for entry in entries:
        with contextlib.suppress(ValueError):
            if address in ipaddress.ip_network(entry, strict=False):
                return True
    return False


def _library_metadata(name: str, exc: OSError) -> str | None:
    """The hint kind of a metadata change a library makes on its own, whatever the
    program asks, when the sandbox refused it: "dbm_dumb" (dbm and shelve fall back on
    dbm.dumb without gdbm and ndbm, and it sets the mode of every file it writes), or
    "xlsxwriter_times" (xlsxwriter sets the times of the temporary files it zips into a
    workbook, and pandas' to_excel writes through it where it is installed), or
    "move_metadata" (shutil.move copies a file's mode and times to another file system),
    or "tar_metadata" (tarfile copies the archive's owners, modes and times)."""
    if exc.errno not in _DENIED_ERRNOS:
        return None
    if name in _METADATA_EVENTS and innermost_module(exc) == "tarfile":
        return "tar_metadata"
    if name == "os.chmod" and innermost_module(exc) == "dbm.dumb":
        return "dbm_dumb"
    if name == "os.utime" and innermost_module(exc) == "xlsxwriter.workbook":
        return "xlsxwriter_times"
    if name in _METADATA_EVENTS and passes_through(exc, "shutil", "move"):
        return "move_metadata"
    return None


def _refused_before_cleanup(name: str, exc: OSError) -> "OSError | None":
    """The refusal that TemporaryDirectory's removal met first, when exc is the refused
    mode change it tries next (it makes what it could not remove writable, and tries
    again): removing a folder granted only for writing takes listing it, which no mode
    gives. None otherwise."""
    if name not in _METADATA_EVENTS or exc.errno not in _DENIED_ERRNOS:
        return None
    if not passes_through(exc, "tempfile", "_rmtree"):
        return None
    first = context_of(exc)
    if not isinstance(first, OSError) or errno_of(first) != errno.EACCES:
        return None
    return first


def _only_metadata_refused(exc: OSError) -> bool:
    """Whether exc is the shutil.Error of a tree copy (copytree, or move across file
    systems) whose every failure is a refused metadata change: the sandbox refuses those
    with EPERM, its file grants with EACCES. shutil keeps each failure as its message."""
    if type(exc).__module__ != "shutil" or type(exc).__name__ != "Error":
        return False
    failures = exc.args[0] if exc.args else None
    if not isinstance(failures, list) or not failures:
        return False
    refused = f"[Errno {errno.EPERM}] "
    return all(
        isinstance(failure, tuple) and len(failure) == 3 and str(failure[2]).startswith(refused)
        for failure in failures
    )


def _classify_os_error(
    exc: OSError, event: "tuple[str, tuple[Any, ...]] | None", policy: "Policy | None"
) -> tuple[str | None, str | None, str | None]:
    sockets = _sockets()
    offline = policy is not None and not policy.allow_network
    if offline and sockets is not None and isinstance(exc, (sockets.gaierror, sockets.herror)):
        # Without the network, the resolver's files are not readable: no name resolves,
        # not even localhost, before any socket is refused; nor does an address
        # (gethostbyaddr's herror).
        return "network", None, None
    if offline and sockets is not None and _network_table_closed(exc):
        return "network_tables", None, None
    name = event[0] if event is not None else ""
    if _only_metadata_refused(exc):
        return "tree_metadata", None, None
    if name in XATTR_READ_EVENTS and exc.errno == errno.EPERM and event is not None:
        if innermost_module(exc) == "shutil":
            return "metadata", None, None  # copy2 and copystat copy the attributes first
        named = event[1][0] if event[1] else None
        if not isinstance(named, int):  # a path, or None for the working directory
            return "xattr_by_path", None, None
    cleanup = _refused_before_cleanup(name, exc)
    if cleanup is not None:
        return _classify_os_error(cleanup, None, policy)
    library = _library_metadata(name, exc)
    if library is not None:
        # Before the metadata hint below, which os.utime's error, named by no file before
        # Python 3.13, would get: its way out is not the program's to take.
        named = exc.filename if isinstance(exc.filename, (str, bytes)) else None
        return library, None, None if named is None else os.path.abspath(os.fsdecode(named))
    if exc.filename is None or isinstance(exc.filename, int):
        # A descriptor in place of a path (os.chmod(fd), os.utime(fd)), or no name at all
        # (os.utime before Python 3.13): nothing to grant, but a metadata change is
        # refused however the file is named.
        if name in _METADATA_EVENTS and exc.errno in _DENIED_ERRNOS:
            return "metadata", None, None
        if isinstance(exc.filename, int):
            return None, None, None
    path = None
    if exc.filename is not None:
        path = os.path.abspath(os.fsdecode(exc.filename))
    terminal = _pseudo_terminal(exc, path)
    if terminal is not None:
        return terminal, None, None
    if path is None and sockets is not None and called_names(exc) & _INTERFACE_LOOK_UPS:
        return "interfaces", None, None
    if exc.errno == errno.EFBIG:
        asked = policy.max_file_size if policy is not None else None
        below = inherited_limit_below(asked, "max_file_size")
        if below is not None:
            return "file_size_inherited", below, path
        return "file_size", None, path
    if exc.errno == errno.EMFILE:
        return _open_files_kind(policy), None, path
    if exc.errno is None and offline and _inet_socket_event(event, sockets):
        # asyncio's create_server() passes over the sockets it could not make and says
        # only "could not bind on any address", with no errno and no error behind it.
        return "network", None, None
    moved = _two_paths(exc, event)
    if moved is not None and exc.errno == errno.EXDEV:
        kind, target = _refused_between_grants(*moved, policy)
        return kind, target, path
    if exc.errno not in _DENIED_ERRNOS:
        return None, None, path
    if moved is not None:
        kind, target = _folder_not_written(*moved, policy)
        return kind, target, path
    if exc.errno == errno.EPERM and _makes_set_id(event, path):
        if _edits_in_place(exc):
            return "fileinput_set_id", path, path
        return "set_id", None, path
    if exc.errno == errno.EPERM:
        refused = _filter_refusal(exc, event, path, policy)
        if refused is not None:
            return refused, None, None
    certificates = _unreadable_certificates(exc) if path is None else None
    if certificates is not None:  # before the sockets: the last event is the connection's
        kind, target = _only_missing("read", certificates, policy)
        return kind, target, certificates
    if _raised_in_process_module(exc) or _refused_starting_a_process(exc):
        return ("thread_pool" if _from_thread_pool(exc) else "process"), None, path
    if name == "socket.__new__" and path is None and event is not None:
        family = event[1][1] if len(event[1]) > 1 else None
        kind = event[1][2] if len(event[1]) > 2 else None
        if sockets is not None and family in (sockets.AF_INET, sockets.AF_INET6):
            # The low bits are the type (SOCK_NONBLOCK and SOCK_CLOEXEC above them): a raw
            # socket takes a privilege the sandbox never has, with the network or without.
            raw = isinstance(kind, int) and kind & 0xF == sockets.SOCK_RAW
            return ("raw_socket" if raw else "network"), None, None
        if innermost_module(exc) != "socket":
            # Not refused making it (socket.socket.__init__): a socket pair's end, made,
            # then refused something else (listen, growing its buffers).
            return None, None, None
        unix = sockets is not None and family == sockets.AF_UNIX
        return ("unix_socket" if unix else "other_socket"), None, None
    if name == "socket.bind" and exc.errno == errno.EACCES and _privileged_port(event):
        # Root's CAP_NET_BIND_SERVICE went with every other capability.
        return "privileged_port", None, None
    if name in ("socket.connect", "socket.bind") and path is None:
        return "network", None, None
    if path is not None:
        folder_needs = _rotating_log_folder(exc)
        if folder_needs is not None:
            if folder_needs == "entries":
                kind, target = _only_missing("entries", os.path.dirname(path), policy)
            else:  # what a database's folder needs is what this one does
                kind, target = _sqlite_folder(path, policy)
            if kind is not None:
                return kind, target, path
        if _edits_in_place(exc):
            # Editing in place: it renamed the file to its backup, then was refused reading
            # that. Whatever the program did after (fileinput's close removes the file it
            # renamed), the refusal was of reading it.
            kind, target = _classify_file(path, ("open", (path, "r")), policy)
            return ("fileinput_backup" if kind == "read" else kind), target, path
        if _made_natively(exc, event, path):
            kind, target = _only_missing("entries", _nearest_existing_dir(path), policy)
        else:
            kind, target = _classify_file(path, event, policy)
        return kind, target, path
    return None, None, None


# Calls that name two paths, by their audit events (os.replace raises os.rename's).
# os.rename removes an entry from the first path's folder and makes one in the second's,
# os.link only makes one, and os.symlink's first path is the text the link holds, which
# nothing checks.
_TWO_PATH_EVENTS = frozenset({"os.rename", "os.link", "os.symlink"})


def _two_paths(
    exc: OSError, event: "tuple[str, tuple[Any, ...]] | None"
) -> "tuple[str, str, str] | None":
    """(the call's event, its first path, its second path, both absolute) when exc is
    the error of the two-path call the last event is, or of the rename shutil.move tried
    first; else None.

    shutil.move copies when the rename fails, and the copy then fails too (reading a
    file of a folder granted only for writing, say): the rename's refusal, which the
    copy's error keeps as its context, is the one to hint at.
    """
    context = context_of(exc)
    if (
        event is not None
        and event[0] in _TWO_PATH_EVENTS
        and exc.filename2 is not None
        and len(event[1]) >= 2
    ):
        name, args = event[0], event[1][:2]
        if any(fd != -1 for fd in event[1][2:]):
            return None  # relative to a folder's descriptor, whose path is unknown
    elif (
        isinstance(context, OSError)
        and errno_of(context) in _DENIED_ERRNOS
        and passes_through(exc, "shutil", "move")
    ):
        exc = context
        name, args = "os.rename", (exc.filename, exc.filename2)
    else:
        return None
    # Exact types only: a program's own path class would run its code here.
    named = (*args, exc.filename, exc.filename2)
    if not all(type(path) is str or type(path) is bytes for path in named):
        return None
    first, second, *said = (os.fsdecode(path) for path in named)
    if [first, second] != said:
        return None
    return name, os.path.abspath(first), os.path.abspath(second)


def _folder_not_written(
    name: str, first: str, second: str, policy: "Policy | None"
) -> tuple[str | None, str | None]:
    """The folder a refused os.rename, os.replace, os.link or os.symlink needed to
    change and may not: the second path's, or os.rename's first's."""
    folders = [os.path.dirname(first)] if name == "os.rename" else []
    folders.append(_nearest_existing_dir(second))
    for folder in folders:
        kind, target = _only_missing("entries", folder, policy)
        if kind is not None:
            return kind, target
    return None, None


def _refused_between_grants(
    name: str, first: str, second: str, policy: "Policy | None"
) -> tuple[str | None, str | None]:
    """Why Landlock refused moving or linking first to second with EXDEV, as between
    file systems: where it would go, the program would have a right to it that it has
    not where it is (runtime/landlock.c). None for a real move between file systems,
    which fails under python too."""
    if policy is None or name == "os.symlink":
        return None, None
    source, destination = os.path.dirname(first), _nearest_existing_dir(second)
    try:
        if os.stat(source).st_dev != os.stat(destination).st_dev:
            return None, None
    except OSError:
        return None, None
    # The entry itself moves, not what a link leads to.
    moved = os.path.join(os.path.realpath(source), os.path.basename(first))
    there = os.path.realpath(destination)
    scratch = policy.scratch_list()
    folder = os.path.isdir(moved) and not os.path.islink(moved)
    if folder and _covering(there, scratch) and not _covering(moved, scratch):
        return "folder_into_scratch", None
    if _covering(there, policy.reads()) and not _covering(moved, policy.reads()):
        tree = _covering(moved, policy.writes()) or os.path.realpath(source)
        kind, target = _only_missing("read", tree, policy)
        return ("move_unreadable", target) if kind is not None else (None, None)
    if name == "os.link" and not _covering(moved, policy.writes()):
        kind, target = _only_missing("write", os.path.realpath(source), policy)
        return ("link_unwritable", target) if kind is not None else (None, None)
    return None, None


def _rotating_log_folder(exc: OSError) -> str | None:
    """What the folder of a rotating log needs when exc is the refusal of its file as the
    handler was made (logging.handlers): "entries" where its rollovers rename the file
    beside it, "read_write" where they also list the folder for old backups to remove
    (a TimedRotatingFileHandler keeping some); else None. A grant of the file alone would
    let the program start, and each rollover fail, which logging reports and passes over."""
    handlers = sys.modules.get("logging.handlers")
    if handlers is None:
        return None
    codes = {}
    for name in ("RotatingFileHandler", "TimedRotatingFileHandler"):
        code = getattr(getattr(getattr(handlers, name, None), "__init__", None), "__code__", None)
        codes[code] = name
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        handler = codes.get(frame.f_code)
        if handler is not None:
            backups, size = frame.f_locals.get("backupCount"), frame.f_locals.get("maxBytes")
            if type(backups) is not int:
                return None
            if handler == "TimedRotatingFileHandler":
                return "read_write" if backups > 0 else "entries"
            # Only a size limit rolls over, and only with backups renames.
            return "entries" if type(size) is int and size > 0 and backups > 0 else None
        tb = tb.tb_next
    return None


# The mode bits runtime/seccomp.c refuses making a file or folder with.
_SET_ID = 0o6000  # S_ISUID | S_ISGID


def _edits_in_place(exc: BaseException) -> bool:
    """Whether exc left fileinput editing a file in place (inplace=True), which moves the
    file to a backup, then makes it again with the old file's mode."""
    return bool(getattr(local_in(exc, "fileinput", "_readline", "self"), "_inplace", False))


def _makes_set_id(event: "tuple[str, tuple[Any, ...]] | None", path: str | None) -> bool:
    """Whether the refusal (EPERM) is seccomp's of making path set-user-ID or
    set-group-ID: by os.mkdir with those bits, or by os.open, whose mode its event leaves
    out, creating it (a file not there is refused EACCES by Landlock, never EPERM)."""
    if event is None or path is None or _event_path(event[1]) != path:
        return False
    name, args = event
    if name == "os.mkdir":
        mode = args[1] if len(args) > 1 else None
        return type(mode) is int and bool(mode & _SET_ID)
    if name == "open" and len(args) > 2 and args[1] is None and type(args[2]) is int:
        return bool(args[2] & os.O_CREAT) and not os.path.lexists(path)
    return False


# The sources of a Cython module, which its frames name in place of a Python file.
_CYTHON_SOURCES = (".pyx", ".pxd", ".pxi")


def _made_natively(exc: OSError, event: "tuple[str, tuple[Any, ...]] | None", path: str) -> bool:
    """Whether compiled code was refused making path (netCDF4's Dataset(path, "w"), raised
    in a frame of its Cython source): its own open() raises no audit event, and a file
    that is not there was not refused reading, which would have failed with ENOENT."""
    tb = innermost(exc)
    if tb is None or os.path.lexists(path):
        return False
    if event is not None and _event_path(event[1]) == path:
        return False  # Python's own call, which says what it did
    filename = tb.tb_frame.f_code.co_filename
    return isinstance(filename, str) and filename.endswith(_CYTHON_SOURCES)


# A pseudo-terminal is opened from /dev/ptmx, which no run reads or writes unless granted,
# and granting it would not help: seccomp's ioctl allowlist leaves out those that set one
# up (TIOCGPTN, TIOCSPTLCK), so os.openpty() then fails with EINVAL.
_PSEUDO_TERMINAL_CALLS = frozenset({"openpty", "posix_openpt"})
_PSEUDO_TERMINAL_DEVICES = frozenset({"/dev/ptmx", "/dev/pts/ptmx"})
# pty.openpty()'s error, before Python 3.14, once os.openpty() failed and so did its
# fallback on the old BSD devices (/dev/ptyp0...): no errno, nothing behind it.
_NO_PTY_DEVICES = ("out of pty devices",)


def _pseudo_terminal(exc: OSError, path: str | None) -> str | None:
    """The hint kind when exc is the refusal of a pseudo-terminal ("pseudo_terminal"), or
    "process" when pty.fork() or pty.spawn() wanted one for a child process; else None."""
    if exc.errno is None:
        if exc.args != _NO_PTY_DEVICES or innermost_module(exc) != "pty":
            return None
    elif exc.errno not in _DENIED_ERRNOS:
        return None
    elif path is not None:
        if os.path.realpath(path) not in _PSEUDO_TERMINAL_DEVICES:
            return None
    elif not called_names(exc) & _PSEUDO_TERMINAL_CALLS:
        return None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_globals.get("__name__") == "pty" and frame.f_code.co_name in ("fork", "spawn"):
            return "process"
        tb = tb.tb_next
    return "pseudo_terminal"


# socket's look-ups of one network interface: the C library asks the kernel with
# interface ioctls the sandbox refuses, with the network or without, so that they fail
# whatever the interface ("no interface with this name", ENOENT, ENOTTY).
_INTERFACE_LOOK_UPS = frozenset({"if_nametoindex", "if_indextoname"})


def _inet_socket_event(event: "tuple[str, tuple[Any, ...]] | None", sockets: "Any") -> bool:
    """Whether the last event is the making of an IPv4 or IPv6 socket."""
    if sockets is None or event is None or event[0] != "socket.__new__" or len(event[1]) < 2:
        return False
    return event[1][1] in (sockets.AF_INET, sockets.AF_INET6)


# Ports below this one take CAP_NET_BIND_SERVICE: net.ipv4.ip_unprivileged_port_start's
# default, which a run cannot read.
_FIRST_UNPRIVILEGED_PORT = 1024


def _privileged_port(event: "tuple[str, tuple[Any, ...]] | None") -> bool:
    """Whether the last event binds an IPv4 or IPv6 address, (host, port, ...), to a port
    below 1024. Exact types only: the address is the program's object."""
    if event is None or len(event[1]) < 2:
        return False
    address = event[1][1]
    if type(address) is not tuple or len(address) < 2:
        return False
    port = address[1]
    return type(port) is int and 0 < port < _FIRST_UNPRIVILEGED_PORT


# Linux's numbers (the same on x86_64 and aarch64; Python's modules lack some): the
# fcntl commands and ioctls that choose who gets a file's I/O signals, and the ioctl
# that moves the terminal's foreground process group (runtime/seccomp.c refuses all).
_F_SETFL = 4
_SIGNAL_OWNER_COMMANDS = frozenset({8, 10, 15})  # F_SETOWN, F_SETSIG, F_SETOWN_EX
_SIGNAL_OWNER_IOCTLS = frozenset({0x8901, 0x8902})  # FIOSETOWN, SIOCSPGRP
_TIOCSPGRP = 0x5410
# The other fcntl commands runtime/seccomp.c refuses, and the hint kind of each.
_REFUSED_COMMANDS = {1024: "lease", 1031: "pipe_size"}  # F_SETLEASE, F_SETPIPE_SZ
# Calls with no audit event that only job control makes: refused unless they name the
# program's own process group, and always where the program leads a session of its own
# (under the Python supervisor), since the kernel lets no session leader change groups.
_JOB_CONTROL_CALLS = frozenset({"setpgid", "setpgrp", "tcsetpgrp"})
# Calls with no audit event that the sandbox refuses whatever their arguments, by hint kind.
_REFUSED_CALLS = {
    "memfd_create": "memfd",
    "unshare": "namespaces",
    "setns": "namespaces",
    "chroot": "namespaces",
    "clock_settime": "clock",
    "clock_settime_ns": "clock",
    "sethostname": "host_name",
    # Refused for any id but the program's own: the sandbox holds no capabilities
    # (runtime/capabilities.c), so these fail with EPERM even for root.
    **dict.fromkeys(
        (
            "setuid",
            "setgid",
            "seteuid",
            "setegid",
            "setreuid",
            "setregid",
            "setresuid",
            "setresgid",
            "setgroups",
            "initgroups",
        ),
        "user_ids",
    ),
    # Refused unless of Unix stream sockets (runtime/seccomp.c's emit_socketpair).
    "socketpair": "socket_pair",
    # Refused even for the program's own process: os.kill reaches that.
    "pidfd_send_signal": "other_process",
    # It asks the kernel through a netlink socket, which is never allowed.
    "if_nameindex": "interfaces",
}
# Calls that may name only the program's own process (runtime/seccomp.c's
# add_own_process_rules), by their audit events: the process id comes first in each.
_OWN_PROCESS_EVENTS = frozenset({"os.kill", "os.killpg", "resource.prlimit"})
# Scheduling calls with no audit event: refused for another process by seccomp, and by
# the kernel when they raise the program's priority, a privilege it never has.
_SCHEDULING_CALLS = frozenset(
    {"nice", "setpriority", "sched_setscheduler", "sched_setparam", "sched_setaffinity"}
)


def _filter_refusal(
    exc: OSError,
    event: "tuple[str, tuple[Any, ...]] | None",
    path: str | None,
    policy: "Policy | None",
) -> str | None:
    """The hint kind when exc (EPERM) is a refusal of runtime/seccomp.c's that no grant
    lifts, or that only --allow-network does (growing socket buffers); else None."""
    called = called_names(exc)
    for name in called:
        if name in _REFUSED_CALLS:
            return _REFUSED_CALLS[name]
    if path is not None:
        return None
    kind = _refused_arguments(event, called)
    if kind is not None:
        return kind
    if "setsockopt" in called and policy is not None and not policy.allow_network:
        return "socket_buffers"
    if called & _SCHEDULING_CALLS:
        return "scheduling"
    return None


def _refused_arguments(
    event: "tuple[str, tuple[Any, ...]] | None", called: "set[str]"
) -> str | None:
    """The hint kind when the last event's arguments, or a call with no event, are what
    seccomp refuses: signal-driven I/O ("io_signals"), another process group
    ("job_control"), another process ("other_process"), a lease or a larger pipe; else
    None."""
    if event is not None and event[0] in FCNTL_EVENTS and len(event[1]) >= 3:
        _, command, argument = event[1][:3]
        if event[0] == "fcntl.ioctl":
            if command in _SIGNAL_OWNER_IOCTLS:
                return "io_signals"
            if command == _TIOCSPGRP:
                return "job_control"
        elif command in _SIGNAL_OWNER_COMMANDS or (
            command == _F_SETFL and isinstance(argument, int) and argument & os.O_ASYNC
        ):
            return "io_signals"
        elif command in _REFUSED_COMMANDS:
            return _REFUSED_COMMANDS[command]
    if event is not None and event[0] in _OWN_PROCESS_EVENTS and event[1]:
        # A call that names this process is not refused: its error is another's. A
        # process group is refused unless it is the program's own in a session of its
        # own, where os.killpg succeeds.
        own = {os.getpid()} if event[0] == "os.kill" else {0, os.getpid()}
        if event[0] == "os.killpg" or event[1][0] not in own:
            return "other_process"
    if called & _JOB_CONTROL_CALLS:
        return "job_control"
    return None


# The ssl calls that read certificate files in OpenSSL, whose refusal names no file.
_CERTIFICATE_CALLS = ("load_verify_locations", "load_cert_chain", "create_default_context")


def _unreadable_certificates(exc: OSError) -> str | None:
    """The certificate file or folder an ssl call was refused (a CA bundle given to
    create_default_context(cafile=...), requests' verify=..., load_cert_chain), as
    OpenSSL's error names none: the path that call was given, which exists but cannot
    be read. Found in the line that made the call: its variables (the standard
    library's and urllib3's wrappers pass them on by name) and its quoted strings."""
    if sys.modules.get("_ssl") is None or exc.errno != errno.EACCES:
        return None
    tb = innermost(exc)
    if tb is None:
        return None
    frame = tb.tb_frame
    import linecache

    line = linecache.getline(frame.f_code.co_filename, tb.tb_lineno)
    if not any(call in line for call in _CERTIFICATE_CALLS):
        return None
    import re

    named = [*re.findall(r"""["']([^"']+)["']""", line), *frame.f_locals.values()]
    for value in named:
        if not isinstance(value, (str, bytes, os.PathLike)):
            continue
        try:
            path = os.path.abspath(os.fsdecode(value))
        except (TypeError, ValueError):
            continue
        if os.path.lexists(path) and not readable(path):
            return path
    return None


def _sockets() -> "Any":
    """The C module of sockets if the program imported it, else None: only then can it
    have met a socket's error or made a socket.

    Not imported here: socket.py imports enum, selectors and collections, and even the C
    module is a shared library to load, which would cost every run that reports an error
    milliseconds.
    """
    return sys.modules.get("_socket")


# --- a module that is installed where the run may not import from ------------------------


def missing_module_dir(
    exc: ModuleNotFoundError, candidates: list[str], granted: list[str]
) -> str | None:
    """The first of candidates that holds the module exc could not find, unless granted.

    Runs in the confined child once a ModuleNotFoundError reached the top: Landlock
    does not restrict stat(), so probing the few names an import would look for
    works without any read grant and without listing a directory. A directory
    that holds a regular module or package wins over one where the name is only a
    directory (a namespace package, or any directory of that name).
    """
    name = exc.name
    if not isinstance(name, str) or not name:
        return None
    top = name.partition(".")[0]
    if top in sys.modules or not top.isidentifier():
        return None  # the package imports; a submodule of it is what is missing
    import _imp

    names = [
        os.path.join(top, "__init__.py"),
        top + ".py",
        *(top + suffix for suffix in _imp.extension_suffixes()),
    ]
    given = set(granted)  # real paths already: the policy's package_dirs are resolved
    directories: list[str] = []
    for candidate in candidates:
        directory = os.path.realpath(candidate)
        if directory not in given and directory not in directories:
            directories.append(directory)
    for directory in directories:
        if any(os.path.isfile(os.path.join(directory, entry)) for entry in names):
            return directory
    for directory in directories:
        if os.path.isdir(os.path.join(directory, top)):
            return directory
    return None


# --- packages installed for another version of Python -------------------------------------

# The version tag in a compiled module's name: _multiarray_umath.cpython-311-x86_64-linux-gnu.so
# is for CPython 3.11 ("313t" for a free-threaded 3.13).
_EXTENSION_TAG = r"\.cpython-3(\d+)(t?)-[^/]*\.so$"
# The most directories, and entries in each, looked at: the few an import failed in.
_MAX_DIRS = 8
_MAX_ENTRIES = 4096


def other_python_version(exc: ImportError, package_dirs: list[str]) -> str | None:
    """The Python version ("3.11") that the compiled modules of a granted package
    directory were built for, when an import failed in that directory and none of them
    is for this interpreter: a virtual environment or `pip install --target` folder of
    another Python. None otherwise.

    Looks where the import failed (the frames of exc and of the errors it came from
    that lie in a package directory, and the package of a submodule that was not
    found) and lists those few directories, which the grant lets the program read.
    """
    folders: list[str] = []

    def consider(path: str) -> None:
        granted = _covering(path, package_dirs) is not None
        if granted and len(folders) < _MAX_DIRS and path not in folders:
            folders.append(path)

    current: BaseException | None = exc
    for _ in range(8):  # the error and those it was raised from, as a traceback shows them
        if current is None:
            break
        name = getattr(current, "name", None)
        if isinstance(current, ModuleNotFoundError) and isinstance(name, str) and "." in name:
            package = name.rpartition(".")[0].replace(".", "/")
            for root in package_dirs:
                consider(os.path.join(root, package))
        tb = current.__traceback__
        frames = []
        while tb is not None:
            frames.append(tb.tb_frame.f_code.co_filename)
            tb = tb.tb_next
        for filename in reversed(frames):  # innermost first
            if os.path.isabs(filename):
                consider(os.path.dirname(filename))
        current = current.__cause__ or current.__context__
    import re

    tag = re.compile(_EXTENSION_TAG)
    ours = running_python_version()
    for folder in folders:
        others = set()
        try:
            with os.scandir(folder) as entries:
                for _, entry in zip(range(_MAX_ENTRIES), entries, strict=False):
                    match = tag.search(entry.name)
                    if match is None:
                        continue
                    version = f"3.{match.group(1)}{match.group(2)}"
                    if version == ours:
                        return None  # built for this Python: something else went wrong
                    others.add(version)
        except OSError:
            continue
        if others:
            return sorted(others)[0]
    return None
