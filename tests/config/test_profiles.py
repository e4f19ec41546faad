"""Profiles: merged on top of [permissions], falsy overrides kept, unknown ones named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.config_files import write_config

from pynox.errors import ConfigError
from pynox.policy.cache import load_config
from pynox.policy.config import Grants

pytestmark = pytest.mark.unit


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
        f"profile 'fetch' is not in {loaded.path}, which has no [profiles] table;"
        " add the profile there, or run without one"
    )
