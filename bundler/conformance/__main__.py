"""`python -m bundler.conformance [CELL...]`: run cells, print the report per cell and the
summary table of every cell, and write that table to dist/conformance.md.

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
from bundler.conformance.cell_run import Result, run_cell
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
    args = parser.parse_args(argv)
    unknown = [name for name in args.cells if name not in known]
    if unknown:
        parser.error(f"unknown cell {unknown[0]}; the cells are {', '.join(known)}")
    selected = args.cells or known
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


def main(argv: list[str]) -> int:
    try:
        return run(argv)
    except BundlerError as exc:
        log.error(exc.message)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
