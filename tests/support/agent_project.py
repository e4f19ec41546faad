"""An agent's working directory, as the tests of real agent tasks and of their hints
make it: data/ to read, with a small CSV of sales, and out/ for results."""

from __future__ import annotations

from pathlib import Path

SALES_CSV = "region,amount\nnorth,70\nsouth,80\nnorth,50\n"


def make_agent_project(root: Path) -> Path:
    (root / "out").mkdir()
    (root / "data").mkdir()
    (root / "data" / "sales.csv").write_text(SALES_CSV)
    return root
