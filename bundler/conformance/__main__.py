"""`python -m bundler.conformance [CELL...]`: run cells, print the report per cell and the
summary table of every cell, and write that table to dist/conformance.md.

`--prepare` runs nothing: it makes what those cells' runs make first and cache (Debian
roots, disk and boot images, the arm64 runtime and bundle), so that it can be made while
something else runs (CI makes it during the test suite); exit status 1 if making one
failed, 0 otherwise (a cell this machine cannot run is only said to be so).

The cells are those of dist-config/conformance.toml. Exit status 0 when no cell failed
(a cell this machine cannot run is listed as not run, with why), 1 otherwise. binfmt
handlers registered for a run are unregistered when it ends.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bundler import log
from bundler.conformance import binfmt, cells, report
from bundler.conformance.cell_run import Result, prepare_cell, run_cell
from bundler.conformance.errors import Missing
from bundler.errors import BundlerError


def run(argv: list[str]) -> int:
    known = cells.names()
    parser = argparse.ArgumentParser(prog="python -m bundler.conformance", description=__doc__)
    parser.add_argument("cells", nargs="*", metavar="CELL", help=f"default: all of {known}")
    parser.add_argument(
        "--engine", choices=("auto", "docker", "podman", "bubblewrap"), default="auto"
    )
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    parser.add_argument("--summary", type=Path, default=report.SUMMARY,
                        help="where the summary table goes (default: %(default)s)")  # fmt: skip
    parser.add_argument("--prepare", action="store_true",
                        help="only make what the cells' runs cache, run nothing")  # fmt: skip
    args = parser.parse_args(argv)
    unknown = [name for name in args.cells if name not in known]
    if unknown:
        parser.error(f"unknown cell {unknown[0]}; the cells are {', '.join(known)}")
    selected = args.cells or known
    if args.prepare:
        return _prepare(selected, args.engine)
    try:
        ran = {name: run_cell(cells.cell(name), args.engine) for name in selected}
    finally:
        for undone in binfmt.release():
            log.output(f"binfmt: {undone}")
    log.output("\nconformance report")
    for result in ran.values():
        log.output("\n".join(report.lines(result)))
    results = [ran.get(name) or Result(name, report.NOT_SELECTED, "") for name in known]
    log.output("\n" + report.table(results))
    report.write_summary(results, args.summary)
    log.output(f"(written to {args.summary})")
    if args.json:
        report.write_json(list(ran.values()), args.json)
    return 1 if any(result.status == "failed" for result in results) else 0


def _prepare(selected: list[str], engine: str) -> int:
    failed = False
    try:
        for name in selected:
            try:
                made = prepare_cell(cells.cell(name), engine)
            except Missing as why:
                made = [f"cannot run here: {why.message}"]
            except (BundlerError, OSError) as exc:
                failed = True
                made = [f"failed: {exc.message if isinstance(exc, BundlerError) else exc}"]
            log.output("\n".join([f"{name}:", *(f"  {line}" for line in made)]))
    finally:
        for undone in binfmt.release():
            log.output(f"binfmt: {undone}")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    try:
        return run(argv)
    except BundlerError as exc:
        log.error(exc.message)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
