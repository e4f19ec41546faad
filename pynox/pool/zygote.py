"""The zygote: a warm copy of the pool server that only forks children.

The pool server forks it once, after preloading and before it reads a single
request, so the zygote's memory never holds a request's code, policy, output
or host-call data, and neither does any child it forks. The pool server sends it
a child's descriptors; the zygote forks a spare child, hands back a pidfd,
reaps its children and reports how each ended. A spare readies itself, then
waits for its policy and program, which reach it over its own channel from the
pool server; a spare the server primes gets its policy first (pynox.pool.priming).
"""

import _signal
import atexit
import gc
import os
import select
import socket

from pynox._native import compile_source
from pynox.engine import child, prepared_sandbox, sandbox, scratch, shutdown
from pynox.engine.child_setup import ChildSetup
from pynox.engine.program import Program
from pynox.jsonfast import hook as json_hook
from pynox.policy.resolve import Policy
from pynox.pool import channel, request_child, warmup
from pynox.pool.child_link import ChildLink

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import CodeType
    from typing import NoReturn

    from pynox.errors import SandboxError

CHILD_FDS = ("stdout", "stderr", "report", "channel")
# The frame a spare sends once it has warmed up and waits idle, and the one that primes it.
READY = "ready"
PRIME = "prime"
# The server and the zygote trade a token, a pid or an exit status: a few dozen bytes.
# The buffer is allocated per message, so it stays small (1 MiB cost a mapping each).
MAX_MESSAGE = 4096


def send(sock: socket.socket, message: dict[str, object], fds: "list[int] | None" = None) -> None:
    data = channel.encode(message)[4:]
    socket.send_fds(sock, [data], fds or [])


def receive(sock: socket.socket) -> "tuple[dict[str, object] | None, list[int]]":
    """One message and its descriptors; ChannelError for one cut short."""
    data, fds, flags, _ = socket.recv_fds(sock, MAX_MESSAGE, len(CHILD_FDS))
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            os.close(fd)
        raise channel.ChannelError("a message between the pool server and its zygote was cut short")
    if not data:
        return None, fds
    return channel.decode(data), fds


def start(
    system_reads: list[str],
    config_package_dirs: "list[str] | None" = None,
    warmup_code: "CodeType | None" = None,
) -> "tuple[int, socket.socket]":
    """Forks the zygote; returns its pid and the pool server's end of its socket.

    config_package_dirs: every package directory the pool's pynox.toml names, where
    the hint of a failed import looks (pynox.engine.report._module_hint).
    warmup_code: the pool's warm-up, which each spare runs before its request comes.
    """
    server_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        server_end.close()
        _serve(zygote_end, system_reads, list(config_package_dirs or ()), warmup_code)
    zygote_end.close()
    return pid, server_end


def _serve(
    sock: socket.socket,
    system_reads: list[str],
    config_package_dirs: list[str],
    warmup_code: "CodeType | None",
) -> "NoReturn":
    json_hook.install()  # patched once here, the children share it
    # Nothing the zygote or its children print may reach the protocol stream.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    _signal.set_wakeup_fd(wake_write)
    _signal.signal(_signal.SIGCHLD, lambda signum, frame: None)
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    poller.register(wake_read, select.POLLIN)
    base = prepared_sandbox.base_policy(system_reads, os.getpid())  # shared by every spare
    # Emptied once here: no spare's memory holds the user's environment, and none
    # spends its own time emptying it.
    emptied = child.empty_environment()
    while True:
        ready = {fd for fd, _ in _poll(poller)}
        if wake_read in ready:
            _drain(wake_read)
            _reap(sock)
        if sock.fileno() not in ready:
            continue
        message, fds = _receive_or_leave(sock)
        pid = os.fork()
        if pid == 0:
            _become_child(
                sock,
                wake_read,
                wake_write,
                fds,
                base,
                emptied,
                config_package_dirs,
                warmup_code,
                wanted_now=message.get("wanted_now") is True,
            )
        pidfd = os.pidfd_open(pid)
        _send_or_leave(sock, {"spawned": message.get("token"), "pid": pid}, [pidfd])
        for fd in (pidfd, *fds):
            os.close(fd)


def _receive_or_leave(sock: socket.socket) -> "tuple[dict[str, object], list[int]]":
    try:
        message, fds = receive(sock)
    except (OSError, channel.ChannelError):
        message, fds = None, []
    if message is None:
        os._exit(0)  # the pool server is gone; the children die with us
    return message, fds


def _send_or_leave(sock: socket.socket, message: dict[str, object], fds: "list[int]") -> None:
    try:
        send(sock, message, fds)
    except OSError:
        os._exit(0)  # the pool server is gone


def _poll(poller: select.poll) -> "list[tuple[int, int]]":
    while True:
        try:
            return poller.poll()
        except InterruptedError:
            continue


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send_or_leave(sock, {"exited": pid, "status": status}, [])


def _become_child(
    sock: socket.socket,
    wake_read: int,
    wake_write: int,
    fds: list[int],
    base: sandbox.CPolicy,
    emptied: "tuple[str | None, SandboxError | None]",
    config_package_dirs: list[str],
    warmup_code: "CodeType | None",
    wanted_now: bool,
) -> "NoReturn":
    """A spare child: ready before any request, then confined to the one it gets.

    emptied: what child.empty_environment() gave when the zygote emptied its own.
    wanted_now: whether a request already waits for a spare (see below).
    """
    _signal.set_wakeup_fd(-1)
    _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
    for fd in (sock.detach(), wake_read, wake_write):
        os.close(fd)
    named = dict(zip(CHILD_FDS, fds, strict=True))
    setup = ChildSetup()
    setup.stdin_null = True
    setup.stdout_fd, setup.stderr_fd = named["stdout"], named["stderr"]
    setup.report_fd, setup.channel_fd = named["report"], named["channel"]
    setup.api_hints = True
    setup.user_base, setup.scrub_failure = emptied
    setup.environment_emptied = True
    setup.parent_pid = os.getppid()
    setup.config_package_dirs = config_package_dirs
    link = ChildLink(named["channel"])
    setup.pool_link = link
    child.prepare(setup)
    shutdown.exit_announcer = link.announce_exit

    # Warming up pays only while the spare would wait anyway. In a busy pool its
    # request is there, or queued for it, before it is ready: then the warm-up
    # would only take CPU time from the requests that run meanwhile (it spares a
    # request about a third of what it costs).
    channel_fd = named["channel"]

    def idle() -> bool:
        return not wanted_now and not _request_waiting(channel_fd)

    if idle():
        _warm_up()
    if warmup_code is not None and idle():
        warmup.run_in_spare(warmup_code)
    if idle():
        _rehearse(setup)
    prepared_sandbox.prepare_child(setup, base)
    # What the spare holds now outlives the request: the collections a request's
    # end runs (see shutdown.finish) then look only at what the program made.
    gc.freeze()
    if idle():
        link.send({"type": READY})  # the pool server may prime it now (see below)
    start = channel.receive(setup.channel_fd)
    policy = None
    if start is not None and start.get("type") == PRIME:
        # Primed: confined now to the policy the pool expects its next request to
        # have, so that such a request finds the work done. The pool server sends a
        # primed spare only a request of that very policy, and no host functions.
        policy = Policy.from_wire(start["policy"])  # type: ignore[arg-type]
        child.confine(policy, setup)
        start = channel.receive(setup.channel_fd)
    if start is None:
        os._exit(0)  # the pool closed an unused spare
    link.session = bool(start.get("session"))
    link.echo = start.get("echo") is True
    argv = start.get("argv")
    arguments = [str(arg) for arg in argv] if isinstance(argv, list) else []
    program = Program(str(start["kind"]), arguments)
    program.filename = str(start["filename"])
    # A script is not sent: the child reads it once confined (ChildLink.run), so the
    # request's grants decide whether it may, not the pool server's.
    program.source = b"" if program.kind == "script" else str(start.get("source", ""))
    path0 = start.get("path0")
    program.path0 = path0 if isinstance(path0, str) else None
    if policy is not None:
        child.begin(program, policy, setup)
    functions = start.get("functions")
    link.functions = list(functions) if isinstance(functions, list) else []
    child.start(program, Policy.from_wire(start["policy"]), setup)  # type: ignore[arg-type]


def _request_waiting(fd: int) -> bool:
    """Whether the spare's start frame (or the pool's goodbye) already waits on fd."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def _warm_up() -> None:
    """Touches the interpreter's common paths now, while no request waits.

    Right after a fork, every page a process writes to is first copied; a
    spare pays for the pages a small program needs before its request comes.
    """
    namespace: dict[str, object] = {"__builtins__": __builtins__}
    code = compile_source(
        b"import sys\nbuffer = sys.modules['io'].StringIO()\n"
        b"print(sum(range(10)), [str(i) for i in range(3)], {'k': 1}, file=buffer)\n"
        b"try:\n    1 / 0\nexcept ZeroDivisionError:\n    pass\n",
        "<warm-up>",
    )
    exec(code, namespace)  # noqa: S102 - our own fixed code
    # A request's code is compiled apart from its last expression, through a syntax
    # tree (request_child.run_code): a path of its own, with pages of its own.
    request_child.compile_with_value(
        b"import sys\nvalue = [i for i in range(3)]\nvalue", "<warm-up>"
    )


def _rehearse(setup: ChildSetup) -> None:
    """Walks the pure-Python steps of a request that leave nothing behind.

    The spare copies the pages (and warms the caches) those steps touch now, not
    while a request waits: decoding a start frame, the policy, the environment,
    and the checks and flushes of a program's end.
    """
    sample = Policy().to_wire()
    # What it sets up (argv, __main__) a request's start sets up again.
    child.setup_interpreter(Program("request", ["<rehearsal>"]), Policy(), setup)
    channel.decode(channel.encode({"type": "start", "policy": sample, "argv": ["<x>"]})[4:])
    sandbox.own_policy(Policy.from_wire(sample))
    saved = dict(os.environ)
    os.environ.update(dict.fromkeys(scratch.VARIABLES, "/"))
    for name in scratch.VARIABLES:
        if name in saved:
            os.environ[name] = saved[name]
        else:
            del os.environ[name]
    if atexit._ncallbacks() == 0:  # never the exit handlers of what the pool preloaded
        atexit._run_exitfuncs()
    shutdown.flush_stdio()
    # A program's end runs the collector (shutdown.finish); its first pass in a new
    # process copies the collector's own pages. Before gc.freeze, it only looks at
    # what the spare made since its fork.
    gc.collect()
