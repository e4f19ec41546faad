"""The zygote: a warm copy of the pool server that only forks children.

The pool server forks it once, after preloading and before it reads a single
request, so the zygote's memory never holds a request's code, policy, output
or host-call data, and neither does any child it forks. The pool server sends it
a child's descriptors; the zygote forks a spare child, hands back a pidfd,
reaps its children and reports how each ended (a loop in C, runtime/zygote.c, so
that the zygote writes to almost none of the pages its children share). A spare
readies itself, then waits for its policy and program, which reach it over its
own channel from the pool server; a spare the server primes gets its policy
first (pynox.pool.priming).
"""

import array
import atexit
import gc
import os
import resource
import select
import socket
import struct

from pynox._native import (
    ZYGOTE_EXITED,
    ZYGOTE_ORDER_FORMAT,
    ZYGOTE_SPAWNED,
    ZYGOTE_WORD_FORMAT,
    compile_source,
    serve_spares,
)
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

    from pynox.engine.child_setup import PackageEnv, PathEnv
    from pynox.errors import SandboxError

CHILD_FDS = ("stdout", "stderr", "report", "channel")
# The frame a spare sends once it has warmed up and waits idle, and the one that primes it.
READY = "ready"
PRIME = "prime"
# The records the server and the zygote trade (laid out in runtime/zygote.c): the
# server's order for a spare, and the zygote's word of one it forked or one that ended.
ORDER = struct.Struct(ZYGOTE_ORDER_FORMAT)  # token, wanted_now; with CHILD_FDS
WORD = struct.Struct(ZYGOTE_WORD_FORMAT)  # SPAWNED, token, pid (a pidfd); EXITED, pid, status
SPAWNED = ZYGOTE_SPAWNED
EXITED = ZYGOTE_EXITED
SPARES_SKIP_WARMUP = (
    "pynox: the pool's warm-up code leaves threads running in a child (a BLAS library's"
    " workers, say), which no sandbox can confine, so spares skip it and only the pool's"
    " own run of it is shared; for spares to run it too, have it start no thread (for"
    " numpy, use arrays small enough for one thread)\n"
)


def order_spare(sock: socket.socket, token: int, wanted_now: bool, fds: "list[int]") -> None:
    """Asks the zygote for a spare with these descriptors (CHILD_FDS, in order), without
    waiting: BlockingIOError while its socket is full (a zygote that is stopped reads no
    orders)."""
    # Not socket.send_fds, which drops its flags (CPython 3.13 and before).
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
    sock.sendmsg([ORDER.pack(token, wanted_now)], rights, socket.MSG_DONTWAIT)


def read_word(sock: socket.socket) -> "tuple[tuple[int, int, int] | None, list[int]]":
    """The zygote's next word (kind, id, value) and its descriptors; None when the
    zygote is gone; ChannelError for a record of another size or more descriptors."""
    try:
        data, fds, flags, _ = socket.recv_fds(sock, WORD.size + 1, 1)
    except ConnectionResetError:  # killed with a word of ours still unread: gone as well
        return None, []
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) or (data and len(data) != WORD.size):
        for fd in fds:
            os.close(fd)
        raise channel.ChannelError("a message from the pool's zygote was not one it sends")
    if not data:
        return None, fds
    kind, ident, value = WORD.unpack(data)
    return (kind, ident, value), fds


def start(
    system_reads: list[str],
    config_package_dirs: "list[str] | None" = None,
    warmup_code: "CodeType | None" = None,
    package_dirs: "list[str] | None" = None,
    protocol_fd: "int | None" = None,
    config_path: "str | None" = None,
    open_files: "tuple[int, int] | None" = None,
) -> "tuple[int, socket.socket]":
    """Forks the zygote; returns its pid and the pool server's end of its socket.

    config_package_dirs: every package directory the pool's pynox.toml names, where
    the hint of a failed import looks (pynox.engine.report._module_hint).
    warmup_code: the pool's warm-up, which each spare runs before its request comes,
    importing from the pool's package_dirs as requests do.
    protocol_fd: the pool server's descriptor of the protocol stream, which the zygote
    closes: no spare may write there, nor hold the client's pipe open.
    config_path: the pool's pynox.toml, which, as the package directories, no write hint
    may name a grant of (pynox.engine.hints._where_writable).
    open_files: the soft and hard limits on open files of every spare, below the pool's
    own (startup.share_open_files); None, the pool's own.
    """
    server_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        server_end.close()
        if protocol_fd is not None:
            os.close(protocol_fd)
        child.reopen_standard_output()
        warmup_run = None if warmup_code is None else (warmup_code, list(package_dirs or ()))
        trusted = ([config_path] if config_path else [], list(package_dirs or ()))
        _serve(
            zygote_end,
            system_reads,
            list(config_package_dirs or ()),
            warmup_run,
            trusted,
            open_files,
        )
    zygote_end.close()
    return pid, server_end


def _serve(
    sock: socket.socket,
    system_reads: list[str],
    config_package_dirs: list[str],
    warmup_run: "tuple[CodeType, list[str]] | None",
    trusted: "tuple[list[str], list[str]]",
    open_files: "tuple[int, int] | None",
) -> "NoReturn":
    json_hook.install()  # patched once here, the children share it
    # Nothing the zygote or its children print may reach the protocol stream.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    base = prepared_sandbox.base_policy(system_reads, os.getpid())  # shared by every spare
    # Emptied once here: no spare's memory holds the user's environment, and none
    # spends its own time emptying it.
    emptied = child.empty_environment()
    try:
        _practise()
        # The zygote runs no program: from here it only forks spares (in C), which
        # inherit this filter instead of each compiling all of it.
        prepared_sandbox.share_filter()
        if warmup_run is not None and not _spares_may_warm_up(warmup_run):
            os.write(2, SPARES_SKIP_WARMUP.encode())
            warmup_run = None
        # Returns only in a new spare; the zygote itself ends there once the server has.
        fds, wanted_now = serve_spares(sock.fileno(), len(CHILD_FDS))
    except BaseException as exc:  # noqa: BLE001 - the zygote must not unwind into the server's code
        if not isinstance(exc, KeyboardInterrupt):
            os.write(2, f"pynox: the pool's zygote stopped: {exc!r}\n".encode())
        os._exit(1)
    if open_files is not None:
        _lower_open_files(open_files)
    _become_child(
        sock, fds, base, emptied, config_package_dirs, warmup_run, trusted, wanted_now=wanted_now
    )


def _become_child(
    sock: socket.socket,
    fds: list[int],
    base: sandbox.CPolicy,
    emptied: "tuple[PackageEnv, PathEnv, SandboxError | None]",
    config_package_dirs: list[str],
    warmup_run: "tuple[CodeType, list[str]] | None",
    trusted: "tuple[list[str], list[str]]",
    wanted_now: bool,
) -> "NoReturn":
    """A spare child: ready before any request, then confined to the one it gets.

    emptied: what child.empty_environment() gave when the zygote emptied its own.
    trusted: the pool's pynox.toml, if any, and package directories, which every request
    imports from.
    wanted_now: whether a request already waits for a spare (see below).
    """
    os.close(sock.detach())
    named = dict(zip(CHILD_FDS, fds, strict=True))
    setup = ChildSetup()
    setup.stdin_null = True
    setup.stdout_fd, setup.stderr_fd = named["stdout"], named["stderr"]
    setup.report_fd, setup.channel_fd = named["report"], named["channel"]
    setup.api_hints = True
    setup.package_env, (variables, import_path, user_home), setup.scrub_failure = emptied
    setup.config_paths, package_dirs = trusted
    setup.path_env = (variables, import_path + package_dirs, user_home)
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
    if warmup_run is not None and idle():
        warmup.run_in_spare(*warmup_run)
    warmup.drop_host_exit_handlers()
    if idle():
        _rehearse(setup)
    prepared_sandbox.prepare_child(setup, base)
    # What the spare holds now outlives the request: the collections a request's
    # end runs (see shutdown.finish) then look only at what the program made.
    gc.freeze()
    if idle():
        link.send({"type": READY})  # the pool server may prime it now (see below)
    start = next_order(setup.channel_fd)
    policy = None
    if start is not None and start.get("type") == PRIME:
        # Primed: confined now to the policy the pool expects its next request to
        # have, so that such a request finds the work done. The pool server sends a
        # primed spare only a request of that very policy, and no host functions.
        policy = Policy.from_wire(start["policy"])  # type: ignore[arg-type]
        child.confine(policy, setup)
        start = next_order(setup.channel_fd)
    if start is None:
        os._exit(0)  # the pool closed an unused spare
    link.session = bool(start.get("session"))
    link.echo = start.get("echo") is True
    argv = start.get("argv")
    arguments = [str(arg) for arg in argv] if isinstance(argv, list) else []
    program = Program(str(start["kind"]), arguments)
    # sys.flags as python shows them for the command line sys.orig_argv gives a request
    # (`python NAME ARGS`, no options), not those of the pool's own interpreter (-I -S).
    program.options = frozenset()
    program.filename = str(start["filename"])
    # A script is not sent: the child reads it once confined (ChildLink.run), so the
    # request's grants decide whether it may, not the pool server's.
    program.source = b"" if program.kind == "script" else str(start.get("source", ""))
    path0 = start.get("path0")
    program.path0 = path0 if isinstance(path0, str) else None
    cwd = start.get("cwd")
    if isinstance(cwd, str):
        child.enter_directory(cwd, setup, link.session)
    if policy is not None:
        child.begin(program, policy, setup)
    functions = start.get("functions")
    link.functions = list(functions) if isinstance(functions, list) else []
    child.start(program, Policy.from_wire(start["policy"]), setup)  # type: ignore[arg-type]


def _lower_open_files(limits: "tuple[int, int]") -> None:
    """Gives a new spare its limits on open files, before anything else runs in it; one
    that cannot have them ends at once, as the zygote's own spares do (runtime/zygote.c)."""
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
    except (OSError, ValueError) as exc:
        os.write(2, f"pynox: a pool spare cannot start: {exc}\n".encode())
        os._exit(1)


def next_order(fd: int) -> "dict[str, object] | None":
    """The pool server's next frame to a spare; None once it closed the spare. A spare
    whose ready frame the server never read sees that close as a reset connection: left
    to rise, the error would unwind into the pool server's own code (the spare is its
    fork) and end there as pynox's internal error."""
    try:
        return channel.receive(fd)
    except OSError:
        return None


def _spares_may_warm_up(warmup_run: "tuple[CodeType, list[str]]") -> bool:
    """Whether a spare that ran the warm-up could still confine itself: the sandbox takes
    only a process of one thread, and code that starts threads no one stops (a BLAS
    library's workers, which a fork leaves behind and a matrix product starts again)
    would fail every request that took a warmed spare. Tried once, in a child forked as
    each spare is, since the pool server's own run cannot tell: it already had them."""
    pid = os.fork()
    if pid == 0:
        threads = 0
        try:
            warmup.run_in_spare(*warmup_run)
            threads = len(os.listdir("/proc/self/task"))
        finally:
            os._exit(min(threads, 255))
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 1


def _practise() -> None:
    """Runs, with sample data, the Python each spare runs on its way to a request.

    Each first run of a function writes to its code (CPython specializes it where it
    runs) and fills the interpreter's caches; done here, a few times, before any fork,
    every spare shares the result instead of each copying those pages for itself.
    """
    sample = {
        "type": "start",
        "kind": "request",
        "argv": ["<practice>"],
        "filename": "<practice>",
        "source": "print(1)",
        "policy": Policy().to_wire(),
        "functions": [],
        "session": False,
        "echo": True,
    }
    for _ in range(3):  # CPython specializes an instruction on its second run
        _warm_up()
        start = channel.decode(channel.encode(sample)[4:])
        sandbox.own_policy(Policy.from_wire(start["policy"]))  # type: ignore[arg-type]


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
