"""Where a pool request's wall-clock time goes, from a trace of the kernel's scheduler.

Requests go to a `pynox pool` of 2 workers one at a time, with a pause before each, while
`perf` records every scheduler switch, wake-up and fork on the machine, and every write.
Each request, from the client's sending it to its reading of the result, is then cut at
five moments the trace shows: the client's write of the request line, the pool server
waking the child that runs it (its start frame, or a session's run frame), that child
getting a CPU, the child's last write (its exit or done frame: whether or not the server
was asleep to be woken by it), and the server's last write, the result line.

    python bench/request_path.py [--requests N] [--pause SECONDS] [--session]

Prints the median of each stretch, the whole request's both traced and not (the same
requests run once without perf first), and how often the child was woken onto the
server's own CPU (where it waits until the server sleeps). Not part of `make bench`: it needs
`perf` and the right to trace the scheduler (root, or kernel.perf_event_paranoid at -1),
and it judges nothing; it is for finding where to cut next.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import perf_trace
from pool_bench import CODE, STEP  # the requests and steps of make bench's pool rows
from pool_process import PoolProcess
from runners import interpreter

WARMUP = 20
EVENTS = (
    "sched:sched_switch",
    "sched:sched_wakeup",
    "sched:sched_process_fork",
    "syscalls:sys_enter_write",
)
STRETCHES = (
    "the client, to writing the request",
    "the pool server, to waking the child",
    "the child waiting for a CPU",
    "the child, to writing its last frame",
    "the pool server, to writing the result",
    "the client, to reading the result",
)

# perf script -F tid,cpu,time,event,trace: "TID [CPU] SECONDS: EVENT: FIELDS". A
# command name may hold spaces, so each field is found from its end of the line.
_LINE = re.compile(r"^\s*(\d+)\s+\[(\d+)\]\s+(\d+\.\d+):\s+(?:sched|syscalls):(\w+):(.*)$")
_WOKEN = re.compile(r" pid=(\d+) prio=-?\d+ target_cpu=(\d+)")
_NEXT = re.compile(r"next_pid=(\d+) next_prio=")
_WRITTEN = re.compile(r"^\s*fd: (0x[0-9a-f]+),")


@dataclass(frozen=True)
class Event:
    time_ns: int
    tid: int  # the task the event happened in: the waker of a wake-up
    cpu: int
    kind: str  # sched_switch, sched_wakeup, sched_process_fork or sys_enter_write
    other: int  # the task switched to, woken or forked; the file descriptor written
    target_cpu: int = -1  # of a wake-up


def drive(args: argparse.Namespace) -> None:
    """The client's side, run under perf: requests, and when each went out and came back."""
    _, pynox = interpreter()
    with tempfile.TemporaryDirectory() as workdir:
        pool = PoolProcess(pynox, 2, workdir)
        try:
            request: dict[str, object] = {"code": CODE}
            if args.session:
                pool.run({"code": "steps = 0", "session": "timed"})
                request = {"code": STEP, "session": "timed"}
            for _ in range(WARMUP):
                pool.run(request)
                time.sleep(args.pause)
            windows = []
            for _ in range(args.requests):
                time.sleep(args.pause)
                sent = time.monotonic_ns()  # perf's clock too (-k CLOCK_MONOTONIC)
                pool.run(request)
                windows.append((sent, time.monotonic_ns()))
            record = {"server": pool.process.pid, "client": os.getpid(), "windows": windows}
        finally:
            pool.close()
    Path(args.drive).write_text(json.dumps(record))


def parse(text: str) -> list[Event]:
    events = []
    for line in text.splitlines():
        found = _LINE.match(line)
        if found is None:
            continue
        tid, cpu, seconds, kind, fields = found.groups()
        time_ns = round(float(seconds) * 1e9)
        if kind == "sched_wakeup" and (woken := _WOKEN.search(fields)):
            other, target = int(woken[1]), int(woken[2])
            events.append(Event(time_ns, int(tid), int(cpu), kind, other, target))
        elif kind == "sched_switch" and (switched := _NEXT.search(fields)):
            events.append(Event(time_ns, int(tid), int(cpu), kind, int(switched[1])))
        elif kind == "sched_process_fork" and (forked := perf_trace.FORKED.search(fields)):
            events.append(Event(time_ns, int(tid), int(cpu), kind, int(forked[2])))
        elif kind == "sys_enter_write" and (written := _WRITTEN.match(fields)):
            events.append(Event(time_ns, int(tid), int(cpu), kind, int(written[1], 16)))
    events.sort(key=lambda event: event.time_ns)
    return events


def split(
    events: list[Event], server: int, client: int, windows: list[tuple[int, int]]
) -> tuple[list[tuple[int, ...]], int]:
    """Each request's stretches (nanoseconds, in the order of STRETCHES), and how many
    children were woken onto the CPU the server was on.

    A request whose moments the trace lacks is left out: one whose child was awake
    already when the server wrote to it shows no wake-up of it.
    """
    parent = {event.other: event.tid for event in events if event.kind == "sched_process_fork"}
    times = [event.time_ns for event in events]

    def is_child(tid: int) -> bool:  # forked by the zygote, which the server forked
        return parent.get(parent.get(tid, 0), 0) == server

    def writes(inside: list[Event], tid: int) -> list[Event]:
        return [e for e in inside if e.kind == "sys_enter_write" and e.tid == tid]

    rows = []
    on_server_cpu = 0
    for sent, received in windows:
        inside = events[bisect.bisect_left(times, sent) : bisect.bisect_left(times, received)]
        request = next(iter(writes(inside, client)), None)
        if request is None:
            continue
        woken = next(
            (
                e
                for e in inside
                if e.time_ns >= request.time_ns
                and e.kind == "sched_wakeup"
                and e.tid == server
                and is_child(e.other)
            ),
            None,
        )
        if woken is None:
            continue
        child = woken.other
        running = next(
            (
                e
                for e in inside
                if e.time_ns >= woken.time_ns and e.kind == "sched_switch" and e.other == child
            ),
            None,
        )
        if running is None:
            continue
        # Its frame is its last write: after an exit frame it only leaves, after a done frame
        # it waits for the next step, and the result (which needs the frame) ends the window.
        frame = next(reversed(writes(inside, child)), None)
        if frame is None:
            continue
        # The result is the server's last write before the client has read it.
        result = next(reversed(writes(inside, server)), None)
        if result is None or result.time_ns < frame.time_ns:
            continue
        moments = [sent, *(e.time_ns for e in (request, woken, running, frame, result)), received]
        rows.append(tuple(b - a for a, b in zip(moments, moments[1:], strict=False)))
        on_server_cpu += woken.target_cpu == woken.cpu
    return rows, on_server_cpu


def main(argv: list[str]) -> int:
    args = perf_trace.arguments(
        argv, __doc__.splitlines()[0], "--session", "time steps of one session"
    )
    if args.drive:
        drive(args)
        return 0
    perf = perf_trace.find("request_path")
    if perf is None:
        return perf_trace.CANNOT_TRACE
    with tempfile.TemporaryDirectory() as scratch:
        data, record = f"{scratch}/perf.data", f"{scratch}/windows.json"
        # The same requests untraced first: tracing changes what it measures (perf keeps
        # the processors busier, and so quicker to wake), so the whole is shown both ways.
        untraced = f"{scratch}/untraced.json"
        if subprocess.run([sys.executable, __file__, *argv, "--drive", untraced]).returncode:
            print("request_path: the requests failed before any tracing; see the error above")
            return 1
        plain = json.loads(Path(untraced).read_text())["windows"]
        options = [
            "--clockid=CLOCK_MONOTONIC",
            *(f"--event={name}" for name in EVENTS),
            # Perf's own writes of its buffer, which would feed it more (a filter on the
            # event before it: the writes are the last of EVENTS).
            "--exclude-perf",
        ]
        command = [sys.executable, __file__, *argv, "--drive", record]
        if not perf_trace.record(
            perf, "request_path", "the scheduler", options, command, data, record
        ):
            return perf_trace.CANNOT_TRACE
        fields = ["--fields=tid,cpu,time,event,trace", "--ns"]
        trace = perf_trace.script(perf, "request_path", data, fields)
        if trace is None:
            return perf_trace.CANNOT_TRACE
        windows = json.loads(Path(record).read_text())
    rows, on_server_cpu = split(
        parse(trace), windows["server"], windows["client"], windows["windows"]
    )
    if not rows:
        print("request_path: the trace shows none of the requests whole (perf lost events?)")
        return 1
    what = "session steps" if args.session else "requests"
    print(f"{len(rows)} of {args.requests} {what} traced whole, {args.pause * 1000:g} ms apart")
    if len(rows) < args.requests:
        # Most often its child was awake already when its request came: no wake-up shows.
        print("(the rest lack a moment in the trace: left out)")
    for index, name in enumerate(STRETCHES):
        print(f"  {name:44s} {statistics.median(row[index] for row in rows) / 1e3:8.1f} us")
    total = statistics.median(sum(row) for row in rows) / 1e3
    print(f"  {'the whole request':44s} {total:8.1f} us")
    alone = statistics.median(received - sent for sent, received in plain) / 1e3
    print(f"  {'the whole request, untraced':44s} {alone:8.1f} us")
    print(f"  the child woken onto the server's CPU in {on_server_cpu} of {len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
