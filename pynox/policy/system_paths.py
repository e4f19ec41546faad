"""What the interpreter itself must read inside the sandbox, and nothing more.

The standard library with its extension modules, the shared libraries they
load, the pynox package, and a few read-only system facts Python consults
(time zone, CPU count, the operating system's name, the table of MIME types,
terminal descriptions, the entropy devices). The standard library is granted as
one tree: one Landlock rule instead of one per entry, which keeps a run's
start-up short. Where an interpreter keeps its own site-packages inside that
tree (python-build-standalone, pyenv), those files are readable too; sys.path
does not list them, and a bundle ships only pynox there.
"""

import posix
import sys

from pynox import PACKAGE_DIR, lean_os
from pynox.policy.location import CONFIG_ENV

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# Where mimetypes looks for the system's table of types (mimetypes.knownfiles, the
# same list on every supported Python): it reads each one that exists, and raises
# when one of them cannot be read. Written out, since importing mimetypes costs a
# run's start-up more than the list does.
MIME_TYPES_FILES = (
    "/etc/mime.types",
    "/etc/httpd/mime.types",
    "/etc/httpd/conf/mime.types",
    "/etc/apache/mime.types",
    "/etc/apache2/mime.types",
    "/usr/local/etc/httpd/conf/mime.types",
    "/usr/local/lib/netscape/mime.types",
    "/usr/local/etc/mime.types",
)

# Read-only files and trees Python and libc consult at run time.
SYSTEM_FACTS = (
    "/etc/ld.so.cache",  # the dynamic loader's index, for extension modules' libraries
    "/etc/localtime",  # time.localtime() and friends
    "/usr/share/zoneinfo",  # zoneinfo
    "/usr/lib/locale",  # locale.setlocale(), with LANG passed through
    "/sys/devices/system/cpu",  # os.cpu_count()
    "/etc/os-release",  # platform.freedesktop_os_release(), which falls back to
    "/usr/lib/os-release",  # the second when the first cannot be read
    *MIME_TYPES_FILES,  # mimetypes.guess_type() and friends
    # The terminal descriptions curses.setupterm() looks up, with TERM passed: where
    # Debian, Fedora and python-build-standalone's ncurses look for them.
    "/etc/terminfo",
    "/lib/terminfo",
    "/usr/share/terminfo",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
)

# What the resolver reads to turn a host name into addresses: readable only
# to a program granted the network, which is the one that can use them.
RESOLVER_FILES = (
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
)

# Where the CA certificates that verify TLS peers live: OpenSSL's directory for
# each common build (Debian, Alpine and python-build-standalone, Fedora, its own
# default) and the distributions' certificate trees. A network run reads the
# ones this interpreter's OpenSSL names (see pynox.policy.ca_store); no write grant may
# reach them, since a link planted there would widen a later run's reads.
CA_STORE_LOCATIONS = (
    "/usr/lib/ssl",
    "/etc/ssl",
    "/etc/pki",
    "/usr/local/ssl",
    "/usr/share/ca-certificates",
    "/usr/local/share/ca-certificates",
)

# Variables naming a CA file or directory: OpenSSL's own and those of requests
# and curl, each in the order its readers read them. Passed to a program with the
# network, what they name is readable.
OPENSSL_CA_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR")
REQUESTS_CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
CA_VARIABLES = OPENSSL_CA_VARIABLES + REQUESTS_CA_VARIABLES

# The links of /proc that name the process that opens them: the sandboxed process grants
# its own entries when it confines itself (pynox.engine.sandbox).
OWN_PROCESS_LINKS = ("/proc/self", "/proc/thread-self")

# The kernel's settings. Written as root, one makes the kernel run a program outside any
# sandbox (kernel.core_pattern and kernel.modprobe under /proc/sys, a cgroup's
# release_agent and uevent_helper under /sys) or stops the machine (sysrq-trigger).
KERNEL_SETTINGS = ("/proc/sys", "/proc/sysrq-trigger", "/sys")

# What a program may read of its own process: the control groups it is in, which the
# programs and libraries that size themselves to the machine read first (DuckDB refuses
# to connect without it). Per process, so the sandboxed process grants it itself.
OWN_PROCESS_FACTS = ("/proc/self/cgroup",)

# Where control groups are mounted, and the files of a group that say what it may use:
# its CPU quota and memory limit, as cgroup v2 names them and as v1's cpu and memory
# controllers do (a "cpu,cpuacct" hierarchy is listed under both names; cpu is enough).
# Readers (DuckDB, Rust's available_parallelism, loky) look in the process's own group
# and its parents, up to the root.
CGROUP_ROOT = "/sys/fs/cgroup"
CGROUP_LIMIT_FILES = {
    "": ("cpu.max", "memory.max"),
    "cpu": ("cpu.cfs_quota_us", "cpu.cfs_period_us"),
    "memory": ("memory.limit_in_bytes",),
}
# /proc/self/cgroup is a few lines; one longer than this is not one to trust.
_CGROUP_LIST_MAX = 16384

# The shell pynox starts outside any sandbox to remove scratch directories once their
# run ends (pynox.engine.scratch, for the pool and python -m pynox), and the folders
# where it finds the commands it runs (rm, find, chmod, sleep).
HELPER_SHELL = "/bin/sh"
HELPER_COMMAND_FOLDERS = ("/usr/bin", "/bin")

# Devices every program may write to as well as read.
DEVICES_READ_WRITE = ("/dev/null",)


def stdlib_dir() -> str:
    return lean_os.stdlib_dir()


# Prefixes shared with the rest of the system: their lib/ is not the interpreter's own.
SYSTEM_PREFIXES = ("/", "/usr", "/usr/local")


def library_dirs() -> list[str]:
    """The directories the dynamic loader takes shared libraries from."""
    multiarch = getattr(sys.implementation, "_multiarch", "")
    dirs = existing([f"/lib/{multiarch}", f"/usr/lib/{multiarch}"] if multiarch else [])
    if not dirs:
        # musl and other single-directory layouts keep libraries directly in /lib.
        dirs = existing(["/lib", "/usr/lib"])
    return dirs + existing(["/lib64", "/usr/lib64"]) + runtime_library_dirs()


def runtime_library_dirs() -> list[str]:
    """The interpreter's own lib/ where its installation is its own (a bundle, pyenv,
    python-build-standalone): libpython and the libraries a bundle carries (libssl,
    libffi...), which extension modules load through $ORIGIN RUNPATHs after the sandbox
    exists. Never /usr/lib: a system interpreter's libraries are in the dirs above."""
    if lean_os.realpath(sys.base_prefix) in SYSTEM_PREFIXES:
        return []
    return existing([lean_os.join(sys.base_prefix, "lib")])


# The dynamic loader's list of libraries to load into every process on the machine,
# pynox's included, where it exists.
LOADER_PRELOAD_LIST = "/etc/ld.so.preload"
# The folders whose libraries ldconfig indexes in /etc/ld.so.cache, where the dynamic
# loader finds a library by name (/usr/local/lib, a CUDA toolkit's), with the files it
# includes (include /etc/ld.so.conf.d/*.conf).
LOADER_CONFIG = "/etc/ld.so.conf"
_MAX_LOADER_CONFIGS = 256
# Readable in every run, as public as the loader's cache made from them: a write hint
# reads them (pynox.policy.trusted.installed) so as never to name a folder they list,
# which pynox refuses to grant. The usual folder of their includes comes with them.
LOADER_CONFIG_READS = (LOADER_CONFIG, "/etc/ld.so.conf.d")


def loader_config() -> "tuple[list[str], list[str]]":
    """The loader's configuration files that exist (with the folders where an included
    file would be added), and the folders they list."""
    files: list[str] = []
    folders: list[str] = []
    pending = [LOADER_CONFIG]
    while pending and len(files) < _MAX_LOADER_CONFIGS:
        path = pending.pop(0)
        try:
            with open(path, "rb") as config:
                text = lean_os.fsdecode(config.read(1 << 20))
        except (OSError, ValueError):
            continue
        files.append(path)
        for line in text.splitlines():
            words = line.partition("#")[0].replace(",", " ").replace(":", " ").split()
            if not words or words[0] == "hwcap":
                continue
            if words[0] == "include":
                for pattern in words[1:]:
                    pattern = lean_os.join(lean_os.dirname(path), pattern)
                    files.append(_fixed_folder(lean_os.dirname(pattern)))
                    pending += [name for name in _matching(pattern) if name not in files]
                continue
            folders += [word.partition("=")[0] for word in words if word.startswith("/")]
    return files, folders


def _fixed_folder(folder: str) -> str:
    """The folder of an include's pattern up to its first name with a wildcard: a file
    added anywhere below it may match (include /opt/*/ld.so.conf reads a folder's
    ld.so.conf made in /opt later)."""
    while any(character in folder for character in "*?["):
        folder = lean_os.dirname(folder)
    return folder


def _matching(pattern: str) -> list[str]:
    """The files a pattern of ld.so.conf's include names, sorted, as ldconfig reads them:
    a "*" in the last name (the usual *.conf) matched here, anything else by glob, whose
    regular expressions a run's start-up need not pay for."""
    folder, _, name = pattern.rpartition("/")
    if not any(character in pattern for character in "*?["):
        return [pattern]
    if any(character in folder for character in "*?[") or any(c in name for c in "?["):
        import glob

        return sorted(glob.glob(pattern))
    first, *middle, last = name.split("*")
    try:
        names = posix.listdir(folder or "/")
    except OSError:
        return []
    found = []
    for candidate in names:
        if candidate.startswith(".") and not first.startswith("."):
            continue  # as glob: a "*" never matches a leading dot
        if len(candidate) < len(first) + len(last) or not candidate.startswith(first):
            continue
        if not candidate.endswith(last):
            continue
        rest, ok = candidate[len(first) : len(candidate) - len(last)], True
        for part in middle:
            at = rest.find(part)
            if at < 0:
                ok = False
                break
            rest = rest[at + len(part) :]
        if ok:
            found.append(lean_os.join(folder, candidate))
    return sorted(found)


# The C library's variables that name where it takes code from, in every process
# started with them (the interpreter included, before any of its code runs): the
# dynamic loader's LD_LIBRARY_PATH folders, searched before the system's, and the
# libraries LD_PRELOAD and LD_AUDIT load into every process; GCONV_PATH's folders,
# whose converters it loads first for a locale's character set (ISO-8859-15, say) as
# the interpreter decodes its arguments. Their entries are separated by colons
# (LD_LIBRARY_PATH's also by semicolons, LD_PRELOAD's also by spaces).
LOADER_FOLDER_VARIABLES = ("LD_LIBRARY_PATH", "GCONV_PATH")
LOADER_FILE_VARIABLES = ("LD_PRELOAD", "LD_AUDIT")
# OpenSSL's variables that name where it takes code from, each one path: the
# configuration it reads as a process first makes a TLS context (a pool that preloads
# requests does, before any sandbox exists), which names modules it then loads, and the
# folders of its providers and engines.
OPENSSL_VARIABLES = ("OPENSSL_CONF", "OPENSSL_MODULES", "OPENSSL_ENGINES")
# Every variable that names a path no write grant may reach (pynox.policy.trusted): where
# the shell finds the pynox command, the C library's and OpenSSL's above, where a run is
# told its pynox.toml is, and where it keeps the cache of it (pynox.policy.cache).
PATH_NAMING_VARIABLES = (
    "PATH",
    *LOADER_FOLDER_VARIABLES,
    *LOADER_FILE_VARIABLES,
    *OPENSSL_VARIABLES,
    CONFIG_ENV,
    "XDG_CACHE_HOME",
    "HOME",
)


def loader_environment_paths(environ: "Mapping[str, str]") -> "list[tuple[str, str]]":
    """What an environment has the C library load, as (path, the variable naming it): the
    next run started from the same environment loads it too."""
    paths = []
    for variable in LOADER_FOLDER_VARIABLES:
        folders = (environ.get(variable) or "").replace(";", ":").split(":")
        # An empty folder is the working directory of the run, whichever that is: this
        # one's is refused already (a pynox.toml would be found there), and refusing the
        # folders inside it too would refuse every output folder of a project; but the
        # loader looks first in a few of them, as in every folder it searches.
        paths += [(as_loader_reads(folder), variable) for folder in folders if folder]
        if variable == "LD_LIBRARY_PATH" and len(folders) > 1 and "" in folders:
            paths += [(folder, variable) for folder in _loader_subfolders()]
    for variable in LOADER_FILE_VARIABLES:
        files = (environ.get(variable) or "").replace(" ", ":").split(":")
        # A bare name is looked for in the loader's folders, which are covered already.
        paths += [(as_loader_reads(name), variable) for name in files if "/" in name]
    paths += [(path, name) for name in OPENSSL_VARIABLES if (path := environ.get(name))]
    return paths


# The loader's older names for what the processor can do, each a folder it searches
# before the folder itself where the processor has it (the C library up to 2.36; `ld.so
# --help` lists them as legacy HWCAP subdirectories): avx512_1, and the platforms haswell
# and xeon_phi of the C library up to 2.32.
_LEGACY_CAPABILITY_FOLDERS = ("avx512_1", "haswell", "xeon_phi")


def _loader_subfolders() -> "list[str]":
    """The folders the loader searches first in each folder of LD_LIBRARY_PATH, as names
    in it: glibc-hwcaps/x86-64-v3, tls/x86_64, x86_64 (the processor's name) and the
    older names of what the processor can do (avx512_1)."""
    return ["glibc-hwcaps", "tls", posix.uname().machine, *_LEGACY_CAPABILITY_FOLDERS]


# The dynamic loader's tokens in those paths: $ORIGIN, the folder of the program it loads
# for (the interpreter's, for a run), and $LIB and $PLATFORM, which name folders of its
# own choosing (lib/x86_64-linux-gnu, haswell); each also written in braces. A name that
# goes on ($ORIGINAL) is no token: the loader keeps it as written.
_ORIGIN_TOKENS = ("{ORIGIN}", "ORIGIN")
_NAME_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def as_loader_reads(path: str, origin: "str | None" = None) -> str:
    """The path with $ORIGIN as origin (the folder of the object the loader looks for a
    library for; by default the interpreter's), and cut before any other `$`: what
    /opt/app/$LIB names lies in /opt/app, whatever $LIB is there, and so does the folder
    /opt/app/$ORIGINAL, as written."""
    if origin is None and sys.executable:
        origin = lean_os.dirname(lean_os.realpath(sys.executable))
    if origin is not None:
        first, *after_signs = path.split("$")
        path = first + "".join(_after_sign(part, origin) for part in after_signs)
    before, token, _ = path.partition("$")
    if not token:
        return path
    return before.rpartition("/")[0] or ("/" if before.startswith("/") else ".")


def _after_sign(part: str, origin: str) -> str:
    """What follows a `$` in a loader path, with the sign: origin for $ORIGIN."""
    for token in _ORIGIN_TOKENS:
        rest = part[len(token) :]
        if part.startswith(token) and (token.endswith("}") or rest[:1] not in _NAME_LETTERS):
            return origin + rest
    return "$" + part


def stdlib_search() -> list[str]:
    """Where the interpreter looks for its standard library as it starts, before it runs
    any code, and takes the first it finds: the directory it starts from (a build
    directory's marker there would do), then each folder above it, for a zip of the
    standard library (CPython 3.11 and later, up to the top as long as none is found)
    and for the folder of os.py and of lib-dynload (until it finds them). Where the
    interpreter's prefix is ~/.pyenv/versions/3.13.0, a zip planted in ~/lib would be
    the next run's standard library."""
    if not sys.executable:
        return []
    major, minor = sys.version_info[:2]
    thread = "t" if "t" in getattr(sys, "abiflags", "") else ""
    archive = lean_os.join(sys.platlibdir, f"python{major}{minor}{thread}.zip")
    stdlib = lean_os.join(sys.platlibdir, f"python{major}.{minor}{thread}")
    folder = _executable_dir()
    paths = [folder]
    searching_archive = sys.version_info >= (3, 11)
    found_os = found_dynload = False
    # Never "/" itself: CPython's search stops below it.
    while folder not in ("/", "") and (searching_archive or not (found_os and found_dynload)):
        if searching_archive:
            paths.append(lean_os.join(folder, archive))
            searching_archive = not lean_os.isfile(paths[-1])
        if not (found_os and found_dynload):
            paths.append(lean_os.join(folder, stdlib))
            landmarks = (lean_os.join(paths[-1], name) for name in ("os.py", "os.pyc"))
            found_os = found_os or any(lean_os.isfile(landmark) for landmark in landmarks)
            found_dynload = found_dynload or lean_os.isdir(lean_os.join(paths[-1], "lib-dynload"))
        folder = lean_os.dirname(folder)
    return paths


def _executable_dir() -> str:
    """Where CPython starts its search for the standard library: the `home` of the
    virtual environment whose pyvenv.cfg is beside or above the executable, else the
    directory of the executable with its links resolved."""
    executable = sys.executable
    for folder in (lean_os.dirname(lean_os.dirname(executable)), lean_os.dirname(executable)):
        try:
            with open(lean_os.join(folder, "pyvenv.cfg"), encoding="utf-8") as config:
                lines = config.readlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            key, equals, value = line.partition("=")
            if equals and key.strip().lower() == "home":
                return value.strip()
        break  # the first pyvenv.cfg found is the one read
    return lean_os.dirname(lean_os.realpath(executable))


def pynox_package_dir() -> str:
    return PACKAGE_DIR


def existing(paths: list[str] | tuple[str, ...]) -> list[str]:
    """Those that exist, without duplicates.

    Symbolic links need no resolving: the sandbox core opens each path and
    grants the file or directory it leads to.
    """
    seen: dict[str, None] = {}
    for path in paths:
        try:
            posix.stat(path)
        except OSError:
            continue
        seen.setdefault(path, None)
    return list(seen)


def network_reads() -> list[str]:
    """The resolver's files that exist here, resolved (/etc/resolv.conf is often a link)."""
    return [lean_os.realpath(path) for path in existing(RESOLVER_FILES)]


def cgroup_limit_files() -> list[str]:
    """The files that say what this process's control groups, and their parents, may use
    (CGROUP_LIMIT_FILES), those that exist. A pool's children are in the pool's groups."""
    try:
        fd = posix.open("/proc/self/cgroup", posix.O_RDONLY | posix.O_CLOEXEC)
        try:
            listing = posix.read(fd, _CGROUP_LIST_MAX)
        finally:
            posix.close(fd)
    except OSError:
        return []
    lines = listing.decode("utf-8", "replace").splitlines()
    paths = []
    for line in lines:
        # "ID:CONTROLLERS:PATH"; v2's single line has no controllers.
        _, _, rest = line.partition(":")
        controllers, _, group = rest.partition(":")
        if not group.startswith("/") or "/.." in group or "/./" in group:
            continue
        for controller in controllers.split(",") if controllers else [""]:
            names = CGROUP_LIMIT_FILES.get(controller)
            if names is None:
                continue
            mount = lean_os.join(CGROUP_ROOT, controller) if controller else CGROUP_ROOT
            folder = group.rstrip("/")
            while True:
                paths += [f"{mount}{folder}/{name}" for name in names]
                if not folder:
                    break
                folder = folder.rpartition("/")[0]
    return existing(paths)


def interpreter_reads() -> list[str]:
    """Everything the interpreter reads, and pynox's hints, as existing real paths."""
    return existing(
        [
            stdlib_dir(),
            *library_dirs(),
            pynox_package_dir(),
            *SYSTEM_FACTS,
            *LOADER_CONFIG_READS,
            *cgroup_limit_files(),
        ]
    )
