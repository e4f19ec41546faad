"""What libraries' own errors say of a refusal or of a failed allocation, where Python
was not told: a file named only in a message (pyarrow, polars, lxml, DuckDB, h5py, whose
native code opens files itself, and python-docx, which passes over the refusal), a
MemoryError that C code lost, the size an allocation asked for, a Rust HTTP client that
found no CA store. pynox.engine.hints makes hints of them.
"""

import errno
import os

from pynox.engine.exception_parts import args_of, called_names, chain, errno_of

# How libraries that open files in their own native code word a refusal, for Python
# gets no filename from them (and from polars, lxml and duckdb no errno either): the
# file is in the message alone. With each, the audit event of the call python would have
# made to do the same, where the message says which.
_DENIED_FILE_MESSAGES = (
    # pyarrow, and so pandas' read_parquet and to_parquet
    (r"Failed to open local file '(.+)'\. Detail: \[errno 13\] Permission denied", None),
    (r"Cannot create directory '(.+)'\. Detail: \[errno 13\] Permission denied", "os.mkdir"),
    (r"Cannot list directory '(.+)'\. Detail: \[errno 13\] Permission denied", "os.listdir"),
    # polars, as Rust words the error, and when it expands a glob
    (r"Permission denied \(os error 13\): (.+)", None),
    (r"attempting to read `(.+)` resulted in an error: Permission denied \(os error 13\)", None),
    # lxml, as libxml2 words it
    (r"Error reading file '(.+)': failed to load .*: Permission denied", None),
    # duckdb (its errors are no OSError), after what it was doing ("Failed to commit: ")
    (r'(?:.*: )?Cannot open file "(.+)": Permission denied', None),
    # duckdb again, for a glob in a folder it was refused listing: it says nothing of that
    (r'(?:.*: )?No files found that match the pattern "(.+)"', "glob"),
    # python-docx (and python-pptx): zipfile.is_zipfile() passed over the refusal, and
    # the message is the same for a file that is missing or no package
    (r"Package not found at '(.+)'", "unreadable"),
    # h5py, as HDF5 words it, with the flags of its open() in hex: a file it makes, it
    # opens to be read back too
    (
        r"Unable to (?:synchronously )?(?:open|create) file \(unable to open file: "
        r"name = '(.+)', errno = 13, error message = 'Permission denied', "
        r"flags = [0-9a-f]+, o_flags = (?P<flags>[0-9a-f]{1,8})\)",
        "open",
    ),
)
# A path is at most 4096 bytes: a longer message is not one of these.
_MAX_MESSAGE = 8192


def denied_in_message(
    exc: BaseException,
) -> "tuple[BaseException, str, tuple[str, tuple[object, ...]] | None] | None":
    """The error of a library's that says a file was refused, when Python was not told
    which, that file (one that exists, or one to be made in a folder that exists), and
    the audit event of the call it stands for, if the message says."""
    import re

    for error in chain(exc):
        args = args_of(error)
        # An OSError made with an errno keeps its message second (pyarrow's).
        message = args[-1] if len(args) in (1, 2) else None
        if not isinstance(message, str) or len(message) > _MAX_MESSAGE:
            continue
        for pattern, call in _DENIED_FILE_MESSAGES:
            match = re.fullmatch(pattern, message.partition("\n")[0])
            named = None if match is None else match.group(1)
            if named is not None and call == "glob":
                named, call = _unlistable_folder(named), "os.listdir"
            elif named is not None and call == "unreadable":
                # Only a file that is there and cannot be opened was refused.
                is_file = os.path.isfile(named)
                named, call = (named if is_file and not readable(named) else None), "open"
            if named is None:
                continue
            path = os.path.abspath(named)
            if os.path.lexists(path) or os.path.isdir(os.path.dirname(path)):
                if call is None:
                    return error, path, None
                flags = match.groupdict().get("flags") if match is not None else None
                # As open()'s audit event has them: the path, a mode, the flags.
                arguments = (path,) if flags is None else (path, None, int(flags, 16))
                return error, path, (call, arguments)
    return None


def readable(path: str) -> bool:
    """Whether path can be opened for reading here (access() does not ask the sandbox)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return False
    os.close(fd)
    return True


def _unlistable_folder(pattern: str) -> str | None:
    """The folder a glob lists ("data" for "data/*.csv"), if listing it is refused."""
    parts = pattern.split("/")
    fixed = []
    for part in parts:
        if any(wildcard in part for wildcard in "*?["):
            break
        fixed.append(part)
    if len(fixed) == len(parts):
        return None  # no wildcard: a file that is not there, under python too
    folder = "/".join(fixed) or ("/" if pattern.startswith("/") else ".")
    try:
        with os.scandir(folder):
            return None
    except PermissionError:
        return folder
    except OSError:
        return None


def duckdb_database(error: BaseException, path: str) -> str | None:
    """The database whose folder a file DuckDB was refused calls for: the one
    duckdb.connect() opened, or the one whose write-ahead log (NAME.wal) it could not
    open. DuckDB makes that log beside the database and reads it back, so the folder
    needs both grants, as SQLite's does; read-only connections work under them too."""
    if type(error).__module__ not in ("_duckdb", "duckdb"):
        return None
    if path.startswith(("/proc/", "/sys/")):
        return None  # what it reads of the machine as it connects (its cgroup's limits)
    if path.endswith(".wal"):
        return path[: -len(".wal")]
    return path if "connect" in called_names(error) else None


# What CPython says when C code failed without setting an exception: under a memory
# limit, an allocation whose MemoryError was lost (an import of scikit-learn under
# --memory=256m ends so about as often as with a MemoryError).
_NO_EXCEPTION_SET = ("error return without exception set",)
_NULL_WITHOUT_EXCEPTION = " returned NULL without setting an exception"


def lost_memory_error(exc: BaseException) -> bool:
    """Whether exc is how a failed allocation may end without a MemoryError: CPython's
    SystemError for C code that failed without setting an exception, an OSError with
    ENOMEM (a file opened or mapped with no memory left), or DuckDB's own error."""
    kind = type(exc)
    if kind.__name__ == "OutOfMemoryException" and kind.__module__ in ("_duckdb", "duckdb"):
        return True
    if kind is SystemError:
        args = args_of(exc)
        said = args[0] if len(args) == 1 else None
        return args == _NO_EXCEPTION_SET or (
            isinstance(said, str) and said.endswith(_NULL_WITHOUT_EXCEPTION)
        )
    return isinstance(exc, OSError) and errno_of(exc) == errno.ENOMEM


# pyarrow's ArrowMemoryError says the size it asked for in bytes: "malloc of size
# 1073741824 failed".
_ALLOCATION_MESSAGE = r"(?:malloc|realloc) of size (\d{1,20}) failed"


def size_in_message(exc: MemoryError) -> int | None:
    """The size in bytes a failed allocation's message says it asked for, if any."""
    import re

    args = args_of(exc)
    message = args[0] if len(args) == 1 else None
    match = re.fullmatch(_ALLOCATION_MESSAGE, message) if isinstance(message, str) else None
    return None if match is None else int(match.group(1))


# What Rust's HTTP clients (polars' reads of a URL among them) say when they find no CA
# store, which only a run with the network reads (pynox.policy.ca_store): they say it
# before they make any socket, even for a plain http:// URL.
_NO_SYSTEM_CERTIFICATES = "No CA certificates were loaded from the system"


def no_system_certificates(exc: BaseException) -> bool:
    """Whether exc, or an error it came from, says no CA store could be read."""
    for error in chain(exc):
        args = args_of(error)
        if any(isinstance(arg, str) and _NO_SYSTEM_CERTIFICATES in arg for arg in args):
            return True
    return False


# What polars panics with when it cannot set the mode of the temporary folder it makes
# for what it reads from a URL (chmod, which seccomp refuses whatever the path).
_POLARS_TEMPORARY_FOLDER = "error initializing temporary directory: Operation not permitted"


def polars_temporary_folder(exc: BaseException) -> bool:
    """Whether exc is polars' panic for the mode of its temporary folder."""
    kind = type(exc)
    if kind.__name__ != "PanicException" or kind.__module__ != "pyo3_runtime":
        return False
    said = args_of(exc)
    message = said[0] if len(said) == 1 else None
    return isinstance(message, str) and _POLARS_TEMPORARY_FOLDER in message[:_MAX_MESSAGE]
