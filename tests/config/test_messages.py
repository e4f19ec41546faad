"""What a user is told about a pynox.toml that is wrong: one sentence naming the file,
the key and what to write instead."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.config_files import write_config

from pynox.errors import ConfigError
from pynox.policy.cache import load_config

pytestmark = pytest.mark.unit


DURATION_HINT = "write it like 500ms, 5s, 2m or 1h"
GRANT_KEYS = (
    "allow_read, allow_write, package_dirs, allow_env, allow_network, timeout, memory,"
    " max_output, max_file_size"
)
TABLES_HINT = "settings go in the tables [permissions], [profiles.NAME] and [pool]"


def error_for(directory: Path, environ: dict[str, str], text: str) -> tuple[str, str]:
    """(the error message, the config path it should name)."""
    path = write_config(directory, text)
    with pytest.raises(ConfigError) as failure:
        load_config(path, environ)
    assert failure.value.exit_code == 125
    return failure.value.message, path


@pytest.mark.parametrize(
    ("table", "line", "expected"),
    [
        (
            "permissions",
            'allow_read = "data"',
            'must be a list of strings, like allow_read = ["data"]',
        ),
        (
            "permissions",
            "allow_write = [1]",
            'must be a list of strings, like allow_write = ["out"]',
        ),
        (
            "permissions",
            'package_dirs = "/opt"',
            "must be a list of strings,"
            ' like package_dirs = ["/opt/venv/lib/python3.11/site-packages"]',
        ),
        (
            "permissions",
            'allow_env = "API_KEY"',
            'must be a list of strings, like allow_env = ["API_KEY"]',
        ),
        (
            "permissions",
            'allow_network = "yes"',
            "must be true or false, like allow_network = false",
        ),
        ("pool", "workers = 0", "must be a whole number of at least 1, like workers = 4"),
        ("pool", 'workers = "4"', "must be a whole number of at least 1, like workers = 4"),
        ("pool", "workers = true", "must be a whole number of at least 1, like workers = 4"),
        (
            "pool",
            "max_sessions = -1",
            "must be a whole number of at least 0, like max_sessions = 16",
        ),
        ("pool", 'preload = "pandas"', 'must be a list of module names, like preload = ["pandas"]'),
    ],
)
def test_wrong_types(
    project: Path, environ: dict[str, str], table: str, line: str, expected: str
) -> None:
    message, path = error_for(project, environ, f"[{table}]\n{line}\n")
    key = line.split(" ")[0]
    assert message == f"{key} in [{table}] of {path} {expected}"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            'timeout = "abc"',
            f'timeout = "abc" in [permissions] of {{}} is not a duration; {DURATION_HINT}',
        ),
        (
            "timeout = true",
            f"timeout = true in [permissions] of {{}} is not a duration; {DURATION_HINT}",
        ),
        (
            'timeout = ["5s"]',
            f'timeout = ["5s"] in [permissions] of {{}} is not a duration; {DURATION_HINT}',
        ),
        (
            "timeout = 00:00:05",
            f"timeout = 00:00:05 in [permissions] of {{}} is not a duration; {DURATION_HINT}",
        ),
        (
            "timeout = 2024-01-01T10:00:00Z",
            "timeout = 2024-01-01T10:00:00+00:00 in [permissions] of {} is not a duration;"
            f" {DURATION_HINT}",
        ),
        (
            "timeout = 0",
            "timeout = 0 in [permissions] of {} is not more than zero;"
            " give a positive duration, like 5s",
        ),
        (
            'timeout = "25h"',
            'timeout = "25h" in [permissions] of {} is above the 24h maximum; give at most 24h',
        ),
        (
            'memory = "16m"',
            'memory = "16m" in [permissions] of {} is below the 32m minimum; give at least 32m',
        ),
        (
            'memory = "lots"',
            'memory = "lots" in [permissions] of {} is not a size;'
            " write it like 65536, 64k, 512m or 1g",
        ),
        (
            'max_output = "32m"',
            'max_output = "32m" in [permissions] of {} is above the 16m maximum; give at most 16m',
        ),
        (
            "max_file_size = -1",
            "max_file_size = -1 in [permissions] of {} is negative; give a size of at least 1 byte",
        ),
        (
            'allow_env = ["API-KEY"]',
            "allow_env in [permissions] of {} lists 'API-KEY', which is not an environment"
            " variable name; use letters, digits and _, not starting with a digit",
        ),
        (
            'allow_env = ["1ABC"]',
            "allow_env in [permissions] of {} lists '1ABC', which is not an environment"
            " variable name; use letters, digits and _, not starting with a digit",
        ),
        (
            'allow_env = [""]',
            "allow_env in [permissions] of {} lists '', which is not an environment"
            " variable name; use letters, digits and _, not starting with a digit",
        ),
        (
            'allow_env = ["API_KEY", "LD_PRELOAD"]',
            "allow_env in [permissions] of {} lists 'LD_PRELOAD', which steers the dynamic"
            " loader and is never passed into the sandbox; remove it",
        ),
        (
            'allow_read = [""]',
            'allow_read in [permissions] of {} lists an empty path; remove it, or write "." for'
            " the directory of pynox.toml",
        ),
        (
            'allow_read = ["a\\u0000b"]',
            "allow_read in [permissions] of {} lists a path with a NUL character;"
            " remove that character",
        ),
        (
            'allow_read = ["~no-such-user-pynox/x"]',
            "allow_read in [permissions] of {} lists '~no-such-user-pynox/x', but there is no"
            " user 'no-such-user-pynox'; write the full path",
        ),
    ],
)
def test_bad_values_in_permissions(
    project: Path, environ: dict[str, str], line: str, expected: str
) -> None:
    message, path = error_for(project, environ, f"[permissions]\n{line}\n")
    assert message == expected.format(path)


def test_env_names_may_use_underscores_and_digits(project: Path, environ: dict[str, str]) -> None:
    text = '[permissions]\nallow_env = ["_X", "API_KEY_2", "lower"]\n'
    loaded = load_config(write_config(project, text), environ)
    assert loaded.permissions.allow_env == ["_X", "API_KEY_2", "lower"]


@pytest.mark.parametrize("module", ["pandas-ta", "class", "numpy..linalg", "", "1abc", "a.b c"])
def test_preload_names_must_be_importable(
    project: Path, environ: dict[str, str], module: str
) -> None:
    message, path = error_for(project, environ, f'[pool]\npreload = ["{module}"]\n')
    assert message == (
        f"preload in [pool] of {path} lists {module!r}, which is not a module name;"
        ' write importable names, like "pandas" or "numpy.linalg"'
    )


def test_preload_accepts_dotted_names(project: Path, environ: dict[str, str]) -> None:
    text = '[pool]\npreload = ["numpy.linalg", "_private", "pandas", "pandas"]\n'
    loaded = load_config(write_config(project, text), environ)
    assert loaded.pool.preload == ["numpy.linalg", "_private", "pandas"]


def test_durations_in_pool(project: Path, environ: dict[str, str]) -> None:
    message, path = error_for(project, environ, '[pool]\nsession_idle = "soon"\n')
    assert (
        message == f'session_idle = "soon" in [pool] of {path} is not a duration; {DURATION_HINT}'
    )


@pytest.mark.parametrize(
    ("text", "section"),
    [
        ("[permissions]\nallow_reed = []\n", "[permissions]"),
        ("[profiles.fetch]\nnetwork = true\n", "[profiles.fetch]"),
        ("[pool.limits]\nworkers = 2\n", "[pool.limits]"),
        ('[profiles."odd name"]\nx = 1\n', '[profiles."odd name"]'),
    ],
)
def test_unknown_keys_in_grant_tables(
    project: Path, environ: dict[str, str], text: str, section: str
) -> None:
    message, path = error_for(project, environ, text)
    key = text.split("\n")[1].split(" ")[0]
    assert message == f"unknown key {key!r} in {section} of {path}; the keys are {GRANT_KEYS}"


def test_unknown_key_in_pool(project: Path, environ: dict[str, str]) -> None:
    message, path = error_for(project, environ, '[pool]\nallow_read = ["data"]\n')
    assert message == (
        f"unknown key 'allow_read' in [pool] of {path}; the keys are workers, preload,"
        " warmup, package_dirs, max_sessions, session_idle and the table [pool.limits]"
    )


def test_unknown_table(project: Path, environ: dict[str, str]) -> None:
    message, path = error_for(project, environ, "[perms]\nallow_network = true\n")
    assert message == f"unknown table [perms] in {path}; {TABLES_HINT}"


def test_grant_outside_any_table(project: Path, environ: dict[str, str]) -> None:
    message, path = error_for(project, environ, 'timeout = "5s"\n')
    assert (
        message == f"timeout at the top of {path} is outside any table; put it under [permissions]"
    )


def test_unknown_top_level_key(project: Path, environ: dict[str, str]) -> None:
    message, path = error_for(project, environ, "verbose = true\n")
    assert message == f"unknown key 'verbose' at the top of {path}; {TABLES_HINT}"


@pytest.mark.parametrize("name", ["permissions", "profiles", "pool"])
def test_tables_must_be_tables(project: Path, environ: dict[str, str], name: str) -> None:
    message, path = error_for(project, environ, f"{name} = 5\n")
    assert message == f"{name} in {path} must be a table, like [{name}]"


def test_profiles_hold_tables(project: Path, environ: dict[str, str]) -> None:
    message, path = error_for(project, environ, "[profiles]\nallow_network = true\n")
    assert message == (
        f"'allow_network' in [profiles] of {path} is not a profile table;"
        " give each profile its own table, like [profiles.fetch]"
    )


def test_pool_limits_must_be_a_table(project: Path, environ: dict[str, str]) -> None:
    message, path = error_for(project, environ, "[pool]\nlimits = 5\n")
    assert message == f"limits in [pool] of {path} must be a table, like [pool.limits]"


def test_toml_syntax_error_names_the_line(project: Path, environ: dict[str, str]) -> None:
    message, path = error_for(project, environ, '[permissions]\nallow_read ["data"]\n')
    assert message.startswith(f"{path} is not valid TOML: ")
    assert "(at line 2, column" in message
    assert message.endswith("; fix it there")


def test_file_that_is_not_utf8(project: Path, environ: dict[str, str]) -> None:
    path = project / "pynox.toml"
    path.write_bytes(b'[permissions]\nallow_read = ["caf\xe9"]\n')
    with pytest.raises(ConfigError) as failure:
        load_config(str(path), environ)
    assert failure.value.message == (
        f"{os.path.realpath(path)} is not UTF-8 text (see line 2); save it as UTF-8 "
        f"({NAMES_NOT_UTF8})"
    )


NAMES_NOT_UTF8 = (
    "a path whose name is not UTF-8 cannot be written in TOML: grant it on the command line "
    "(--allow-read, --allow-write), or name a symbolic link to it whose path is UTF-8"
)


def test_a_path_spelled_as_os_fsdecode_spells_it_says_how_to_grant_it(
    project: Path, environ: dict[str, str]
) -> None:
    """\\udce9 is how os.fsdecode, and the pool protocol, spell the byte 0xe9 of a name:
    TOML has no spelling for it, and the message says what to do instead."""
    message, path = error_for(project, environ, '[permissions]\nallow_read = ["/srv/caf\\udce9"]\n')
    assert message.startswith(f"{path} is not valid TOML: ")
    assert message.endswith(f"; fix it there ({NAMES_NOT_UTF8})")


def test_file_that_starts_with_a_byte_order_mark(project: Path, environ: dict[str, str]) -> None:
    """As some editors save UTF-8: the parser alone would point at line 1, column 1."""
    path = project / "pynox.toml"
    path.write_bytes(b'\xef\xbb\xbf[permissions]\ntimeout = "5s"\n')
    with pytest.raises(ConfigError) as failure:
        load_config(str(path), environ)
    assert failure.value.message == (
        f"{os.path.realpath(path)} starts with a byte order mark, which TOML does not allow;"
        " save it as UTF-8 without one"
    )


def test_unreadable_file(project: Path, environ: dict[str, str]) -> None:
    path = project / "pynox.toml"
    path.mkdir()  # a directory cannot be read as a file, even by root
    with pytest.raises(ConfigError) as failure:
        load_config(str(path), environ)
    assert failure.value.message == (
        f"cannot read {os.path.realpath(path)} (Is a directory);"
        " check that it exists and that you may read it"
    )


def test_missing_file(project: Path, environ: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"\(No such file or directory\); check that it exists"):
        load_config(str(project / "absent.toml"), environ)
