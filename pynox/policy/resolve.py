"""The resolved policy of one run: absolute grants, environment and limits.

Grants come from pynox.toml, a profile and flags (see pynox.policy.config.Grants);
here they become what the kernel enforces: real paths that exist, the exact
environment the program sees, and numeric limits.
"""

import os

from pynox.errors import PolicyError
from pynox.limits import DEFAULT_MAX_OUTPUT
from pynox.policy.grants import GRANT_NAMES

TYPE_CHECKING = False  # typing itself costs milliseconds to import
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from pynox.policy.config import Grants

# Variables the dynamic loader or libc act on: never forwarded into the sandbox.
_LOADER_VARIABLES = frozenset(
    {
        "GCONV_PATH",
        "GETCONF_DIR",
        "HOSTALIASES",
        "LOCALDOMAIN",
        "LOCPATH",
        "MALLOC_TRACE",
        "NIS_PATH",
        "NLSPATH",
        "RESOLV_HOST_CONF",
        "RES_OPTIONS",
        "TZDIR",
    }
)


def is_locale_variable(name: str) -> bool:
    """Locale and time-zone settings: not permissions, but what makes text and
    local time come out as they do under python, so they always pass through."""
    return name in ("LANG", "LANGUAGE", "TZ") or name.startswith("LC_")


def is_loader_variable(name: str) -> bool:
    return name.startswith(("LD_", "MALLOC_", "GLIBC_")) or name in _LOADER_VARIABLES


class Policy:
    """Everything the sandbox enforces for one run."""

    # One field per grant (pynox.policy.grants), resolved, and what the run adds to them.
    __slots__ = (*GRANT_NAMES, "implicit_read", "environment", "scratch")

    def __init__(self) -> None:
        self.allow_read: list[str] = []  # real paths, like every path below
        self.allow_write: list[str] = []
        self.package_dirs: list[str] = []
        self.allow_env: list[str] = []
        self.allow_network = False
        self.timeout: float | None = None
        self.memory: int | None = None
        self.max_output = DEFAULT_MAX_OUTPUT
        self.max_file_size: int | None = None
        # What the interpreter and the program's own location need to be read.
        self.implicit_read: list[str] = []
        # The program's environment: locale variables, granted ones, the scratch's.
        self.environment: dict[str, str] = {}
        # The run's own directory (pynox.engine.scratch), readable and writable.
        self.scratch: str | None = None

    def reads(self) -> list[str]:
        """Every path granted for reading, implicit ones included."""
        return self.implicit_read + self.allow_read + self.package_dirs + self.scratch_list()

    def writes(self) -> list[str]:
        """Every path granted for writing."""
        return self.allow_write + self.scratch_list()

    def scratch_list(self) -> list[str]:
        return [] if self.scratch is None else [self.scratch]

    def to_wire(self) -> "dict[str, Any]":
        """Every field, for handing the policy to another process."""
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_wire(cls, data: "dict[str, Any]") -> "Policy":
        policy = cls()
        for name in cls.__slots__:
            setattr(policy, name, data[name])
        return policy

    def to_json(self) -> "dict[str, Any]":
        return {
            "allow_read": self.allow_read,
            "allow_write": self.allow_write,
            "implicit_read": self.implicit_read,
            "package_dirs": self.package_dirs,
            "allow_env": self.allow_env,
            "network": "allow" if self.allow_network else "deny",
            "subprocesses": "deny",
            "host_unix_sockets": "deny",
            "timeout_ms": None if self.timeout is None else round(self.timeout * 1000),
            "memory_bytes": self.memory,
            "max_file_size_bytes": self.max_file_size,
            "max_output_bytes": self.max_output,
            "scratch": self.scratch,
            "backend": "landlock+seccomp",
        }


def resolve_grant(path: str, kind: str, cwd: str) -> str:
    """The real path of a granted file or directory, which must exist."""
    absolute = _absolute(path, cwd)
    try:
        os.stat(absolute)
    except FileNotFoundError:
        raise PolicyError(
            f"cannot grant {kind} {absolute}: it does not exist; "
            "create it first or correct the path"
        ) from None
    except OSError as exc:
        raise PolicyError(f"cannot grant {kind} {absolute}: {exc.strerror}") from None
    except ValueError:  # a NUL character
        raise PolicyError(f"cannot grant {kind} {absolute!r}: it is not a valid path") from None
    resolved = real_path(absolute)
    through = _magic_link_on_way(absolute, resolved)
    if through:
        raise PolicyError(
            f"cannot grant {kind} {absolute}: it goes through {through}, a link of /proc "
            "that leads wherever a process's root, working directory, executable or "
            "descriptors lead; grant the real path you mean instead"
        )
    return resolved


def _absolute(path: str, cwd: str) -> str:
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))


def _magic_link_on_way(absolute: str, resolved: str) -> str | None:
    """The form of the path that is or goes through a magic link of /proc, if any."""
    for form in (absolute, resolved):
        if _through_proc_magic_link(form):
            return form
    return None


def real_path(path: str) -> str:
    """The path with every symbolic link resolved, as the sandbox will open it.

    /proc/self and /proc/thread-self stay as they are: resolved here, they would
    name this process; the sandboxed process names itself when it confines itself.
    """
    if _names_own_process(path):
        return os.path.normpath(path)
    return os.path.realpath(path)


def _names_own_process(path: str) -> bool:
    return any(path == link or path.startswith(link + "/") for link in OWN_PROCESS_LINKS)


OWN_PROCESS_LINKS = ("/proc/self", "/proc/thread-self")


def _through_proc_magic_link(path: str) -> bool:
    """Whether the path is, or goes through, a "magic" link of /proc of any process or
    thread: the kernel follows those to a process's root or working directory, its
    executable, its open files or its namespaces, wherever those are."""
    parts = path.split("/")  # "", "proc", pid, ...
    if len(parts) < 4 or parts[1] != "proc":
        return False
    if parts[2] not in ("self", "thread-self") and not parts[2].isdigit():
        return False
    rest = parts[3:]
    if len(rest) >= 3 and rest[0] == "task" and rest[1].isdigit():
        rest = rest[2:]
    if rest[:1] in (["root"], ["cwd"], ["exe"]):
        return True
    return len(rest) >= 2 and rest[0] in ("fd", "map_files", "ns") and rest[1] != ""


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def build_policy(
    grants: "Grants",
    implicit_read: list[str],
    environ: "Mapping[str, str]",
    cwd: str,
) -> "Policy":
    """Turns merged grants into the policy of one run."""
    policy = Policy()
    policy.allow_read = _unique([resolve_grant(p, "reading", cwd) for p in grants.allow_read])
    policy.allow_write = _unique([resolve_grant(p, "writing", cwd) for p in grants.allow_write])
    policy.package_dirs = _unique(
        [resolve_grant(p, "imports from", cwd) for p in grants.package_dirs]
    )
    policy.implicit_read = _unique(implicit_read)
    # Names only: decoding every value would leave copies of secrets in memory.
    policy.environment = {name: environ[name] for name in environ if is_locale_variable(name)}
    for name in _unique(grants.allow_env):
        if is_loader_variable(name):
            raise PolicyError(
                f"the environment variable {name} steers the dynamic loader and is never "
                "passed into the sandbox; remove it from allow_env"
            )
        policy.allow_env.append(name)
        if name in environ:
            policy.environment[name] = environ[name]
    policy.allow_network = bool(grants.allow_network)
    if policy.allow_network:
        policy.implicit_read = _unique(policy.implicit_read + ca_reads(policy, cwd))
    policy.timeout = grants.timeout
    policy.memory = grants.memory
    if grants.max_output is not None:
        policy.max_output = grants.max_output
    policy.max_file_size = grants.max_file_size
    return policy


def ca_reads(policy: "Policy", cwd: str) -> list[str]:
    """What a run granted the network reads to verify TLS peers: the interpreter's
    default CA store, and what the CA variables passed to the program name.

    A variable naming nothing that exists adds nothing, as OpenSSL then loads
    nothing from it; one that goes through a magic link of /proc is refused,
    as a grant of that path would be.
    """
    from pynox.policy import system_paths

    reads = system_paths.ca_store_reads()
    for name in system_paths.CA_VARIABLES:
        value = policy.environment.get(name) if name in policy.allow_env else None
        if not value:
            continue
        absolute = os.path.normpath(os.path.join(cwd, value))  # OpenSSL expands no ~
        try:
            os.stat(absolute)
        except (OSError, ValueError):
            continue
        resolved = real_path(absolute)
        if _magic_link_on_way(absolute, resolved):
            raise PolicyError(
                f"{name} names {absolute}, a path through a link of /proc that leads "
                "wherever a process's root, working directory, executable or descriptors "
                f"lead; set {name} to the real path of the CA file or directory"
            )
        reads.append(resolved)
    # SSL_CERT_FILE often names a file of the default CA directory.
    return [path for path in reads if not any(_within(path, other) for other in reads)]


def _within(path: str, directory: str) -> bool:
    return path != directory and path.startswith(directory.rstrip("/") + "/")


def covering_write(policy: "Policy", path: str) -> str | None:
    """The write grant that covers path, if any."""
    for granted in policy.allow_write:
        if path == granted or path.startswith(granted.rstrip("/") + "/"):
            return granted
    return None
