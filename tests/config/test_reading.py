"""Reading pynox.toml: what each table sets, numbers and paths as a user writes them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.config_files import FULL_EXAMPLE, write_config

from pynox.policy import config
from pynox.policy.cache import load_config
from pynox.policy.config import Grants, PoolSettings

pytestmark = pytest.mark.unit


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


def test_an_empty_list_in_pool_limits_still_limits(tmp_path: Path) -> None:
    path = tmp_path / "pynox.toml"
    path.write_text('[pool.limits]\nallow_read = []\ntimeout = "5s"\n')
    loaded = config.parse_config_file(str(path), {})
    assert loaded.pool_limits.allow_read == []
    assert loaded.pool.limited == ["allow_read", "timeout"]
