"""A cache of validated pynox.toml files, so most runs skip the ~20 ms TOML parser import.

An entry is one marshal file per config path holding
(CACHE_FORMAT, key, the file's bytes, Config.to_data()). The validated result depends on
exactly the key (the real path, HOME for `~` in paths, a stamp of the validating code) and
the bytes, so that is what is compared. Comparing the bytes, not size/mtime/inode, costs a
read of a small file and cannot miss a rewrite within one timestamp tick. Any problem with
the cache just means a parse: it is an optimisation, never a source of errors.
"""

import marshal
import posix

from pynox import lean_os
from pynox.policy.config_values import Config

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    # (real path, HOME, code stamp)
    CacheKey = tuple[str, str | None, tuple[int, ...]]

CACHE_FORMAT = 3
SUFFIX = ".marshal"
_MAX_NAME = 200
_MAX_ENTRY_BYTES = 1 << 20
# What a missing, unwritable, truncated or tampered cache raises (LookupError: belt and braces).
_IGNORED = (OSError, EOFError, ValueError, TypeError, LookupError)


# The caches pynox keeps, each a folder of its cache root: the validated pynox.toml
# files (here), and where the interpreter's OpenSSL reads its configuration
# (pynox.policy.openssl_dirs).
CONFIG_CACHE = "config"
OPENSSL_CACHE = "openssl"


def pynox_cache_dir(environ: "Mapping[str, str]") -> str | None:
    """$XDG_CACHE_HOME/pynox, else ~/.cache/pynox, else None: pynox's cache, of validated
    configurations (config/), of where OpenSSL reads its configuration (openssl/), and of
    what the bundler builds from (runtimes/, wheels/, rootfs/, conformance/; see
    bundler.paths)."""
    root = cache_root(environ)
    return None if root is None else lean_os.join(root, "pynox")


def cache_dir(environ: "Mapping[str, str]", cache: str = CONFIG_CACHE) -> str | None:
    """$XDG_CACHE_HOME/pynox/<cache>, else ~/.cache/pynox/<cache>, else None (no cache)."""
    pynox_cache = pynox_cache_dir(environ)
    return None if pynox_cache is None else lean_os.join(pynox_cache, cache)


def cache_dirs_of_any_run(
    environ: "Mapping[str, str]", user_home: "str | None" = None
) -> list[str]:
    """Where this run keeps pynox's cache, and where a run or a build of this user with
    another environment would: with or without XDG_CACHE_HOME, with HOME or without it
    (the home directory of the user database, user_home, read now if not given). A
    program that could write any of them could forge a configuration entry that such a
    later run trusts, or plant what a later build takes (a root file system, a link where
    a download is written) (see pynox.policy.trusted)."""
    if user_home is None:
        from pynox.policy.user_paths import home_in_passwd_file  # only runs granted a write

        user_home = home_in_passwd_file()
    environments = (environ, {"HOME": environ.get("HOME", "")}, {"HOME": user_home})
    found = (pynox_cache_dir(each) for each in environments)
    return list(dict.fromkeys(directory for directory in found if directory is not None))


def load_config(path: str, environ: "Mapping[str, str] | None" = None) -> Config:
    """The validated configuration in `path` (config.parse_config_file), from the cache when
    nothing it depends on changed."""
    if environ is None:
        environ = lean_os.environment()
    real_path = lean_os.realpath(path)
    try:
        raw = _read_file(real_path)
    except OSError:
        from pynox.policy import config

        return config.parse_config_file(real_path, environ)  # reports why it cannot be read
    key = (real_path, environ.get("HOME"), _code_stamp())
    entry = _entry_path(real_path, environ)
    if entry is not None:
        cached = _read_entry(entry, key, raw)
        if cached is not None:
            return cached
    # Parse the very bytes stored beside the result, never a second read of the file.
    from pynox.policy import config

    loaded = config.parse_config_bytes(raw, real_path, environ)
    root = cache_root(environ)
    if entry is not None and root is not None:
        from pynox.policy.cache_writer import write_entry

        write_entry(entry, (CACHE_FORMAT, key, raw, loaded.to_data()), root, SUFFIX)
    return loaded


def _read_file(path: str) -> bytes:
    """The file's bytes, through the descriptor alone: open() would build a buffered
    file object around it, which costs a run more than the read."""
    descriptor = posix.open(path, posix.O_RDONLY | posix.O_CLOEXEC)
    try:
        chunks = []
        while chunk := posix.read(descriptor, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        posix.close(descriptor)


def cache_root(environ: "Mapping[str, str]") -> str | None:
    xdg = environ.get("XDG_CACHE_HOME")
    if xdg and lean_os.isabs(xdg):  # the XDG spec says to ignore relative values
        return xdg
    home = environ.get("HOME")
    if home and lean_os.isabs(home):
        return lean_os.join(home, ".cache")
    return None


def _entry_path(real_path: str, environ: "Mapping[str, str]") -> str | None:
    return entry_path(real_path, environ, CONFIG_CACHE)


def entry_path(path: str, environ: "Mapping[str, str]", cache: str) -> str | None:
    """The entry of a cache for a file, named after its path (cache_writer prunes the
    entries of files that are gone by that name); None without a cache, or for a path
    too long to name one."""
    directory = cache_dir(environ, cache)
    name = path.replace("%", "%25").replace("/", "%2F") + SUFFIX
    if directory is None or len(name) > _MAX_NAME:
        return None
    return lean_os.join(directory, name)


# The modules that validate a pynox.toml, beside this one: not imported to find them,
# since a run that finds its configuration in the cache loads only config_values.
_VALIDATING_MODULES = (
    "config.py",
    "config_values.py",
    "location.py",
    "user_paths.py",
    "grants.py",
    "../units.py",
    "../limits.py",  # the bounds of sizes and durations
    "../lean_os.py",  # paths: the real path, ~
)


def _code_stamp() -> tuple[int, ...]:
    """Size and mtime of the validating modules: a changed pynox invalidates old entries."""
    stamp: list[int] = []
    here = lean_os.dirname(__file__)
    for module_file in _VALIDATING_MODULES:
        try:
            module_stat = posix.stat(lean_os.join(here, module_file))
        except OSError:  # no source file, e.g. a frozen or zipped build
            continue
        stamp += (module_stat.st_size, module_stat.st_mtime_ns)
    return tuple(stamp)


def _read_entry(entry: str, key: "CacheKey", raw: bytes) -> "Config | None":
    stored = read_own_entry(entry)
    if type(stored) is not tuple or len(stored) != 4:
        return None
    if stored[0] != CACHE_FORMAT or stored[1] != key or stored[2] != raw:
        return None
    try:
        return Config.from_data(stored[3])
    except _IGNORED:
        return None


def read_own_entry(entry: str) -> object:
    """What a cache entry holds, unmarshalled; None when it is missing, unreadable,
    damaged, or not this user's alone: only trust an entry this user wrote and nobody
    else can change."""
    try:
        descriptor = posix.open(entry, posix.O_RDONLY | posix.O_CLOEXEC | posix.O_NOFOLLOW)
    except (OSError, ValueError):
        return None
    try:
        entry_stat = posix.fstat(descriptor)
        if (
            not lean_os.is_regular_file(entry_stat.st_mode)
            or entry_stat.st_uid != posix.geteuid()
            or entry_stat.st_mode & 0o022
            or entry_stat.st_size > _MAX_ENTRY_BYTES
        ):
            return None
        return marshal.loads(posix.read(descriptor, entry_stat.st_size + 1))
    except _IGNORED:
        return None
    finally:
        posix.close(descriptor)
