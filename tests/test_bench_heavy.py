"""bench/heavy_bench.py: a heavy request is timed only once the pool has shown that it does
python's work for it, no more and no less."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.append(str(BENCH))  # last, so that no module of bench/ hides another
import heavy_bench  # noqa: E402 - from bench/, which is no package

CODE = "print(6 * 7)"


class _Pool:
    """Answers every request with the result it was given, as `pynox pool` would."""

    def __init__(self, **result: Any) -> None:
        self.result = {"exit": 0, "stdout": "42\n", "value": None, "images": [], **result}
        self.requests: list[dict[str, Any]] = []

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        return self.result


def _check(pool: _Pool, tmp_path: Path) -> None:
    heavy_bench._check_same_work(pool, sys.executable, str(tmp_path), CODE, str(tmp_path))


def test_a_pool_that_prints_what_python_prints_passes(tmp_path: Path) -> None:
    pool = _Pool()
    _check(pool, tmp_path)
    assert pool.requests == [{"code": CODE}]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"images": [{"format": "png", "data": "iVBORw0KGgo="}]}, "images"),
        ({"value": "42"}, "value"),
        ({"files": {"chart.png": "iVBORw0KGgo="}}, "files"),
    ],
)
def test_a_result_with_more_than_python_made_stops_the_bench(
    tmp_path: Path, extra: dict[str, Any], named: str
) -> None:
    with pytest.raises(SystemExit, match=named):
        _check(_Pool(**extra), tmp_path)


def test_other_output_stops_the_bench(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="is not what python printed, '42\\\\n'"):
        _check(_Pool(stdout="41\n"), tmp_path)
