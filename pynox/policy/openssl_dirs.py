"""Where the interpreter's OpenSSL reads its configuration and loads modules from.

OpenSSL reads openssl.cnf, which can name providers and engines to load, from the
directory it was built with (OPENSSLDIR), and loads them from the ones it was built with
for each (MODULESDIR, ENGINESDIR), unless OPENSSL_CONF, OPENSSL_MODULES and
OPENSSL_ENGINES say otherwise. A pool that preloads a module making a TLS context
(requests) has it read that configuration before any sandbox exists: no write grant may
reach those directories (pynox.policy.trusted), wherever a build put them.

Only the library says where they are: each as a string of its own (`OPENSSLDIR:
"/usr/lib/ssl"`, which OpenSSL_version() returns). Loading OpenSSL to find out costs a
run some milliseconds, so the answer is kept in pynox's cache (pynox.policy.cache, which
no write grant may reach either), with what it came from: the identity (device, inode,
size, modification and change times) of each of the standard library's modules that
load OpenSSL and of every library they need, as the dynamic loader found them, and of
the loader's own files, and the variables that steer the loader. A run that finds all of
these as they were takes the answer, for the cost of a few stat calls; anything else (a
file changed or gone, an entry missing, damaged or not this user's alone) and it asks
again, the way the first run did.
"""

import posix
import sys

from pynox import lean_os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from mmap import mmap
    from typing import Any

    from pynox.policy.loaded_objects import LoadedObject

    # A file's identity, as stat gives it; None for a file that does not exist.
    Identity = tuple[int, int, int, int, int] | None

# What each directory is to OpenSSL: its own (openssl.cnf, the CA store), its providers',
# its engines'.
CONFIGURATION = "configuration"
PROVIDERS = "providers"
ENGINES = "engines"
_KINDS = (CONFIGURATION, PROVIDERS, ENGINES)
# How the library names each (crypto/cversion.c): the string before the quoted path.
_MARKERS = {
    b'OPENSSLDIR: "': CONFIGURATION,
    b'MODULESDIR: "': PROVIDERS,
    b'ENGINESDIR: "': ENGINES,
}
# Those strings lie together, as one function's: the others are looked for this near the
# first (a pass through libcrypto each would cost the first run milliseconds), and
# through the whole file only where they are not.
_NEAR = 1 << 16
_MAX_PATH = 4096  # PATH_MAX: a longer "path" is no path
# The standard library's modules that load OpenSSL, each of which reads its configuration.
_MODULES = ("_ssl", "_hashlib")
# The dynamic loader's files, and the variables that change where it finds a library.
_LOADER_FILES = ("/etc/ld.so.cache", "/etc/ld.so.preload")
_LOADER_VARIABLES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT", "GLIBC_TUNABLES")
_FORMAT = 1

_found: "list[tuple[str, str]] | None" = None  # this process's answer, once asked


def directories(remember: bool = True) -> "list[tuple[str, str]]":
    """The directories the interpreter's OpenSSL reads its configuration and loads
    modules from, as (path, CONFIGURATION, PROVIDERS or ENGINES); none without OpenSSL.

    From the cache when nothing it came from changed; else OpenSSL is loaded and asked,
    and with remember, the answer kept for later runs. Never raises: what cannot be read
    (a process that may not read its own memory, in a sandbox) gives what could be.
    """
    global _found
    if _found is None:
        cached = _cached()
        _found = cached if cached is not None else _asked(remember)
    return list(_found)


def _entry() -> "tuple[str | None, str | None]":
    """The cache entry of this interpreter, and the cache's root; (None, None) without."""
    from pynox.policy.cache import OPENSSL_CACHE, cache_root, entry_path

    environ = lean_os.environment()
    if not sys.executable:
        return None, None
    return entry_path(sys.executable, environ, OPENSSL_CACHE), cache_root(environ)


def _key() -> "tuple[object, ...]":
    """What the entry is for besides its files: the format, this code's, the interpreter
    and the loader's variables."""
    environ = lean_os.environment()
    return (
        _FORMAT,
        _code_stamp(),
        sys.executable,
        tuple(environ.get(name) for name in _LOADER_VARIABLES),
    )


def _cached() -> "list[tuple[str, str]] | None":
    from pynox.policy.cache import read_own_entry

    entry, _ = _entry()
    stored = read_own_entry(entry) if entry is not None else None
    # (key, ((path, identity), ...), ((directory, what), ...)), as _asked writes it.
    if type(stored) is not tuple or len(stored) != 3 or stored[0] != _key():
        return None
    files, found = stored[1], stored[2]
    try:
        if not all(identity == _identity(path) for path, identity in files):
            return None
        answer = [(path, what) for path, what in found]
    except (TypeError, ValueError):  # an entry of another shape
        return None
    if all(isinstance(path, str) and what in _KINDS for path, what in answer):
        return answer
    return None


def _asked(remember: bool) -> "list[tuple[str, str]]":
    """OpenSSL's answer, from the libraries the loader loaded for it; kept in the cache
    with remember, where every file it came from could be read."""
    sources = []
    verify_paths = None
    for name in _MODULES:
        try:
            module = __import__(name)
        except ImportError:  # an interpreter built without it, or without OpenSSL
            continue
        sources.append(getattr(module, "__file__", None) or "")  # "": built in
        if name == "_ssl":
            verify_paths = module.get_default_verify_paths()
    found: dict[str, str] = {}
    if verify_paths is not None:
        # OPENSSLDIR/cert.pem and OPENSSLDIR/certs, where a build changed no more.
        _, cafile, _, capath = verify_paths
        for path in (cafile, capath):
            if isinstance(path, str) and lean_os.isabs(path):
                found.setdefault(lean_os.dirname(path), CONFIGURATION)
    files = _library_files(sources) if sources else None
    if files is None:
        return list(found.items())  # not all known: asked again next time
    identities = []
    told: set[str] = set()  # what the files read so far named
    for path in files:
        # The modules first, then the libraries they need: once the three are named (by
        # libcrypto, or by a module OpenSSL is built into), the C library's and the
        # loader's own files need no reading, only their identity.
        identity, named = _read_markers(path, read=len(told) < len(_MARKERS))
        identities.append((path, identity))
        for directory, what in named:
            found.setdefault(directory, what)
            told.add(what)
    answer = list(found.items())
    if remember:
        identities += [(path, _identity(path)) for path in _LOADER_FILES]
        _remember((_key(), tuple(identities), tuple(answer)))
    return answer


def _library_files(sources: "list[str]") -> "list[str] | None":
    """The files of the modules (as imported; "" for one built into the executable) and
    of every library they need, as the loader opened them; None where this process
    cannot read what it loaded."""
    from pynox.policy.loaded_objects import loaded_objects, needed_by

    try:
        objects = loaded_objects(links=True)
    except OSError:
        return None
    names = [source for source in sources if source]
    if "" in sources:
        names.append("")  # the executable, as the loader lists it
    files = [_file_of(item) for item in needed_by(names, objects)]
    return list(dict.fromkeys(path for path in files if path))


def _file_of(item: "LoadedObject") -> str:
    if not item.name:
        return sys.executable  # the executable
    return item.name if "/" in item.name else ""  # the kernel's vDSO has no file


def _read_markers(path: str, read: bool) -> "tuple[Identity, list[tuple[str, str]]]":
    """The identity of the file at path and, with read, the directories its strings
    name, read from the one descriptor."""
    try:
        descriptor = posix.open(path, posix.O_RDONLY | posix.O_CLOEXEC)
    except (OSError, ValueError):
        return None, []
    try:
        status = posix.fstat(descriptor)
        identity = _as_identity(status)
        if not read or not lean_os.is_regular_file(status.st_mode) or not status.st_size:
            return identity, []
        import mmap  # only when OpenSSL is asked: once per interpreter

        with mmap.mmap(descriptor, status.st_size, prot=mmap.PROT_READ) as data:
            return identity, _named(data)
    except (OSError, ValueError):
        return None, []
    finally:
        posix.close(descriptor)


def _named(data: "bytes | mmap") -> "list[tuple[str, str]]":
    """The directories the markers in data name (a path in quotes after each)."""
    first, *others = _MARKERS
    found = _found_at(data, first, 0, len(data))
    for marker in others:
        near = [
            at
            for place in found
            for at in _found_at(data, marker, max(0, place - _NEAR), place + _NEAR)
        ]
        if found and not near:  # not beside the first, for once: anywhere
            near = _found_at(data, marker, 0, len(data))
        found += near
    named = []
    for at in sorted(set(found)):
        marker = bytes(data[at : at + len(first)])
        start = at + len(marker)
        end = data.find(b'"', start, start + _MAX_PATH)
        if end > start:
            path = lean_os.fsdecode(bytes(data[start:end]))
            if lean_os.isabs(path) and "\0" not in path:
                named.append((lean_os.normpath(path), _MARKERS[marker]))
    return named


def _found_at(data: "bytes | mmap", marker: bytes, start: int, end: int) -> "list[int]":
    """Where marker starts in data[start:end]."""
    found = []
    at = data.find(marker, start, end)
    while at >= 0:
        found.append(at)
        at = data.find(marker, at + 1, end)
    return found


def _identity(path: str) -> "Identity":
    try:
        return _as_identity(posix.stat(path))
    except (OSError, ValueError):
        return None


def _as_identity(status: "posix.stat_result") -> "tuple[int, int, int, int, int]":
    # The change time too: one who may write a file may set its modification time back.
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


def _code_stamp() -> "tuple[Identity, ...]":
    """This module's and the loader reader's files: a changed pynox asks again."""
    here = lean_os.dirname(__file__)
    return tuple(_identity(lean_os.join(here, name)) for name in _CODE)


_CODE = ("openssl_dirs.py", "loaded_objects.py")


def _remember(stored: "tuple[Any, ...]") -> None:
    entry, root = _entry()
    if entry is None or root is None:
        return
    from pynox.policy.cache import SUFFIX
    from pynox.policy.cache_writer import write_entry

    write_entry(entry, stored, root, SUFFIX)
