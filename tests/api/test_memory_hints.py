"""MemoryError under a memory limit: the hint's limit is one that lets the allocation fit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pynox.api.pool import Pool

# numpy's MemoryError says how much it asked for; these stand in for it, without numpy.
ASKS = """
class _ArrayMemoryError(MemoryError):
    _total_size = {size}
raise _ArrayMemoryError("Unable to allocate the array")
"""


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    with Pool(workers=1) as pool:
        yield pool


def test_the_limit_suggested_fits_what_was_asked_for(pool: Pool) -> None:
    # 512 MiB + 3 GiB: doubling the limit (1g) would fail again, twice.
    result = pool.run(ASKS.format(size=3 << 30), memory="512m")
    assert result.error is not None
    assert result.error["hint"] == (
        "the program used up its 512m memory limit; allocate less or raise the limit with "
        "memory='4g'"
    )


def test_a_small_ask_doubles_the_limit(pool: Pool) -> None:
    result = pool.run(ASKS.format(size=1 << 20), memory="512m")
    assert result.error is not None and result.error["hint"] is not None
    assert result.error["hint"].endswith("raise the limit with memory='1g'")


def test_more_than_the_machine_has_is_not_a_limit_to_raise(pool: Pool) -> None:
    result = pool.run(ASKS.format(size=1 << 60), memory="512m")
    assert result.error is not None
    assert result.error["hint"] == (
        "the program used up its 512m memory limit, asking at once for more than this machine "
        "has; allocate less, or work through the data in parts"
    )


def test_the_limit_suggested_stays_within_the_pool_limits(tmp_path: Path) -> None:
    config = tmp_path / "pynox.toml"
    config.write_text('[pool.limits]\nmemory = "3g"\n')
    with Pool(workers=1, config=config) as limited:
        # 512 MiB + 2 GiB fits in 3g, not in the 4g that fits it in powers of two.
        result = limited.run(ASKS.format(size=2 << 30), memory="512m")
    assert result.error is not None and result.error["hint"] is not None
    assert result.error["hint"].endswith("raise the limit with memory='3g'")


def test_an_allocation_beyond_the_pool_limits_is_not_told_to_raise_the_limit(
    tmp_path: Path,
) -> None:
    """512 MiB + 3 GiB cannot fit in the 2g [pool.limits] allows: a hint that says to raise
    the limit to 2g would only fail again, one call later."""
    config = tmp_path / "pynox.toml"
    config.write_text('[pool.limits]\nmemory = "2g"\n')
    with Pool(workers=1, config=config) as limited:
        result = limited.run(ASKS.format(size=3 << 30), memory="512m")
    assert result.error is not None
    assert result.error["hint"] == (
        "the program used up its 512m memory limit, and the allocation that failed needs "
        "more than the 2g [pool.limits] allows; allocate less, or work through the data in "
        "parts"
    )
