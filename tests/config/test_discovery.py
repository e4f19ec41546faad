"""Finding the file: --config, else PYNOX_CONFIG, else pynox.toml in the working
directory; what is said when a named file is missing or is not a file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pynox.errors import ConfigError
from pynox.policy import config

pytestmark = pytest.mark.unit


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
