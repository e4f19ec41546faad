"""pynox.toml: parsing, the messages users see, discovery and the parsed-config cache."""

import marshal
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import pynox
from pynox.errors import ConfigError
from pynox.policy import cache as config_cache
from pynox.policy import config
from pynox.policy.cache import load_config
from pynox.policy.config import Config, Grants, PoolSettings

SOME_MTIME = 1_600_000_000
DURATION_HINT = "write it like 500ms, 5s, 2m or 1h"
GRANT_KEYS = (
    "allow_read, allow_write, package_dirs, allow_env, allow_network, timeout, memory,"
    " max_output, max_file_size"
)
TABLES_HINT = "settings go in the tables [permissions], [profiles.NAME] and [pool]"

FULL_EXAMPLE = """
[permissions]
allow_read = ["data"]
allow_write = ["out"]
package_dirs = ["/opt/venv/lib/python3.11/site-packages"]
allow_env = ["API_KEY"]
allow_network = false
timeout = "10s"
memory = "512m"
max_output = 65536
max_file_size = "100m"

[profiles.fetch]
allow_network = true

[pool]
workers = 4
preload = ["pandas"]
max_sessions = 16
session_idle = "10m"

[pool.limits]
allow_read = ["data"]
allow_write = ["out"]
allow_network = false
timeout = "30s"
memory = "1g"
"""


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {"HOME": str(home), "XDG_CACHE_HOME": str(tmp_path / "cache")}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every real parse of a pynox.toml (the cache calls parse_config_bytes)."""
    calls: list[str] = []
    parse = config.parse_config_bytes

    def counting_parse(raw: bytes, path: str, environ: dict[str, str]) -> Config:
        calls.append(path)
        return parse(raw, path, environ)

    monkeypatch.setattr(config, "parse_config_bytes", counting_parse)
    return calls


def write_config(directory: Path, text: str, mtime: int | None = None) -> str:
    path = directory / "pynox.toml"
    path.write_text(textwrap.dedent(text))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return os.path.realpath(path)


def error_for(directory: Path, environ: dict[str, str], text: str) -> tuple[str, str]:
    """(the error message, the config path it should name)."""
    path = write_config(directory, text)
    with pytest.raises(ConfigError) as failure:
        load_config(path, environ)
    assert failure.value.exit_code == 125
    return failure.value.message, path


# --- parsing ---------------------------------------------------------------------------------


def test_full_example(project: Path, environ: dict[str, str]) -> None:
    loaded = load_config(write_config(project, FULL_EXAMPLE), environ)
    here = os.path.realpath(project)
    assert loaded.path == os.path.join(here, "pynox.toml")
    assert loaded.permissions == Grants(
        allow_read=[f"{here}/data"],
        allow_write=[f"{here}/out"],
        package_dirs=["/opt/venv/lib/python3.11/site-packages"],
        allow_env=["API_KEY"],
        allow_network=False,
        timeout=10.0,
        memory=512 << 20,
        max_output=65536,
        max_file_size=100 << 20,
    )
    assert loaded.profiles == {"fetch": Grants(allow_network=True)}
    expected_pool = PoolSettings(workers=4, preload=["pandas"], max_sessions=16, session_idle=600.0)
    expected_pool.limited = ["allow_network", "allow_read", "allow_write", "memory", "timeout"]
    assert loaded.pool == expected_pool
    assert loaded.pool_limits == Grants(
        allow_read=[f"{here}/data"],
        allow_write=[f"{here}/out"],
        allow_network=False,
        timeout=30.0,
        memory=1 << 30,
    )


def test_empty_file_sets_nothing(project: Path, environ: dict[str, str]) -> None:
    loaded = load_config(write_config(project, ""), environ)
    assert loaded.permissions == Grants()
    assert loaded.profiles == {}
    assert loaded.pool == PoolSettings()
    assert loaded.pool_limits == Grants()
    assert loaded.permissions.allow_network is None
    assert loaded.permissions.timeout is None


def test_numbers_are_seconds_and_bytes(project: Path, environ: dict[str, str]) -> None:
    text = """
    [permissions]
    timeout = 2.5
    memory = 67108864
    [pool]
    session_idle = 60
    """
    loaded = load_config(write_config(project, text), environ)
    assert loaded.permissions.timeout == 2.5
    assert loaded.permissions.memory == 64 << 20
    assert loaded.pool.session_idle == 60.0


def test_paths_are_relative_to_the_file_not_the_working_directory(
    project: Path, environ: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    text = """
    [permissions]
    allow_read = ["data", "./a/../b/", "../shared", "/abs//path", "~", "~/notes", "data"]
    """
    loaded = load_config(write_config(project, text), environ)
    here = os.path.realpath(project)
    assert loaded.permissions.allow_read == [
        f"{here}/data",  # listed twice, kept once
        f"{here}/b",
        f"{os.path.dirname(here)}/shared",
        "/abs/path",
        environ["HOME"],
        f"{environ['HOME']}/notes",
    ]


def test_paths_do_not_need_to_exist(project: Path, environ: dict[str, str]) -> None:
    text = '[permissions]\nallow_write = ["not/there/yet"]\n'
    loaded = load_config(write_config(project, text), environ)
    assert loaded.permissions.allow_write == [f"{os.path.realpath(project)}/not/there/yet"]


def test_a_symlinked_file_resolves_from_its_real_directory(
    project: Path, environ: dict[str, str], tmp_path: Path
) -> None:
    real_file = write_config(project, '[permissions]\nallow_read = ["data"]\n')
    link_dir = tmp_path / "linked"
    link_dir.mkdir()
    (link_dir / "pynox.toml").symlink_to(real_file)
    loaded = load_config(str(link_dir / "pynox.toml"), environ)
    assert loaded.path == real_file
    assert loaded.permissions.allow_read == [f"{os.path.realpath(project)}/data"]
    assert config.parse_config_file(str(link_dir / "pynox.toml"), environ) == loaded


# --- what a user is told --------------------------------------------------------------------


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
            "max_file_size = -1 in [permissions] of {} is negative; give a size of at least 1",
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
        " max_sessions, session_idle and the table [pool.limits]"
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
        f"{os.path.realpath(path)} is not UTF-8 text (see line 2); save it as UTF-8"
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


# --- profiles and merging --------------------------------------------------------------------

PROFILES = """
[permissions]
allow_read = ["data", "shared"]
allow_env = ["HOME_DIR"]
allow_network = false
timeout = "10s"
memory = "512m"

[profiles.fetch]
allow_read = ["shared", "cache"]
allow_write = ["out"]
allow_network = true
timeout = "1m"

[profiles.quiet]
max_output = 1024
"""


def test_profile_merges_on_top_of_permissions(project: Path, environ: dict[str, str]) -> None:
    loaded = load_config(write_config(project, PROFILES), environ)
    here = os.path.realpath(project)
    merged = loaded.grants_for("fetch")
    assert merged.allow_read == [f"{here}/data", f"{here}/shared", f"{here}/cache"]
    assert merged.allow_write == [f"{here}/out"]
    assert merged.allow_env == ["HOME_DIR"]
    assert merged.allow_network is True  # the profile overrides
    assert merged.timeout == 60.0
    assert merged.memory == 512 << 20  # not set by the profile: kept
    assert merged.max_output is None
    # The parts themselves are unchanged.
    assert loaded.permissions.allow_network is False
    assert loaded.profile("fetch") == Grants(
        allow_read=[f"{here}/shared", f"{here}/cache"],
        allow_write=[f"{here}/out"],
        allow_network=True,
        timeout=60.0,
    )
    assert loaded.grants_for(None) == loaded.permissions
    assert loaded.grants_for("quiet").max_output == 1024


def test_merged_keeps_falsy_overrides() -> None:
    base = Grants(allow_network=True, max_output=100, allow_env=["A", "B"])
    top = Grants(allow_network=False, max_output=0, allow_env=["B", "C"])
    merged = base.merged(top)
    assert merged.allow_network is False
    assert merged.max_output == 0
    assert merged.allow_env == ["A", "B", "C"]
    assert base.allow_env == ["A", "B"]  # not modified in place


def test_unknown_profile_lists_the_known_ones(project: Path, environ: dict[str, str]) -> None:
    loaded = load_config(write_config(project, PROFILES), environ)
    with pytest.raises(ConfigError) as failure:
        loaded.profile("fetcch")
    assert failure.value.message == (
        f"profile 'fetcch' is not in {loaded.path}; its profiles are: fetch, quiet"
    )


def test_unknown_profile_without_profiles(project: Path, environ: dict[str, str]) -> None:
    loaded = load_config(write_config(project, "[permissions]\n"), environ)
    with pytest.raises(ConfigError) as failure:
        loaded.grants_for("fetch")
    assert failure.value.message == (
        f"profile 'fetch' is not in {loaded.path}; it has no [profiles] table"
    )


# --- plain data for the cache -----------------------------------------------------------------


def test_data_round_trip(project: Path, environ: dict[str, str]) -> None:
    loaded = load_config(write_config(project, FULL_EXAMPLE), environ)
    data = loaded.to_data()
    assert marshal.loads(marshal.dumps(data)) == data  # builtins only
    again = Config.from_data(data)
    assert again == loaded
    assert again.profiles["fetch"] == loaded.profiles["fetch"]
    assert again.pool == loaded.pool
    assert again.pool_limits == loaded.pool_limits
    assert again != Config.from_data({**data, "path": "/elsewhere/pynox.toml"})


def bad_shapes() -> list[Callable[[dict[str, object]], None]]:
    def missing_key(data: dict[str, object]) -> None:
        del data["pool"]

    def extra_key(data: dict[str, object]) -> None:
        data["extra"] = 1

    def bool_for_int(data: dict[str, object]) -> None:
        data["pool"] = {**data["pool"], "workers": True}  # type: ignore[dict-item]

    def int_for_float(data: dict[str, object]) -> None:
        data["permissions"] = {**data["permissions"], "timeout": 10}  # type: ignore[dict-item]

    def number_in_path_list(data: dict[str, object]) -> None:
        data["permissions"] = {**data["permissions"], "allow_read": [1]}  # type: ignore[dict-item]

    def profile_not_a_dict(data: dict[str, object]) -> None:
        data["profiles"] = {"fetch": []}

    def path_not_a_string(data: dict[str, object]) -> None:
        data["path"] = b"/p"

    return [
        missing_key,
        extra_key,
        bool_for_int,
        int_for_float,
        number_in_path_list,
        profile_not_a_dict,
        path_not_a_string,
    ]


@pytest.mark.parametrize("damage", bad_shapes())
def test_from_data_rejects_other_shapes(
    project: Path, environ: dict[str, str], damage: Callable[[dict[str, object]], None]
) -> None:
    data = load_config(write_config(project, FULL_EXAMPLE), environ).to_data()
    damage(data)
    with pytest.raises((ValueError, TypeError)):
        Config.from_data(data)


# --- finding the file ------------------------------------------------------------------------


def test_explicit_config_comes_first(tmp_path: Path, project: Path) -> None:
    other = tmp_path / "other.toml"
    other.write_text("")
    from_env = tmp_path / "env.toml"
    from_env.write_text("")
    (project / "pynox.toml").write_text("")
    environ = {"PYNOX_CONFIG": str(from_env), "HOME": str(tmp_path)}
    found = config.find_config_path("../other.toml", environ, str(project))
    assert found == f"{project}/../other.toml"
    assert os.path.samefile(found, other)
    assert config.find_config_path(None, environ, str(project)) == str(from_env)
    assert config.find_config_path(None, {}, str(project)) == str(project / "pynox.toml")


def test_relative_pynox_config_is_relative_to_cwd(tmp_path: Path, project: Path) -> None:
    (project / "ci.toml").write_text("")
    found = config.find_config_path(None, {"PYNOX_CONFIG": "ci.toml"}, str(project))
    assert found == str(project / "ci.toml")


def test_empty_pynox_config_is_unset(project: Path) -> None:
    (project / "pynox.toml").write_text("")
    found = config.find_config_path(None, {"PYNOX_CONFIG": ""}, str(project))
    assert found == str(project / "pynox.toml")


def test_tilde_in_explicit_config_uses_home_from_environ(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text("")
    environ = {"HOME": str(tmp_path)}
    found = config.find_config_path("~/mine.toml", environ, "/")
    assert found == str(tmp_path / "mine.toml")


def test_no_config_anywhere(tmp_path: Path, project: Path) -> None:
    # A pynox.toml beside a script in another directory is never picked up.
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "pynox.toml").write_text("[permissions]\nallow_network = true\n")
    (scripts / "tool.py").write_text("print('hi')\n")
    assert config.find_config_path(None, {}, str(project)) is None


def test_a_directory_named_pynox_toml_is_not_a_config(project: Path) -> None:
    (project / "pynox.toml").mkdir()
    assert config.find_config_path(None, {}, str(project)) is None


def test_missing_explicit_config(project: Path) -> None:
    with pytest.raises(ConfigError) as failure:
        config.find_config_path("nope.toml", {}, str(project))
    assert failure.value.message == (
        "--config=nope.toml does not exist; pass the path of a pynox.toml"
    )


def test_explicit_config_that_is_a_directory(project: Path) -> None:
    with pytest.raises(ConfigError) as failure:
        config.find_config_path(str(project), {}, "/")
    assert failure.value.message == (
        f"--config={project} is a directory; pass the path of a pynox.toml, not of its directory"
    )


def test_explicit_config_that_is_not_a_file(project: Path) -> None:
    os.mkfifo(project / "fifo")
    with pytest.raises(ConfigError) as failure:
        config.find_config_path("fifo", {}, str(project))
    assert failure.value.message == (
        "--config=fifo is not a regular file; pass the path of a pynox.toml"
    )


def test_empty_explicit_config(project: Path) -> None:
    with pytest.raises(ConfigError) as failure:
        config.find_config_path("", {}, str(project))
    assert failure.value.message == "--config= is empty; pass the path of a pynox.toml"


def test_missing_pynox_config(project: Path) -> None:
    (project / "pynox.toml").write_text("")  # not a fallback when PYNOX_CONFIG is wrong
    with pytest.raises(ConfigError) as failure:
        config.find_config_path(None, {"PYNOX_CONFIG": "/no/such.toml"}, str(project))
    assert failure.value.message == (
        "PYNOX_CONFIG=/no/such.toml does not exist; point PYNOX_CONFIG at a pynox.toml or unset it"
    )


# --- the cache -------------------------------------------------------------------------------


def entry_for(path: str, environ: dict[str, str]) -> Path:
    directory = config_cache.cache_dir(environ)
    assert directory is not None
    return Path(directory) / (path.replace("%", "%25").replace("/", "%2F") + ".marshal")


def test_cache_dir_locations(tmp_path: Path) -> None:
    xdg = str(tmp_path / "xdg")
    assert config_cache.cache_dir({"XDG_CACHE_HOME": xdg, "HOME": "/h"}) == f"{xdg}/pynox/config"
    assert config_cache.cache_dir({"HOME": "/h"}) == "/h/.cache/pynox/config"
    # The XDG spec says relative values are invalid and to be ignored.
    assert config_cache.cache_dir({"XDG_CACHE_HOME": "rel", "HOME": "/h"}) == (
        "/h/.cache/pynox/config"
    )
    assert config_cache.cache_dir({}) is None


def test_second_load_uses_the_cache(
    project: Path, environ: dict[str, str], parses: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(project, FULL_EXAMPLE)
    first = load_config(path, environ)
    assert parses == [path]
    entry = entry_for(path, environ)
    assert entry.is_file()

    def no_parsing(raw: bytes, path: str, environ: dict[str, str]) -> Config:
        raise AssertionError("parsed although the cache was fresh")

    monkeypatch.setattr(config, "parse_config_bytes", no_parsing)
    second = load_config(path, environ)
    assert second == first
    assert second.permissions.memory == 512 << 20


def test_cache_file_and_directory_modes(project: Path, environ: dict[str, str]) -> None:
    path = write_config(project, FULL_EXAMPLE)
    load_config(path, environ)
    entry = entry_for(path, environ)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert stat.S_IMODE(entry.parent.stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE(entry.parent.parent.stat().st_mode) & 0o077 == 0
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]  # no temporary files left


def test_cached_run_does_not_import_a_toml_parser(project: Path, environ: dict[str, str]) -> None:
    path = write_config(project, FULL_EXAMPLE)
    load_config(path, environ)  # fills the cache
    script = (
        "import sys\n"
        "from pynox.policy.cache import load_config\n"
        f"loaded = load_config({path!r}, {environ!r})\n"
        "assert loaded.permissions.memory == 512 << 20\n"
        "print(sorted(m for m in ('tomllib', 'tomli') if m in sys.modules))\n"
    )
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(pynox.__file__)))
    result = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": package_root},
        # Not the repository's root: -c puts the working directory first on sys.path,
        # where the source tree's pynox (other files, so another cache key) would win.
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "[]"


def test_changed_file_is_parsed_again(
    project: Path, environ: dict[str, str], parses: list[str]
) -> None:
    path = write_config(project, '[permissions]\ntimeout = "5s"\n')
    assert load_config(path, environ).permissions.timeout == 5.0
    write_config(project, '[permissions]\ntimeout = "50s"\n')
    assert load_config(path, environ).permissions.timeout == 50.0
    assert len(parses) == 2


def test_same_size_and_mtime_but_replaced_file_is_parsed_again(
    project: Path, environ: dict[str, str], parses: list[str]
) -> None:
    path = write_config(project, '[permissions]\ntimeout = "5s"\n', mtime=SOME_MTIME)
    load_config(path, environ)
    replacement = project / "new.toml"
    replacement.write_text('[permissions]\ntimeout = "6s"\n')  # same size
    os.utime(replacement, (SOME_MTIME, SOME_MTIME))  # same mtime
    os.replace(replacement, path)
    assert load_config(path, environ).permissions.timeout == 6.0
    assert len(parses) == 2


def test_same_size_and_mtime_edited_in_place_is_parsed_again(
    project: Path, environ: dict[str, str], parses: list[str]
) -> None:
    # Size, mtime, inode and device all stay (as after a rewrite within one timestamp
    # tick, or `cp -p`): only the bytes tell.
    path = write_config(project, '[permissions]\ntimeout = "5s"\n', mtime=SOME_MTIME)
    before = os.stat(path)
    load_config(path, environ)
    write_config(project, '[permissions]\ntimeout = "7s"\n', mtime=SOME_MTIME)
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    assert load_config(path, environ).permissions.timeout == 7.0
    assert len(parses) == 2


def test_an_edit_during_the_parse_never_leaves_a_wrong_entry(
    project: Path, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    old_text = '[permissions]\ntimeout = "5s"\n'
    path = write_config(project, old_text)
    edited: list[bool] = []

    def edit_once() -> None:
        if not edited:
            edited.append(True)
            write_config(project, '[permissions]\ntimeout = "9s"\n')

    # The edit lands just after the cache has read the file, before any parsing.
    parse_file, parse_bytes = config.parse_config_file, config.parse_config_bytes

    def file_then_edit(path: str, environ: dict[str, str]) -> Config:
        edit_once()
        return parse_file(path, environ)

    def bytes_then_edit(raw: bytes, path: str, environ: dict[str, str]) -> Config:
        edit_once()
        return parse_bytes(raw, path, environ)

    monkeypatch.setattr(config, "parse_config_file", file_then_edit)
    monkeypatch.setattr(config, "parse_config_bytes", bytes_then_edit)
    load_config(path, environ)
    write_config(project, old_text)  # back to the bytes the cache read
    assert load_config(path, environ).permissions.timeout == 5.0


def test_a_file_written_just_now_is_cached(
    project: Path, environ: dict[str, str], parses: list[str]
) -> None:
    path = write_config(project, '[permissions]\ntimeout = "5s"\n')
    load_config(path, environ)
    load_config(path, environ)
    assert len(parses) == 1
    assert entry_for(path, environ).is_file()


def test_change_of_home_is_parsed_again(
    project: Path, environ: dict[str, str], tmp_path: Path, parses: list[str]
) -> None:
    path = write_config(project, '[permissions]\nallow_read = ["~/data"]\n')
    assert load_config(path, environ).permissions.allow_read == [f"{environ['HOME']}/data"]
    other_home = {**environ, "HOME": str(tmp_path / "other")}
    assert load_config(path, other_home).permissions.allow_read == [f"{tmp_path}/other/data"]
    assert len(parses) == 2


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"garbage",
        b"\xff" * 64,
        marshal.dumps([1, 2, 3]),
        marshal.dumps((1, 2)),
        marshal.dumps("abc"),
    ],
)
def test_corrupt_cache_file_is_ignored(
    project: Path, environ: dict[str, str], parses: list[str], content: bytes
) -> None:
    path = write_config(project, FULL_EXAMPLE)
    first = load_config(path, environ)
    entry = entry_for(path, environ)
    entry.write_bytes(content)
    assert load_config(path, environ) == first
    assert len(parses) == 2
    # ... and the entry is written again, good this time.
    assert load_config(path, environ) == first
    assert len(parses) == 2


def test_cache_entry_of_the_wrong_shape_is_ignored(
    project: Path, environ: dict[str, str], parses: list[str]
) -> None:
    path = write_config(project, FULL_EXAMPLE)
    first = load_config(path, environ)
    entry = entry_for(path, environ)
    version, key, raw, data = marshal.loads(entry.read_bytes())
    data["permissions"]["memory"] = "a lot"
    entry.write_bytes(marshal.dumps((version, key, raw, data)))
    assert load_config(path, environ) == first
    assert len(parses) == 2


def test_cache_entry_others_can_write_is_ignored(
    project: Path, environ: dict[str, str], parses: list[str]
) -> None:
    path = write_config(project, FULL_EXAMPLE)
    load_config(path, environ)
    entry = entry_for(path, environ)
    entry.chmod(0o666)
    load_config(path, environ)
    assert len(parses) == 2


def test_cache_from_another_format_version_is_ignored(
    project: Path, environ: dict[str, str], parses: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(project, FULL_EXAMPLE)
    load_config(path, environ)
    monkeypatch.setattr(config_cache, "CACHE_FORMAT", config_cache.CACHE_FORMAT + 1)
    load_config(path, environ)
    assert len(parses) == 2


def test_unwritable_cache_is_fine(
    project: Path, environ: dict[str, str], tmp_path: Path, parses: list[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    environ = {**environ, "XDG_CACHE_HOME": str(blocker)}  # mkdir below a file fails
    path = write_config(project, FULL_EXAMPLE)
    assert load_config(path, environ).pool.workers == 4
    assert load_config(path, environ).pool.workers == 4
    assert len(parses) == 2


def test_missing_home_does_not_get_created(
    project: Path, tmp_path: Path, parses: list[str]
) -> None:
    environ = {"HOME": str(tmp_path / "no-home")}
    path = write_config(project, FULL_EXAMPLE)
    load_config(path, environ)
    assert not (tmp_path / "no-home").exists()


def test_no_cache_location_means_parsing(project: Path, parses: list[str]) -> None:
    path = write_config(project, FULL_EXAMPLE)
    load_config(path, {})
    load_config(path, {})
    assert len(parses) == 2


def test_long_paths_are_not_cached(
    tmp_path: Path, environ: dict[str, str], parses: list[str]
) -> None:
    deep = tmp_path / ("d" * 100) / ("e" * 100)
    deep.mkdir(parents=True)
    path = write_config(deep, FULL_EXAMPLE)
    load_config(path, environ)
    load_config(path, environ)
    assert len(parses) == 2
    cache = config_cache.cache_dir(environ)
    assert cache is None or not os.path.exists(cache) or os.listdir(cache) == []


def test_percent_in_path_does_not_collide(
    tmp_path: Path, environ: dict[str, str], parses: list[str]
) -> None:
    # "a%2Fb/pynox.toml" and "a/b/pynox.toml" must get different entries.
    one = tmp_path / "a%2Fb"
    two = tmp_path / "a" / "b"
    one.mkdir()
    two.mkdir(parents=True)
    first = write_config(one, '[permissions]\ntimeout = "1s"\n')
    second = write_config(two, '[permissions]\ntimeout = "2s"\n')
    assert load_config(first, environ).permissions.timeout == 1.0
    assert load_config(second, environ).permissions.timeout == 2.0
    assert load_config(first, environ).permissions.timeout == 1.0
    assert load_config(second, environ).permissions.timeout == 2.0
    assert len(parses) == 2
    assert entry_for(first, environ).name.startswith("%2F")
    assert "%252F" in entry_for(first, environ).name


def test_forget(project: Path, environ: dict[str, str], parses: list[str]) -> None:
    path = write_config(project, FULL_EXAMPLE)
    load_config(path, environ)
    config_cache.forget(path, environ)
    assert not entry_for(path, environ).exists()
    load_config(path, environ)
    assert len(parses) == 2
    config_cache.forget(str(project / "never-loaded.toml"), environ)  # nothing to do: fine


def test_forget_all(
    project: Path, tmp_path: Path, environ: dict[str, str], parses: list[str]
) -> None:
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    paths = [write_config(project, FULL_EXAMPLE), write_config(other_dir, FULL_EXAMPLE)]
    for path in paths:
        load_config(path, environ)
    config_cache.forget_all(environ)
    for path in paths:
        assert not entry_for(path, environ).exists()
    config_cache.forget_all({})  # no cache directory: fine


def test_an_empty_list_in_pool_limits_still_limits(tmp_path: Path) -> None:
    path = tmp_path / "pynox.toml"
    path.write_text('[pool.limits]\nallow_read = []\ntimeout = "5s"\n')
    loaded = config.parse_config_file(str(path), {})
    assert loaded.pool_limits.allow_read == []
    assert loaded.pool.limited == ["allow_read", "timeout"]


def test_cache_drops_entries_of_deleted_files_and_keeps_a_bounded_number(
    tmp_path: Path, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = Path(config_cache.cache_dir(environ) or "")
    paths = []
    for n in range(4):
        path = tmp_path / f"project-{n}" / "pynox.toml"
        path.parent.mkdir()
        path.write_text('[permissions]\nallow_env = ["A"]\n')
        paths.append(path)
    load_config(str(paths[0]), environ)
    load_config(str(paths[1]), environ)
    assert len(list(directory.iterdir())) == 2
    paths[0].unlink()  # a project (or a temporary directory) that is gone
    load_config(str(paths[2]), environ)
    entries = sorted(p.name for p in directory.iterdir())
    assert len(entries) == 2 and not any("project-0" in name for name in entries)
    monkeypatch.setattr(config_cache, "_MAX_ENTRIES", 2)
    load_config(str(paths[3]), environ)
    entries = sorted(p.name for p in directory.iterdir())
    assert len(entries) == 2 and any("project-3" in name for name in entries)
