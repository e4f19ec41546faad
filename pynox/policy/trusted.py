"""What no write grant may reach: everything a later run trusts.

A sandboxed program writes whatever its write grants let it write. Anything
beneath them that a later pynox run loads before it confines itself (pynox's
own code and start-up image, the interpreter, its standard library (and where
it looks for one as it starts) and the shared libraries it loads, those
LD_LIBRARY_PATH, LD_PRELOAD and LD_AUDIT name, their bytecode where a pycache
prefix keeps it, the environment whose bin/ holds the `pynox` command, the
directories of modules imported before confinement, the directories the
interpreter's OpenSSL reads its configuration and loads modules from) or reads as
its permissions (a pynox.toml where a run looks for one, whether or not one exists
yet, and pynox's cache, whose configurations it trusts and whose runtimes and wheels
a build takes), or the system files every run may read (the time zone, the resolver's
files, the CA store, /dev/null: a program that could turn one into a link would widen
every later run's reads) would let one run widen the next.
Landlock cannot leave a hole in a granted tree, so such a grant is refused.

Paths are compared resolved, as the kernel will see them, and also by the name of
every symbolic link on the way to them: a write grant on the directory that holds
a symbolic link can replace the link itself.
"""

import posix
import sys

from pynox import lean_os
from pynox.errors import PolicyError
from pynox.policy import openssl_dirs, system_paths
from pynox.policy.loaded_objects import loaded_objects, runpath_folders

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

    from pynox.policy.bind_mounts import Mount
    from pynox.policy.resolve import Policy

_OWN_CODE = "pynox's own code, which every run loads before its sandbox exists"
_ENVIRONMENT = "the Python environment pynox runs in (the pynox command and its interpreter)"
_INTERPRETER = "the interpreter's installation, which every run loads before its sandbox exists"
_LIBRARIES = "the shared libraries the interpreter loads before its sandbox exists"
_PRELOAD_LIST = (
    "the dynamic loader's list of libraries it loads into every process, a run's before "
    "its sandbox exists"
)
_LOADER_CONFIG = (
    "the dynamic loader's configuration, which lists the folders it takes libraries from"
)
_LOADER_FOLDER = (
    "a folder /etc/ld.so.conf lists, where the dynamic loader takes libraries from before "
    "the sandbox exists"
)
_LOADER_ENVIRONMENT = "named in {}, which has {} from there before the sandbox exists"
_LOADED_BY = {
    "GCONV_PATH": "the C library load character set converters",
    "OPENSSL_CONF": "OpenSSL read its configuration (which names modules to load)",
    "OPENSSL_MODULES": "OpenSSL load its providers",
    "OPENSSL_ENGINES": "OpenSSL load its engines",
}
_LOADED_OTHERWISE = "the dynamic loader load libraries"
# The directories the interpreter's OpenSSL was built to take them from
# (pynox.policy.openssl_dirs), by what it takes from each.
_OPENSSL_DIRS = {
    openssl_dirs.CONFIGURATION: (
        "the directory the interpreter's OpenSSL reads its configuration from (which names "
        "modules to load) before the sandbox exists"
    ),
    openssl_dirs.PROVIDERS: (
        "the directory the interpreter's OpenSSL loads its providers from before the sandbox exists"
    ),
    openssl_dirs.ENGINES: (
        "the directory the interpreter's OpenSSL loads its engines from before the sandbox exists"
    ),
}
_STDLIB_SEARCH = (
    "where the interpreter looks for its standard library as it starts, before its sandbox exists"
)
_COMMAND = (
    "where the shell looks for the pynox command on PATH, whose first one found runs "
    "before any sandbox exists"
)
_INTERPRETER_COMMAND = (
    "where the shell looks for the interpreter on PATH, whose first one found runs "
    "`python3 -m pynox` before any sandbox exists"
)
_HELPER_SHELL = "the shell pynox runs outside any sandbox to remove scratch directories"
_HELPER_COMMANDS = (
    "where the shell pynox runs outside any sandbox to remove scratch directories finds "
    "its commands"
)
_IMPORTED = "the home of a module pynox imported before the sandbox existed"
_MAPPED = "the folder of a shared library pynox loaded before the sandbox existed"
_LOADER_NAME = (
    "a name the dynamic loader opened a shared library by before the sandbox existed, "
    "which the next run's loader opens again"
)
_RUNPATH = (
    "a folder a loaded library's RUNPATH names, where the dynamic loader looks for the "
    "libraries it needs before the sandbox exists"
)
_IMPORTED_SOURCE = (
    "the file a module pynox imported before the sandbox existed was read from, through "
    "a symbolic link"
)
_IMPORT_PATH = (
    "a folder on pynox's own sys.path, which every run imports from before its sandbox exists"
)
_USER_SITE = (
    "the user's site-packages, whose .pth files python -m pynox runs at start before its "
    "sandbox exists"
)
_BYTECODE = (
    "where the interpreter keeps every module's bytecode (its pycache prefix), which every "
    "run loads before its sandbox exists"
)
_SYSTEM = "a system file every run reads where it exists (made a link, it would widen that read)"
_KERNEL = "the kernel's settings, which could make the kernel run a program outside any sandbox"
_CA_STORE = "the CA store, which runs granted the network read (a planted link would widen that)"
_CONFIG = "where pynox reads its configuration, so the program could grant itself more next time"
_CACHE = (
    "pynox's cache of validated configurations and of where OpenSSL reads its own (which "
    "later runs trust), and of the runtimes, wheels and root file systems later builds take"
)
# What pynox reads its permissions from, of the reasons above.
CONFIGURATION = frozenset({_CONFIG, _CACHE})
SCRATCH_ROOT = "the directory of the pool's scratch directories, which hold other requests' files"


class _Found:
    """What resolving paths found, kept while many are resolved at once: most share
    their folders, and each name is then looked up once."""

    __slots__ = ("directories", "walks")

    def __init__(self) -> None:
        from pynox.policy.path_grant import LinkWalks

        self.directories: dict[str, str] = {}  # a folder's path: the folder resolved
        self.walks = LinkWalks()


def _forms(path: str, found: "_Found | None" = None) -> "list[str]":
    """The path resolved, then every symbolic link the kernel follows on the way to it,
    by the link's own name (its folder resolved): the last component's, and a folder's
    above it (PYTHONPATH=links/mods/sub with links/mods a link), whose folder a grant
    could hold.

    Never normalized before it is resolved: in "link/../pynox.toml", ".." leaves
    where the link leads, as the kernel reads it.
    """
    from pynox.policy.path_grant import links_on_way

    if found is None:
        found = _Found()
    absolute = path if lean_os.isabs(path) else lean_os.join(lean_os.getcwd(), path)
    directory = _resolved(lean_os.dirname(absolute), found.directories)
    name = lean_os.basename(absolute)
    as_named = lean_os.normpath(lean_os.join(directory, name))
    # A last name that is no link: what realpath makes of the path too.
    plain = _plain(name) and not _is_link(as_named)
    resolved = as_named if plain else lean_os.realpath(absolute)
    return list(dict.fromkeys([resolved, *links_on_way(absolute, found.walks)]))


def _resolved(path: str, directories: "dict[str, str]") -> str:
    """lean_os.realpath(path), from its nearest parent resolved before: one lstat for
    each name below it that is no link, where realpath(3) reads every name of the
    path as a link."""
    below: list[str] = []  # the paths under the nearest one resolved before, deepest first
    while path not in directories:
        if not _plain(lean_os.basename(path)):
            directories[path] = lean_os.realpath(path)  # "/", or ".." to take as it comes
            break
        below.append(path)
        path = lean_os.dirname(path)
    found = directories[path]
    for path in reversed(below):
        found = lean_os.join(found, lean_os.basename(path))
        if _is_link(found):
            found = lean_os.realpath(path)
        directories[path] = found
    return found


def _plain(name: str) -> bool:
    """Whether a path's last name is a name, whose parent realpath resolves first."""
    return name not in ("", ".", "..")


def _is_link(path: str) -> bool:
    try:
        return lean_os.is_link(posix.lstat(path).st_mode)
    except FileNotFoundError:
        return False  # realpath keeps a missing name as it is
    except (OSError, ValueError):
        return True  # not known: realpath decides


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def installation() -> "list[tuple[str, str]]":
    """pynox, its environment, the interpreter, what it loaded so far and what this
    process's environment and sys.path name, as (path, what it is) pairs."""
    from pynox.policy.path_grant import links_on_way

    environ = lean_os.environment()
    found = _Found()  # shared by every path below
    named = _loaded_by_environment(environ, lean_os.getcwd())
    resolved = resolve(installed() + named, found)
    roots = {form for form, _ in resolved}
    beneath_roots = tuple(root.rstrip("/") + "/" for root in roots)  # as _inside
    # Modules imported so far, from wherever they came (a package directory, a
    # path given to the pool): a later run imports them again before confinement.
    homes: dict[str, None] = {}
    sources: dict[str, None] = {}
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        if not isinstance(filename, str):
            continue
        if filename not in roots and not filename.startswith(beneath_roots):
            homes.setdefault(lean_os.dirname(filename), None)
        # A module file that is a link (Debian's sitecustomize.py, a module linked into
        # a package directory) is read from where the link leads, outside its home.
        sources.update(dict.fromkeys(_link_chain(filename)[1:]))
    resolved += resolve([(home, _IMPORTED) for home in homes], found)
    try:
        mapped_code = _mapped_files(code=True)
        objects = loaded_objects()
    except OSError as error:
        # What this process loaded is not known: no write grant can be checked.
        return resolved + [(UNREAD, _unread(error))]
    # Shared libraries loaded so far from elsewhere (through an extension module's
    # RUNPATH, by a preload's ctypes.CDLL of a path): a later run loads them again.
    mapped = [
        path for path in mapped_code if path not in roots and not path.startswith(beneath_roots)
    ]
    folders = dict.fromkeys(lean_os.dirname(path) for path in mapped)
    resolved += resolve([(folder, _MAPPED) for folder in folders], found)
    # Every link on the way from the names the loader opened them by: maps gives only
    # where each ends (/usr/lib/x86_64-linux-gnu/blas/libblas.so.3, refused with its
    # folder above), and a grant holding a link the loader went through
    # (/etc/alternatives/libblas.so.3) could lead the next run's loader elsewhere.
    names = [lean_os.join(lean_os.getcwd(), item.name) for item in objects if "/" in item.name]
    links = dict.fromkeys(link for name in names for link in links_on_way(name, found.walks))
    resolved += [
        (link, _LOADER_NAME)
        for link in links
        if link not in roots and not link.startswith(beneath_roots)
    ]
    resolved += resolve([(folder, _RUNPATH) for folder in runpath_folders(objects)], found)
    resolved += resolve([(source, _IMPORTED_SOURCE) for source in sources], found)
    resolved += resolve(_import_path(sys.path), found)
    # Last: finding them may load OpenSSL, whose libraries are then no library this run
    # loaded before its sandbox (above), as they are not where the answer was cached.
    return resolved + resolve(openssl_entries(), found)


def openssl_entries(remember: bool = True) -> "list[tuple[str, str]]":
    """The directories the interpreter's OpenSSL takes its configuration, providers and
    engines from, unresolved (remember: see pynox.policy.openssl_dirs.directories)."""
    return [(path, _OPENSSL_DIRS[what]) for path, what in openssl_dirs.directories(remember)]


# The path of installation()'s entry for what this process could not read of itself (no
# file has it: a path holds no NUL), with what that was as its "what": refuse_trusted_writes
# then refuses every write grant.
UNREAD = "\0"


def _unread(error: OSError) -> str:
    """What installation() could not read, and why, from the error reading it."""
    what = error.filename if isinstance(error.filename, str) else "its own memory"
    return f"{what} ({error.strerror or error})"


def unread_refusal(grant: "str | None", unread: str) -> PolicyError:
    """The refusal of a write grant (of every one, if None) where pynox could not read
    what it loaded (unread: what it could not read, and why)."""
    refused = f"cannot grant writing {grant}" if grant else "cannot grant writes"
    return PolicyError(
        f"{refused}: pynox cannot read {unread}, which tells what it "
        "loaded before its sandbox, to check that the grant reaches none of it; run pynox "
        "where it can read its own entries of /proc (mounted, and the process not made "
        "undumpable by a set-user-ID or set-group-ID start), or grant no writes"
    )


def installed() -> "list[tuple[str, str]]":
    """pynox, its environment, the interpreter and the system's files, unresolved: what
    a sandboxed process finds as pynox does, though its environment was emptied and its
    sys.path is the program's (it reads the loader's configuration too:
    system_paths.LOADER_CONFIG_READS, but for includes outside their usual folder)."""
    entries = [(system_paths.pynox_package_dir(), _OWN_CODE)]
    # pynox starts without `site`, which is what points sys.prefix at a virtual
    # environment: find the environment from the interpreter's place in it.
    environment = lean_os.dirname(lean_os.dirname(sys.executable))
    if lean_os.isfile(lean_os.join(environment, "pyvenv.cfg")):
        entries.append((environment, _ENVIRONMENT))
    bundle_root = lean_os.dirname(sys.prefix)
    if lean_os.isfile(lean_os.join(bundle_root, "bin", "pynox")):
        entries.append((bundle_root, _ENVIRONMENT))  # a bundle: bin/pynox beside python/
    entries += [(prefix, _ENVIRONMENT) for prefix in (sys.prefix, sys.exec_prefix)]
    entries += [(prefix, _INTERPRETER) for prefix in (sys.base_prefix, sys.base_exec_prefix)]
    entries.append((system_paths.stdlib_dir(), _INTERPRETER))
    entries += [(path, _STDLIB_SEARCH) for path in system_paths.stdlib_search()]
    if sys.executable:
        entries.append((sys.executable, _INTERPRETER))  # with its links (_forms)
    if sys.pycache_prefix:
        # PYTHONPYCACHEPREFIX or -X pycache_prefix (python -m pynox; the launcher runs
        # its interpreter isolated): the .pyc of the standard library and of pynox are
        # read from there, not from beside their sources.
        entries.append((sys.pycache_prefix, _BYTECODE))
    entries += [(directory, _LIBRARIES) for directory in system_paths.library_dirs()]
    system = [*system_paths.SYSTEM_FACTS, *system_paths.RESOLVER_FILES]
    entries += [(path, _SYSTEM) for path in system + list(system_paths.DEVICES_READ_WRITE)]
    entries.append((system_paths.LOADER_PRELOAD_LIST, _PRELOAD_LIST))
    loader_files, loader_folders = system_paths.loader_config()
    entries += [(path, _LOADER_CONFIG) for path in loader_files]
    entries += [(folder, _LOADER_FOLDER) for folder in loader_folders]
    entries += [(path, _KERNEL) for path in system_paths.KERNEL_SETTINGS]
    entries.append((system_paths.HELPER_SHELL, _HELPER_SHELL))
    entries += [(folder, _HELPER_COMMANDS) for folder in system_paths.HELPER_COMMAND_FOLDERS]
    entries += [
        (path, _CA_STORE) for path in system_paths.existing(system_paths.CA_STORE_LOCATIONS)
    ]
    return entries


def named_by_environment(
    config_paths: "Iterable[str | None]",
    cwd: str,
    environ: "Mapping[str, str]",
    import_path: "list[str]",
    user_home: str,
) -> "list[tuple[str, str]]":
    """What installation() and configuration() take from the environment pynox started
    with (environ, of system_paths.PATH_NAMING_VARIABLES at least), its own sys.path
    (import_path) and the user's home in /etc/passwd (user_home), unresolved: the folders
    of PATH up to the pynox command, what the C library's variables load, the folders
    pynox imports from and the user's site-packages, the configuration a later run finds
    or is given and the cache."""
    named = _loaded_by_environment(environ, cwd) + _import_path(import_path)
    return named + _configuration_paths(config_paths, cwd, environ, user_home)


def resolve(
    entries: "list[tuple[str, str]]", found: "_Found | None" = None
) -> "list[tuple[str, str]]":
    """entries as write_refusal compares them: each path in the forms the kernel sees
    (found: see _forms)."""
    if found is None:
        found = _Found()
    return [(form, what) for path, what in entries for form in _forms(path, found)]


def _loaded_by_environment(environ: "Mapping[str, str]", cwd: str) -> "list[tuple[str, str]]":
    """What an environment has a later run load before its sandbox exists: the pynox
    command and the interpreter (for `python3 -m pynox`) where the shell finds them on
    PATH, and what the C library's variables name.
    A relative path is taken from cwd, pynox's: the program's process, where a hint asks,
    may have changed directory since."""
    launchers = {lean_os.realpath(path) for path in _launchers() if lean_os.isfile(path)}

    def is_a_launcher(command: str) -> bool:
        return lean_os.realpath(command) in launchers

    entries = [(path, _COMMAND) for path in _command_on_path("pynox", is_a_launcher, environ, cwd)]
    for name in _interpreter_names():
        found = _command_on_path(name, _runs_this_interpreter, environ, cwd)
        entries += [(path, _INTERPRETER_COMMAND) for path in found]
    return entries + [
        (
            lean_os.join(cwd, path),
            _LOADER_ENVIRONMENT.format(variable, _LOADED_BY.get(variable, _LOADED_OTHERWISE)),
        )
        for path, variable in system_paths.loader_environment_paths(environ)
    ]


def _import_path(import_path: "list[str]") -> "list[tuple[str, str]]":
    """Where the interpreter imports from (PYTHONPATH and the user's site-packages under
    python -m pynox, which the launcher's isolated interpreter has not): a module or a
    .pth file planted there runs in a later run before its sandbox exists, whether or
    not anything was imported from there yet."""
    entries = [(entry, _IMPORT_PATH) for entry in import_path if entry and isinstance(entry, str)]
    # The user's site-packages, where site reads .pth files at start: on sys.path only
    # once it exists, which a program granted its parent could make it.
    site = sys.modules.get("site")
    user_site = getattr(site, "USER_SITE", None) if getattr(site, "ENABLE_USER_SITE", 0) else None
    if isinstance(user_site, str):
        entries.append((user_site, _USER_SITE))
    return entries


_MAX_LINKS = 40  # as the kernel follows at most 40 links in one lookup


def _link_chain(path: str) -> "list[str]":
    """path, then each name its symbolic links lead to, the last a file's (or a name
    that does not exist): a write grant over any of their directories could replace
    one, and with it what a later run reads through the first."""
    chain = [path]
    for _ in range(_MAX_LINKS):
        try:
            target = posix.readlink(chain[-1])
        except (OSError, ValueError):
            break  # not a link: the file itself
        # Not normalized: ".." after a link leaves where the link leads (see _forms).
        chain.append(lean_os.join(lean_os.dirname(chain[-1]), target))
    return chain


def _launchers() -> "list[str]":
    """Where this installation's `pynox` command is: beside the interpreter (a virtual
    environment), or in the bin/ beside a bundle's python/."""
    bundle_root = lean_os.dirname(sys.prefix)
    return [
        lean_os.join(lean_os.dirname(sys.executable), "pynox"),
        lean_os.join(bundle_root, "bin", "pynox"),
    ]


def _interpreter_names() -> "list[str]":
    """The names `python3 -m pynox` may be typed with (python, python3, python3.13)."""
    major, minor = sys.version_info[:2]
    return ["python", f"python{major}", f"python{major}.{minor}"]


def _runs_this_interpreter(command: str) -> bool:
    """Whether the command (an executable's path) starts this interpreter in this
    environment: a virtual environment's is found by the folder the command is named in,
    not where its link leads."""
    if not _same_file(command, sys.executable):
        return False
    environment = lean_os.dirname(lean_os.dirname(sys.executable))
    if not lean_os.isfile(lean_os.join(environment, "pyvenv.cfg")):
        return True
    return _same_file(lean_os.dirname(command), lean_os.dirname(sys.executable))


def _same_file(path: str, other: str) -> bool:
    """Whether two paths lead to one file (by identity: cheaper than resolving both)."""
    try:
        first, second = posix.stat(path), posix.stat(other)
    except (OSError, ValueError):
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _command_on_path(
    name: str, ours: "Callable[[str], bool]", environ: "Mapping[str, str]", cwd: str
) -> "list[str]":
    """Where the shell looks for the command name on PATH (install.sh links pynox into
    ~/.local/bin), up to the one it finds when that is ours, this installation's: a
    program that replaced that link, or put a command of that name in a folder before
    it, would run unconfined as the next `pynox` or `python3 -m pynox`. Nothing when the
    shell finds another one, or none.
    """
    looked_in = []
    for folder in (environ.get("PATH") or "").split(":"):
        # A relative folder ("bin", or "" for "."), from the working directory of whichever
        # run: this one's (cwd), where a command typed next is likely run again.
        candidate = lean_os.join(cwd, folder, name)
        looked_in.append(candidate)
        # access() first: it says False for a name not there without raising, as stat does.
        if posix.access(candidate, posix.X_OK) and lean_os.isfile(candidate):
            return looked_in if ours(candidate) else []
    return []


def configuration(
    config_paths: "Iterable[str | None]", cwd: str, environ: "Mapping[str, str]"
) -> "list[tuple[str, str]]":
    """The configuration a later run would discover or be given, and the cache."""
    return resolve(_configuration_paths(config_paths, cwd, environ))


def _configuration_paths(
    config_paths: "Iterable[str | None]",
    cwd: str,
    environ: "Mapping[str, str]",
    user_home: "str | None" = None,
) -> "list[tuple[str, str]]":
    from pynox.policy.cache import cache_dirs_of_any_run
    from pynox.policy.location import CONFIG_ENV, CONFIG_NAME
    from pynox.policy.user_paths import expand_home

    paths = [lean_os.join(cwd, CONFIG_NAME)]  # whether or not it exists yet
    if environ.get(CONFIG_ENV):
        paths.append(lean_os.join(cwd, expand_home(environ[CONFIG_ENV], environ)))
    paths += [path for path in config_paths if path]
    entries = [(path, _CONFIG) for path in paths]
    if user_home is None:
        from pynox.policy.user_paths import home_in_passwd_file  # read once for both

        user_home = home_in_passwd_file()
    return entries + [(cache, _CACHE) for cache in cache_dirs_of_any_run(environ, user_home)]


def write_refusal(grant: str, trusted: "list[tuple[str, str]]") -> "tuple[str, str, bool] | None":
    """Why a grant of the real path grant would be refused: the trusted path, what it
    is, and whether the grant covers it (rather than being or lying inside it); None
    when it would not be."""
    # The most telling reason first: the path itself, the innermost tree holding
    # the grant, then the first trusted path beneath it.
    holding = [(path, what) for path, what in trusted if _inside(grant, path)]
    if holding:
        path, what = max(holding, key=lambda entry: len(entry[0]))
        return path, what, False
    for path, what in trusted:
        if _inside(path, grant):
            return path, what, True
    return None


def named(paths: "Iterable[str]", what: str) -> "list[tuple[str, str]]":
    """Paths a later run reaches by these names (absolute ones), as trusted entries of
    what they are: resolved, and by each link on the way, which a grant could replace."""
    return [(form, what) for path in paths for form in _forms(path)]


def scratch_root(path: str) -> "list[tuple[str, str]]":
    """A pool's scratch root, where every run's scratch directory is made: no request may
    be granted to read or write it, anything inside it, or anything that holds it."""
    return [(form, SCRATCH_ROOT) for form in _forms(path)]


def refuse_trusted_writes(
    policy: "Policy", trusted: "list[tuple[str, str]]", mounts: "list[Mount] | None" = None
) -> None:
    """Raises PolicyError when a write grant of the policy reaches a trusted path, also
    through a bind mount (mounts: as bind_mounts.mounts() gives them, read if None), or a
    device that is the machine itself (device_refusal)."""
    for grant in policy.allow_write:
        for path, what in trusted:
            if path == UNREAD:
                raise unread_refusal(grant, what)
    _refuse_reaching("writing", policy.allow_write, trusted, "for the program's output")
    if mounts is None and policy.allow_write:
        from pynox.policy import bind_mounts

        mounts = bind_mounts.mounts()
    _refuse_mounted("writing", policy.allow_write, trusted, mounts)
    for grant in policy.allow_write:
        refusal = device_refusal(grant, mounts)
        if refusal is not None:
            device, what = refusal
            relation = f"it is {what}" if device == grant else f"it holds {device}, {what}"
            raise PolicyError(
                f"cannot grant writing {grant}: {relation}; no run is granted that, write to "
                "a file instead"
            )


def _refuse_mounted(
    verb: str,
    grants: "list[str]",
    entries: "list[tuple[str, str]]",
    mounts: "list[Mount] | None",
) -> None:
    """Raises PolicyError when a grant reaches one of entries (as write_refusal compares
    them) through a bind mount (see pynox.policy.bind_mounts), which no comparison of
    paths sees."""
    from pynox.policy import bind_mounts

    for grant in grants:
        mounts = bind_mounts.mounts() if mounts is None else mounts
        for path, point in bind_mounts.shown_elsewhere(grant, mounts):
            refusal = write_refusal(path, entries)
            if refusal is None:
                continue
            reached, what, covers = refusal
            relation = "is" if reached == path else "holds" if covers else "lies inside"
            raise PolicyError(
                f"cannot grant {verb} {grant}: through the mount at {point} it reaches {path}, "
                f"which {relation} {reached}, {what}; grant {_away_from(point, grant)} instead"
            )


def _away_from(point: str, grant: str) -> str:
    """What to grant instead of a grant that reaches too far through the mount at point."""
    if _inside(grant, point):
        return "a directory outside that mount"
    if _inside(point, grant):
        return "a directory that holds no such mount"
    return "a directory that holds nothing that mount shows"


# --- devices -------------------------------------------------------------------------
#
# Landlock's write right opens a device node for writing like any file, and a run keeps
# the user's id: run as root, a write grant on a disk or on the memory devices is the
# whole machine, whatever the path rules say. Character devices that hold nothing of
# the machine's (/dev/null, /dev/zero, a terminal, a serial port) stay grantable.

_FILE_TYPE = 0o170000  # the S_IFMT bits of st_mode
_BLOCK_DEVICE = 0o060000
_CHARACTER_DEVICE = 0o020000
_DISK = (
    "a block device (a disk or a part of one): writing it rewrites the file systems on it, "
    "past every path rule"
)
_MACHINE = (
    "a device of the kernel's memory, log or I/O ports, a processor's registers, a disk's "
    "raw commands or the machine's keyboard and mouse: writing it reaches past every path rule"
)
# Character devices by major number (the kernel's Documentation/admin-guide/devices.txt):
# the memory driver's, of which null, zero, full, random and urandom hold nothing; input
# (/dev/input/event*: what is written there reaches the console and the desktop as if
# typed); SCSI generic (/dev/sg*: raw commands to a disk); x86's model-specific
# registers (/dev/cpu/N/msr).
_MEMORY_MAJOR = 1
_HARMLESS_MEMORY_MINORS = frozenset({3, 5, 7, 8, 9})
_MACHINE_MAJORS = frozenset({13, 21, 202})
# Where device nodes live: a directory grant there is searched for them (elsewhere a
# program cannot make one: creating device nodes is never granted).
_DEVICES = "/dev"


def device_refusal(path: str, mounts: "list[Mount] | None" = None) -> "tuple[str, str] | None":
    """(the device, what it is) when path is, or is a folder under /dev that holds, a
    device no write grant may reach; else None. mounts (as bind_mounts.mounts() gives
    them): a folder where every mount is nodev is not searched, no device opens there."""
    what = _machine_device(path, follow=True)
    if what is not None:
        return path, what
    if not _inside(path, _DEVICES) or not lean_os.isdir(path):
        return None
    if mounts is not None:
        from pynox.policy import bind_mounts

        if not bind_mounts.opens_devices(path, mounts):
            return None
    for entries in _folder_entries(path):
        for entry in entries:
            # The listing gives each entry's type (a stat where it does not): a regular
            # file, folder or link (not followed) is no device, and needs no stat. A name
            # cannot turn into a device node in the grant later: making one is never granted.
            if (
                entry.is_file(follow_symlinks=False)
                or entry.is_dir(follow_symlinks=False)
                or entry.is_symlink()
            ):
                continue
            what = _machine_device(entry.path, follow=False)
            if what is not None:
                return entry.path, what
    return None


def _machine_device(path: str, follow: bool) -> "str | None":
    try:
        status = posix.stat(path, follow_symlinks=follow)
    except (OSError, ValueError):
        return None
    kind = status.st_mode & _FILE_TYPE
    if kind == _BLOCK_DEVICE:
        return _DISK
    if kind != _CHARACTER_DEVICE:
        return None
    major, minor = posix.major(status.st_rdev), posix.minor(status.st_rdev)
    if major in _MACHINE_MAJORS or (
        major == _MEMORY_MAJOR and minor not in _HARMLESS_MEMORY_MINORS
    ):
        return _MACHINE
    return None


def refuse_scratch_base_writes(
    policy: "Policy", bases: "Iterable[str]", mounts: "list[Mount] | None" = None
) -> None:
    """Raises PolicyError when a write grant is, or holds, a folder where runs make their
    scratch directories (bases: this run's TMPDIR and /tmp), also through a bind mount
    (mounts: as bind_mounts.mounts() gives them, read if None).

    Each run's directory is emptied at its end with pynox's rights, folders its owner
    cannot enter given their rights back first. A program granted the folder that holds
    another run's directory moved into it a folder of its grant whose files it may not
    remove itself, and that run's end removed them. A folder inside a base holds no run's
    directory, and may be granted.
    """
    from pynox.policy import bind_mounts

    forms = [form for base in bases for form in _forms(base)]
    for grant in policy.allow_write:
        for form in forms:
            if _inside(form, grant):
                relation = "is" if form == grant else "holds"
                raise PolicyError(
                    f"cannot grant writing {grant}: it {relation} {form}, where runs make "
                    "their scratch directories, which pynox empties with its own rights as "
                    "each run ends; grant a subdirectory of it for the program's output instead"
                )
    for grant in policy.allow_write:
        mounts = bind_mounts.mounts() if mounts is None else mounts
        for path, point in bind_mounts.shown_elsewhere(grant, mounts):
            for form in forms:
                if _inside(form, path):
                    relation = "is" if form == path else "holds"
                    raise PolicyError(
                        f"cannot grant writing {grant}: through the mount at {point} it reaches "
                        f"{path}, which {relation} {form}, where runs make their scratch "
                        "directories, which pynox empties with its own rights as each run ends; "
                        f"grant {_away_from(point, grant)} instead"
                    )


def refuse_private_reads(
    policy: "Policy", private: "list[tuple[str, str]]", mounts: "list[Mount] | None" = None
) -> None:
    """Raises PolicyError when a read of the policy (a grant, a package directory, a
    script's directory) reaches a path that holds other runs' data (scratch_root), also
    through a bind mount (mounts: as bind_mounts.mounts() gives them, read if None)."""
    reads = policy.implicit_read + policy.allow_read + policy.package_dirs
    _refuse_reaching("reading", reads, private, "for the program's data")
    _refuse_mounted("reading", reads, private, mounts)


def reaches(path: str, entries: "list[tuple[str, str]]") -> "str | None":
    """What of `entries` the path (already normalized) is, lies inside or covers, if any."""
    refusal = write_refusal(path, entries)
    return None if refusal is None else refusal[1]


def _refuse_reaching(
    verb: str, grants: "list[str]", entries: "list[tuple[str, str]]", subdirectory: str
) -> None:
    for grant in grants:
        refusal = write_refusal(grant, entries)
        if refusal is None:
            continue
        path, what, covers = refusal
        if not covers:
            relation = "is" if path == grant else "lies inside"
            raise PolicyError(
                f"cannot grant {verb} {grant}: it {relation} {path}, {what}; grant a "
                "directory outside it instead"
            )
        raise PolicyError(
            f"cannot grant {verb} {grant}: it covers {path}, {what}; grant a directory "
            f"that holds none of it instead, such as a subdirectory {subdirectory}"
        )


# --- hard links ----------------------------------------------------------------------
#
# A file has as many names as hard links, and Landlock grants by name: a write grant on
# a folder that holds another link to libpython (perf's build-id cache keeps one; conda's
# and uv's caches link every file of the environments they install) lets the program
# rewrite libpython itself. Paths cannot show that; inode numbers can.

_LINKED = "another name of {}, which runs load before their sandbox exists"
_MAX_ENTRIES = 200_000  # a write grant searched for links; past that, refused unchecked
# File systems whose files all have the device number of the file system's folders: a
# grant on them alone is not searched when nothing pynox loaded is on its device. Each
# btrfs subvolume has a device of its own, and overlayfs gives a file of a lower layer on
# another file system that layer's device.
_ONE_DEVICE_FILE_SYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "tmpfs", "f2fs"})
# File systems whose folder listings give each file's inode number as stat does: a grant
# on them is searched by listing its folders, elsewhere by an lstat of each entry.
# overlayfs lists a file copied up by its inode number in the upper layer; a FUSE file
# system may list no inode number at all.
_LISTED_AS_STAT_FILE_SYSTEMS = _ONE_DEVICE_FILE_SYSTEMS | {"btrfs"}
# An overlay of layers on different file systems (xino off) gives each of its files the
# device of its layer, which no mount lists, and gives two names of one file copied up
# different devices and inode numbers (the name in a folder of both layers, those of the
# file in the lower one): a file there whose device no mount lists, of more than one
# name, may be one pynox loaded, and is refused. An overlay of layers on one file system,
# or with xino, gives its files its own device instead: a file of its upper layer is
# then also taken as that layer's file of its inode number, which pynox may have loaded
# from the layer's file system without the overlay (_linked_name).
_OVERLAY = "overlay"


def linked_files() -> "dict[tuple[int, int], str]":
    """The files this process loaded before its sandbox that have more than one name,
    as {(device, inode): path}: usually none, and then no grant needs searching.

    Those are the files mapped into the process (the interpreter, libpython, extension
    modules), the `pynox` command that starts the next run, the source and bytecode of
    every module imported so far, and all of pynox's package, which other kinds of run
    import. A module of the standard library that this process did not import is not
    among them.
    """
    try:
        candidates = [sys.executable, *_launchers(), *_mapped_files()]
    except OSError as error:
        raise unread_refusal(None, _unread(error)) from None
    for module in list(sys.modules.values()):
        for attribute in ("__file__", "__cached__"):
            path = getattr(module, attribute, None)
            if isinstance(path, str):
                candidates.append(path)
    candidates += _files_below(system_paths.pynox_package_dir())
    linked: dict[tuple[int, int], str] = {}
    for path in candidates:
        try:
            status = posix.stat(path)
        except (OSError, ValueError):
            continue
        if status.st_nlink > 1 and lean_os.is_regular_file(status.st_mode):
            linked.setdefault((status.st_dev, status.st_ino), lean_os.realpath(path))
    return linked


# How /proc/self/maps writes a newline in a path, which would end its line; nothing else
# is escaped (a carriage return stays as it is, and so does a backslash).
_MAPS_NEWLINE = b"\\012"


def _mapped_files(code: bool = False) -> "list[str]":
    """The files mapped into this process (only as code, if code), from /proc/self/maps
    ("address perms offset device inode path"; a path in brackets or marked deleted names
    no file). Raises OSError where it cannot be read."""
    with open("/proc/self/maps", "rb") as maps:
        lines = maps.read().split(b"\n")  # lines end at a newline only
    paths = set()
    for line in lines:
        fields = line.split(b" ", 5)
        if len(fields) < 6 or (code and b"x" not in fields[1]):
            continue
        path = fields[5].lstrip(b" ")  # padded to a column
        if path.startswith(b"/") and not path.endswith(b" (deleted)"):
            # "\012" is a newline, or those four characters in a name: both are kept.
            paths.update({path, path.replace(_MAPS_NEWLINE, b"\n")})
    return [lean_os.fsdecode(path) for path in paths]


def _files_below(top: str) -> "list[str]":
    return [
        entry.path
        for entries in _folder_entries(top)
        for entry in entries
        if not entry.is_dir(follow_symlinks=False)
    ]


class _HiddenNames(Exception):
    """A folder this user may not list but may search: the program, which runs as this
    user and may not change a folder's mode, opens what it holds by name all the same."""

    def __init__(self, folder: str) -> None:
        super().__init__(folder)
        self.folder = folder


def _folder_entries(top: str, hidden: bool = False) -> "Iterator[list[posix.DirEntry[str]]]":
    """What each folder below top holds, top first, never following a link. hidden:
    raises _HiddenNames at a folder whose names cannot be listed but can be opened."""
    folders = [top]
    while folders:
        folder = folders.pop()
        try:
            entries = list(posix.scandir(folder))
        except PermissionError:
            if hidden and posix.access(folder, posix.X_OK, effective_ids=True):
                raise _HiddenNames(folder) from None
            continue
        except OSError:
            continue
        folders += [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
        yield entries


_FEW_ENTRIES = 1_000  # a write grant checked entry by entry for files with more than one name


def may_hold_links(policy: "Policy") -> bool:
    """Whether a write grant of the policy may hold another name of some file: it is or
    holds a file with more than one name, or more than a few entries to check. When
    none may, what pynox loaded (linked_files, some 250 stat calls) need not be found
    at all: an output folder holds a few files, each with one name."""
    seen = 0
    for grant in policy.allow_write:
        try:
            status = posix.stat(grant)
        except OSError:
            continue  # refuse_linked_writes skips it too
        if not lean_os.is_directory(status.st_mode):
            if status.st_nlink > 1:
                return True
            continue
        try:
            for entries in _folder_entries(grant, hidden=True):
                seen += len(entries)
                if seen > _FEW_ENTRIES:
                    return True
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False) or entry.is_symlink():
                        continue  # as refuse_linked_writes: a link is another file
                    try:
                        if entry.stat(follow_symlinks=False).st_nlink > 1:
                            return True
                    except OSError:
                        return True  # not known: the full search decides
        except _HiddenNames:
            return True  # the full search decides
    return False


def refuse_linked_writes(
    policy: "Policy", linked: "dict[tuple[int, int], str]", mounts: "list[Mount] | None" = None
) -> None:
    """Raises PolicyError when a write grant of the policy holds another name of a file
    in linked (linked_files), or is too large to search for one."""
    if not linked:
        return
    from pynox.policy import bind_mounts

    devices = {device for device, _ in linked}
    inodes = {inode for _, inode in linked}
    for grant in policy.allow_write:
        try:
            status = posix.stat(grant)
        except OSError:
            continue
        mounts = bind_mounts.mounts() if mounts is None else mounts
        kinds = bind_mounts.kinds_reached(grant, mounts)
        elsewhere = kinds <= _ONE_DEVICE_FILE_SYSTEMS and status.st_dev not in devices
        if elsewhere and not bind_mounts.holds_a_mount(grant, mounts):
            continue  # a hard link never crosses file systems, but a mount inside may
        if _OVERLAY in kinds and _overlay_apart(grant, linked, mounts):
            continue
        uppers = _overlay_uppers(mounts) if _OVERLAY in kinds else None
        if lean_os.is_directory(status.st_mode):
            by_listing = kinds <= _LISTED_AS_STAT_FILE_SYSTEMS
            listed = bind_mounts.devices(mounts) if _OVERLAY in kinds else None
            named = _search(grant, inodes if by_listing else None, linked, listed, uppers)
        else:
            target = _linked_name(status, linked, uppers)
            named = None if target is None else (grant, target)
        if named is not None:
            found, target = named
            raise PolicyError(
                f"cannot grant writing {grant}: {found} is {_LINKED.format(target)}; grant "
                "a directory that holds no such link, or remove that link"
            )


def _overlay_apart(grant: str, linked: "dict[tuple[int, int], str]", mounts: "list[Mount]") -> bool:
    """Whether no name anywhere on the overlay that holds grant (which holds no mount)
    can write a file of linked, which then need not be searched for there.

    A name there is written in the overlay's upper layer: a name of a lower layer's file
    is copied up first, and the lower file is left as it was. So it writes a file of
    linked only where that file is seen through an overlay (this one, or another whose
    upper layer shares a file system with it) or lies on this one's upper file system.
    Neither holds when every file of linked is on a file system that gives its files its
    own device number, other than the upper layer's. Renaming the grant changes nothing:
    a name never leaves its file system, nor does a hard link.
    """
    from pynox.policy import bind_mounts

    overlay = bind_mounts.mount_of(grant, mounts)
    if overlay is None or overlay.kind != _OVERLAY or bind_mounts.holds_a_mount(grant, mounts):
        return False
    upper_device = _upper_device(overlay)
    if upper_device is None:
        return False
    for (device, _), path in linked.items():
        holding = bind_mounts.mount_of(path, mounts)
        if device == upper_device or holding is None:
            return False
        if holding.kind not in _LISTED_AS_STAT_FILE_SYSTEMS:
            return False
    return True


def _overlay_uppers(mounts: "list[Mount]") -> "dict[int, int | None]":
    """{an overlay's device: its upper layer's, None where that layer cannot be looked
    at (not in this mount namespace)}, for the overlays with an upper layer."""
    uppers: dict[int, int | None] = {}
    for mount in mounts:
        major, _, minor = mount.device.partition(":")
        if mount.kind != _OVERLAY or not mount.upper or not (major + minor).isdigit():
            continue
        uppers[posix.makedev(int(major), int(minor))] = _upper_device(mount)
    return uppers


def _upper_device(overlay: "Mount") -> "int | None":
    """The device of an overlay's upper layer, or None where pynox cannot look at it: none,
    named in another mount namespace (a container's), or named relative to the folder
    where the overlay was mounted, as mountinfo shows a name given so (read from here, it
    may name another folder, on another file system)."""
    if not overlay.upper.startswith("/"):
        return None
    try:
        return posix.stat(overlay.upper).st_dev
    except (OSError, ValueError):
        return None


def _linked_name(
    status: "posix.stat_result",
    linked: "dict[tuple[int, int], str]",
    uppers: "dict[int, int | None] | None",
) -> "str | None":
    """The file of linked that a file (status: its lstat) is another name of, or None.

    An overlay of layers on one file system, or with xino, gives its files its own
    device, and a file of its upper layer that layer's inode number: that file is the
    upper layer's of that number too, which pynox may have loaded from there, not
    through the overlay (uppers: see _overlay_uppers). Where the upper layer's file
    system is not known, a file of any of linked's devices with that number is taken.
    """
    target = linked.get((status.st_dev, status.st_ino))
    if target is not None or uppers is None or status.st_nlink < 2:
        return target
    if status.st_dev not in uppers:
        return None
    upper = uppers[status.st_dev]
    if upper is not None:
        return linked.get((upper, status.st_ino))
    return next((path for (_, inode), path in linked.items() if inode == status.st_ino), None)


def _search(
    top: str,
    inodes: "set[int] | None",
    linked: "dict[tuple[int, int], str]",
    listed: "set[int] | None" = None,
    uppers: "dict[int, int | None] | None" = None,
) -> "tuple[str, str] | None":
    """The first path below top that names a linked file, and the file it names, or
    None. Raises PolicyError when top holds too much to search. inodes: the inode
    numbers of linked, where a folder listing gives them as stat does; else None, each
    entry is looked at with lstat; and with listed (the devices of the mount table, for
    an overlay), a file of more than one name whose device is not among them is
    refused: see _OVERLAY; uppers: see _linked_name."""
    try:
        return _search_listed(top, inodes, linked, listed, uppers)
    except _HiddenNames as hidden:
        raise PolicyError(
            f"cannot grant writing {top}: pynox cannot list {hidden.folder} to search it for "
            "another name of a file pynox loads before its sandbox (such as a hard link to "
            "libpython), and the program could open what it holds by name; let this user "
            "read that folder, or grant a directory that holds no such folder"
        ) from None


def _search_listed(
    top: str,
    inodes: "set[int] | None",
    linked: "dict[tuple[int, int], str]",
    listed: "set[int] | None",
    uppers: "dict[int, int | None] | None",
) -> "tuple[str, str] | None":
    seen = 0
    for entries in _folder_entries(top, hidden=True):
        seen += len(entries)
        if seen > _MAX_ENTRIES:
            raise PolicyError(
                f"cannot grant writing {top}: it holds more than {_MAX_ENTRIES:,} entries to "
                "search for another name of a file pynox loads before its sandbox (such as "
                "a hard link to libpython); grant a smaller directory"
            )
        for entry in entries:
            if entry.is_dir(follow_symlinks=False) or entry.is_symlink():
                continue
            if inodes is not None and entry.inode() not in inodes:
                continue  # d_ino: no stat unless it may be one
            try:
                status = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            target = _linked_name(status, linked, uppers)
            if target is not None:
                return entry.path, target
            if listed is not None and status.st_nlink > 1 and status.st_dev not in listed:
                raise PolicyError(
                    f"cannot grant writing {top}: {entry.path} has another name, on an "
                    "overlay of layers on different file systems, where pynox cannot tell "
                    "whether it is a file that runs load before their sandbox exists (such as "
                    "pynox's own code); grant a directory that holds no such link, or "
                    "remove that link"
                )
    return None
