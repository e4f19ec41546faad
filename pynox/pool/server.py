"""`pynox pool`: a warm server of sandboxed runs over JSON Lines.

One thread, one poll loop. The pool server reads requests on stdin, checks and
caps them, asks the zygote (see zygote.py) to fork a child per request or per
session, sends each child its program over the child's own channel, relays
host-function calls to the client, collects output within its limits, enforces
timeouts through pidfds, and writes one result per request on stdout. The
protocol is documented in docs/pool-protocol.md. What it keeps of each child, request and
session is in records.py; what it does once as it starts, in startup.py. Three parts
of PoolServer are mixins in modules of their own: the steps of its sessions
(session_steps.py), the relay of host calls (host_calls.py), and the pipes of its
children, which it reads and streams (child_output.py).
"""

import contextlib
import errno
import gc
import os
import select
import signal
import time

from pynox import lean_os, strict_json
from pynox._native import immortalize
from pynox.engine import scratch, scratch_removal
from pynox.engine.child_setup import REPORT_CONFINED
from pynox.engine.hint_style import LIMITED_BY, Style
from pynox.engine.program import cannot_open_text
from pynox.engine.result import build_result, refusal
from pynox.engine.result_frame import python_version
from pynox.engine.supervisor import Outcome, wait_with_default_child_action
from pynox.engine.time_limit import is_stopped, timeout_error
from pynox.errors import (
    EXIT_CANCELLED,
    EXIT_CANNOT_OPEN,
    EXIT_SETUP_FAILURE,
    PynoxError,
)
from pynox.file_names import OUT_DIR
from pynox.limits import (
    DEFAULT_NAME,
    DEFAULT_SESSION_IDLE,
    DEFAULT_TIMEOUT,
    DEFAULT_WORKERS,
    MAX_IMAGES,
    MAX_LINE,
    REPORT_LIMIT,
    STREAM_BACKLOG,
)
from pynox.policy import pool_limits, system_paths
from pynox.policy import trusted as trusted_paths
from pynox.policy.bind_mounts import MountTable
from pynox.policy.cache import load_config
from pynox.policy.config import Config, Grants, find_config_path
from pynox.policy.grants import HINTS_PYTHON, PATH_GRANTS
from pynox.policy.path_grant import absolute_grant
from pynox.policy.resolve import build_policy
from pynox.pool import channel, descriptors, priming, records, startup, warmup, zygote
from pynox.pool import files as pool_files
from pynox.pool import request as pool_request
from pynox.pool.child_link import SCRIPT_UNREADABLE
from pynox.pool.child_output import READ_CHUNK, ChildOutput
from pynox.pool.host_calls import NO_CLIENT_TO_ANSWER, HostCalls
from pynox.pool.records import (
    CANCELLED_QUEUED,
    CANCELLED_RUNNING,
    Child,
    Run,
    Session,
    error_result,
    step_not_run,
)
from pynox.pool.request import RequestError
from pynox.pool.scratch_keeper import ScratchKeeper, gone, own_root
from pynox.pool.session_steps import SessionSteps, check_step_functions, session_fields

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from pynox.policy.resolve import Policy
    from pynox.pool.command import PoolOptions

# New spares wait while a program that started less than this ago runs: forking
# and warming one up competes for the CPU with it (~0.5 ms of a small request's
# latency on two cores). A program that runs longer gets its spares anyway.
_SPARE_DELAY = 0.02
# While a run's scratch directory waits for the keeper's thread (one it took to reuse may
# come back), the loop wakes this often to hand it over.
_TIDY_AGAIN = 0.02
# Past this many bytes of lines the client has not read, the pool reads no more requests
# and starts none it has queued: a client that writes and never reads would make it hold
# every result. What runs still ends, so the pool holds at most this plus those results.
_CLIENT_BACKLOG = 16 << 20
_ZYGOTE_GONE = "the pool's zygote stopped; restart the pool"
# The limits, in bytes, that a hint may suggest raising.
_SIZE_LIMITS = ("memory", "max_file_size")
# How long orders wait when the kernel's bound on descriptors in flight was met all the
# same (startup.orders_in_flight: the user's other processes hold some too) before they
# are sent again.
_ORDERS_RETRY = 0.02
_MAX_SIGNAL = 64
# What a session's runtime may still send for a step that its program ended early (with a
# done frame of its own): its value, its images and its real done frame. More frames of
# steps that are over, and the server would spend its time dropping them.
_STALE_FRAMES = MAX_IMAGES + 2
# Frames that belong to one session step: taken only from the step they name.
_STEP_FRAMES = ("call", "value", "image", "done")
# A child whose run or session is over (closed, exited, its result sent) gets this
# long to leave on its own before the pool server kills it: with the kill and the
# kernel's teardown, no child outlives its request or session by more than a second.
EXIT_GRACE = 0.9
_IDS_DIFFER = (
    "the line gives 'id' more than once, with different values; give each key once, so that "
    "the answer to the line can name it"
)


class PoolServer(SessionSteps, HostCalls, ChildOutput):
    def __init__(self, options: "PoolOptions") -> None:
        cwd = lean_os.getcwd()  # python starts in a removed directory, and so does the pool
        path = find_config_path(options.config, os.environ, cwd)
        self.config = load_config(path, os.environ) if path else Config("")
        settings = self.config.pool
        self.workers = options.workers or settings.workers or DEFAULT_WORKERS
        self.child_open_files = startup.share_open_files()  # first: the checks below use it
        # How many sessions (each holds a child) the limit on open files leaves room for.
        self.session_room = startup.check_descriptors(self.workers)
        self.orders_in_flight = startup.orders_in_flight()
        self.max_sessions = settings.max_sessions
        self.session_idle = settings.session_idle or DEFAULT_SESSION_IDLE
        self.limits = pool_limits.resolve_limits(self.config.pool_limits)
        self.limited = frozenset(settings.limited)
        # Hints name what a request may ask for: never more than [pool.limits] allows.
        ceilings = {key: getattr(self.limits, key) for key in _SIZE_LIMITS if key in self.limited}
        # By (session step, JSON fields): see HINTS_JSON.
        self.hint_styles = {
            (session, json): Style(
                True, ceilings, self._limits_refuse, self._never_granted, session=session, json=json
            )
            for session in (False, True)
            for json in (False, True)
        }
        self.private: list[tuple[str, str]] = []  # the scratch root, once made (below)
        self.cwd = cwd
        # Before any code of the host's runs (preloads, the warm-up, and the threads they
        # may leave printing): the protocol's lines get a descriptor of their own.
        self.out_fd = startup.protocol_output()
        # Granted to every request (and on its sys.path), resolved as any grant is.
        self.package_dirs = startup.pool_package_dirs(
            settings.package_dirs, options.package_dirs, cwd
        )
        startup.preload([*settings.preload, *options.preload], self.package_dirs)
        warmup_source = options.warmup if options.warmup is not None else settings.warmup
        warmup_code = None
        if warmup_source:
            warmup_code = warmup.compile_warmup(warmup_source)
            warmup.run_in_server(warmup_code, self.package_dirs)
        startup.warm_up()
        # What no request may write: pynox, what the pool loaded, its configuration,
        # and the package directories every request imports from.
        self.trusted = trusted_paths.installation()
        self.trusted += trusted_paths.configuration([path], cwd, os.environ)
        # As named too: the next pool finds them by those names, through their links.
        named = [absolute_grant(path, cwd) for path in settings.package_dirs + options.package_dirs]
        self.trusted += trusted_paths.named(named, startup.POOL_PACKAGES)
        self.system_reads = system_paths.interpreter_reads()
        # The children share the pool server's pages: keep their reference counts (from
        # 3.12 on, runtime/immortal.c) and the collector off them.
        immortalize(gc.get_objects())
        gc.freeze()
        # Where a module a request cannot import may be installed, for its hint.
        known = self.config.package_dirs_named()
        wait_with_default_child_action()  # the zygote's, and the zygote's own children's
        self.zygote_pid, self.zygote = zygote.start(
            self.system_reads,
            known,
            warmup_code,
            self.package_dirs,
            self.out_fd,
            path,
            self.child_open_files,
        )
        # Each run's scratch directory is made in one of the pool's own, which a helper
        # removes once the pool ends, however it ends (after the zygote's fork: the
        # helper's pipe must not stay open in it).
        self.scratch_root = scratch.create()
        self.scratch_bases = scratch.bases()  # where plain runs make theirs too
        self.scratch_fd = scratch.remove_when_gone(self.scratch_root)
        # It holds every run's scratch directory: no request may read or write it, what
        # it holds, or what holds it (a grant of TMPDIR, say), and no hint suggests it.
        self.private = trusted_paths.scratch_root(self.scratch_root)
        self.trusted += self.private
        self.scratch_keeper = ScratchKeeper(self.scratch_root)
        # What grants may reach through bind mounts, read again when the mounts change
        # (opened at first use: after the zygote's fork, which must not hold it).
        self.mount_table = MountTable()
        # What each request's policy takes its variables from, decoded once. Copied only
        # after the zygote's fork: no spare's memory may hold the user's environment.
        self.environ = dict(os.environ)
        self.poller = select.poll()
        self.handlers: dict[int, tuple[Child, str]] = {}
        self.children: dict[int, Child] = {}  # by token
        self.by_pid: dict[int, Child] = {}
        # Scratch directories of children whose run ended before the zygote's word of
        # their pid came (_spawned_after_its_end), by token.
        self.ended_unseen: dict[int, str] = {}
        self.runs: dict[object, Run] = {}  # by request id
        self.child_runs: dict[int, Run] = {}  # by token, for one-shot and session steps
        self.queue: list[tuple[Run, dict[str, object]]] = []
        self.sessions: dict[str, Session] = {}
        self.next_token = 0
        # Orders for spares not sent to the zygote yet (its socket had no room, or too many
        # wait for answers), oldest first: the child, and whether a request waits for it.
        self.unsent: list[tuple[Child, bool]] = []
        self.orders_unanswered = 0  # sent to the zygote, and no word of their spare yet
        # When orders are sent again after the user had too many descriptors in flight.
        self.orders_retry_at: float | None = None
        self.stdin_open = True
        self.spares: list[Child] = []
        # The policy spares are primed to: the last request's (pynox.pool.priming).
        self.prime_template: dict[str, Any] | None = None
        # The template of the policy of a request that names none of POLICY_FIELDS, once
        # one came (_policy): made of the pool's own settings alone, so made once.
        self.default_template: dict[str, Any] | None = None
        self.dying: dict[int, Child] = {}  # by token: done, and given EXIT_GRACE to exit
        self.line = bytearray()
        self.discarding = False
        # Lines for the client not written yet: a client that reads slowly makes them wait
        # here, and past STREAM_BACKLOG bytes the output of streaming runs waits in their
        # pipes instead (held: unregistered from the poller) until the client catches up.
        self.out = bytearray()
        self.held: set[int] = set()
        self.paused = False  # whether requests wait for the client (_pace)
        # Children whose output pipes are unregistered while their run is new (_quiet).
        self.quiet: dict[int, Child] = {}  # by token
        startup.nonblocking_to_a_pipe(self.out_fd)

    # --- output -------------------------------------------------------------------------

    def emit(self, message: "dict[str, Any]") -> None:
        try:
            # UTF-8, appended as it is: a result of large output is held once or twice
            # at most, not escaped to six bytes a character and copied four times. Every
            # integer here is the pool's own or one that strict_json.loads read.
            line = strict_json.dumps_read(message)
        except ValueError as exc:
            # The stream stays RFC 8259 JSON: a result that cannot be written becomes
            # a PoolError result; an event that cannot be written is dropped.
            if "event" in message:
                return
            line = strict_json.dumps_read(
                error_result(message.get("id"), f"the result is not JSON: {exc}", "PoolError")
            )
        self.out += line
        self.out += b"\n"
        self._flush_out()

    def _flush_out(self) -> None:
        try:
            while self.out:
                del self.out[: os.write(self.out_fd, self.out)]
        except BlockingIOError:
            pass
        except BrokenPipeError:
            self.shutdown_now()
        self.poller.modify(self.out_fd, select.POLLOUT if self.out else 0)
        if len(self.out) <= STREAM_BACKLOG and self.held:
            for fd in self.held:
                self.poller.register(fd, select.POLLIN)
            self.held.clear()

    def _finish_output(self) -> None:
        """Writes what is left for the client before the pool exits (it may wait for it)."""
        os.set_blocking(self.out_fd, True)
        self._flush_out()

    def shutdown_now(self) -> None:
        """The client is gone: kill every child and leave."""
        for child in list(self.children.values()):
            child.kill("the client went away")
        for directory in self._scratch_directories():
            scratch_removal.remove(directory)
        os._exit(0)

    def _scratch_directories(self) -> "list[str]":
        """Those of every run and session still known."""
        policies = [run.policy for run in self.runs.values()]
        policies += [session.policy for session in self.sessions.values()]
        directories = [p.scratch for p in policies] + [c.scratch for c in self.children.values()]
        directories += self.ended_unseen.values()
        directories += self.scratch_keeper.directories()
        return [d for d in dict.fromkeys(directories) if d is not None]

    # --- the loop -----------------------------------------------------------------------

    def serve(self) -> int:
        self.poller.register(0, select.POLLIN)
        self.poller.register(self.out_fd, 0)  # POLLERR: the client closed it; POLLOUT: room
        self.poller.register(self.zygote.fileno(), select.POLLIN)
        self._replenish()
        self.emit(
            {
                "event": "ready",
                "pynox": startup.version(),
                "python": python_version(),
                "workers": self.workers,
                "pid": os.getpid(),
            }
        )
        while self.stdin_open or self.runs or self.queue:
            timeout_ms = self._next_timeout_ms()
            ready = self._poll(timeout_ms)
            for fd, events in ready:
                self._dispatch(fd, events)
            self._pace()
            self._retry_orders()
            # At once, busy or not: what runs left fills the pool's TMPDIR until it goes.
            if self.scratch_keeper.used():
                self.scratch_keeper.remove_used()
            self._expire()
            # A request that finds no spare gets one forked on the spot (_take_spare);
            # with requests queued, spares are what they wait for.
            just_started = self._just_started()
            if self.queue or not just_started:
                self._replenish()
            if not self.child_runs or not just_started:
                self._prime_spares()
        self._close_sessions()
        self._finish_output()
        return 0

    def _close_sessions(self) -> None:
        """Ends the pool once its input closed and no request is left: closes every
        session, runs the loop while children remain for up to twice EXIT_GRACE (each is
        killed past its own), kills any left, and removes every scratch directory."""
        for session in list(self.sessions.values()):
            self._end_session(session)
        deadline = time.monotonic() + 2 * EXIT_GRACE
        while self.children and time.monotonic() < deadline:
            for fd, events in self._poll(100):
                self._dispatch(fd, events)
            self._expire()
        for child in list(self.children.values()):
            child.kill("the pool is exiting")
        self.scratch_keeper.close()
        for directory in self._scratch_directories():
            scratch_removal.remove(directory)

    def _backlogged(self) -> bool:
        return len(self.out) > _CLIENT_BACKLOG

    def _pace(self) -> None:
        """Stops reading requests and starting queued ones while the client's backlog is
        past _CLIENT_BACKLOG; once it has read it down, takes them up again."""
        if self.paused == self._backlogged():
            return
        self.paused = not self.paused
        if self.stdin_open:
            if self.paused:
                self.poller.unregister(0)
            else:
                self.poller.register(0, select.POLLIN)
        if not self.paused:
            self._start_queued()
            for session in list(self.sessions.values()):
                self._next_step(session)

    def _poll(self, timeout_ms: int | None) -> "list[tuple[int, int]]":
        try:
            return self.poller.poll(timeout_ms)
        except InterruptedError:
            return []

    def _next_timeout_ms(self) -> int | None:
        now = time.monotonic()
        # Only a run a child took has a deadline: the queue, however long, is not walked.
        deadlines = [r.deadline for r in self.child_runs.values() if r.deadline is not None]
        # Ended sessions too (no child, since a timeout, a crash or sys.exit()): they hold
        # a place among max_sessions and their scratch directory until closed.
        deadlines += [
            s.last_used + self.session_idle for s in self.sessions.values() if s.running is None
        ]
        deadlines += [child.kill_at for child in self.dying.values()]
        if self.orders_retry_at is not None:
            deadlines.append(self.orders_retry_at)
        deadlines += [child.quiet_until for child in self.quiet.values()]
        if self.scratch_keeper.used():
            deadlines.append(now + _TIDY_AGAIN)
        if self.stdin_open and (len(self.spares) < self.workers or self._spare_to_prime()):
            # Wake up to replenish or prime the spares once the newest program is no longer
            # new.
            new = [run.started + _SPARE_DELAY for run in self.child_runs.values()]
            deadlines += [moment for moment in new if moment > now]
        if not deadlines:
            return None
        return max(0, int((min(deadlines) - now) * 1000) + 1)

    def _dispatch(self, fd: int, events: int) -> None:
        if fd == 0:
            self._read_stdin()
        elif fd == self.out_fd:
            if events & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                self.shutdown_now()
            self._flush_out()
        elif fd == self.zygote.fileno():
            if events & select.POLLOUT:
                self._send_orders()
            if events & ~select.POLLOUT:
                self._from_zygote()
        elif fd in self.handlers:
            child, role = self.handlers[fd]
            if role == "channel":
                self._channel_event(child, events)
            elif role == "pidfd":
                self._exited_unreported(child)
            else:
                self._read_output(child, role)

    def _expire(self) -> None:
        now = time.monotonic()
        for child in list(self.quiet.values()):
            if now >= child.quiet_until:
                self._unquiet(child)
        for run in list(self.child_runs.values()):
            if run.deadline is not None and now >= run.deadline and run.child is not None:
                run.deadline = None
                # A fork can take longer than a timeout of a few milliseconds: that run
                # just timed out; only a stopped zygote is the pool's to report.
                if run.child.pid is None and self._zygote_stopped():
                    self._kill(run.child, self._never_forked(run))
                elif run.child.pid is None and descriptors.passing_refused():
                    self._kill(run.child, _no_room_to_pass(run))
                else:
                    # Not forked yet: it cannot have stopped itself.
                    pid = run.child.pid
                    run.child.stopped = pid is not None and is_stopped(pid)
                    self._kill(run.child, "timeout")
        for session in list(self.sessions.values()):
            if session.running is None and now >= session.last_used + self.session_idle:
                self._end_session(session)
        for child in list(self.dying.values()):
            if child.status is not None or child.finished:
                del self.dying[child.token]
            elif now >= child.kill_at:
                del self.dying[child.token]
                child.kill(f"it did not exit within {EXIT_GRACE:g}s of the end of its run")

    def _zygote_stopped(self) -> bool:
        """Whether the zygote is stopped (SIGSTOP, or a tracer's stop), as its
        /proc/PID/stat says; not when that cannot be read (it exited: the pool learns so
        from its socket)."""
        try:
            with open(f"/proc/{self.zygote_pid}/stat", "rb") as stat:
                fields = stat.read()
        except OSError:
            return False
        # The state follows the command name, which is in parentheses and may hold any.
        return fields[fields.rfind(b")") + 2 :][:1] in (b"T", b"t")

    def _never_forked(self, run: Run) -> str:
        """Why a run whose process the zygote has not forked by its deadline ends now."""
        pid = self.zygote_pid
        return (
            f"the pool's zygote (pid {pid}) forked no process for this request within its "
            f"timeout of {run.policy.timeout:g}s; if the zygote is stopped, continue it "
            f"(kill -CONT {pid}), else restart the pool"
        )

    def _kill(self, child: Child, reason: str) -> None:
        """Kills the child of a run, whose result then comes once the child is gone, even
        if the zygote (which reaps it and reports how it ended) says nothing, as a stopped
        zygote does: at once for a child it has not forked yet (killed when it comes,
        _spawned_after_its_end), else when the child's pidfd says it exited."""
        child.kill(reason)
        if child.finished or child.status is not None:
            return
        if child.pid is None:
            self._end_unforked(child)
        elif child.pidfd is not None and child.pidfd not in self.handlers:
            self.handlers[child.pidfd] = (child, "pidfd")
            self.poller.register(child.pidfd, select.POLLIN)

    def _end_unforked(self, child: Child) -> None:
        """Ends the run of a child the zygote has not forked: no output will come (its
        start frame was never sent, see _flush_channel)."""
        self._exited_unreported(child)

    def _exited_unreported(self, child: Child) -> None:
        """A child the pool killed is gone, and the zygote has not said so: it ended as
        the zygote will say it did (killed by SIGKILL). What it wrote is read now, not at
        the end of its pipes, which a zygote stopped right after its fork still holds."""
        if child.pidfd is not None and self.handlers.pop(child.pidfd, None) is not None:
            self.poller.unregister(child.pidfd)
        if child.status is not None:
            return
        self._drain(child, ("stdout", "stderr", "report"))
        for capture, role in ((child.stdout, "stdout"), (child.stderr, "stderr")):
            capture.open = False
            self._close_fd(child, role)
        self._close_fd(child, "report")
        if child.pid is not None:
            self.by_pid.pop(child.pid, None)
        child.status = signal.SIGKILL  # the wait status of a process SIGKILL ended
        self._child_exited(child)

    def _expect_exit(self, child: Child) -> None:
        """A child with no more work: it leaves by itself within EXIT_GRACE, or is killed."""
        if child.status is None and not child.finished and child.token not in self.dying:
            child.kill_at = time.monotonic() + EXIT_GRACE
            self.dying[child.token] = child

    # --- stdin --------------------------------------------------------------------------

    def _read_stdin(self) -> None:
        try:
            data = os.read(0, READ_CHUNK)
        except BlockingIOError:
            return
        if not data:
            # A last line without its newline is answered as any other.
            if self.discarding:
                self._refuse_long_line()
            elif self.line.strip():
                self._handle_line(bytes(self.line))
            self.line.clear()
            self.stdin_open = False
            self.poller.unregister(0)  # registered: only then is stdin read (_pace)
            self._close_spares(list(self.spares))
            for run in list(self.child_runs.values()):
                if run.child is not None:
                    self._drop_pending_calls(run.child, NO_CLIENT_TO_ANSWER)
            return
        while data:
            newline = data.find(b"\n")
            if newline < 0:
                self._extend_line(data)
                return
            self._extend_line(data[:newline])
            data = data[newline + 1 :]
            if self.discarding:
                self._refuse_long_line()
            elif self.line.strip():
                self._handle_line(bytes(self.line))
            self.line.clear()

    def _refuse_long_line(self) -> None:
        self.discarding = False
        message = f"the line is longer than {MAX_LINE} bytes; send smaller requests"
        self.emit(error_result(None, message))

    def _extend_line(self, data: bytes) -> None:
        if self.discarding:
            return
        self.line += data
        if len(self.line) > MAX_LINE:
            self.line.clear()
            self.discarding = True

    def _handle_line(self, line: bytes) -> None:
        request_id: object = None
        try:
            try:
                message = pool_request.parse_line(line)
            except RequestError as exc:
                if exc.request_id is not None and len(_ids_given(line)) > 1:
                    # Which id the client meant cannot be known, and a refusal under either
                    # could be taken for the result of another request of that id.
                    raise RequestError(_IDS_DIFFER) from None
                raise
            request_id = message["id"]
            if any(key in message for key in pool_request.CONTROL_FIELDS):
                try:
                    self._control(message)
                except PynoxError as exc:
                    # Not a request: an event, so no client takes it for a result.
                    self.emit({"id": request_id, "event": "control_error", "message": exc.message})
                return
            self._request(message)
        except RequestError as exc:
            if exc.request_id is not None:
                request_id = exc.request_id
            if exc.control:
                self.emit({"id": request_id, "event": "control_error", "message": exc.message})
            else:
                self.emit(error_result(request_id, exc.message))
        except PynoxError as exc:
            self.emit(error_result(request_id, exc.message))

    def _request(self, message: dict[str, object]) -> None:
        request_id = message["id"]
        pool_request.check_fields(message)
        files = pool_request.request_files(message)
        if request_id in self.runs:  # queued runs are there too
            raise RequestError(f"id {request_id!r} is already running; use a new id", request_id)
        functions = pool_request.host_functions(message)
        session_name = message.get("session")
        script = message.get("script")
        stream = message.get("stream") is True
        if isinstance(script, str) and isinstance(session_name, str):
            raise RequestError('a session runs code, not scripts; send "code"', request_id)
        if "args" in message and isinstance(session_name, str):
            # Its process started with the session: sys.argv is [name] in every step.
            raise RequestError(
                "a session step takes no args: sys.argv stays as the session's process "
                "started; set the values in the step's code instead",
                request_id,
            )
        if isinstance(session_name, str) and session_name in self.sessions:
            session = self.sessions[session_name]
            check_step_functions(session, functions, request_id)
            run = Run(request_id, self._step_policy(session, message))
            run.json_hints = message.get("hints") != HINTS_PYTHON
            run.files = files
            if stream:
                run.stream()
            self.runs[request_id] = run
            session.queue.append((run, message))
            self._next_step(session)
            return
        policy, template = self._policy(message)
        run = Run(request_id, policy)
        run.json_hints = message.get("hints") != HINTS_PYTHON
        if stream:
            run.stream()
        if isinstance(script, str):
            run.script = script  # read by the child, once confined (see child.start)
            run.shown.echo = False  # a script has no value, as under python
        if isinstance(session_name, str):
            if self.max_sessions == 0:
                raise RequestError(
                    "this pool keeps no sessions ([pool] max_sessions = 0); run the code "
                    'without a session (pool.run() in Python, a request without "session" in '
                    "the protocol), or allow sessions with a higher max_sessions",
                    request_id,
                )
            # Closed sessions whose steps still run (close_session lets them finish) hold a
            # process each, and its descriptors, until they end: they count as sessions.
            ending = self._ending_session_processes()
            held = f"{len(self.sessions)} sessions"
            if ending:
                held += f" and {ending} processes of closed sessions, not yet ended"
            if self.max_sessions is not None and len(self.sessions) + ending >= self.max_sessions:
                wait = ", or wait for the steps of closed sessions to end" if ending else ""
                raise RequestError(
                    f"the pool has {held}, its max_sessions; close one first (session.close() "
                    f"in Python, close_session in the protocol){wait}",
                    request_id,
                )
            if self.session_room is not None and len(self.sessions) + ending >= self.session_room:
                raise RequestError(
                    f"the pool has {held}, as many as its limit on open files leaves room for "
                    f"(each holds {startup.DESCRIPTORS_PER_CHILD}); close one first "
                    "(session.close() in Python, close_session in the protocol), or start the "
                    "pool with a higher limit (ulimit -n)",
                    request_id,
                )
            self._scratch_for(policy)  # the session's, for its life
            # Never given to a later run: processes of the session have it in turn, and
            # one that ended (sys.exit() with a thread still running) may still write
            # there after the last one's exit.
            self.scratch_keeper.never_reuse(policy.scratch or "")
            session = Session(session_name, policy, functions)
            session.fields = session_fields(message)
            cwd = message.get("cwd")
            session.cwd = cwd if isinstance(cwd, str) else None
            self.sessions[session_name] = session
            run.files = files
            self.runs[request_id] = run
            session.queue.append((run, message))
            self._next_step(session)
            return
        # A pool of one worker keeps its one spare unprimed (_prime_spares).
        if self.workers > 1 and not files and not functions:
            run.template = template if template is not None else priming.template(policy)
        run.files = files  # placed, with its scratch directory, when it starts (_start_queued)
        self.runs[request_id] = run
        self.queue.append((run, message))
        self._start_queued()

    def _ending_session_processes(self) -> int:
        """Processes of sessions that are over and have not exited yet (a closed session's
        step still running, one that lingers): each holds a child's descriptors until then,
        as each session does for its process."""
        current = {id(session.child) for session in self.sessions.values()}
        return sum(1 for c in self.children.values() if c.session and id(c) not in current)

    def _policy(self, message: dict[str, object]) -> "tuple[Policy, dict[str, Any] | None]":
        """The request's policy, with its template (pynox.pool.priming) when it is the
        pool's default policy."""
        if not pool_request.POLICY_FIELDS.isdisjoint(message):
            return self._new_policy(message), None
        # Without a grant, a profile or a script, the policy depends on nothing but the
        # pool's own settings, which never change: not on the request, not on the files.
        if self.default_template is None:
            self.default_template = priming.template(self._new_policy(message))
        return priming.from_template(self.default_template), self.default_template

    def _new_policy(self, message: dict[str, object]) -> "Policy":
        request_id = message["id"]
        grants = pool_request.request_grants(message)
        profile = message.get("profile")
        if isinstance(profile, str):
            if not self.config.path:
                raise RequestError(
                    f"profile {profile!r} needs a pynox.toml; start the pool with --config",
                    request_id,
                )
            grants = self.config.profile(profile).merged(grants)
        grants = pool_request.cap(grants, self.limits, self.limited, request_id)
        if grants.timeout is None:
            grants.timeout = DEFAULT_TIMEOUT
        implicit: list[str] = []
        script = message.get("script")
        if isinstance(script, str):
            implicit = self._script_reads(script, request_id)
        cwd = self._request_cwd(message)
        policy = build_policy(grants, implicit, self.environ, cwd)
        # The pool's own package directories come first, as they did for preload.
        policy.package_dirs = list(dict.fromkeys(self.package_dirs + policy.package_dirs))
        mounts = self.mount_table.current()
        trusted = self.trusted
        if cwd != self.cwd:
            # The pynox.toml a later run there would find, as for a run started there.
            trusted = trusted + trusted_paths.configuration([], cwd, self.environ)
        trusted_paths.refuse_trusted_writes(policy, trusted, mounts)
        trusted_paths.refuse_scratch_base_writes(policy, self.scratch_bases, mounts)
        # Found for each request, as for each run on the command line: a file the zygote
        # loaded may have been given another name since (uv's cache links what it installs).
        if trusted_paths.may_hold_links(policy):
            trusted_paths.refuse_linked_writes(policy, trusted_paths.linked_files(), mounts)
        trusted_paths.refuse_private_reads(policy, self.private, mounts)
        return policy

    def _request_cwd(self, message: dict[str, object]) -> str:
        """Where the request's program runs: its cwd, a directory, or the pool's."""
        cwd = message.get("cwd")
        if not isinstance(cwd, str):
            return self.cwd
        if not os.path.isdir(cwd):
            raise RequestError(
                f"cwd {cwd} is not a directory that exists; send the directory the program "
                "should run in, or leave cwd out to run it in the pool's",
                message["id"],
            )
        if not os.access(cwd, os.X_OK):  # the child enters it as the pool's user
            raise RequestError(
                f"cwd {cwd} is a directory the pool's user may not enter (it lacks search "
                "permission there); send one it may enter, or leave cwd out to run the "
                "program in the pool's",
                message["id"],
            )
        return cwd

    def _script_reads(self, script: str, request_id: object) -> list[str]:
        """The script's directory, the run's implicit read, once [pool.limits] allow it.

        It is checked as an allow_read grant of the request would be; the pool server
        reads nothing of the script: the child does, under the run's own confinement.
        """
        asked = Grants(allow_read=[os.path.dirname(os.path.realpath(script))])
        try:
            capped = pool_request.cap(asked, self.limits, self.limited, request_id)
        except RequestError as exc:
            message = f"the script {script} cannot run: {exc.message}"
            raise RequestError(message, request_id) from None
        # A directory that does not exist has nothing to grant: the child then
        # reports the script as python does, "can't open file".
        return [path for path in capped.allow_read if os.path.isdir(path)]

    def _control(self, message: dict[str, object]) -> None:
        request_id = message["id"]
        unknown = sorted(set(message) - {"id", *pool_request.CONTROL_FIELDS})
        if unknown or sum(key in message for key in pool_request.CONTROL_FIELDS) != 1:
            raise RequestError(
                "a control line holds an id and exactly one of host_result, host_error, "
                "close_session and control",
                request_id,
            )
        if "control" in message:
            if message["control"] != "cancel":
                raise RequestError('"control" takes "cancel", the one control there is', request_id)
            self._cancel(request_id)
            return
        if "close_session" in message:
            name = message["close_session"]
            if not isinstance(name, str):
                raise RequestError("close_session takes the session's name, a string", request_id)
            session = self.sessions.get(name)
            if session is None:
                raise RequestError(f"there is no session {name!r} to close", request_id)
            self.sessions.pop(session.name, None)
            child = session.child
            self._end_session(session)
            if child is None or child.status is not None:
                self.emit(records.closed_answer(request_id, session.name))
            else:
                # Answered once its process has ended (finalized, or killed past EXIT_GRACE):
                # by then a file its program never closed is written, as when python exits.
                child.answers_at_exit.append(records.closed_answer(request_id, session.name))
            return
        self._answer_host_call(message)

    def _cancel(self, request_id: object) -> None:
        """Ends a request: its child killed now, or its place in a queue given up.

        Either way the request's result says Cancelled, and it is its only result; a
        child that already ended gives its own result instead.
        """
        run = self.runs.get(request_id)
        if run is None:
            raise RequestError(
                f"there is no running or queued request {request_id!r} to cancel", request_id
            )
        child = run.child
        if child is not None:
            if child.status is None and child.announced is None and not child.finished:
                run.decoders.clear()  # no more output events: its result comes next
                self._release(child)
                self._kill(child, "cancelled")
            return
        result = {"id": request_id, **refusal("Cancelled", CANCELLED_QUEUED, EXIT_CANCELLED)}
        self.runs.pop(request_id, None)
        result.update(run.shown.fields())  # none: it never ran, but its fields are there
        for queued in self.queue:
            if queued[0] is run:
                self.queue.remove(queued)
                if run.policy.scratch is not None:
                    self.scratch_keeper.discard(run.policy.scratch)
                break
        for session in self.sessions.values():
            for queued in session.queue:
                if queued[0] is run:
                    session.queue.remove(queued)
                    step_not_run(result, run, session)  # the session goes on
                    break
        self.emit(result)

    # --- children -----------------------------------------------------------------------

    def _start_queued(self) -> None:
        busy = sum(1 for run in self.child_runs.values() if run.session is None)
        while self.queue and busy < self.workers and not self._backlogged():
            run, message = self.queue.pop(0)
            functions = pool_request.host_functions(message)
            primed = self._primed_spare(run)
            if primed is None and not self._give_scratch(run):
                continue
            run.child = self._take_spare(run.policy, functions, primed)
            run.child.scratch = run.policy.scratch
            run.start_clock()
            self.child_runs[run.child.token] = run
            cwd = message.get("cwd")
            cwd = cwd if isinstance(cwd, str) else None
            self._start_child(run.child, run.policy, functions, message, False, cwd)
            self._quiet(run)
            busy += 1

    def _just_started(self) -> bool:
        """Whether a request or session step started less than _SPARE_DELAY ago runs."""
        now = time.monotonic()
        return any(now - run.started < _SPARE_DELAY for run in self.child_runs.values())

    def _give_scratch(self, run: Run) -> bool:
        """Gives a run that starts now its scratch directory, with the files it brought.
        Not before: a queued run would hold one that the runs ahead of it need. False, with
        the run's result sent, when that fails."""
        try:
            self._scratch_for(run.policy)
            if run.files:
                try:
                    pool_files.place(run.policy.scratch or "", run.files, run.id)
                except RequestError:
                    self.scratch_keeper.remove(run.policy.scratch or "")
                    raise
        except PynoxError as exc:
            self.runs.pop(run.id, None)
            self.emit(error_result(run.id, exc.message))
            return False
        run.files = {}
        return True

    def _take_spare(
        self, policy: "Policy", functions: list[dict[str, str]], primed: Child | None = None
    ) -> Child:
        """A child for a run: `primed`, a spare primed to its policy (_primed_spare), else a
        spare that is not primed, else one forked now."""
        child = primed
        if child is None:
            child = next((spare for spare in self.spares if spare.primed is None), None)
            if child is not None:
                self.spares.remove(child)
            else:
                child = self._spawn(wanted_now=True)
        child.functions = {spec["name"] for spec in functions}
        child.stdout.limit = child.stderr.limit = policy.max_output
        return child

    def _primed_spare(self, run: Run) -> Child | None:
        """The spare primed to the policy of a run that may take one (its template), if
        there is one; the run takes its scratch directory too. The run's policy is what the
        pool expects next from now on: spares primed to anything else go, and new ones are
        primed to it."""
        template = run.template
        if template is None:
            return None
        self.prime_template = template
        primed = [spare for spare in self.spares if spare.primed is not None]
        if not primed:
            return None
        wanted = priming.key(template)
        found = None
        stale = []
        for spare in primed:
            if spare.primed != wanted:
                stale.append(spare)
            elif found is None:
                found = spare
        if found is not None and gone(found.scratch):
            # Gone with the pool's scratch root (ScratchKeeper makes that again, not this).
            stale.append(found)
            found = None
        self._close_spares(stale)
        if found is None:
            return None
        self.spares.remove(found)
        scratch.attach(run.policy, ready=found.scratch)  # the one its confinement grants
        return found

    def _spare_to_prime(self) -> bool:
        """Whether _prime_spares would prime a spare now."""
        if self.prime_template is None or not self.stdin_open:
            return False
        primed = sum(1 for spare in self.spares if spare.primed is not None)
        unprimed = any(spare.ready and spare.primed is None for spare in self.spares)
        return primed < self.workers - 1 and unprimed

    def _prime_spares(self) -> None:
        """Primes the spares that wait idle to the policy the pool expects next, but keeps
        one spare in `workers` unprimed: a request of another policy takes that one.

        Not while a program that started moments ago runs (the loop waits until none does,
        or until it is no longer new): a spare confining itself would take a CPU from it,
        and the pool server's own work of priming would delay it."""
        template = self.prime_template
        if template is None or not self._spare_to_prime():
            return
        primed = sum(1 for spare in self.spares if spare.primed is not None)
        for spare in self.spares:
            if primed >= self.workers - 1:
                return
            if spare.ready and spare.primed is None:
                policy = priming.from_template(template)
                try:
                    self._scratch_for(policy)
                except (PynoxError, OSError):
                    return  # a request then makes its own, and says why it cannot
                spare.primed = priming.key(template)
                spare.scratch = policy.scratch
                self._send_frame(spare, {"type": zygote.PRIME, "policy": policy.to_wire()})
                primed += 1

    def _close_spares(self, spares: list[Child]) -> None:
        """Lets spares go unused: each exits once its channel closes."""
        for spare in spares:
            self.spares.remove(spare)
            self._close_fd(spare, "channel")
            self._expect_exit(spare)

    def _replenish(self) -> None:
        if self.stdin_open and len(self.spares) < self.workers:
            unanswered = sum(1 for spare in self.spares if spare.pid is None)
            while len(self.spares) < self.workers and unanswered < self.orders_in_flight:
                self.spares.append(self._spawn(wanted_now=bool(self.queue)))
                unanswered += 1
        # Scratch directories made ahead, as spares are: a request does not wait for one.
        if self.stdin_open:
            self.scratch_keeper.keep_ready(self.workers)

    def _scratch_for(self, policy: "Policy") -> None:
        scratch.attach(policy, self.scratch_root, self.scratch_keeper.take())

    def _files_out(self, run: Run, result: "dict[str, Any]") -> None:
        """Adds the files the run left in its scratch directory's out/ to its result. A
        session's process lives on, and may act on out/ as the pool reads it: its out/
        is moved out of its reach first (collect_moved), which also empties it."""
        scratch_dir = run.policy.scratch
        if scratch_dir is None:
            return
        if run.session is None:  # its process has ended
            result.update(pool_files.collect(scratch_dir).fields())
            return
        if pool_files.holds_nothing(scratch_dir):
            return
        try:
            trash = scratch.create(own_root(self.scratch_root))
            os.rmdir(trash)  # only its name: out/ takes its place
        except (PynoxError, OSError) as exc:
            problem = exc.message if isinstance(exc, PynoxError) else exc.strerror
            found = pool_files.Collected()
            found.leave_out(OUT_DIR, f"could not be read after this step ({problem})")
        else:
            found = pool_files.collect_moved(scratch_dir, trash)
            if os.path.lexists(trash):
                self.scratch_keeper.discard(trash)
        result.update(found.fields())

    def _spawn(self, wanted_now: bool) -> Child:
        """A new spare. wanted_now: a request already waits for it (or for the next
        spare), so it would not wait long enough to warm up (zygote._become_child)."""
        self.next_token += 1
        child = Child(self.next_token)
        self.children[child.token] = child
        self.unsent.append((child, wanted_now))
        self._send_orders()
        return child

    def _send_orders(self) -> None:
        """Sends the zygote the orders it has room for; the rest wait for that room (the
        loop polls for it), so that a zygote that reads none (stopped) never stops the
        pool: the runs of those children end at their timeouts (_never_forked)."""
        self.orders_retry_at = None
        while self.unsent and self.orders_unanswered < self.orders_in_flight:
            child, wanted_now = self.unsent[0]
            if not child.fds:
                self._open_pipes(child)
            try:
                zygote.order_spare(self.zygote, child.token, wanted_now, child.passed)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno != errno.ETOOMANYREFS:  # EPIPE, ECONNRESET: the zygote is gone
                    self._stop(_ZYGOTE_GONE)
                # The socket's room says nothing of this: sent again on a timer.
                self.orders_retry_at = time.monotonic() + _ORDERS_RETRY
                break
            del self.unsent[0]
            self.orders_unanswered += 1
            child.ordered = True
            descriptors.close_all(child.passed)
        # Polled for room only while room is what they wait for: not while the orders
        # sent wait for answers, nor for a retry.
        room_wanted = (
            self.unsent
            and self.orders_unanswered < self.orders_in_flight
            and self.orders_retry_at is None
        )
        self.poller.modify(self.zygote, select.POLLIN | (select.POLLOUT if room_wanted else 0))

    def _retry_orders(self) -> None:
        """Sends the orders held back for a retry, once its time has come."""
        if self.orders_retry_at is not None and time.monotonic() >= self.orders_retry_at:
            self._send_orders()

    def _drop_order(self, child: Child) -> None:
        """Forgets the order of a child that ended before it was sent."""
        for index, (unsent, _) in enumerate(self.unsent):
            if unsent is child:
                del self.unsent[index]
                descriptors.close_all(child.passed)
                return

    def _start_child(
        self,
        child: Child,
        policy: "Policy",
        functions: list[dict[str, str]],
        message: dict[str, object],
        session: bool,
        cwd: str | None,
    ) -> None:
        """Sends a spare its policy and program; it confines itself and runs. cwd: the
        directory it runs in, when not the pool's."""
        name = message.get("name", DEFAULT_NAME)
        args = pool_request.string_list(message, "args")
        script = message.get("script")
        start: dict[str, object]
        if session:
            start = {"kind": "request", "argv": [name], "filename": name, "source": ""}
        elif isinstance(script, str):
            # No source: the child reads the script itself once confined.
            start = {
                "kind": "script",
                "argv": [script, *args],
                "filename": script,
                "path0": os.path.dirname(os.path.realpath(script)),
            }
        else:
            start = {
                "kind": "request",
                "argv": [name, *args],
                "filename": name,
                "source": message["code"],
            }
        start.update(type="start", session=session)
        if cwd is not None:
            start["cwd"] = cwd
        child.session = session
        if child.primed is None:  # a primed spare has its policy, and no host functions
            start.update(policy=policy.to_wire(), functions=functions)
        start["echo"] = not isinstance(script, str) or session
        try:
            self._send_frame(child, start)
        except channel.ChannelError as exc:
            child.kill(f"the program is too large to send: {exc}")

    def _send_frame(self, child: Child, frame: dict[str, object]) -> None:
        try:
            child.outbound += channel.encode_read(frame)
        except ValueError as exc:
            raise channel.ChannelError(f"a message is not JSON: {exc}") from None
        self._flush_channel(child)

    def _flush_channel(self, child: Child) -> None:
        fd = child.fds.get("channel")
        # Not before the zygote's word of its fork: a run that ended meanwhile (its timeout
        # passed while the zygote was stopped) must not reach a child forked after its end.
        if fd is None or child.pid is None:
            return
        try:
            while child.outbound:
                del child.outbound[: os.write(fd, child.outbound)]
        except BlockingIOError:
            pass
        except OSError:
            child.outbound.clear()
        events = select.POLLIN | (select.POLLOUT if child.outbound else 0)
        self.poller.modify(fd, events)

    def _from_zygote(self) -> None:
        try:
            word, fds = zygote.read_word(self.zygote)
        except channel.ChannelError as exc:
            self._stop(f"the pool's zygote broke its protocol ({exc}); restart the pool")
        if word is None:
            self._stop(_ZYGOTE_GONE)
        kind, ident, value = word
        if kind == zygote.SPAWNED:
            self.orders_unanswered -= 1
            if self.unsent:
                self._send_orders()
            child = self.children.get(ident)
            if child is None:
                self._spawned_after_its_end(ident, fds)
                return
            child.pid = value
            child.pidfd = fds[0] if fds else None
            self.by_pid[child.pid] = child
            if child.kill_reason is not None:
                self._kill(child, child.kill_reason)
            elif child.outbound:
                self._flush_channel(child)
            return
        for fd in fds:  # only a spawned spare's word carries one
            os.close(fd)
        if kind == zygote.EXITED:
            child = self.by_pid.pop(ident, None)
            if child is not None:
                child.status = value
                self._child_exited(child)

    def _stop(self, problem: str) -> "NoReturn":
        """The pool cannot go on: every request it has (running, queued, or a session's
        step) gets a result that says why, then the pool stops with that sentence. Without
        the zygote no request can run or end as its program did: the zygote reaped them."""
        for run in list(self.runs.values()):
            self.emit(error_result(run.id, problem, "PoolError"))
        self.runs.clear()
        for child in self.children.values():
            self._answer_at_exit(child)  # their sessions are gone with the pool
        self._finish_output()
        raise PynoxError(problem)

    def _spawned_after_its_end(self, token: int, fds: "list[int]") -> None:
        """The zygote's word of a child whose run already ended (a burst can do that): it
        goes now, as _finish_child sends any child that may only have claimed to end, and
        its scratch directory goes to the keeper with the pidfd that shows when it has."""
        pidfd = fds[0] if fds else None
        for fd in fds[1:]:
            os.close(fd)
        if pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        scratch_dir = self.ended_unseen.pop(token, None)
        if scratch_dir is not None:
            self.scratch_keeper.discard(scratch_dir, pidfd)
        elif pidfd is not None:
            os.close(pidfd)

    def _channel_event(self, child: Child, events: int) -> None:
        if events & select.POLLOUT:
            self._flush_channel(child)
        if not events & (select.POLLIN | select.POLLHUP | select.POLLERR):
            return
        self._read_channel(child)

    def _read_channel(self, child: Child) -> bool:
        """Reads and handles what the child's channel holds now; False once nothing is left."""
        fd = child.fds.get("channel")
        if fd is None:
            return False
        try:
            data = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self._close_fd(child, "channel")
            return False
        try:
            for frame, size in child.frames.feed(data):
                self._child_frame(child, frame, size)
        except channel.OverBound as exc:
            self._close_fd(child, "channel")
            self._kill(child, str(exc))
            return False
        except channel.ChannelError as exc:
            self._close_fd(child, "channel")
            self._kill(child, f"the program broke its channel to the pool: {exc}")
            return False
        return True

    def _child_frame(self, child: Child, frame: dict[str, object], size: int) -> None:
        """One frame from a child, checked field by field: ChannelError drops the child."""
        run = self.child_runs.get(child.token)
        kind = frame.get("type")
        if child.session and kind in _STEP_FRAMES and not records.of_step(frame, run):
            self._other_step_frame(child, frame)
        elif kind == "call" and run is not None:
            self._host_call(run, child, frame, size)
        elif kind == "exit":
            # Once per child, as the ready frame: a child that repeats a frame the pool
            # must act on would have the server spend its time on them, every other
            # request waiting (tiny frames cost it far more per byte than output).
            if child.announced is not None:
                raise channel.ChannelError("a second exit frame")
            status, signum = frame.get("status"), frame.get("signal")
            if type(status) is not int or not (
                signum is None or channel.small_int(signum, 1, _MAX_SIGNAL)
            ):
                raise channel.ChannelError("an exit frame without a status and signal")
            child.announced = (status & 0xFF, signum)  # type: ignore[assignment]
            # Its output has closed already, unless the program kept a copy of it open:
            # then the result can go now, not when the kernel has torn the process
            # down (~0.7 ms later). Drained first: a quiet pipe that closed is never
            # polled or resized again.
            self._drain(child)
            self._unquiet(child)
            self._maybe_finish(child)
        elif kind == zygote.READY:
            # From a spare, which has run nothing yet; one that a request took meanwhile
            # may send it still.
            if child.said_ready:
                raise channel.ChannelError("a second ready frame")
            child.said_ready = True
            if run is None:
                child.ready = True
        elif kind == "value" and run is not None:
            run.shown.take_value(frame)
        elif kind == "image" and run is not None:
            run.shown.take_image(frame)
        elif kind == "done" and run is not None and run.session is not None:
            exit_code, error, ended = frame.get("exit"), frame.get("error"), frame.get("ended")
            # The step's error report: flat and small, as a one-shot child's report is.
            flat = error is None or (
                type(error) is dict
                and len(error) <= records.REPORT_ITEMS
                and not any(isinstance(value, (list, dict)) for value in error.values())
            )
            if not (channel.small_int(exit_code, 0, 255) and flat and ended in (None, True, False)):
                raise channel.ChannelError(
                    f"a done frame without an exit status and a flat error of at most "
                    f"{records.REPORT_ITEMS} fields"
                )
            if size > REPORT_LIMIT:  # the bound of a one-shot child's report, with its frame
                raise channel.ChannelError(f"a done frame longer than {REPORT_LIMIT} bytes")
            self._unquiet(child)
            self._drain(child)
            self._finish_step(
                run,
                exit_code,  # type: ignore[arg-type]
                error,  # type: ignore[arg-type]
                "exit" if ended else None,
            )
        elif (
            kind == SCRIPT_UNREADABLE
            and run is not None
            and run.script is not None
            and child.script_errno is None
            and channel.small_int(frame.get("errno"), 0, 4095)
        ):
            child.script_errno = frame["errno"]  # type: ignore[assignment]
        else:
            raise channel.ChannelError(f"an unexpected frame of type {str(kind)[:40]!r}")

    def _other_step_frame(self, child: Child, frame: dict[str, object]) -> None:
        """A session's frame that names no step running: a call is refused, and the rest
        dropped, so that a done frame the program forged ends its own step only, never
        the next one (whose result would carry this one's output, and so on)."""
        if frame.get("type") == "call":
            self._refuse_call_between_steps(child, frame)
            return
        child.stale_frames += 1
        if child.stale_frames > _STALE_FRAMES:
            raise channel.ChannelError(
                f"more than {_STALE_FRAMES} frames of session steps that were over"
            )

    def _child_exited(self, child: Child) -> None:
        self._unquiet(child)
        run = self.child_runs.get(child.token)
        if run is not None and run.session is not None:
            self._drain(child)
            self._finish_step(run, None, None, records.how_it_ended(child))
        self._maybe_finish(child)
        self._answer_at_exit(child)

    def _answer_at_exit(self, child: Child) -> None:
        for line in child.answers_at_exit:
            self.emit(line)
        child.answers_at_exit.clear()

    def _maybe_finish(self, child: Child) -> None:
        """A child is done once it ended (or said it did) and its pipes closed.

        A one-shot request gets its result then; so does a session step that was
        still running (a program can announce its end without a done frame).
        """
        if child.finished or (child.status is None and child.announced is None):
            return
        if child.stdout.open or child.stderr.open:
            return
        if child.status is None:
            # It announced its end: what it reported came before the announcement.
            self._drain(child, ("report",))
        elif child.report.open and "report" in child.fds:
            return
        else:
            # Reaped: whatever it sent on its channel is there now; it may tell how the
            # run ended (a script it could not read, say), so it is read first.
            while self._read_channel(child) and not child.finished:
                pass
            if child.finished:
                return
        child.finished = True
        # The keeper reuses its scratch directory only once it sees the child exit, through
        # a pidfd of its own (_finish_child closes the child's).
        pidfd = descriptors.duplicate(child.pidfd) if child.scratch is not None else None
        try:
            self._finish_child(child)
        finally:
            # Reused or removed once the child is surely gone, off the path of this result
            # and of the next request (ScratchKeeper). Without its pid yet, the zygote's
            # word of it brings the pidfd (_spawned_after_its_end).
            if child.scratch is not None and child.pid is None and child.ordered:
                self.ended_unseen[child.token] = child.scratch
            elif child.scratch is not None:
                self.scratch_keeper.discard(child.scratch, pidfd)

    def _finish_child(self, child: Child) -> None:
        if child.pid is None and self.unsent:
            self._drop_order(child)
        for role in list(child.fds):
            self._close_fd(child, role)
        self.quiet.pop(child.token, None)
        child.quiet_until = 0.0  # no pipe of it is left to read
        for session in self.sessions.values():
            if session.child is child:
                self._hold_scratch(session, child)
        if child.pidfd is not None:
            if self.handlers.pop(child.pidfd, None) is not None:
                self.poller.unregister(child.pidfd)
            if child.status is None:
                # Gone in a moment anyway; a program that only claimed to end goes now.
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(child.pidfd, signal.SIGKILL)
            os.close(child.pidfd)
            child.pidfd = None
        self.children.pop(child.token, None)
        self.dying.pop(child.token, None)
        if child in self.spares:
            self.spares.remove(child)  # it died waiting: no request may be given it
            if child.primed is not None:
                self.prime_template = None  # it failed its priming: none until a request
        run = self.child_runs.get(child.token)
        if run is not None and run.session is not None:
            self._finish_step(run, None, None, records.how_it_ended(child))
        run = self.child_runs.pop(child.token, None)
        for session in self.sessions.values():
            if session.child is child:
                session.child = None
        if run is None or run.session is not None:
            return
        self._finish_oneshot(run, child)

    def _outcome(self, run: Run, child: Child, exit_code: int | None) -> Outcome:
        outcome = Outcome()
        outcome.take_output(child.stdout, child.stderr)
        child.stdout, child.stderr = child.stdout.emptied(), child.stderr.emptied()
        outcome.duration_ms = (time.monotonic() - run.started) * 1000
        outcome.stopped = child.stopped
        if exit_code is not None:
            outcome.exit_code = exit_code
            return outcome
        if child.status is None and child.announced is not None:
            outcome.exit_code, outcome.signal = child.announced
            if outcome.signal is not None:
                outcome.exit_code = 128 + outcome.signal
            return outcome
        outcome.ended(child.status or 0, child.kill_reason == "timeout")
        return outcome

    def _finish_oneshot(self, run: Run, child: Child) -> None:
        outcome = self._outcome(run, child, None)
        if run.policy.memory is not None:
            # A child announces its end once Python saw the program to it: native code
            # that gave up under the memory limit exit()ed without a word.
            outcome.python_finished = child.announced is not None
        outcome.report = bytes(child.report.data)
        problem = None
        # After the confinement marker (child.REPORT_CONFINED), the program's report.
        confined = outcome.report.startswith(REPORT_CONFINED)
        body = outcome.report[len(REPORT_CONFINED) :] if confined else outcome.report
        if body and child.kill_reason is None:
            problem = records.report_problem(body, child.report.truncated)
            if problem is not None:
                outcome.report = b""
        result = self._result(outcome, run)
        if child.kill_reason == "cancelled":
            records.failed(result, "Cancelled", CANCELLED_RUNNING, EXIT_CANCELLED)
        elif child.kill_reason not in (None, "timeout"):
            records.failed(result, "PoolError", str(child.kill_reason))
        elif problem is not None:
            records.failed(result, "PoolError", f"the program wrote to its error report: {problem}")
        elif child.script_errno is not None and run.script is not None:
            self._script_failed(result, run.script, child.script_errno)
        result.update(run.shown.fields())
        self._files_out(run, result)
        self.runs.pop(run.id, None)
        self._end_stream(run, outcome)
        self.emit({"id": run.id, **result})
        self._start_queued()

    @staticmethod
    def _script_failed(result: "dict[str, Any]", script: str, error: int) -> None:
        """The result of a script its child could not read: worded here, from the errno.

        Only for a child that then left as such a child leaves (request_child._script_unreadable).
        """
        if result["exit"] != (EXIT_CANNOT_OPEN if error else EXIT_SETUP_FAILURE):
            return
        if error:
            message = cannot_open_text(script, error, os.strerror(error))
            records.failed(result, "ProgramNotFound", message, EXIT_CANNOT_OPEN)
        else:
            message = f"the script {script} is not a regular file; send the path of a Python file"
            records.failed(result, "RequestError", message)

    def _result(self, outcome: Outcome, run: Run, session: bool = False) -> "dict[str, Any]":
        """The result of a run, whatever its child wrote: a PoolError rather than the pool's end."""
        policy = run.policy
        style = self.hint_styles[session, run.json_hints]
        try:
            result = build_result(outcome, policy, api=True, style=style)
        except Exception as exc:  # noqa: BLE001 - the child's data must not take the pool down
            outcome.report = b""
            result = build_result(outcome, policy, api=True, style=style)
            records.failed(
                result, "PoolError", f"the program's error report is unusable ({exc!r:.200})"
            )
        if outcome.timed_out:
            result["error"] = self._timeout_error(run, outcome.stopped)
        return result

    def _limits_refuse(self, name: str, path: str | None) -> bool:
        return pool_limits.refused_by_limits(name, path, self.limits, self.limited)

    def _never_granted(self, name: str, path: str | None) -> str | None:
        """What a path grant would reach that no request may have (the scratch root), judged
        from the path as written, as _limits_refuse judges it."""
        if path is None or name not in PATH_GRANTS:
            return None
        return trusted_paths.reaches(os.path.normpath(path), self.private)

    def _timeout_error(self, run: Run, stopped: bool) -> "dict[str, Any]":
        """A timed-out run's error, whose hint names no longer limit than [pool.limits]
        lets a request ask for."""
        policy, json = run.policy, run.json_hints
        if "timeout" in self.limited and self.limits.timeout is not None:
            return timeout_error(
                policy,
                api=True,
                longest=self.limits.timeout,
                allowed_by=LIMITED_BY,
                stopped=stopped,
                json=json,
            )
        return timeout_error(policy, api=True, stopped=stopped, json=json)


def _ids_given(line: bytes) -> "list[object]":
    """The different values that a line refused as not JSON the pool takes gives its "id",
    as a lenient parser reads them (only on that error path); none if even that fails."""
    import json

    given: list[object] = []

    def pairs_of(pairs: "list[tuple[str, object]]") -> "dict[str, object]":
        given[:] = [value for key, value in pairs if key == "id"]  # the outermost comes last
        return dict(pairs)

    try:
        # A number past int()'s digit limit reads as null, as in the refusal itself.
        json.loads(
            line,
            object_pairs_hook=pairs_of,
            parse_int=lambda text: int(text) if len(text) < 4000 else None,
        )
    except (ValueError, RecursionError):
        return []
    distinct: list[object] = []
    for value in given:
        if not any(type(value) is type(seen) and value == seen for seen in distinct):
            distinct.append(value)
    return distinct


def _no_room_to_pass(run: Run) -> str:
    """Why a run whose process was never started ends at its deadline, when the kernel
    refuses to pass descriptors (pynox.pool.descriptors.passing_refused): it waited for
    room that someone else holds, and its program never ran."""
    return (
        "the pool could not start a process for this request within its timeout of "
        f"{run.policy.timeout:g}s: the kernel refuses to pass it descriptors while this user's "
        "descriptors in flight on Unix sockets are at its bound (the limit on open files), "
        "held by a program the pool runs or another process of this user; end that program "
        "(close its session), then send the request again"
    )
