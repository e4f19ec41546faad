"""A project directory, the environment a load sees, and a count of real parses."""

from __future__ import annotations

from pathlib import Path

import pytest

from pynox.policy import config
from pynox.policy.config import Config


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
