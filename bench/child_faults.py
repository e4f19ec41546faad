"""Where a pool child's page faults go, from a trace of the kernel's page-fault events.

Requests go to a `pynox pool` of 2 workers, one at a time after a pause (or, with
--burst, written all at once, as make bench's throughput batches are), while `perf`
records every page fault a process takes in user mode, with the instruction that took it,
and every fork. Each fault of a process the pool's zygote forked (a spare, then its
request's child) is then put in a row by what it hit, the mapping the zygote had there
(the interpreter's own data, the heap, anonymous memory, a library's code), and how: a
copy of a page shared since the fork, a page written for the first time, a page read in.
The copies also go in rows by the function that wrote.

    python bench/child_faults.py [--requests N] [--pause SECONDS] [--burst]

Each fault costs a few microseconds of the child's CPU time, and make bench's report says
how many a request takes (pool_costs). Not part of `make bench`: it needs `perf`, the
right to trace (root, or kernel.perf_event_paranoid at -1) and an x86-64 kernel, whose
page-fault tracepoint this is; it judges nothing, it is for finding what to cut.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import perf_trace
from pool_bench import CODE  # the request of make bench's pool rows
from pool_process import PoolProcess
from runners import interpreter

WARMUP = 20
EVENTS = ("exceptions:page_fault_user", "sched:sched_process_fork")
TOP_WRITERS = 15
# The x86 page-fault error code's bits: the page was present, the access a write.
_PRESENT, _WRITE = 0x1, 0x2

# perf script -F pid,event,trace,ip,sym,dso: "PID EVENT: FIELDS", then one line per frame
# of the call chain, "ADDRESS SYMBOL (OBJECT)", the kernel's frames first.
_HEADER = re.compile(r"^\s*(\d+)\s+(?:exceptions|sched):(\w+):(.*)$")
_FAULT = re.compile(r"address=(0x[0-9a-f]+) ip=0x[0-9a-f]+ error_code=(0x[0-9a-f]+)")


@dataclass(frozen=True)
class Fault:
    pid: int
    address: int
    error_code: int
    writer: str  # the function whose instruction took it, "SYMBOL (OBJECT)"


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    name: str  # the file's name with its permissions, or what the kernel calls it


def drive(args: argparse.Namespace) -> None:
    """The client's side, run under perf: the requests, and the zygote's mappings."""
    _, pynox = interpreter()
    with tempfile.TemporaryDirectory() as workdir:
        pool = PoolProcess(pynox, 2, workdir)
        try:
            for _ in range(WARMUP):
                pool.run({"code": CODE})
            zygote = _zygote(pool.process.pid)
            maps = Path(f"/proc/{zygote}/maps").read_text()
            if args.burst:
                for _ in range(args.requests):
                    pool.send({"code": CODE})
                for _ in range(args.requests):
                    pool.receive()
            else:
                for _ in range(args.requests):
                    time.sleep(args.pause)
                    pool.run({"code": CODE})
        finally:
            pool.close()
    Path(args.drive).write_text(json.dumps({"zygote": zygote, "maps": maps}))


def _zygote(server: int) -> int:
    """The pool server's child that runs the same executable: its other child (the helper
    that removes the scratch directories) runs a shell."""
    executable = os.readlink(f"/proc/{server}/exe")
    children = Path(f"/proc/{server}/task/{server}/children").read_text().split()
    for pid in map(int, children):
        if os.readlink(f"/proc/{pid}/exe") == executable:
            return pid
    raise SystemExit("child_faults: the pool server has no zygote")


def parse_maps(text: str) -> list[Mapping]:
    mappings = []
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 5:
            continue
        start, end = (int(bound, 16) for bound in fields[0].split("-"))
        path = fields[5].strip() if len(fields) > 5 else ""
        name = os.path.basename(path) if path.startswith("/") else path or "anonymous memory"
        mappings.append(Mapping(start, end, f"{name} {fields[1]}"))
    return sorted(mappings, key=lambda mapping: mapping.start)


def parse(text: str) -> tuple[list[Fault], dict[int, int]]:
    """The faults in a perf script, and each forked task's parent."""
    faults, parent = [], {}
    lines = text.splitlines()
    for index, line in enumerate(lines):
        header = _HEADER.match(line)
        if header is None:
            continue
        pid, kind, fields = int(header[1]), header[2], header[3]
        if kind == "sched_process_fork" and (forked := perf_trace.FORKED.search(fields)):
            parent[int(forked[2])] = int(forked[1])
        elif kind == "page_fault_user" and (fault := _FAULT.search(fields)):
            faults.append(
                Fault(pid, int(fault[1], 16), int(fault[2], 16), _writer(lines, index + 1))
            )
    return faults, parent


def _writer(lines: list[str], first: int) -> str:
    """The call chain's first frame outside the kernel: the instruction that faulted."""
    for symbol, owner in perf_trace.call_chain(lines, first):
        if owner != perf_trace.KERNEL:
            return f"{symbol} ({os.path.basename(owner)})"
    return "[unknown]"


def how(error_code: int) -> str:
    if error_code & _WRITE:
        return "copied on write" if error_code & _PRESENT else "written first"
    return "read in"


def region(mappings: list[Mapping], starts: list[int], address: int) -> str:
    """The name of the mapping at `address`; `starts`: each mapping's start, in order."""
    index = bisect.bisect_right(starts, address) - 1
    if index >= 0 and address < mappings[index].end:
        return mappings[index].name
    return "memory mapped after the fork"


def tally(
    faults: list[Fault], parent: dict[int, int], zygote: int, mappings: list[Mapping]
) -> tuple[int, Counter[str], Counter[str], list[int]]:
    """The zygote's children with faults, the faults by mapping and kind, the copies by
    writer, and each child's count."""
    by_region: Counter[str] = Counter()
    by_writer: Counter[str] = Counter()
    per_child: Counter[int] = Counter()
    starts = [mapping.start for mapping in mappings]  # once, not per fault
    for fault in faults:
        if parent.get(fault.pid) != zygote:
            continue
        per_child[fault.pid] += 1
        kind = how(fault.error_code)
        by_region[f"{region(mappings, starts, fault.address)}, {kind}"] += 1
        if kind == "copied on write":
            by_writer[fault.writer] += 1
    return len(per_child), by_region, by_writer, sorted(per_child.values())


def main(argv: list[str]) -> int:
    args = perf_trace.arguments(
        argv, __doc__.splitlines()[0], "--burst", "write the requests all at once"
    )
    if args.drive:
        drive(args)
        return 0
    options = [
        *(f"--event={name}" for name in EVENTS),
        "--call-graph=fp",  # its first user frame is the instruction that faulted
    ]
    what = "page faults (it takes an x86-64 kernel)"
    fields = ["--fields=pid,event,trace,ip,sym,dso"]
    traced = perf_trace.run_traced("child_faults", __file__, argv, options, what, fields)
    if traced is None:
        return perf_trace.CANNOT_TRACE
    trace, recorded = traced
    faults, parent = parse(trace)
    children, by_region, by_writer, counts = tally(
        faults, parent, recorded["zygote"], parse_maps(recorded["maps"])
    )
    if not children:
        print("child_faults: the trace shows no fault of the zygote's children (perf lost events?)")
        return 1
    how_sent = "written at once" if args.burst else f"{args.pause * 1000:g} ms apart"
    print(f"{args.requests} requests, {how_sent}: {children} children of the zygote faulted")
    mean = sum(counts) / children
    print(f"  faults per child: median {statistics.median(counts):g}, mean {mean:.1f}")
    print("  by what they hit, and how (per child):")
    for name, count in by_region.most_common():
        if count / children >= 0.5:
            print(f"    {count / children:7.1f}  {name}")
    print("  pages copied on write, by the function that wrote (per child):")
    for name, count in by_writer.most_common(TOP_WRITERS):
        print(f"    {count / children:7.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
