"""pynox.toml: the permissions a project grants the programs Pynox runs for it.

Reads and validates the file into a Config (pynox.policy.config_values). Imported
when a pynox.toml is read rather than found in the cache (pynox.policy.cache):
module level uses only builtins and os (the TOML parser is imported inside
`parse_config_file`).
Annotations that name classes not yet defined are quoted instead of importing `__future__`.
"""

import os
import sys

from pynox import units
from pynox.errors import ConfigError
from pynox.policy.config_values import POOL_KEYS, Config, PoolSettings
from pynox.policy.grants import (
    _GRANT_KEYS,
    DURATION,
    GRANT_FIELDS,
    LOADER_VARIABLE_RULE,
    PATH_GRANTS,
    SIZE,
    SWITCH,
    VARIABLE_CHARS,
    VARIABLE_NAME_RULE,
    Grants,
    _unique,
    is_loader_variable,
    is_variable_name,
)
from pynox.policy.location import CONFIG_ENV, CONFIG_NAME, find_config_path
from pynox.policy.user_paths import expand_home

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# Grants and the finding of the file live in their own modules; they are part of this API too.
__all__ = ["CONFIG_ENV", "CONFIG_NAME", "Config", "Grants", "PoolSettings", "find_config_path"]

_TABLES_HINT = "settings go in the tables [permissions], [profiles.NAME] and [pool]"
# TOML is Unicode text: neither its bytes nor its escapes can spell a name that is not UTF-8.
_NAMES_NOT_UTF8 = (
    "a path whose name is not UTF-8 cannot be written in TOML: grant it on the command line "
    "(--allow-read, --allow-write), or name a symbolic link to it whose path is UTF-8"
)
# What TOML parsers say of an escape such as \udcff, os.fsdecode's spelling of a byte.
_SURROGATE_ESCAPE = "not a Unicode scalar value"
_BARE_KEY_CHARS = VARIABLE_CHARS | frozenset("-")


def parse_config_file(path: str, environ: "Mapping[str, str]") -> Config:
    """Read, parse and validate `path` (costs ~20 ms for the TOML parser's import)."""
    real_path = os.path.realpath(path)
    try:
        with open(real_path, "rb") as config_file:
            raw = config_file.read()
    except OSError as failure:
        reason = failure.strerror or str(failure)
        raise ConfigError(
            f"cannot read {real_path} ({reason}); check that it exists and that you may read it"
        ) from None
    return parse_config_bytes(raw, real_path, environ)


def parse_config_bytes(raw: bytes, real_path: str, environ: "Mapping[str, str]") -> Config:
    """Parse and validate the contents of the pynox.toml whose real path is `real_path`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as failure:
        line = raw.count(b"\n", 0, failure.start) + 1
        raise ConfigError(
            f"{real_path} is not UTF-8 text (see line {line}); save it as UTF-8 ({_NAMES_NOT_UTF8})"
        ) from None
    if text.startswith("\ufeff"):
        # Some editors start UTF-8 files with this mark; TOML parsers refuse it at 1:1,
        # where the user sees nothing wrong.
        raise ConfigError(
            f"{real_path} starts with a byte order mark, which TOML does not allow;"
            " save it as UTF-8 without one"
        )
    return config_from_toml(parse_toml(text, real_path), real_path, environ)


def config_from_toml(
    document: dict[str, object], path: str, environ: "Mapping[str, str]"
) -> Config:
    """Validate a parsed pynox.toml; relative paths are taken from the directory of `path`."""
    reader = _Reader(path, environ)
    for key, value in document.items():
        if key in ("permissions", "profiles", "pool"):
            continue
        if isinstance(value, dict):
            raise ConfigError(f"unknown table [{key}] in {path}; {_TABLES_HINT}")
        if key in _GRANT_KEYS:
            raise ConfigError(
                f"{key} at the top of {path} is outside any table; put it under [permissions]"
            )
        raise ConfigError(f"unknown key {key!r} at the top of {path}; {_TABLES_HINT}")
    config = Config(path)
    permissions = document.get("permissions")
    if permissions is not None:
        config.permissions = reader.grants(
            _table(permissions, "permissions", path), "[permissions]"
        )
    profiles = document.get("profiles")
    if profiles is not None:
        config.profiles = reader.profiles(_table(profiles, "profiles", path))
    pool = document.get("pool")
    if pool is not None:
        config.pool, config.pool_limits = reader.pool(_table(pool, "pool", path))
    return config


class _Reader:
    """Checks the tables of one file; every error names the key, the table and the file."""

    __slots__ = ("path", "directory", "environ")

    def __init__(self, path: str, environ: "Mapping[str, str]") -> None:
        self.path = path
        self.directory = os.path.dirname(path)
        self.environ = environ

    def grants(self, table: dict[str, object], section: str) -> Grants:
        _reject_unknown_keys(table, _GRANT_KEYS, section, self.path, ", ".join(_GRANT_KEYS))
        grants = Grants()
        for key in PATH_GRANTS:
            if key in table:
                paths = self._strings(table[key], key, section)
                setattr(grants, key, _unique([self._path(p, key, section) for p in paths]))
        if "allow_env" in table:
            names = self._strings(table["allow_env"], "allow_env", section)
            for name in names:
                if not is_variable_name(name):
                    raise ConfigError(
                        f"allow_env in {section} of {self.path} lists {name!r}, which is not an"
                        f" environment variable name; {VARIABLE_NAME_RULE}"
                    )
                if is_loader_variable(name):
                    raise ConfigError(
                        f"allow_env in {section} of {self.path} lists {name!r}, which"
                        f" {LOADER_VARIABLE_RULE}; remove it"
                    )
            grants.allow_env = _unique(names)
        for field in GRANT_FIELDS:
            if field.name not in table:
                continue
            value = table[field.name]
            if field.kind == SWITCH:
                if not isinstance(value, bool):
                    raise self._type_error(field.name, section, "true or false", "false")
                setattr(grants, field.name, value)
            elif field.kind in (DURATION, SIZE):
                what = self._what(field.name, section)
                setattr(grants, field.name, field.parse(value, what, error=ConfigError))
        return grants

    def profiles(self, table: dict[str, object]) -> "dict[str, Grants]":
        profiles: dict[str, Grants] = {}
        for name, value in table.items():
            if not isinstance(value, dict):
                raise ConfigError(
                    f"{name!r} in [profiles] of {self.path} is not a profile table;"
                    " give each profile its own table, like [profiles.fetch]"
                )
            profiles[name] = self.grants(value, f"[profiles.{toml_key(name)}]")
        return profiles

    def pool(self, table: dict[str, object]) -> "tuple[PoolSettings, Grants]":
        listed = ", ".join(POOL_KEYS) + " and the table [pool.limits]"
        _reject_unknown_keys(table, POOL_KEYS + ("limits",), "[pool]", self.path, listed)
        pool = PoolSettings()
        if "workers" in table:
            pool.workers = self._whole_number(table["workers"], "workers", 1, "4")
        if "max_sessions" in table:
            pool.max_sessions = self._whole_number(table["max_sessions"], "max_sessions", 0, "16")
        if "session_idle" in table:
            pool.session_idle = units.parse_duration(
                table["session_idle"], self._what("session_idle", "[pool]"), error=ConfigError
            )
        if "preload" in table:
            modules = self._strings(table["preload"], "preload", "[pool]", kind="module names")
            for module in modules:
                if not is_module_name(module):
                    raise ConfigError(
                        f"preload in [pool] of {self.path} lists {module!r}, which is not a"
                        ' module name; write importable names, like "pandas" or "numpy.linalg"'
                    )
            pool.preload = _unique(modules)
        if "warmup" in table:
            if not isinstance(table["warmup"], str):
                raise self._type_error(
                    "warmup", "[pool]", "a string of Python code", '"import pandas"'
                )
            pool.warmup = table["warmup"]
        if "package_dirs" in table:
            paths = self._strings(table["package_dirs"], "package_dirs", "[pool]")
            pool.package_dirs = _unique([self._path(p, "package_dirs", "[pool]") for p in paths])
        limits = Grants()
        if "limits" in table:
            limits_table = table["limits"]
            if not isinstance(limits_table, dict):
                raise ConfigError(
                    f"limits in [pool] of {self.path} must be a table, like [pool.limits]"
                )
            limits = self.grants(limits_table, "[pool.limits]")
            pool.limited = sorted(limits_table)
        return pool, limits

    def _strings(self, value: object, key: str, section: str, kind: str = "strings") -> list[str]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self._type_error(key, section, f"a list of {kind}", _LIST_EXAMPLES[key])
        return value

    def _path(self, text: str, key: str, section: str) -> str:
        where = f"{key} in {section} of {self.path}"
        if not text:
            raise ConfigError(
                f'{where} lists an empty path; remove it, or write "." for the directory of'
                f" {CONFIG_NAME}"
            )
        if "\0" in text:
            raise ConfigError(f"{where} lists a path with a NUL character; remove that character")
        if text.startswith("~"):
            text = expand_home(text, self.environ)
            if text == "~" or text.startswith("~/"):
                raise ConfigError(
                    f"{where} lists {text!r}, but HOME is not set and /etc/passwd lists no "
                    "home for this user; set HOME or write the full path"
                )
            if text.startswith("~"):
                user = text[1:].partition("/")[0]
                raise ConfigError(
                    f"{where} lists {text!r}, but there is no user {user!r}; write the full path"
                )
        return os.path.normpath(os.path.join(self.directory, text))

    def _whole_number(self, value: object, key: str, minimum: int, example: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self._type_error(key, "[pool]", f"a whole number of at least {minimum}", example)
        return value

    def _what(self, key: str, section: str) -> str:
        return f"{key} in {section} of {self.path}"

    def _type_error(self, key: str, section: str, expected: str, example: str) -> ConfigError:
        return ConfigError(
            f"{key} in {section} of {self.path} must be {expected}, like {key} = {example}"
        )


_LIST_EXAMPLES = {
    "allow_read": '["data"]',
    "allow_write": '["out"]',
    "package_dirs": '["/opt/venv/lib/python3.11/site-packages"]',
    "allow_env": '["API_KEY"]',
    "preload": '["pandas"]',
}


def parse_toml(text: str, path: str) -> dict[str, object]:
    """The TOML document in `text`, read from `path`; ConfigError, worded for `path`, if
    it is not valid TOML."""
    # Imported here, not at the top: the import alone costs ~20 ms, paid only on a cache miss.
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        try:
            # The ignore is for mypy run from a 3.11+ environment, where tomli is not installed.
            import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            raise ConfigError(
                f"reading {path} on Python 3.10 needs the tomli package; install it with"
                " `pip install tomli`"
            ) from None
    try:
        document: dict[str, object] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as failure:
        why = f" ({_NAMES_NOT_UTF8})" if _SURROGATE_ESCAPE in str(failure) else ""
        raise ConfigError(f"{path} is not valid TOML: {failure}; fix it there{why}") from None
    except ValueError:
        # Not a TOMLDecodeError (caught above): int() refusing a literal past Python's
        # limit on digits (sys.get_int_max_str_digits), which the parser lets through.
        raise ConfigError(
            f"{path} holds an integer too long for Python to read (thousands of digits); "
            "no setting takes one, so shorten it"
        ) from None
    except RecursionError:
        # The parser recurses once per level of nested arrays and inline tables; no
        # setting nests more than one.
        raise ConfigError(
            f"{path} nests arrays or inline tables too deeply to read (hundreds of levels); "
            "no setting needs more than one level, so flatten it"
        ) from None
    return document


def _table(value: object, name: str, path: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ConfigError(f"{name} in {path} must be a table, like [{name}]")
    return value


def _reject_unknown_keys(
    table: dict[str, object], known: tuple[str, ...], section: str, path: str, listed: str
) -> None:
    for key in table:
        if key not in known:
            raise ConfigError(f"unknown key {key!r} in {section} of {path}; the keys are {listed}")


def is_module_name(name: str) -> bool:
    """Whether name is a dotted module name import takes ([pool] preload, --preload)."""
    import keyword  # only reached while validating, next to the ~20 ms TOML import

    return all(part.isidentifier() and not keyword.iskeyword(part) for part in name.split("."))


def toml_key(name: str) -> str:
    """A profile name as it appears in a table header: bare when TOML allows, else quoted."""
    if name and all(char in _BARE_KEY_CHARS for char in name):
        return name
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
