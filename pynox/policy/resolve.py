"""The resolved policy of one run: absolute grants, environment and limits.

Grants come from pynox.toml, a profile and flags (see pynox.policy.config.Grants);
here they become what the kernel enforces: real paths that exist, the exact
environment the program sees, and numeric limits.
"""

from pynox.errors import PolicyError
from pynox.limits import DEFAULT_MAX_OUTPUT
from pynox.policy.grants import GRANT_NAMES, LOADER_VARIABLE_RULE, is_loader_variable

TYPE_CHECKING = False  # typing itself costs milliseconds to import
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from pynox.policy.config import Grants


def is_locale_variable(name: str) -> bool:
    """Locale and time-zone settings: not permissions, but what makes text and
    local time come out as they do under python, so they always pass through."""
    return name in ("LANG", "LANGUAGE", "TZ") or name.startswith("LC_")


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
    if grants.allow_read or grants.allow_write or grants.package_dirs:
        from pynox.policy.path_grant import resolve_grant

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
                f"the environment variable {name} {LOADER_VARIABLE_RULE}; remove it from allow_env"
            )
        policy.allow_env.append(name)
        if name in environ:
            policy.environment[name] = environ[name]
    policy.allow_network = bool(grants.allow_network)
    if policy.allow_network:
        from pynox.policy.ca_store import ca_reads

        policy.implicit_read = _unique(policy.implicit_read + ca_reads(policy, cwd))
    policy.timeout = grants.timeout
    policy.memory = grants.memory
    if grants.max_output is not None:
        policy.max_output = grants.max_output
    policy.max_file_size = grants.max_file_size
    return policy
