"""The world every escape test starts from (see support/probes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.probes import World, make_world


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)
