"""The child: set the process up as `python` would, confine it, run it.

Never returns. For the command, the program's end (normal, an uncaught
exception, SystemExit, KeyboardInterrupt) propagates to the top of the
interpreter, so CPython itself finalizes exactly as `python` would. The pool's
children leave through pynox.engine.shutdown instead, which is much cheaper there.
"""

import _signal
import builtins
import io  # loaded by every interpreter at start-up; importing it is free
import posix
import sys
from _frozen_importlib import _call_with_frames_removed  # type: ignore[attr-defined]
from _frozen_importlib_external import MAGIC_NUMBER, SourceLoader

from pynox import PACKAGE_DIR, SIGNALS_IGNORED_AT_START, lean_os
from pynox._native import (
    call_at_top,
    compile_source,
    exec_at_top,
    flags_with,
    gate_audit,
    reserve_memory,
)
from pynox.engine.access_log import ACCESS_LOG, WATCHED_EVENTS
from pynox.engine.child_setup import PYTHON_FINISHED, REPORT_CONFINED, ChildSetup
from pynox.engine.sandbox import confine_policy, scrub_environment
from pynox.errors import EXIT_SETUP_FAILURE, SandboxError
from pynox.jsonfast import hook as json_hook  # imported with pynox, from the start-up image
from pynox.policy.system_paths import PATH_NAMING_VARIABLES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import CodeType, ModuleType, TracebackType
    from typing import Any, NoReturn

    from pynox.engine.child_setup import PackageEnv, PathEnv
    from pynox.engine.program import Program
    from pynox.policy.resolve import Policy

# Frames of pynox itself, cut from the program's tracebacks.
_PACKAGE_DIR = PACKAGE_DIR + lean_os.SEP
# CPython's own display of an exception (PyErr_Display), kept before any program runs:
# what python falls back on when a program's sys.excepthook is missing or fails
# (pynox.engine.uncaught).
PYTHON_DISPLAY = sys.__excepthook__
# An exception's traceback and context as CPython keeps them: an exception class of the
# program's may hide them behind a property that raises, which CPython never calls.
_TRACEBACK = BaseException.__dict__["__traceback__"]
_CONTEXT = BaseException.__dict__["__context__"]
# True once this process runs a program: whatever propagates from then on is
# the program's, for CPython to report, never pynox's own error.
program_started = False
# What a run under a memory limit sets aside for pynox's error report (confine): room to
# print the traceback, import the report's modules and write it. Programs that fill their
# memory to the last byte (tests/core/test_memory_limit.py) got their report with 2 MiB
# set aside, not always with 1 MiB: this is twice the former.
REPORT_RESERVE_BYTES = 4 << 20

# importlib compiles a module's source with the builtin compile(), whose first call in a
# process builds every Python AST class (compile_source says why; ~1.5 ms here). Python
# pays that once per module, then reuses the bytecode it wrote beside the source; a
# sandboxed program seldom may write there, so every run that imports a module of its
# own would pay it again. The program's imports compile with compile_source instead,
# with the flags importlib gives compile() (see start).
_importlib_source_to_code = SourceLoader.source_to_code


def _source_to_code(self: object, data: object, path: object, *, _optimize: int = -1) -> object:
    # A null byte is an error whose type differs between versions: compile() raises it,
    # called as the method it stands in for calls it, from the same line (a traceback
    # through runpy, of python -m, shows that frame once, as python's).
    compiler: Any = compile_source
    arguments: tuple[object, ...] = (data, path)
    options: dict[str, object] = {}
    if type(data) is not bytes or type(path) is not str or _optimize != -1 or b"\0" in data:
        compiler, arguments = compile, (data, path, "exec")
        options = {"dont_inherit": True, "optimize": _optimize}
    return _call_with_frames_removed(compiler, *arguments, **options)  # the last line: see below


def _named_as_importlib(code: "CodeType", original: "CodeType") -> "CodeType":
    """code as the import system's own method it stands in for, its last line on the
    line where that method calls the compiler: tracebacks leave its frame out as they
    leave importlib's (remove_importlib_frames in CPython's Python/import.c), and where
    they show it (python -m, through runpy), it reads as python's."""
    first = original.co_firstlineno
    call_line = next(line for *_, line in original.co_lines() if line and line > first)
    last_line = max(line for *_, line in code.co_lines() if line)
    named = code.replace(
        co_filename=original.co_filename,
        co_name=original.co_name,
        co_firstlineno=code.co_firstlineno + call_line - last_line,
    )
    if sys.version_info >= (3, 11):
        named = named.replace(co_qualname=original.co_qualname)
    return named


_source_to_code.__code__ = _named_as_importlib(
    _source_to_code.__code__, _importlib_source_to_code.__code__
)
_source_to_code.__name__ = "source_to_code"
_source_to_code.__qualname__ = "SourceLoader.source_to_code"
_source_to_code.__module__ = SourceLoader.__module__


def run_child(program: "Program", policy: "Policy", setup: ChildSetup) -> "NoReturn":
    """Prepares this process, confines it, runs the program and ends."""
    prepare(setup)
    start(program, policy, setup)


def prepare(setup: ChildSetup) -> None:
    """What every child does whatever its policy: the pool does this ahead of requests."""
    _reset_signals()
    try:
        if not setup.environment_emptied:
            setup.package_env, setup.path_env, setup.scrub_failure = empty_environment()
        _setup_stdio(setup)
        try:
            setup.start_cwd = posix.getcwd()
        except OSError:  # removed: python runs there all the same
            pass
        json_hook.install()  # json.dump's fast path, once the program imports json
        # Only the events it watches, from C: a Python hook would be called for every
        # event (id(), sys._getframe(), ...) and take a frame of the program's.
        gate_audit(ACCESS_LOG, WATCHED_EVENTS)
    except BaseException as exc:  # noqa: BLE001 - any failure here must fail closed
        _setup_failed(exc, setup)


def enter_directory(path: str, setup: ChildSetup, session: bool) -> None:
    """Runs the program in path (a pool request's working directory), where its hints
    then resolve relative paths too; fails closed if it is gone. session: path is the
    directory of a session's first step, where each of its processes starts, which no
    later step can change."""
    try:
        posix.chdir(path)
    except OSError as exc:
        if session:
            message = (
                f"cannot run the session's program in {path}, the directory its first step "
                f"gave it ({exc.strerror}); close the session and start a new one from a "
                "directory that exists"
            )
        else:
            message = f"cannot run the program in {path} ({exc.strerror}); run it from a "
            message += "directory that exists"
        _setup_failed(SandboxError(message), setup)
    setup.start_cwd = path


def empty_environment() -> "tuple[PackageEnv, PathEnv, SandboxError | None]":
    """Empties the environment, in posix.environ, libc and memory (scrub_environment).

    Returns where the caller's python finds packages, read first (the user base,
    PYTHONPATH and VIRTUAL_ENV: see pynox.engine.report._module_hint), what names paths
    no write grant may reach (PathEnv: see pynox.engine.hints._where_writable), and why
    emptying failed, if it did: raised once confinement is tried, since where the kernel
    cannot sandbox at all (an emulator, say) that is the reason to give.
    """
    package_env = (
        lean_os.getenv("PYTHONUSERBASE") or _home_local(),
        lean_os.getenv("PYTHONPATH"),
        lean_os.getenv("VIRTUAL_ENV"),
    )
    # Strings only: the paths are looked at once a hint needs them, not on every start.
    named = {name: lean_os.getenv(name) for name in PATH_NAMING_VARIABLES}
    from pynox.policy.user_paths import home_in_passwd_file  # the sandbox hides the file

    path_env = (
        {name: value for name, value in named.items() if value},
        list(sys.path),
        home_in_passwd_file(),
    )
    try:
        scrub_environment()
    except SandboxError as exc:
        return package_env, path_env, exc
    return package_env, path_env, None


def _home_local() -> str | None:
    home = lean_os.getenv("HOME")
    return home + "/.local" if home else None


def start(program: "Program", policy: "Policy", setup: ChildSetup) -> "NoReturn":
    """Applies the run's policy and runs the program; never returns."""
    confine(policy, setup)
    begin(program, policy, setup)


def confine(policy: "Policy", setup: ChildSetup) -> None:
    """Applies the run's policy: from here on nothing can widen this process's access.

    A pool's primed spare does this before its program is known (see begin).
    """
    global program_started
    program_started = True
    try:
        for name, value in policy.environment.items():
            lean_os.setenv(name, value)
        SourceLoader.source_to_code = _source_to_code  # type: ignore[method-assign, assignment]
        if policy.memory is not None:
            # A program that used up its memory would leave none to import the error
            # report with, which would then end in pynox's own traceback: this much of
            # its limit is set aside until the program's code returns (exec_at_top).
            reserve_memory(REPORT_RESERVE_BYTES)
        if not setup.no_site and not hasattr(builtins, "exit"):
            install_site_builtins()  # an import: while pynox's sys.path alone is there
        if setup.pool_link is not None:
            setup.pool_link.before_confinement()
        if isinstance(setup.prepared, SandboxError):
            raise setup.prepared
        if setup.prepared is not None:
            setup.prepared.finish(policy)
        else:
            confine_policy(
                policy,
                setup.system_reads,
                setup.kept_fds(),
                setup.parent_pid,
                setup.new_session,
                setup.own_group,
            )
        if setup.scrub_failure is not None:
            raise setup.scrub_failure
        if setup.report_fd is not None:
            posix.write(setup.report_fd, REPORT_CONFINED)
        for fd in (setup.report_fd, setup.end_fd):
            if fd is not None:
                setup.own_pipes[fd] = fd_identity(fd)
        _hold_report_reserve(setup)
    except BaseException as exc:  # noqa: BLE001 - any failure here must fail closed
        _setup_failed(exc, setup)


def _hold_report_reserve(setup: ChildSetup) -> None:
    """Holds a descriptor (of /dev/null, out of the program's way) for the error report,
    as REPORT_RESERVE_BYTES holds memory: the report imports its modules, which needs a
    free descriptor, after a program that failed for want of one."""
    from pynox.engine.scratch import out_of_the_way  # loaded with pynox's start

    try:
        fd = out_of_the_way(posix.open("/dev/null", posix.O_RDONLY | posix.O_CLOEXEC))
        setup.own_pipes[fd] = fd_identity(fd)
    except OSError:
        return  # none free: the report goes without, as before
    setup.report_reserve = fd


def _let_go_of_report_reserve(setup: ChildSetup) -> None:
    fd = setup.report_reserve
    if fd is not None:
        setup.report_reserve = None
        if still_own_pipe(setup, fd):  # the program may have closed it, and reused its number
            posix.close(fd)


def begin(program: "Program", policy: "Policy", setup: ChildSetup) -> "NoReturn":
    """Runs the program in this confined process (confine); never returns."""
    try:
        main_module, program_path = setup_interpreter(program, policy, setup)
        # Only now may imports look where the program's files are: nothing that
        # pynox imported before confinement came from a directory the program controls.
        sys.path[:] = program_path
        if setup.end_fd is not None or (setup.pool_link is not None and policy.memory is not None):
            _finish_python_on_exit_calls(setup)
    except BaseException as exc:  # noqa: BLE001 - any failure here must fail closed
        _setup_failed(exc, setup)
    if setup.pool_link is not None:
        # The pool child finalizes __main__ itself (pynox.engine.shutdown), which only
        # works as in CPython when no frame of ours still holds it.
        del main_module
        setup.pool_link.run(program, policy, setup)
    try:
        execute(program, main_module)
    except SystemExit as exc:
        _python_finished(setup)
        missing = _missing_main_module(exc, program)
        if missing is not None:
            try:
                _show_exit_message_unflushed(exc)  # raises
            finally:
                _report_missing_module(missing, program, policy, setup)
        if program.kind not in FLUSHED_AT_END:
            _show_exit_message_unflushed(exc)  # raises
        raise  # CPython prints its message, finalizes and sets the exit status
    except BaseException as exc:  # noqa: BLE001 - reported exactly as python reports it
        _python_finished(setup)
        if program.kind in FLUSHED_AT_END:
            flush_at_end()
        report_exception(exc, program, policy, setup)
        # CPython takes it from here: status 1, or death by SIGINT for
        # KeyboardInterrupt, after a normal finalization. It is printed already.
        shown = _TRACEBACK.__get__(exc)
        sys.excepthook = _silent_for(exc, shown, getattr(sys, "excepthook", None))
        raise
    _python_finished(setup)
    raise SystemExit(0)


# What python runs as a file (a script, compiled or not, or standard input): it flushes
# sys.stderr, then sys.stdout, as the program ends, before it prints the exception that
# ended it (flush_io in CPython's Python/pythonrun.c), so that output the program buffered comes
# before its traceback where both streams go to one place. -c, -m and a directory or zip
# application do not: their traceback comes first. A SystemExit leaves pynox's start-up
# file, which CPython flushes the same way for every kind.
FLUSHED_AT_END = frozenset({"script", "stdin"})


def flush_at_end() -> None:
    for name in ("stderr", "stdout"):
        try:
            getattr(sys, name).flush()
        except BaseException:  # noqa: BLE001, S110 - python ignores any failure here
            pass


def _show_exit_message_unflushed(exc: SystemExit) -> "NoReturn":
    """Ends a program of a kind python does not flush for (see FLUSHED_AT_END)
    with SystemExit's message, shown as python shows it (_Py_HandleSystemExit in
    CPython's Python/pythonrun.c) before the output the program buffered: pynox's start-up
    file would have it flushed first."""
    try:
        code: object = exc.code
    except BaseException:  # noqa: BLE001 - python shows the exception itself then
        code = exc
    if code is None or isinstance(code, int):
        raise exc  # no message: CPython reads the status
    try:
        text = str(code)
    except BaseException:  # noqa: BLE001 - no message to show: CPython has its own ways
        raise exc from None
    stderr = getattr(sys, "stderr", None)
    try:
        if stderr is not None:
            stderr.write(text)
        else:
            posix.write(2, text.encode())
    except BaseException:  # noqa: BLE001, S110 - python ignores any failure here
        pass
    try:
        stderr.write("\n")  # type: ignore[union-attr]
    except BaseException:  # noqa: BLE001 - python writes the line's end to fd 2 then
        try:
            posix.write(2, b"\n")
        except OSError:
            pass
    raise SystemExit(1) from None


def _python_finished(setup: ChildSetup) -> None:
    if setup.end_fd is not None and still_own_pipe(setup, setup.end_fd):
        posix.write(setup.end_fd, PYTHON_FINISHED)


def _finish_python_on_exit_calls(setup: ChildSetup) -> None:
    """Makes os._exit (posix._exit) say, before it ends the process, that Python saw the
    program to its end: the program ended itself, native code did not end it behind
    Python's back, and the supervisor gives no hint for a memory limit."""
    exit_now = posix._exit

    def _exit(status: int, /) -> "NoReturn":
        # Else python's own error, and the program goes on.
        if isinstance(status, int) and -(2**31) <= status < 2**31:
            _python_finished(setup)
            from pynox.engine import shutdown

            if shutdown.exit_announcer is not None:  # a pool child: told on its channel
                shutdown.exit_announcer(status & 0xFF, False)
        exit_now(status)

    _exit.__module__, _exit.__doc__ = exit_now.__module__, exit_now.__doc__
    posix._exit = _exit  # type: ignore[assignment]
    os = sys.modules.get("os")
    if os is not None and getattr(os, "_exit", None) is exit_now:
        os._exit = _exit  # type: ignore[attr-defined]


def fd_identity(fd: int) -> tuple[int, int]:
    """What fd is open on (device, inode): which pipe, socket or file."""
    status = posix.fstat(fd)
    return status.st_dev, status.st_ino


def still_own_pipe(setup: ChildSetup, fd: int) -> bool:
    """Whether fd is still the pipe pynox gave this child, not a file the program
    opened under its number after closing it: pynox writes only into its own."""
    try:
        return fd_identity(fd) == setup.own_pipes.get(fd)
    except OSError:
        return False


def _silent_for(
    reported: "BaseException | None", shown: "TracebackType | None", hook: "Any"
) -> "Any":
    """An excepthook that stays quiet for the one exception already reported, with the
    traceback it was shown with (shown).

    CPython kept that exception, before it calls the hook, as it left pynox's frames: in
    sys.last_traceback and its __traceback__ (sys.last_exc is the exception). They get
    back the traceback python would leave there, which the program's atexit handlers
    (traceback.print_last, pdb.pm) read. A function, not a class: creating a class
    costs a run more than the whole hook."""

    def excepthook(kind: type, value: BaseException, tb: "TracebackType | None") -> None:
        nonlocal reported, shown
        if reported is None or value is not reported:
            (PYTHON_DISPLAY if hook is None else hook)(kind, value, tb)
            return
        _TRACEBACK.__set__(value, shown)
        sys.last_traceback = shown
        # Let go of them: sys.excepthook lives until the very end of finalization, after
        # the modules are emptied, and so would every object the traceback's frames hold,
        # whose __del__ would then find the globals it uses gone. CPython drops sys.last_*
        # first, while the modules are still whole.
        reported = shown = None

    return excepthook


def _reset_signals() -> None:
    # The supervisor forwards these signals to its child, and waits for its own children
    # with SIGCHLD's default action: the program's process finds them all as python would.
    for signum, handler in _STARTING_HANDLERS.items():
        _signal.signal(signum, handler)


def _starting_handlers() -> "dict[int, Any]":
    """What python gives each of these signals at its start: Ctrl-C raises
    KeyboardInterrupt, the rest have their default action, except that python leaves a
    signal its caller ignored ignored (pynox.SIGNALS_IGNORED_AT_START)."""
    handlers: dict[int, Any] = {_signal.SIGINT: _signal.default_int_handler}
    for signum in (_signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT, _signal.SIGCHLD):
        handlers[signum] = _signal.SIG_DFL
    for signum in handlers.keys() & SIGNALS_IGNORED_AT_START:
        handlers[signum] = _signal.SIG_IGN
    return handlers


_STARTING_HANDLERS = _starting_handlers()


def _setup_failed(exc: BaseException, setup: ChildSetup) -> "NoReturn":
    if isinstance(exc, KeyboardInterrupt):
        # Ctrl-C before the program ran: nothing failed, and nothing runs (as pynox.cli.main
        # ends such a run), rather than a sandbox error to report.
        from pynox.interrupted import die_interrupted

        die_interrupted()
    message = getattr(exc, "message", None) or f"cannot set up the sandbox: {exc!r}"
    try:
        posix.write(2, f"pynox: {message}\n".encode(errors="replace"))
        if setup.report_fd is not None:
            _write_report(
                setup.report_fd,
                {
                    "type": "SandboxError",
                    "message": message,
                    "file": None,
                    "line": None,
                    "path": None,
                    "hint": None,
                },
            )
    finally:
        posix._exit(EXIT_SETUP_FAILURE)


_STANDARD_NAMES = ("stdin", "stdout", "stderr")


def _setup_stdio(setup: ChildSetup) -> None:
    moves = [
        (fd, target)
        for fd, target in ((setup.stdout_fd, 1), (setup.stderr_fd, 2))
        if fd is not None
    ]
    if setup.stdin_null:
        moves.append((posix.open(lean_os.DEVNULL, posix.O_RDONLY), 0))
    if any(fd < 3 for fd, _ in moves):
        # A caller that closed a standard descriptor left it free, and a pipe or
        # /dev/null took it: each moves out of the way before any is put in place.
        moves = [(_above_standard(fd), target) for fd, target in moves]
    for fd, target in moves:
        posix.dup2(fd, target)
        posix.close(fd)
        # The stream made for what the descriptor was (the caller's file or terminal, the
        # null device), if any, keeps what it found then: whether it can seek, which
        # tell() and reconfigure(encoding=...) go by, and a pipe cannot. Made anew for
        # what it is now; the old one stays open for whoever kept it (a logging handler
        # of a preloaded module), as python would have it.
        name = _STANDARD_NAMES[target]
        _ABANDONED_STREAMS.extend((getattr(sys, name), getattr(sys, f"__{name}__")))
        _open_standard_stream(target)
    if setup.unbuffered:
        _make_unbuffered()


def _above_standard(fd: int) -> int:
    if fd >= 3:
        return fd
    import fcntl  # only when a caller closed a standard descriptor

    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    posix.close(fd)
    return moved


def _open_standard_stream(fd: int) -> None:
    """sys.stdin, stdout or stderr on fd, as python makes one for a pipe: the encoding
    and errors of the standard streams it made (stderr's errors backslashreplace)."""
    name = _STANDARD_NAMES[fd]
    mode = "r" if fd == 0 else "w"
    raw = io.FileIO(fd, mode + "b", closefd=False)
    raw.name = f"<{name}>"
    buffer = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
    made = [stream for stream in (sys.stdout, sys.stdin) if isinstance(stream, io.TextIOWrapper)]
    encoding = made[0].encoding if made else sys.getfilesystemencoding()
    errors = made[0].errors if made else sys.getfilesystemencodeerrors()
    stream = io.TextIOWrapper(
        buffer,
        encoding=encoding,
        errors="backslashreplace" if fd == 2 else errors,
        newline="\n",  # as python's: no "\r\n" read as "\n"
        line_buffering=fd == 2,  # python's stderr is line-buffered, even into a pipe
    )
    stream.mode = mode  # type: ignore[misc]
    setattr(sys, name, stream)
    setattr(sys, f"__{name}__", stream)


# Standard streams replaced in a process forked while another thread may have held their
# locks: never finalized, since closing one would flush it, which waits for that lock.
_ABANDONED_STREAMS: "list[object]" = []


def reopen_standard_output() -> None:
    """sys.stdout and sys.stderr made anew on descriptors 1 and 2, for a process forked
    from one whose other threads (what the host's preloaded code or warm-up left running)
    may have been writing: a thread that held a stream's lock at the fork leaves it held
    for good in the child, whose first write or flush would then wait forever."""
    for fd in (1, 2):
        name = _STANDARD_NAMES[fd]
        _ABANDONED_STREAMS.extend((getattr(sys, name), getattr(sys, f"__{name}__")))
        _open_standard_stream(fd)


def _make_unbuffered() -> None:
    """Standard streams as `python -u` makes them: text written straight through."""
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        old = getattr(sys, name)
        if old is None:
            continue
        if mode == "w":
            old.flush()
        raw = io.FileIO(fd, mode + "b", closefd=False)
        raw.name = f"<{name}>"
        buffer = io.BufferedReader(raw) if mode == "r" else raw
        stream = io.TextIOWrapper(
            buffer,
            encoding=old.encoding,
            errors=old.errors,
            newline="\n",
            line_buffering=False,
            write_through=True,
        )
        stream.mode = mode  # type: ignore[misc]
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def without_installed_packages(path: "list[str]") -> "list[str]":
    """sys.path without the site-packages of the environment pynox runs in: a run imports
    installed packages from its package_dirs only, which come after the rest."""
    return [p for p in path if lean_os.basename(p) not in ("site-packages", "dist-packages")]


def setup_interpreter(
    program: "Program", policy: "Policy", setup: ChildSetup
) -> "tuple[object, list[str]]":
    """__main__, argv and site's builtins as python sets them up, and the sys.path to use
    once the process is confined."""
    sys.argv = list(program.argv)
    if setup.dont_write_bytecode:
        sys.dont_write_bytecode = True  # what python -B sets
    # Never the command line of pynox's own process (a pool's names its flags and files):
    # code sent to a pool, which has none, gets python's for a script of its sys.argv.
    command_line = program.argv if program.command_line is None else program.command_line
    sys.orig_argv = [sys.executable, *command_line]
    if program.options is not None:
        _set_flags(program.options)
    kept = without_installed_packages(sys.path)
    for dropped in set(sys.path) - set(kept):
        sys.path_importer_cache.pop(dropped, None)
    prefix = [] if program.path0 is None else [program.path0]
    new_path = prefix + kept + policy.package_dirs

    main = type(sys)("__main__")  # types.ModuleType, without importing types
    main.__dict__["__annotations__"] = {}
    main.__dict__["__builtins__"] = builtins
    if program.kind == "script":
        # importlib.machinery's classes, without the cost of importing importlib.
        from _frozen_importlib_external import SourceFileLoader, SourcelessFileLoader

        main.__dict__["__file__"] = program.filename
        main.__dict__["__cached__"] = None
        loader = SourcelessFileLoader if is_compiled(program) else SourceFileLoader
        main.__loader__ = loader("__main__", program.filename)
    elif program.kind in ("code", "stdin", "request"):
        from _frozen_importlib import BuiltinImporter

        main.__loader__ = BuiltinImporter  # what python -c and python - give __main__
        if program.kind == "stdin":  # python names the file it runs, even <stdin>
            main.__dict__["__file__"] = program.filename
            main.__dict__["__cached__"] = None
    sys.modules["__main__"] = main
    return main, new_path


# The fields of sys.flags that pynox's own interpreter (started -I -S) sets, and the
# options that set each under python. Not no_site, which stays 1: site's module has not
# run, and a program that imports it would have it run its main() (site.py reads the
# flag as it is imported), which reads files outside the sandbox.
_FLAG_OPTIONS = {
    "isolated": "I",
    "ignore_environment": "EI",
    "no_user_site": "sI",
    "safe_path": "IP",
    "dont_write_bytecode": "B",
    "quiet": "q",
}


def _set_flags(options: "frozenset[str]") -> None:
    """sys.flags as python shows them with these options."""
    fields = {name: int(not options.isdisjoint(letters)) for name, letters in _FLAG_OPTIONS.items()}
    fields["safe_path"] = bool(fields["safe_path"])  # a bool, where the others are ints
    names = type(sys.flags).__match_args__  # every field, in order (3.11 added safe_path)
    sys.flags = flags_with(tuple(fields.get(name, getattr(sys.flags, name)) for name in names))


def install_site_builtins() -> None:
    # The supervisor may skip `site`; a program still gets what site provides.
    import _sitebuiltins

    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")
    builtins.copyright = _SitePrinter("copyright")  # type: ignore[assignment]
    builtins.credits = _SitePrinter("credits")  # type: ignore[assignment]
    builtins.license = _SitePrinter("license")  # type: ignore[assignment]
    builtins.help = _sitebuiltins._Helper()


class _SitePrinter:
    """`copyright`, `credits` or `license` as this CPython's own `site` words it (its text
    changes between releases): site.setcopyright() makes all three on first use, and puts
    them in builtins. Importing site for every run would cost about 0.2 ms of its start,
    and making even `copyright` here imports os (_sitebuiltins._Printer does), 2.7 ms."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _printer(self) -> "Any":
        site: Any = sys.modules.get("site")
        if not hasattr(site, "setcopyright"):
            site = _stdlib_site()
        site.setcopyright()
        return getattr(builtins, self._name)

    def __repr__(self) -> str:
        return repr(self._printer())

    # A property, not a method: calling the stand-in calls the real printer with no frame
    # of pynox's on the stack, so a traceback from it (EOFError at its "Hit Return" prompt
    # with no input) is python's, line for line.
    @property
    def __call__(self) -> "Any":
        return self._printer()


def _stdlib_site() -> "Any":
    """The standard library's `site`, run as `python -S` imports it (without its main()),
    from its own file: the program's directory, first on sys.path by now, may hold
    another site.py."""
    from _frozen_importlib import module_from_spec
    from _frozen_importlib_external import spec_from_file_location

    spec = spec_from_file_location("site", lean_os.join(lean_os.stdlib_dir(), "site.py"))
    site = module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(site)  # type: ignore[union-attr]
    sys.modules.setdefault("site", site)
    return site


def execute(program: "Program", main: object) -> None:
    """Runs the program in __main__."""
    if program.kind in ("module", "main_dir"):
        runpy = _runpy()
        # As `python -m` does, from C: runpy's frames are the bottom of the stack.
        run_as_main = runpy._run_module_as_main
        if program.kind == "module":
            call_at_top(run_as_main, program.module)
        else:
            call_at_top(run_as_main, "__main__", False)
        return
    if is_compiled(program):
        from pynox.engine.source_file import compiled_code

        exec_at_top(compiled_code(program.source), main.__dict__)  # type: ignore[arg-type]
        return
    # python -c keeps its code in linecache from 3.13 on, once compiled: tracebacks and
    # warnings show its lines, the compiler's own SyntaxWarnings do not.
    remember = program.kind == "code" and sys.version_info >= (3, 13)
    run_source(program.source, program.filename, main, program.seekable, remember)


def _runpy() -> "ModuleType":
    """runpy, which python -m runs a module with. It binds `os` as it is imported, and
    uses it only in run_path: `os` stays unimported until then, or until the program
    imports it, as for a script (about 2 ms, which python pays in site)."""
    # runpy's imports before `os`, loaded as they are (3.11's importlib.util imports os).
    import importlib.machinery  # noqa: F401
    import importlib.util  # noqa: F401

    return lean_os.import_deferring_os("runpy")


def is_compiled(program: "Program") -> bool:
    """Whether python runs the script as bytecode (a .pyc file): by its name, or by the
    first two bytes of this CPython's magic number (maybe_pyc_file in Python/pythonrun.c)."""
    return program.kind == "script" and (
        program.filename.endswith(".pyc") or program.source[:2] == MAGIC_NUMBER[:2]
    )


def remember_lines(text: str, filename: str, as_file: bool = False) -> None:
    """Keeps code that has no file in linecache, so that tracebacks show its lines: split
    as python -c splits its code (str.splitlines), or, as_file, as python reads a file's
    lines, at "\n", "\r\n" and "\r" alone (pool code, which runs as a file of its name).
    str.splitlines also ends a line at a form feed or U+2028, where the compiler does not,
    and every line after one would be shown off by one."""
    import linecache

    if as_file:
        lines = io.StringIO(text, newline=None).readlines()
        # As linecache ends a file's last line: 3.11's and 3.12's traceback place their
        # carets one column right on a line that has no line end.
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
    else:
        lines = text.splitlines(True)
    linecache.cache[filename] = (len(text), None, lines, filename)


def file_reader_may_refuse(source: "str | bytes") -> bool:
    """Whether python's reading of the file source came from might refuse it before
    parsing it (pynox.engine.source_file): bytes with a NUL, with "coding" in their
    first two lines, or not UTF-8. Cheap, and never wrong the other way."""
    if not isinstance(source, bytes):
        return False
    if b"\0" in source:
        return True
    first = source.find(b"\n")
    second = source.find(b"\n", first + 1) if first >= 0 else -1
    if source.find(b"coding", 0, second if second >= 0 else len(source)) >= 0:
        return True  # a line that may declare an encoding
    if source.isascii():
        return False
    try:
        source.decode()  # what every CPython's reader takes for UTF-8, at least
    except UnicodeDecodeError:
        return True
    return False


def run_source(
    source: "str | bytes",
    filename: str,
    main: object,
    seekable: bool = True,
    remember: bool = False,
) -> None:
    """Compiles and runs source in __main__, as python runs a script: bytes as read from
    a file (seekable, unless from a pipe). remember: keep source, text (-c), in linecache
    once it compiled (see execute)."""
    if isinstance(source, str):
        code = compile_source(source.encode("utf-8", "surrogatepass"), filename, True)
        if remember:
            remember_lines(f"{source}\n", filename)
    else:
        if file_reader_may_refuse(source):
            from pynox.engine.source_file import refusal

            refused = refusal(source, filename, seekable)
            if refused is not None:
                raise refused
        code = compile_source(source, filename)
    exec_at_top(code, main.__dict__)


def report_exception(
    exc: BaseException, program: "Program", policy: "Policy", setup: ChildSetup
) -> "dict[str, object] | None":
    """Prints an exception as python would, then pynox's hint; returns the error, or
    None when the program left nothing to describe it with (it broke imports)."""
    last_event = ACCESS_LOG.last  # before printing, which opens source files itself
    # The program may have lowered the recursion limit below what reporting needs.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 1000))
    try:
        tb = _print_as_python(exc, program)  # as python would, with what the program left
        _let_go_of_report_reserve(setup)
        try:
            from pynox.engine.report import describe_and_hint
        except Exception:  # noqa: BLE001 - python's report alone, as python gives
            return None
        lent = _lend_code_lines(program)
        try:
            error = describe_and_hint(exc, tb, last_event, program, policy, setup)
        except BaseException:  # noqa: BLE001 - the program's exception would not be read
            # Reading it runs the program's code (a property, __str__), which may raise
            # anything, KeyboardInterrupt and SystemExit too: python shows no more then.
            return None
        finally:
            if lent is not None:
                import linecache

                linecache.cache.pop(lent, None)
        if setup.report_fd is not None and still_own_pipe(setup, setup.report_fd):
            _write_report(setup.report_fd, error)
            setup.report_fd = None
        return error
    finally:
        sys.setrecursionlimit(limit)
        if setup.report_reserve is None:
            _hold_report_reserve(setup)  # a session's next step may fail the same way


def _missing_main_module(exc: SystemExit, program: "Program") -> "ModuleNotFoundError | None":
    """The module `-m` could not find (or the package above it that could not be
    imported), when runpy ended with its "python: No module named pip": a
    ModuleNotFoundError, so that the run's error and hint are those of an import."""
    runpy = sys.modules.get("runpy")
    error = exc.__context__  # runpy's _Error, which it turned into SystemExit
    if program.kind != "module" or runpy is None or error is None:
        return None
    if type(error) is not runpy._Error:
        return None
    cause = error.__cause__
    if isinstance(cause, ModuleNotFoundError):  # -m pkg.tool, where pkg is missing
        return cause
    message = str(error)
    if message != f"No module named {program.module}":
        return None  # found, but it could not run (a package without __main__, say)
    return ModuleNotFoundError(message, name=program.module)


def _report_missing_module(
    missing: ModuleNotFoundError, program: "Program", policy: "Policy", setup: ChildSetup
) -> None:
    """Prints the hint after runpy's line, and reports the error, as for an import that
    failed in the program (report_exception, without a traceback: python shows none)."""
    _let_go_of_report_reserve(setup)
    try:
        from pynox.engine.report import describe_and_hint

        error = describe_and_hint(missing, None, None, program, policy, setup)
    except BaseException:  # noqa: BLE001 - runpy's line alone, as python gives
        return
    if setup.report_fd is not None and still_own_pipe(setup, setup.report_fd):
        _write_report(setup.report_fd, error)
        setup.report_fd = None


def _lend_code_lines(program: "Program") -> "str | None":
    """The name under which -c code's lines were put in linecache for its hint, if they were
    not there: python keeps them only from 3.13 on, so its tracebacks before that (printed
    already) show none, but a hint told by the failing call's source (memfd_create, chroot,
    the scheduling calls) needs them."""
    import linecache

    if program.kind != "code" or not isinstance(program.source, str):
        return None
    if program.filename in linecache.cache:
        return None
    remember_lines(f"{program.source}\n", program.filename)
    return program.filename


def _print_as_python(exc: BaseException, program: "Program") -> "TracebackType | None":
    """Prints the exception as python would, without pynox's frames; returns its
    traceback so cut. Here, not imported when a program raised: it may have broken
    imports."""
    tb = _user_traceback(_TRACEBACK.__get__(exc))
    _TRACEBACK.__set__(exc, tb)
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = exc  # as python sets it too, where pdb.pm() finds it
    if program.kind == "request" and getattr(sys, "excepthook", None) is PYTHON_DISPLAY:
        # CPython's own hook reads source lines from files; pool code has none,
        # but its lines are in linecache, which the traceback module reads.
        if getattr(sys, "stderr", False) is None:
            return tb  # python's display shows nothing then (traceback's would print)
        if tb is None and isinstance(exc, SyntaxError) and _CONTEXT.__get__(exc) is None:
            # The code's own SyntaxError reads no file: python's display shows it as python
            # does, a tab-indented line too, which traceback's keeps its tab in before 3.13.
            PYTHON_DISPLAY(type(exc), exc, tb)
            return tb
        import traceback

        try:
            lines = traceback.format_exception(type(exc), exc, tb)
            if sys.version_info < (3, 12) and isinstance(exc, (NameError, AttributeError)):
                _suggest_as_python(exc, tb, lines, traceback.format_exception_only)
            for line in lines:
                print(line, file=sys.stderr, end="")
        except Exception:  # noqa: BLE001 - then as python's own display shows it
            PYTHON_DISPLAY(type(exc), exc, tb)
        return tb
    # As python hands it over (_PyErr_PrintEx): a SystemExit from the hook goes on, and
    # python exits with it; pynox.engine.uncaught shows a missing or failing hook.
    try:
        hook = sys.excepthook
    except AttributeError:
        _hook_trouble("missing_hook", type(exc), exc, tb)
        return tb
    try:
        hook(type(exc), exc, tb)
    except SystemExit:
        raise
    except BaseException as failure:  # noqa: BLE001 - shown, then the exception it had
        failure_tb = _user_traceback(_TRACEBACK.__get__(failure))
        _TRACEBACK.__set__(failure, failure_tb)
        _hook_trouble("failed_hook", type(exc), exc, tb, failure, failure_tb)
    return tb


def _suggest_as_python(
    exc: BaseException, tb: "TracebackType | None", lines: list[str], format_only: "Any"
) -> None:
    """Gives the error's line in lines python's suggestion ("Did you mean: 'print'?"),
    which before 3.12 only python's own display makes, not traceback's. Read from that
    display's line for the error, as IDLE reads it (get_message_lines in its run.py);
    the rest of what it prints is left out, its source lines read from files."""
    plain = format_only(type(exc), exc)[0]
    shown = io.StringIO()
    stderr = sys.stderr
    sys.stderr = shown
    try:
        PYTHON_DISPLAY(type(exc), exc, tb)
    finally:
        sys.stderr = stderr
    suggested = [line for line in shown.getvalue().splitlines(True) if line.startswith(plain[:-1])]
    if suggested and suggested[-1] != plain and plain in lines:
        lines[len(lines) - 1 - lines[::-1].index(plain)] = suggested[-1]


def _hook_trouble(what: str, *args: object) -> None:
    try:
        from pynox.engine import uncaught
    except Exception:  # noqa: BLE001 - the program broke imports: python's display alone
        PYTHON_DISPLAY(*args[:3])  # type: ignore[arg-type]
        return
    getattr(uncaught, what)(PYTHON_DISPLAY, *args)


def _is_ours(tb: "TracebackType") -> bool:
    return tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR)


def _user_traceback(tb: "TracebackType | None") -> "TracebackType | None":
    """The traceback without pynox's own frames, as python would show it.

    Ours lead to the program's frames, and where a program calls into pynox
    (pynox_host), they end it: the program's own last line is where it failed.
    """
    while tb is not None and _is_ours(tb):
        tb = tb.tb_next
    last_user = tb
    walker = tb
    while walker is not None:
        if not _is_ours(walker):
            last_user = walker
        walker = walker.tb_next
    if last_user is not None and last_user.tb_next is not None:
        rest: TracebackType | None = last_user.tb_next
        while rest is not None and _is_ours(rest):
            rest = rest.tb_next
        if rest is None:
            last_user.tb_next = None
    return tb


def _write_report(fd: int, error: dict[str, object]) -> None:
    # json.dumps's text, without importing json (and re) into a run that failed: pynox's
    # writer comes with the result's modules, which a run with a report has loaded.
    from pynox.readable_json import dumps_readable

    data = dumps_readable(error).encode()
    while data:
        written = posix.write(fd, data)
        data = data[written:]
    posix.close(fd)
