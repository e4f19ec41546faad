"""A tool's own requests run under `perf record`, and the trace read back as text.

Shared by the tracing tools of bench/ (request_path, child_faults, child_cpu), none of them part of
make bench: each runs itself again as the client, under perf, and reads what perf saw.
On any failure these print one line that says what to do, and give the exit status.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# What a tool gives back when perf is missing or may not trace here.
CANNOT_TRACE = 2
# The object perf names for the kernel's frames.
KERNEL = "[kernel.kallsyms]"
# sched:sched_process_fork's fields: the parent's pid and the child's.
FORKED = re.compile(r" pid=(\d+) child_comm=.* child_pid=(\d+)\s*$")
# A frame of a call chain as perf script writes it: "ADDRESS SYMBOL (OBJECT)".
_FRAME = re.compile(r"^\s+[0-9a-f]+ (.*) \((.*)\)$")


def arguments(argv: list[str], description: str, switch: str, about: str) -> argparse.Namespace:
    """The tools' options: how many requests, the pause before each, the tool's own
    `switch`, and the hidden one that makes it the client perf runs."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--pause", type=float, default=0.02, help="seconds before each request")
    parser.add_argument(switch, action="store_true", help=about)
    parser.add_argument("--drive", help=argparse.SUPPRESS)  # the client's run, under perf
    args = parser.parse_args(argv)
    if args.requests < 1 or args.pause < 0:
        parser.error("give at least 1 request and a pause of 0 seconds or more")
    return args


def find(tool: str) -> str | None:
    perf = shutil.which("perf")
    if perf is None:
        print(f"{tool}: perf is not installed; install it (Debian: linux-perf)")
    return perf


def record(
    perf: str,
    tool: str,
    what: str,
    options: list[str],
    command: list[str],
    data: str,
    made: str,
) -> bool:
    """Runs `command` under perf on every CPU (`options`: its events and the like), into
    `data`; False, said, unless it succeeded and wrote the file `made`."""
    traced = subprocess.run(
        [perf, "record", "--quiet", "--all-cpus", *options, f"--output={data}", "--", *command],
        stderr=subprocess.PIPE,
        text=True,
    )
    if traced.returncode != 0 or not Path(made).exists():
        print(
            f"{tool}: perf could not trace {what}: {traced.stderr.strip()[-300:]}"
            "; run as root, or set kernel.perf_event_paranoid to -1"
        )
        return False
    return True


def script(perf: str, tool: str, data: str, options: list[str]) -> str | None:
    """The trace in `data` as `perf script` writes it with `options`; None, said, if not."""
    read = subprocess.run(
        [perf, "script", f"--input={data}", *options], capture_output=True, text=True
    )
    if read.returncode != 0:
        print(f"{tool}: perf could not read its trace: {read.stderr.strip()[-300:]}")
        return None
    return read.stdout


def run_traced(
    tool: str, path: str, argv: list[str], options: list[str], what: str, fields: list[str]
) -> tuple[str, dict[str, Any]] | None:
    """Runs the tool at `path` again with `argv` as the client, under perf (`options`: its
    events and the like), and gives the trace as `perf script` writes it with `fields`,
    with what the client recorded (the JSON its --drive file holds); None, said, when
    perf is missing or could not trace `what`."""
    perf = find(tool)
    if perf is None:
        return None
    with tempfile.TemporaryDirectory() as scratch:
        data, made = f"{scratch}/perf.data", f"{scratch}/record.json"
        command = [sys.executable, path, *argv, "--drive", made]
        if not record(perf, tool, what, options, command, data, made):
            return None
        trace = script(perf, tool, data, fields)
        if trace is None:
            return None
        recorded: dict[str, Any] = json.loads(Path(made).read_text())
    return trace, recorded


def call_chain(lines: list[str], first: int) -> list[tuple[str, str]]:
    """The call chain perf script wrote from line `first` on: (symbol, object) per frame,
    innermost first."""
    frames = []
    # By index: a slice from `first` would copy the rest of the trace for every event.
    for index in range(first, len(lines)):
        frame = _FRAME.match(lines[index])
        if frame is None:
            break
        frames.append((frame[1], frame[2]))
    return frames


def may_trace(event: str, scratch: Path) -> bool:
    """Whether perf is here and may record `event` on every CPU."""
    if shutil.which("perf") is None:
        return False
    probe = subprocess.run(
        [
            "perf",
            "record",
            "--quiet",
            "--all-cpus",
            f"--event={event}",
            f"--output={scratch / 'probe.data'}",
            "--",
            "true",
        ],
        capture_output=True,
    )
    return probe.returncode == 0
