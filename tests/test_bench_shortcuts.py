"""bench/startup.py and bench/pool.py: shortcuts into the suite that time their own rows
alone, not the suite's other sections (the modes, the batch, Ray, the pool's memory)."""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.append(str(BENCH))  # last, so that no module of bench/ hides another
import suite  # noqa: E402 - from bench/, which is no package


def _suite_options(
    shortcut: str, argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> argparse.Namespace:
    """What the suite would run when the shortcut is called with argv."""
    given: list[list[str]] = []
    monkeypatch.setattr(suite, "main", lambda args: given.append(args) or 0)
    monkeypatch.setattr(sys, "argv", [shortcut, *argv])
    with pytest.raises(SystemExit):
        runpy.run_path(str(BENCH / shortcut), run_name="__main__")
    return suite.parse_arguments(given[0])


def _sections_run(options: argparse.Namespace) -> set[str]:
    skipped = {"modes": options.no_modes, "batch": options.no_batch, "ray": options.no_ray,
               "memory": options.no_memory, "pool": options.no_pool}  # fmt: skip
    return {name for name, skip in skipped.items() if not skip}


def test_startup_times_the_tiny_script_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    options = _suite_options("startup.py", ["--runs", "7"], monkeypatch)
    assert options.chosen == ["tiny"]
    assert options.rounds == 7
    assert _sections_run(options) == set()


def test_pool_times_the_pool_rows_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    options = _suite_options("pool.py", ["--runs=9"], monkeypatch)
    assert options.chosen == []
    assert options.requests == 9
    assert _sections_run(options) == {"pool"}
