"""The steps of the pool's sessions (pynox.pool.server): each later step's policy, the
step a session runs next, the result of one that ended, and a session's end.

SessionSteps is a mixin of PoolServer, not an object of its own: a step's life is woven
through the server's (it takes a spare, sends frames, builds a result, streams output,
ends a child), and a collaborator would reach back into the server for each of those.
The server state and methods it uses are declared below for the type checker, which
checks them against PoolServer's own.
"""

import contextlib
import copy
import signal
import time

from pynox import strict_json
from pynox.engine.child_setup import REPORT_CONFINED
from pynox.errors import EXIT_CANCELLED
from pynox.policy.config import Grants
from pynox.policy.grants import GRANT_FIELDS
from pynox.pool import descriptors, records
from pynox.pool import files as pool_files
from pynox.pool import request as pool_request
from pynox.pool.records import CANCELLED_RUNNING, Child, Run, Session, error_result, step_not_run
from pynox.pool.request import RequestError
from pynox.pool.scratch_keeper import gone

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pynox.engine.supervisor import Outcome
    from pynox.policy.config import Config
    from pynox.policy.resolve import Policy
    from pynox.pool.scratch_keeper import ScratchKeeper

# The grants a session's process is confined with when it starts: a later step keeps them.
_SESSION_GRANTS = tuple(field.name for field in GRANT_FIELDS if field.name != "timeout")
# A later step's fields that bear on its policy: a script or a working directory of its
# own changes nothing, as its session's process is confined for good and stays where it is.
_STEP_POLICY_FIELDS = pool_request.POLICY_FIELDS - {"script", "cwd"}


class SessionSteps:
    """The session-step part of PoolServer."""

    # What it uses of the server's state and methods (pynox.pool.server.PoolServer),
    # declared for the type checker only.
    config: "Config"
    limits: Grants
    limited: frozenset[str]
    sessions: dict[str, Session]
    runs: dict[object, Run]
    child_runs: dict[int, Run]
    children: dict[int, Child]
    scratch_keeper: "ScratchKeeper"

    if TYPE_CHECKING:

        def emit(self, message: "dict[str, Any]") -> None: ...
        def _backlogged(self) -> bool: ...
        def _new_policy(self, message: dict[str, object]) -> "Policy": ...
        def _take_spare(
            self, policy: "Policy", functions: list[dict[str, str]], primed: Child | None = None
        ) -> Child: ...
        def _start_child(
            self,
            child: Child,
            policy: "Policy",
            functions: list[dict[str, str]],
            message: dict[str, object],
            session: bool,
            cwd: str | None,
        ) -> None: ...
        def _send_frame(self, child: Child, frame: dict[str, object]) -> None: ...
        def _outcome(self, run: Run, child: Child, exit_code: int | None) -> "Outcome": ...
        def _result(
            self, outcome: "Outcome", run: Run, session: bool = False
        ) -> "dict[str, Any]": ...
        def _timeout_error(self, run: Run, stopped: bool) -> "dict[str, Any]": ...
        def _files_out(self, run: Run, result: "dict[str, Any]") -> None: ...
        def _expect_exit(self, child: Child) -> None: ...
        def _drop_pending_calls(self, child: Child, refusal: str | None) -> None: ...
        def _stream_held_output(self, run: Run, child: Child) -> None: ...
        def _end_stream(self, run: Run, outcome: "Outcome") -> None: ...
        def _close_fd(self, child: Child, role: str) -> None: ...
        def _drain(self, child: Child, roles: "tuple[str, ...]" = ...) -> None: ...

    def _step_policy(self, session: Session, message: dict[str, object]) -> "Policy":
        """A later step's policy: its session's, whose process is confined for good, with
        the step's own timeout when it gives one (the pool server's clock enforces that).
        A step that asks for other grants is refused: run without them, it would fail as
        the step before did, and get the hint it followed again."""
        policy = session.policy
        if message.keys().isdisjoint(_STEP_POLICY_FIELDS):
            return policy  # most steps: nothing to check on their way
        grants = pool_request.request_grants(message)  # each field checked, as at the first
        asked = [name for name in _SESSION_GRANTS if name in message]
        if "profile" in message:
            asked = list(_SESSION_GRANTS)
        # The first step's fields again (pynox.Session sends them with every step) need no
        # policy built anew, which costs a look at every path.
        if asked and session_fields(message) != session.fields:
            wanted = self._new_policy(message)
            for name in asked:
                if _comparable(getattr(wanted, name)) != _comparable(getattr(policy, name)):
                    raise RequestError(
                        f"session {session.name!r} keeps the {name} its first step gave it, "
                        "as its process is confined for good; close the session and start a "
                        f"new one with the {name} this step asks for",
                        message["id"],
                    )
        timeout = grants.timeout
        profile = message.get("profile")
        if timeout is None and isinstance(profile, str):
            # The profile's timeout, as a first step takes it (its other grants are the
            # session's, checked above, so the profile is known).
            timeout = self.config.profile(profile).timeout
        if timeout is None:
            return policy
        capped = pool_request.cap(Grants(timeout=timeout), self.limits, self.limited, message["id"])
        policy = copy.copy(policy)
        policy.timeout = capped.timeout
        return policy

    def _next_step(self, session: Session) -> None:
        if session.running is not None or not session.queue or self._backlogged():
            return
        run, message = session.queue.pop(0)
        if gone(session.policy.scratch):
            self._close_lost_session(session, run)
            return
        if run.files:
            try:
                pool_files.place(session.policy.scratch or "", run.files, run.id)
            except RequestError as exc:
                self.runs.pop(run.id, None)
                self.emit(step_not_run(error_result(run.id, exc.message), run, session))
                self._next_step(session)
                return
            run.files = {}
        run.session = session
        if session.child is None:
            session.child = self._take_spare(session.policy, session.functions)
            session.restarted = session.steps > 0
            self._start_child(
                session.child, session.policy, session.functions, message, True, session.cwd
            )
        run.child = session.child
        run.start_clock()
        run.step = session.steps + 1
        session.child.stale_frames = 0
        session.running = run
        self.child_runs[session.child.token] = run
        self._stream_held_output(run, session.child)
        # No name: the session names the step after its number (pynox.pool.step_lines).
        name = message.get("name")
        self._send_frame(
            session.child,
            {"type": "run", "code": message.get("code", ""), "name": name, "step": run.step},
        )
        # No quiet start (_quiet): a step's pipes stay open, and its done frame, not
        # their closing, tells the pool server the step ended.

    def _close_lost_session(self, session: Session, run: Run) -> None:
        """Refuses a step of a session whose scratch directory someone removed, and closes
        the session: the step would not find what earlier steps left there, and no other
        directory can take its place (the sandbox of the session's process grants that
        one, gone), so a new session is what is left to give."""
        self.runs.pop(run.id, None)
        result = error_result(
            run.id,
            f"session {session.name!r} lost its scratch directory, its HOME with the files "
            "its steps left there: something outside the pool removed it (emptying TMPDIR, "
            "say), so the session was closed; send this step again to start a new session",
            "PoolError",
        )
        result.update(run.shown.fields())  # none: it never ran, but its fields are there
        result["session"] = {
            "id": session.name,
            "step": session.steps + 1,
            "restarted": False,
            "ended": "scratch_removed",
        }
        self.emit(result)
        self._end_session(session)

    def _finish_step(
        self, run: Run, exit_code: int | None, error: "dict[str, Any] | None", ended: str | None
    ) -> None:
        session = run.session
        child = run.child
        if session is None or child is None or session.running is not run:
            return
        if child.kill_reason == "cancelled":
            ended = "cancelled"  # even if the step got to its end as the kill went out
        outcome = self._outcome(run, child, exit_code)
        if error is not None:
            # A session reports each step's error from inside its sandbox.
            outcome.report = REPORT_CONFINED + strict_json.dumps(error).encode()
            if exit_code == 128 + signal.SIGINT:
                outcome.signal = signal.SIGINT  # a KeyboardInterrupt, which python dies of
        elif ended is not None:
            # Ended without a done frame: its setup may have failed before the step ran (the
            # session's directory removed, say), and it wrote why to its report, as a
            # one-shot child does. Nothing of the program's is there: the session's process
            # closes its report before any step runs.
            self._drain(child, ("report",))
            outcome.report = bytes(child.report.data)
            outcome.report_truncated = child.report.truncated
        result = self._result(outcome, run, session=True)
        if ended == "timeout":
            result["error"] = self._timeout_error(run, outcome.stopped)
        elif ended == "cancelled":
            records.failed(result, "Cancelled", CANCELLED_RUNNING, EXIT_CANCELLED)
        elif child.kill_reason is not None and ended == "crash":
            records.failed(result, "PoolError", child.kill_reason)
        if ended is not None:
            session.child = None
            self._hold_scratch(session, child)
            self._expect_exit(child)  # one that said it ends (sys.exit) must really end
        # A thread the step left running still waits for these: no step takes their
        # answers now, so they fail in the program rather than wait forever (unless the
        # session ended). A late answer then finds no step waiting for it.
        self._drop_pending_calls(
            child, None if ended is not None else "the step ended before the host answered"
        )
        session.steps += 1
        result["session"] = {
            "id": session.name,
            "step": session.steps,
            "restarted": session.restarted,
            "ended": ended,
        }
        result.update(run.shown.fields())
        session.restarted = False
        session.running = None
        session.last_used = time.monotonic()
        self.child_runs.pop(child.token, None)
        self._files_out(run, result)
        self.runs.pop(run.id, None)
        self._end_stream(run, outcome)
        line = {"id": run.id, **result}
        if not session.closing:
            self.emit(line)
            self._next_step(session)
            return
        self._release_session(session)
        if child.status is None and child.token in self.children:
            # Closed while the step ran: its result waits for the process to exit (within
            # EXIT_GRACE), so that a client that has it finds the session's place among
            # max_sessions free, as after a close_session it waited for.
            child.answers_at_exit.append(line)
        else:
            self.emit(line)

    def _end_session(self, session: Session) -> None:
        """Closes a session: queued steps are refused, a running one finishes first."""
        for run, _ in session.queue:
            self.runs.pop(run.id, None)
            refused = error_result(
                run.id,
                f"session {session.name!r} was closed before this step ran; send the "
                "step again to run it in a new session",
            )
            self.emit(step_not_run(refused, run, session, ended="closed"))
        session.queue.clear()
        session.closing = True
        if session.running is None:
            self._release_session(session)

    def _release_session(self, session: Session) -> None:
        child = session.child
        session.child = None
        if child is None:
            # Its last process ended (a timeout, a crash, sys.exit()). Removed by the
            # keeper's thread, as any run's: what its steps left there (a hundred thousand
            # files, say) would hold the pool's loop, and every other request, meanwhile.
            self.scratch_keeper.discard(session.policy.scratch or "")
        else:
            child.scratch = session.policy.scratch  # removed once the child is gone
            self._close_fd(child, "channel")  # the session finalizes and exits
            self._expect_exit(child)  # or is killed, if it lingers (threads, a fake done)
        if self.sessions.get(session.name) is session:
            del self.sessions[session.name]

    def _hold_scratch(self, session: Session, child: Child) -> None:
        """Keeps the session's scratch directory until its process `child`, done with its
        steps, has exited: it may linger (sys.exit() waits for threads), and the session
        may be closed meanwhile (ScratchKeeper.hold)."""
        if child.pidfd is None or child.status is not None:
            return  # never forked, or reaped
        pidfd = descriptors.duplicate(child.pidfd)
        if pidfd is None:  # no descriptor left to watch it with: it goes now
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(child.pidfd, signal.SIGKILL)
            return
        self.scratch_keeper.hold(session.policy.scratch or "", pidfd)


def check_step_functions(
    session: Session, functions: list[dict[str, str]], request_id: object
) -> None:
    """Refuses a later step that declares host functions its session lacks: pynox_host is
    made when the session's process starts, and the step's code could not import them."""
    has = [function["name"] for function in session.functions]
    new = [function["name"] for function in functions if function["name"] not in has]
    if new:
        raise RequestError(
            f"session {session.name!r} has the host functions its first step declared "
            f"({', '.join(has) or 'none'}), as pynox_host is made when its process starts; "
            f"close the session and start a new one that declares {', '.join(new)}",
            request_id,
        )


def session_fields(message: dict[str, object]) -> dict[str, object]:
    """The fields of a session's step that set its process's confinement, as given."""
    return {key: message[key] for key in (*_SESSION_GRANTS, "profile") if key in message}


def _comparable(value: object) -> object:
    """A grant's value as a policy holds it, with lists in any order."""
    return sorted(value) if isinstance(value, list) else value
