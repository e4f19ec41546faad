"""Where a pool child's CPU time goes, from perf's samples of every processor.

Requests go to a `pynox pool` of 2 workers as child_faults sends them (one at a time after
a pause, or with --burst all at once, as make bench's throughput batches are), while
`perf` samples the call chain of whatever runs on each processor, SAMPLES_PER_SECOND times
a second, and records every fork. Each sample of a process the pool's zygote forked (a
spare, then its request's child) goes in one row, by the innermost frame of its call chain
that says what the processor was doing: handling a page fault, tearing the process down
at its exit, a system call (by its name), or something else of the kernel's; outside the
kernel, the object whose code ran (the interpreter's library, the C library, pynox's own
extension, ...).

    python bench/child_cpu.py [--requests N] [--pause SECONDS] [--burst]

make bench's report gives the children's CPU time per request and how much of it the
kernel spends (pool_costs); this splits the kernel's part by what it did. perf's own work
makes every figure somewhat larger than without it: compare the rows with one another.
Not part of `make bench`: it needs `perf` and the right to trace (root, or
kernel.perf_event_paranoid at -1); it judges nothing, it is for finding what to cut.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
from collections import Counter

import perf_trace
from child_faults import drive

SAMPLES_PER_SECOND = 5000
EVENTS = ("cpu-clock", "sched:sched_process_fork")
PAGE_FAULTS = "page faults"
EXIT = "the process's exit"
OTHER_KERNEL = "the kernel, otherwise (interrupts, scheduling)"
UNNAMED = "code perf cannot name"

# perf script -F pid,period,event,trace,ip,sym,dso: "PID PERIOD EVENT: FIELDS" (a sample's
# period is the CPU time it stands for, in ns), then one line per frame of the call
# chain, innermost first, "ADDRESS SYMBOL (OBJECT)".
_HEADER = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\w:-]+):(.*)$")
# Where the kernel handles a fault of the process's (x86-64, arm64).
_FAULT_ENTRIES = frozenset({"asm_exc_page_fault", "exc_page_fault", "do_mem_abort"})
_EXIT_FRAMES = frozenset({"do_exit", "do_group_exit"})
# A system call's own function, as each architecture's entry names it.
_SYSTEM_CALL = re.compile(r"^__(?:x64|ia32|x32|arm64)_sys_(\w+)$|^__(?:do|se)_sys_(\w+)$")


def parse(text: str) -> tuple[dict[int, Counter[str]], dict[int, int]]:
    """Each task's sampled CPU time (ns) by where it went, and each forked task's parent."""
    spent: dict[int, Counter[str]] = {}
    parent: dict[int, int] = {}
    lines = text.splitlines()
    for index, line in enumerate(lines):
        header = _HEADER.match(line)
        if header is None:
            continue
        pid, period, event, fields = int(header[1]), int(header[2]), header[3], header[4]
        if event == "sched:sched_process_fork" and (forked := perf_trace.FORKED.search(fields)):
            parent[int(forked[2])] = int(forked[1])
        elif event == "cpu-clock":
            place = where(perf_trace.call_chain(lines, index + 1))
            spent.setdefault(pid, Counter())[place] += period
    return spent, parent


def where(frames: list[tuple[str, str]]) -> str:
    """What a sample's call chain (innermost first) says the processor was doing."""
    for symbol, owner in frames:
        if owner != perf_trace.KERNEL:
            name = os.path.basename(owner)
            return UNNAMED if name in ("", "[unknown]") else name
        if symbol in _FAULT_ENTRIES:
            return PAGE_FAULTS  # those of a system call too: it touched the process's memory
        if symbol in _EXIT_FRAMES:
            return EXIT
        if called := _SYSTEM_CALL.match(symbol):
            return f"system call {called[1] or called[2]}"
    return OTHER_KERNEL if frames else UNNAMED


def tally(
    spent: dict[int, Counter[str]], parent: dict[int, int], zygote: int
) -> tuple[list[int], Counter[str]]:
    """The sampled CPU time (ns) of each of the zygote's children, and theirs together by
    where it went."""
    per_child, by_place = [], Counter[str]()
    for pid, places in spent.items():
        if parent.get(pid) != zygote:
            continue
        per_child.append(sum(places.values()))
        by_place.update(places)
    return sorted(per_child), by_place


def main(argv: list[str]) -> int:
    args = perf_trace.arguments(
        argv, __doc__.splitlines()[0], "--burst", "write the requests all at once"
    )
    if args.drive:
        drive(args)
        return 0
    options = [
        *(f"--event={name}" for name in EVENTS),
        f"--freq={SAMPLES_PER_SECOND}",
        "--call-graph=fp",  # the kernel's frames say what it was doing
    ]
    fields = ["--fields=pid,period,event,trace,ip,sym,dso"]
    traced = perf_trace.run_traced("child_cpu", __file__, argv, options, "the CPUs", fields)
    if traced is None:
        return perf_trace.CANNOT_TRACE
    trace, recorded = traced
    zygote = recorded["zygote"]
    spent, parent = parse(trace)
    per_child, by_place = tally(spent, parent, zygote)
    if not per_child:
        print("child_cpu: the trace shows no sample of the zygote's children (perf lost events?)")
        return 1
    children = len(per_child)
    how_sent = "written at once" if args.burst else f"{args.pause * 1000:g} ms apart"
    print(f"{args.requests} requests, {how_sent}: {children} children of the zygote sampled")
    median, mean = statistics.median(per_child) / 1e6, sum(per_child) / children / 1e6
    print(f"  CPU time per child: median {median:.2f} ms, mean {mean:.2f} ms")
    print("  by where it went (per child, and of the whole):")
    whole = sum(by_place.values())
    for place, nanoseconds in by_place.most_common():
        share = nanoseconds / whole
        if share >= 0.005:
            print(f"    {nanoseconds / children / 1e6:6.3f} ms  {share:4.0%}  {place}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
