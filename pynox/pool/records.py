"""What the pool server keeps of its processes and requests (pynox.pool.server).

A Child is a process the zygote forked, a Run a request in flight, a Session the steps
that share one child; the functions word the results those end in.
"""

import codecs
import os
import signal
import time

from pynox import strict_json
from pynox.engine.result import error_object, refusal
from pynox.engine.supervisor import Capture
from pynox.errors import EXIT_SETUP_FAILURE
from pynox.limits import REPORT_LIMIT
from pynox.pool import channel
from pynox.pool.display_check import Shown
from pynox.pool.hint_hold import HintHold

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pynox.policy.resolve import Policy
    from pynox.pool.priming import PolicyKey

# pynox's error report has 8 fields. Counted before decoding: a megabyte of `[],` or of
# members would cost the pool server ~0.07 s per request to decode and refuse. A session
# step's report comes in its done frame, held to as many fields.
REPORT_ITEMS = 64
# What the result of a request the client cancelled says.
CANCELLED_RUNNING = "the client cancelled the request while it ran, and its process was killed"
CANCELLED_QUEUED = "the client cancelled the request before it started"


class Child:
    """A process the zygote forked: a spare until a run or a session takes it."""

    def __init__(self, token: int) -> None:
        self.token = token
        self.functions: set[str] = set()
        self.pid: int | None = None  # once the zygote's word of its fork comes
        self.ordered = False  # once its order reached the zygote (PoolServer._send_orders)
        self.pidfd: int | None = None
        self.status: int | None = None
        self.fds: dict[str, int] = {}
        # The ends of its pipes and channel its order passes to the zygote, until it is sent.
        self.passed: list[int] = []
        self.stdout = Capture(0)
        self.stderr = Capture(0)
        self.report = Capture(REPORT_LIMIT)
        self.frames = channel.FrameReader()
        self.outbound = bytearray()
        self.pending_calls: dict[int, int] = {}  # call number -> bytes of its frame
        self.pending_bytes = 0
        self.kill_reason: str | None = None  # "timeout", or why the pool server dropped it
        self.stopped = False  # whether a stop signal had stopped it when its time limit came
        # How the child said it ended, before the zygote reaped it: (status, signal).
        self.announced: tuple[int, int | None] | None = None
        self.finished = False
        self.kill_at = 0.0  # once its work is over: when the pool server stops waiting
        self.script_errno: int | None = None  # why its script could not be read (0: not a file)
        self.scratch: str | None = None  # the scratch directory to remove once it is gone
        self.quiet_until = 0.0  # while its run is new: when its pipes are read again
        self.ready = False  # a spare that warmed up and waits idle: it may be primed
        self.said_ready = False  # whether it sent its one ready frame
        self.primed: PolicyKey | None = None  # the policy it is confined to, if primed
        # Lines that wait for it to exit, then go out: the answers to close_session lines
        # of its session, and the result of a step its session was closed during.
        self.answers_at_exit: list[dict[str, Any]] = []
        self.session = False  # whether it serves a session's steps
        self.stale_frames = 0  # frames of steps that were over, since its step started

    def kill(self, reason: str) -> None:
        if self.kill_reason is None:
            self.kill_reason = reason
        if self.pidfd is not None and self.status is None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass


class Run:
    """A request in flight: a one-shot child, or a step of a session."""

    def __init__(self, request_id: object, policy: "Policy") -> None:
        self.id = request_id
        self.policy = policy
        self.started = time.monotonic()
        # The clock starts when a child takes the request, not while it queues.
        self.deadline: float | None = None
        self.child: Child | None = None
        self.session: Session | None = None
        self.step: int | None = None  # a session step's number, which its frames carry
        self.script: str | None = None
        self.files: dict[str, bytes] = {}  # to place in the scratch directory before it runs
        # With "stream": one incremental decoder per stream, so that a character split
        # between two reads reaches the client whole. Empty once the run stops streaming.
        self.decoders: dict[str, codecs.IncrementalDecoder] = {}
        # With "stream": stderr from a line that may be the hint, until the result is made.
        self.hint_hold = HintHold()
        # Its value and images, as its child sends them.
        self.shown = Shown(echo=True, max_output=policy.max_output)
        # Whether its hints name grants as its request's JSON fields (HINTS_JSON).
        self.json_hints = True
        # Its policy before its scratch directory, if a primed spare may run it.
        self.template: dict[str, Any] | None = None

    def stream(self) -> None:
        for role in ("stdout", "stderr"):
            self.decoders[role] = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def start_clock(self) -> None:
        self.started = time.monotonic()
        if self.policy.timeout is not None:
            self.deadline = self.started + self.policy.timeout


class Session:
    def __init__(self, name: str, policy: "Policy", functions: list[dict[str, str]]) -> None:
        self.name = name
        self.policy = policy
        self.functions = functions
        self.child: Child | None = None
        self.steps = 0
        self.restarted = False
        self.queue: list[tuple[Run, dict[str, object]]] = []
        self.running: Run | None = None
        self.last_used = time.monotonic()
        self.closing = False
        # The fields of its first step that set its process's confinement, as they came.
        self.fields: dict[str, object] = {}
        # Where its first step asked its process to run (None: the pool's directory); a
        # process started again after the one before ended starts there too.
        self.cwd: str | None = None


def error_result(request_id: object, message: str, kind: str = "RequestError") -> "dict[str, Any]":
    return {"id": request_id, **refusal(kind, message)}


def step_not_run(
    result: "dict[str, Any]", run: "Run", session: "Session", ended: str | None = None
) -> "dict[str, Any]":
    """result, for a step of session that never ran, with the fields every step's result
    has: its value and images (none) and its session, with no step number. ended: how the
    session ended, or None when it goes on."""
    result.update(run.shown.fields())
    result["session"] = {"id": session.name, "step": None, "restarted": False, "ended": ended}
    return result


def failed(
    result: "dict[str, Any]", kind: str, message: str, exit_code: int = EXIT_SETUP_FAILURE
) -> None:
    result["exit"] = exit_code
    result["error"] = error_object(kind, message)


def report_problem(report: bytes, truncated: bool) -> str | None:
    """What is wrong with a one-shot child's error report, if anything.

    pynox writes one flat JSON object there; anything else was written by the
    program, and is refused here, before the result is built from it.
    """
    if truncated:
        return f"it is longer than {REPORT_LIMIT} bytes"
    if channel.more_items_than(report, REPORT_ITEMS):
        return f"it holds more than {REPORT_ITEMS} items, more than pynox writes there"
    try:
        parsed = strict_json.loads(report, max_depth=1)
    except strict_json.TooDeep:
        return "it is not one flat JSON object"
    except ValueError as exc:
        return str(exc)
    return None if isinstance(parsed, dict) else "it is not one flat JSON object"


def closed_answer(request_id: object, name: str) -> "dict[str, Any]":
    """The answer to a close_session line."""
    return {"id": request_id, "session": {"id": name, "closed": True}}


def of_step(frame: dict[str, object], run: Run | None) -> bool:
    """Whether a session child's frame names the step running (its runtime echoes the
    number the run frame gave)."""
    step = frame.get("step")
    return run is not None and type(step) is int and step == run.step


def how_it_ended(child: Child) -> str:
    """A session's `ended`: "timeout", "cancelled", "exit" (it left by itself) or "crash"."""
    if child.kill_reason in ("timeout", "cancelled"):
        return str(child.kill_reason)
    if child.kill_reason is None:
        if child.status is None and child.announced is not None and child.announced[1] is None:
            return "exit"
        if child.status is not None and os.WIFEXITED(child.status):
            return "exit"
    return "crash"
