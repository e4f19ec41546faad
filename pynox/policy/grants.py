"""Grants: what a run may touch, as pynox.toml, a profile or flags state it.

On every run's path (flags become Grants even without a pynox.toml), so it is
kept apart from the TOML reading in pynox.policy.config and uses builtins only.
Annotations that name classes not yet defined are quoted instead of importing `__future__`.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_LIST_GRANTS = ("allow_read", "allow_write", "package_dirs", "allow_env")
_SCALAR_GRANTS = ("allow_network", "timeout", "memory", "max_output", "max_file_size")
_GRANT_KEYS = _LIST_GRANTS + _SCALAR_GRANTS


# Exact type checks for cached data: a bool must not pass for an int, nor an int for a float.
def _str(value: object) -> str:
    if type(value) is not str:
        raise TypeError("expected a string")
    return value


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
