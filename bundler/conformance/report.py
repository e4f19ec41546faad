"""The per-cell report: what ran where, and what passed, failed or was skipped and why."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from bundler.conformance.cell_run import Result


def lines(result: Result) -> list[str]:
    counts = ", ".join(f"{n} {k}" for k, n in result.counts.items() if n)
    head = f"{result.cell}: {result.status.upper()} in {result.seconds:.0f}s"
    out = [head + (f" ({counts})" if counts else "")]
    if result.engine:
        out.append(f"  engine: {result.engine}")
        out.append(f"  root file system: {result.root}")
    if result.bundle:
        out.append(f"  bundle: {result.bundle}")
    out += [f"  {note}" for note in result.notes]
    if result.detail:
        label = "skipped because" if result.status == "skipped" else "result"
        out.append(f"  {label}: {result.detail}")
    return out


def write_json(results: list[Result], path: Path) -> None:
    path.write_text(json.dumps([asdict(result) for result in results], indent=2) + "\n")
