"""Pool latency, throughput and session steps alone, beside a cold `python -I -c pass`.

A shortcut into the suite (bench/suite.py), which reports these as its pool rows.
Usage: python bench/pool.py [--runs N] [suite options]; writes nothing unless --output.
"""

from __future__ import annotations

import sys

from suite import OTHER_SECTIONS, main

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--runs"] or (args and args[0].startswith("--runs=")):
        args[0] = args[0].replace("--runs", "--requests", 1)
    sys.exit(main(["--workloads", "", *OTHER_SECTIONS, *args]))
