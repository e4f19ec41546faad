"""`python -m bundler.conformance [CELL...]`: run cells and print the report per cell.

The cells are those of dist-config/conformance.toml. Exit status 0 when no cell failed
(a skipped cell names what it lacks), 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bundler import log
from bundler.conformance import cells, report
from bundler.conformance.cell_run import run_cell
from bundler.errors import BundlerError


def run(argv: list[str]) -> int:
    known = cells.names()
    parser = argparse.ArgumentParser(prog="python -m bundler.conformance", description=__doc__)
    parser.add_argument("cells", nargs="*", metavar="CELL", help=f"default: all of {known}")
    parser.add_argument(
        "--engine", choices=("auto", "docker", "podman", "bubblewrap"), default="auto"
    )
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args(argv)
    unknown = [name for name in args.cells if name not in known]
    if unknown:
        parser.error(f"unknown cell {unknown[0]}; the cells are {', '.join(known)}")
    results = [run_cell(cells.cell(name), args.engine) for name in args.cells or known]
    log.output("\nconformance report")
    for result in results:
        log.output("\n".join(report.lines(result)))
    if args.json:
        report.write_json(results, args.json)
    return 1 if any(result.status == "failed" for result in results) else 0


def main(argv: list[str]) -> int:
    try:
        return run(argv)
    except BundlerError as exc:
        log.error(exc.message)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
