"""Pools for tests/pool/: one shared by the package (`pool`), or one of a test's own
that may break (`fresh`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.pool_client import PoolClient
from support.pool_requests import Keeper


@pytest.fixture(scope="package")
def keeper() -> Iterator[Keeper]:
    """One pool for the whole package: started when a test first asks for it, stopped
    after the package's last test."""
    kept = Keeper()
    yield kept
    kept.stop()


@pytest.fixture
def pool(keeper: Keeper) -> PoolClient:
    return keeper.get()


@pytest.fixture
def fresh() -> Iterator[PoolClient]:
    """A pool of its own, for tests that may break it; it must exit cleanly afterwards."""
    with PoolClient(workers=2) as client:
        yield client
        if client.proc.poll() is None and not client.eof:
            assert client.close() == 0
