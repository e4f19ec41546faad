"""Random interleavings of requests, crashes, timeouts, session steps, cancels and closes,
on one pool: every request gets exactly one result under its own id, none shows pynox's
insides, and once all is answered and every session closed, the pool is back to its
zygote and two spares, with the descriptors it started with."""

from __future__ import annotations

import contextlib
import os
import time

from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test
from support.examples import examples
from support.pool_client import PoolClient, open_fds
from support.pool_requests import FORGE, new_id

# What each program ends with: its exit status, unless a cancel or a close overtakes it.
PROGRAMS = {
    "prints": ("print('x')", 0),
    "segfaults": ("import ctypes\nctypes.string_at(0)", 139),
    "exits": ("import os\nos._exit(7)", 7),
    "raises": ("raise ValueError('boom')", 1),
    "runs past its timeout": ("while True:\n    pass", 124),
    "sleeps": ("import time\ntime.sleep(0.3)", 0),
    "leaves a thread": (
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True)"
        ".start()",
        0,
    ),
    # Says it ended, and sleeps: its process is killed as its result goes out.
    "claims its end": (
        FORGE + "os.close(1)\nos.close(2)\nforge({'type': 'exit', 'status': 0, 'signal': None})\n"
        "import time\ntime.sleep(60)",
        0,
    ),
}
SESSIONS = ("a", "b")
_IDLE = 4  # the pool, its zygote and its two spares


class PoolLifecycle(RuleBasedStateMachine):
    pool: PoolClient
    baseline_fds: int

    def __init__(self) -> None:
        super().__init__()
        self.expected: dict[str, int | None] = {}  # id -> exit status, None if overtaken
        self.sessions: dict[str, str] = {}  # our name -> the pool's (new per example)
        self.closes: list[str] = []  # ids of close_session lines

    def _send(self, request: dict[str, object], status: int | None) -> None:
        self.pool.send({**request, "timeout": "1s"})
        self.expected[str(request["id"])] = status

    @rule(program=st.sampled_from(sorted(PROGRAMS)))
    def run(self, program: str) -> None:
        source, status = PROGRAMS[program]
        self._send({"id": new_id("run"), "code": source}, status)

    @rule(session=st.sampled_from(SESSIONS), program=st.sampled_from(sorted(PROGRAMS)))
    def step(self, session: str, program: str) -> None:
        name = self.sessions.setdefault(session, new_id(f"session-{session}"))
        # A step may find its session ended by an earlier one, or closed before it ran.
        self._send({"id": new_id("step"), "session": name, "code": PROGRAMS[program][0]}, None)

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        if not self.expected:
            return
        request_id = data.draw(st.sampled_from(sorted(self.expected)))
        self.expected[request_id] = None  # cancelled, or ended as the cancel came
        self.pool.send({"id": request_id, "control": "cancel"})

    @rule(session=st.sampled_from(SESSIONS))
    def close(self, session: str) -> None:
        name = self.sessions.pop(session, None)
        if name is not None:
            self._close(name)

    def _close(self, name: str) -> None:
        close_id = new_id("close")
        self.pool.send({"id": close_id, "close_session": name})
        self.closes.append(close_id)

    def teardown(self) -> None:
        for name in self.sessions.values():
            self._close(name)
        for request_id, status in self.expected.items():
            result = self.pool.result(request_id, 30)
            assert result["id"] == request_id
            assert "site-packages/pynox" not in result["stderr"] + result["stdout"], result
            error = result["error"] or {}
            assert error.get("type") != "PoolError", result
            if status is not None:
                assert result["exit"] == status, result
        for close_id in self.closes:  # answered once the session's process has ended
            assert self.pool.result(close_id, 30)["session"]["closed"] is True
        # No second result for any of them (a cancel of one that ended gets an event).
        with contextlib.suppress(TimeoutError):
            self.pool.wait_for(lambda: False, 0.2)
        assert not self.pool.results, self.pool.results
        # A closed session's process gets 0.9 s to exit.
        assert self.pool.settles(_IDLE, within=5), self.pool.diagnose()
        # The scratch keeper lets go of the pidfds of exited children in a moment.
        deadline = time.monotonic() + 5
        while (held := _descriptors(self.pool.pid)) and len(held) > self.baseline_fds:
            if time.monotonic() > deadline:
                raise AssertionError(f"the pool holds more descriptors than it began with: {held}")
            time.sleep(0.05)


def _descriptors(pid: int) -> dict[str, str]:
    fds = f"/proc/{pid}/fd"
    found = {}
    for fd in os.listdir(fds):
        with contextlib.suppress(OSError):  # the listing's own, closed since
            found[fd] = os.readlink(f"{fds}/{fd}")
    return found


def test_any_interleaving_leaves_the_pool_as_it_was() -> None:
    with PoolClient(workers=2) as pool:
        pool.run({"id": new_id(), "code": "pass"})
        time.sleep(0.5)  # its spares made, and its scratch directories made ahead
        PoolLifecycle.pool = pool
        PoolLifecycle.baseline_fds = open_fds(pool.pid)
        run_state_machine_as_test(
            PoolLifecycle,
            # The same runs every time; a failure is shown as found, not shrunk: each
            # shrinking attempt would wait out the teardown's seconds again.
            settings=settings(
                max_examples=examples(12),
                stateful_step_count=8,
                deadline=None,
                derandomize=True,
                phases=[Phase.explicit, Phase.generate],
            ),
        )
        assert pool.stderr() == b""
        assert pool.close() == 0
