"""A validated pynox.toml, as runs use it: its permissions, profiles and pool settings.

Apart from the TOML reader (pynox.policy.config) so that a run whose configuration
comes from the cache (pynox.policy.cache) loads only these classes, which rebuild a
configuration from its cached data (from_data) and answer what a run asks of it.
"""

from pynox.errors import ConfigError
from pynox.policy.grants import (
    Grants,
    _float,
    _int,
    _optional_str,
    _Record,
    _str,
    _str_list,
    _unique,
)

# The keys of [pool] (besides the table [pool.limits]).
POOL_KEYS = ("workers", "preload", "warmup", "package_dirs", "max_sessions", "session_idle")
_POOL_FIELDS = POOL_KEYS + ("limited",)


class PoolSettings(_Record):
    """The [pool] table: how the worker pool runs (its limits are a separate Grants).

    `limited` names the keys [pool.limits] sets: there an empty list still limits
    (to nothing), where a Grants' empty list means "not set".
    """

    __slots__ = _POOL_FIELDS
    _fields = _POOL_FIELDS
    _checks = (_int, _str_list, _optional_str, _str_list, _int, _float, _str_list)

    def __init__(
        self,
        *,
        workers: int | None = None,
        preload: list[str] | None = None,
        warmup: str | None = None,
        package_dirs: list[str] | None = None,
        max_sessions: int | None = None,
        session_idle: float | None = None,
    ) -> None:
        self.workers = workers
        self.preload: list[str] = list(preload or ())
        # Code the pool runs once it has preloaded, and again in each spare child
        # before its request comes (pynox.pool.warmup).
        self.warmup = warmup
        # Importable by every request of the pool, and where preload looks first.
        self.package_dirs: list[str] = list(package_dirs or ())
        self.max_sessions = max_sessions
        self.session_idle = session_idle  # seconds
        self.limited: list[str] = []

    @classmethod
    def from_data(cls, data: object) -> "PoolSettings":
        pool = cls.__new__(cls)
        pool._fill(data)
        return pool


def _profiles(value: object) -> dict[str, Grants]:
    if type(value) is not dict:
        raise TypeError("expected a dict")
    return {_str(name): Grants.from_data(grants) for name, grants in value.items()}


class Config(_Record):
    """A validated pynox.toml; `path` is the file's absolute real path."""

    __slots__ = _fields = ("path", "permissions", "profiles", "pool", "pool_limits")
    _checks = (_str, Grants.from_data, _profiles, PoolSettings.from_data, Grants.from_data)

    def __init__(
        self,
        path: str,
        *,
        permissions: Grants | None = None,
        profiles: dict[str, Grants] | None = None,
        pool: PoolSettings | None = None,
        pool_limits: Grants | None = None,
    ) -> None:
        self.path = path
        self.permissions = Grants() if permissions is None else permissions
        self.profiles: dict[str, Grants] = {} if profiles is None else profiles
        self.pool = PoolSettings() if pool is None else pool
        self.pool_limits = Grants() if pool_limits is None else pool_limits

    def profile(self, name: str) -> Grants:
        """The [profiles.NAME] table as written (see `grants_for` for the merged grants)."""
        found = self.profiles.get(name)
        if found is not None:
            return found
        if not self.profiles:
            raise ConfigError(
                f"profile {name!r} is not in {self.path}, which has no [profiles] table;"
                " add the profile there, or run without one"
            )
        names = ", ".join(sorted(self.profiles))
        raise ConfigError(f"profile {name!r} is not in {self.path}; its profiles are: {names}")

    def package_dirs_named(self) -> list[str]:
        """Every package directory the file names, in any table: where a module a run
        cannot import may be installed (see the ModuleNotFoundError hint)."""
        tables = [self.permissions, *self.profiles.values()]
        paths = [path for table in tables for path in table.package_dirs]
        return _unique(paths + self.pool.package_dirs)

    def grants_for(self, profile: str | None = None) -> Grants:
        """[permissions], with the named profile layered on top when one is given."""
        if profile is None:
            return self.permissions
        return self.permissions.merged(self.profile(profile))

    @classmethod
    def from_data(cls, data: object) -> "Config":
        config = cls.__new__(cls)
        config._fill(data)
        return config

    def __repr__(self) -> str:
        return f"Config({self.path!r})"
