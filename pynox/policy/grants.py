"""Grants: what a run may touch, as pynox.toml, a profile or flags state it.

On every run's path (flags become Grants even without a pynox.toml), so it is
kept apart from the TOML reading in pynox.policy.config and uses builtins only.
Annotations that name classes not yet defined are quoted instead of importing `__future__`.
"""

from pynox.errors import PynoxError, UsageError
from pynox.limits import DEFAULT_MAX_OUTPUT, MAX_OUTPUT_LIMIT, MIN_MEMORY

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

# The kinds of value a grant takes.
PATHS = "paths"  # a list of files or directories
NAMES = "names"  # a list of environment variable names
SWITCH = "switch"  # on or off
DURATION = "duration"  # "500ms", "5s", 2.5
SIZE = "size"  # "512m", 1048576


class GrantField:
    """One grant, defined once: the command line, pynox.toml, the pool protocol, the API,
    the policy and the tool's docstring all take it from here.

    `name` is its attribute, TOML key, request key and API keyword alike; `flag` is its
    command-line flag; sizes and durations are checked against `minimum` and `maximum`.
    """

    __slots__ = ("name", "flag", "kind", "metavar", "help", "minimum", "maximum")

    def __init__(
        self,
        name: str,
        flag: str,
        kind: str,
        help: str,
        minimum: int = 0,
        maximum: "int | None" = None,
    ) -> None:
        self.name = name
        self.flag = flag
        self.kind = kind
        self.metavar = {PATHS: "PATH", NAMES: "NAME", DURATION: "DURATION", SIZE: "SIZE"}.get(
            kind, ""
        )
        self.help = help
        self.minimum = minimum
        self.maximum = maximum

    def parse(self, value: object, what: str, error: "type[PynoxError]" = UsageError) -> float:
        """A duration in seconds or a size in bytes, checked against the bounds; `what`
        names the setting as its interface spells it ("--memory", "memory in [pool]")."""
        from pynox import units  # only runs that set a limit pay for it

        if self.kind == DURATION:
            return units.parse_duration(value, what, error=error)
        return units.parse_size(value, what, self.minimum, self.maximum, error=error)


GRANT_FIELDS = (
    GrantField(
        "allow_read", "--allow-read", PATHS,
        "let the program read PATH (file or directory); repeatable",
    ),
    GrantField(
        "allow_write", "--allow-write", PATHS,
        "let the program write beneath PATH; does not grant reads",
    ),
    GrantField(
        "package_dirs", "--package-dir", PATHS,
        "import installed packages from PATH (no .pth execution)",
    ),
    GrantField(
        "allow_env", "--allow-env", NAMES, "pass the environment variable NAME to the program"
    ),
    GrantField("allow_network", "--allow-network", SWITCH, "allow IPv4 and IPv6 sockets"),
    GrantField(
        "timeout", "--timeout", DURATION,
        "wall-clock limit, e.g. 500ms, 5s, 2m (exit 124 when hit)",
    ),
    GrantField(
        "memory", "--memory", SIZE,
        f"memory used (not address space), e.g. 512m (at least {MIN_MEMORY >> 20}m)",
        minimum=MIN_MEMORY,
    ),
    GrantField(
        "max_output", "--max-output", SIZE,
        f"bytes captured per stream with --json (default {DEFAULT_MAX_OUTPUT})",
        maximum=MAX_OUTPUT_LIMIT,
    ),
    GrantField(
        "max_file_size", "--max-file-size", SIZE,
        "largest size a written file may reach, e.g. 100m", minimum=1,
    ),
)  # fmt: skip
GRANTS_BY_NAME = {field.name: field for field in GRANT_FIELDS}
# How a pool result's hint names grants and limits, by its request's "hints": as the
# request's own fields ("allow_read": ["/srv"]), or as the Python API's arguments, which
# the API asks for (allow_read=['/srv']).
HINTS_JSON, HINTS_PYTHON = "json", "python"
# After a session step's hint that names a grant or limit: asked for in a later step,
# it would be ignored (the pool protocol's sessions keep their first step's policy).
SESSION_NOTE = (
    "; a session keeps the grants and limits it started with: close it (session.close() in "
    "Python, close_session in the protocol) and start a new one with that change"
)
GRANT_NAMES = tuple(GRANTS_BY_NAME)
_LIST_GRANTS = tuple(f.name for f in GRANT_FIELDS if f.kind in (PATHS, NAMES))
_SCALAR_GRANTS = tuple(f.name for f in GRANT_FIELDS if f.kind not in (PATHS, NAMES))
_GRANT_KEYS = _LIST_GRANTS + _SCALAR_GRANTS
PATH_GRANTS = tuple(f.name for f in GRANT_FIELDS if f.kind == PATHS)


# Exact type checks for cached data: a bool must not pass for an int, nor an int for a float.
def _str(value: object) -> str:
    if type(value) is not str:
        raise TypeError("expected a string")
    return value


def _optional_str(value: object) -> str | None:
    if value is None or type(value) is str:
        return value
    raise TypeError("expected a string or None")


def _str_list(value: object) -> list[str]:
    if type(value) is not list or not all(type(item) is str for item in value):
        raise TypeError("expected a list of strings")
    return value


def _int(value: object) -> int | None:
    if value is None or type(value) is int:
        return value
    raise TypeError("expected an int or None")


def _float(value: object) -> float | None:
    if value is None or type(value) is float:
        return value
    raise TypeError("expected a float or None")


def _bool(value: object) -> bool | None:
    if value is None or type(value) is bool:
        return value
    raise TypeError("expected a bool or None")


class _Record:
    """Plain data: compared, shown and cached through its fields (see `_fields`)."""

    __slots__ = ()
    _fields: "tuple[str, ...]" = ()
    _checks: "tuple[Callable[[object], object], ...]" = ()  # one per field, for cached data

    def to_data(self) -> dict[str, object]:
        """The fields as builtins only, for marshal."""
        return {key: _plain(getattr(self, key)) for key in self._fields}

    def _fill(self, data: object) -> None:
        # Anything but exactly what to_data produces is a bad cache entry: TypeError/ValueError.
        if type(data) is not dict or data.keys() != set(self._fields):
            raise ValueError("unexpected fields")
        for key, check in zip(self._fields, self._checks, strict=True):
            setattr(self, key, check(data[key]))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self) or not isinstance(other, _Record):
            return NotImplemented
        return self.to_data() == other.to_data()

    def __repr__(self) -> str:
        shown = (f"{key}={getattr(self, key)!r}" for key in self._fields if _is_set(self, key))
        return f"{type(self).__name__}({', '.join(shown)})"


class Grants(_Record):
    """What a run may do; an empty list or None means "not set here"."""

    __slots__ = _GRANT_KEYS
    _fields = _GRANT_KEYS
    _checks = (_str_list,) * 4 + (_bool, _float, _int, _int, _int)

    def __init__(
        self,
        *,
        allow_read: list[str] | None = None,
        allow_write: list[str] | None = None,
        package_dirs: list[str] | None = None,
        allow_env: list[str] | None = None,
        allow_network: bool | None = None,
        timeout: float | None = None,
        memory: int | None = None,
        max_output: int | None = None,
        max_file_size: int | None = None,
    ) -> None:
        self.allow_read: list[str] = list(allow_read or ())
        self.allow_write: list[str] = list(allow_write or ())
        self.package_dirs: list[str] = list(package_dirs or ())
        self.allow_env: list[str] = list(allow_env or ())
        self.allow_network = allow_network
        self.timeout = timeout  # seconds
        self.memory = memory  # bytes, like the sizes below
        self.max_output = max_output
        self.max_file_size = max_file_size

    def merged(self, other: "Grants") -> "Grants":
        """These grants with `other` layered on top: lists add up, set scalars override."""
        result = Grants()
        for key in _LIST_GRANTS:
            setattr(result, key, _unique(getattr(self, key) + getattr(other, key)))
        for key in _SCALAR_GRANTS:
            override = getattr(other, key)
            setattr(result, key, getattr(self, key) if override is None else override)
        return result

    @classmethod
    def from_data(cls, data: object) -> "Grants":
        """Inverse of to_data; raises ValueError/TypeError for anything else (a bad cache)."""
        grants = cls.__new__(cls)  # _fill sets every field
        grants._fill(data)
        return grants


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _plain(value: object) -> object:
    if isinstance(value, _Record):
        return value.to_data()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return list(value) if isinstance(value, list) else value


def _is_set(record: object, key: str) -> bool:
    value = getattr(record, key)
    return value is not None and value != []


# What an environment variable's name may hold, as allow_env takes it: no "=", no
# spaces, no NUL, so that a name means one variable and the same one everywhere.
_VARIABLE_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
VARIABLE_CHARS = _VARIABLE_START | frozenset("0123456789")
VARIABLE_NAME_RULE = "use letters, digits and _, not starting with a digit"


def is_variable_name(name: str) -> bool:
    return bool(name) and name[0] in _VARIABLE_START and all(c in VARIABLE_CHARS for c in name)


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


# Why such a variable is refused wherever allow_env lists it.
LOADER_VARIABLE_RULE = "steers the dynamic loader and is never passed into the sandbox"


def is_loader_variable(name: str) -> bool:
    return name.startswith(("LD_", "MALLOC_", "GLIBC_")) or name in _LOADER_VARIABLES
