"""Start-up cost alone: the tiny script under python -I, pynox, --no-sandbox and the pool.

A shortcut into the suite (bench/suite.py), which times this as one of its workloads.
Usage: python bench/startup.py [--runs N] [suite options]; writes nothing unless --output.
"""

from __future__ import annotations

import sys

from suite import OTHER_SECTIONS, main

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--runs"] or (args and args[0].startswith("--runs=")):
        args[0] = args[0].replace("--runs", "--rounds", 1)
    sys.exit(main(["--workloads", "tiny", "--no-pool", *OTHER_SECTIONS, *args]))
