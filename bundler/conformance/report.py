"""The per-cell report, and the summary table of every cell (printed, and written to
dist/conformance.md): what ran where, on which kernel, and what passed, failed or was
not run and why."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from bundler.conformance.cell_run import Result
from bundler.paths import PROJECT

SUMMARY = PROJECT / "dist" / "conformance.md"

NOT_SELECTED = "not selected"  # a cell this run was not asked for
COLUMNS = ("cell", "status", "engine", "kernel", "runtime", "passed", "failed", "skipped",
           "sandboxed", "reason")  # fmt: skip


def lines(result: Result) -> list[str]:
    counts = ", ".join(f"{n} {k}" for k, n in result.counts.items() if n)
    head = f"{result.cell}: {result.status.upper()} in {result.seconds:.0f}s"
    out = [head + (f" ({counts})" if counts else "")]
    if result.engine:
        out.append(f"  engine: {result.engine}")
        out.append(f"  root file system: {result.root}")
    if result.kernel:
        out.append(f"  kernel: {result.kernel}")
    out += [f"  booted: {line}" for line in result.provenance]
    if result.bundle:
        out.append(f"  bundle: {result.bundle}")
    out += [f"  {note}" for note in result.notes]
    if result.detail:
        label = "not run because" if result.status == "not run" else "result"
        out.append(f"  {label}: {result.detail}")
    return out


def row(result: Result) -> tuple[str, ...]:
    count = result.counts.get
    numbers = [str(count(k, 0)) if result.counts else "" for k in COLUMNS[5:9]]
    engine = result.engine.split(" (")[0]
    return (result.cell, result.status, engine, result.kernel, result.bundle, *numbers,
            result.detail)  # fmt: skip


def table(results: list[Result]) -> str:
    """A Markdown table, one row per cell (cells not run say why)."""
    rows = [COLUMNS, tuple("---" for _ in COLUMNS), *(row(r) for r in results)]
    return "\n".join("| " + " | ".join(_cell(text) for text in cells) + " |" for cells in rows)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def write_summary(results: list[Result], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    failed = sum(r.status == "failed" for r in results)
    head = "# Conformance\n\n" + (
        f"{failed} cell(s) failed.\n\n" if failed else "No cell failed.\n\n"
    )
    notes = (
        "\n\n`not run`: this machine cannot run the cell (the reason says what is missing); "
        f"`{NOT_SELECTED}`: the run was not asked for it. `sandboxed`: tests of the sandbox "
        "itself that ran and passed.\n"
    )
    path.write_text(head + table(results) + notes)


def write_json(results: list[Result], path: Path) -> None:
    path.write_text(json.dumps([asdict(result) for result in results], indent=2) + "\n")
