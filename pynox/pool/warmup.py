"""The pool's warm-up: host code that readies what the pool preloaded.

Preloading imports a package once, but a heavy package still does much of its
work on first use (its caches, its lazy imports), and a child forked from the
pool copies every page it writes to. So the code given as `[pool].warmup`
(`--warmup`, `Pool(warmup=...)`) runs twice over:

- once in the pool server after its preloads, before the zygote is forked:
  what it fills in stays shared by every child, and a failure stops the pool
  with a sentence, as a failed preload does;
- again in each spare child before its request comes (pynox.pool.zygote), so
  the pages the request will need are copied while the spare waits.

It is the host's code, as a preload is: it runs unconfined (in a spare, under
only the part of the seccomp filter the zygote installed for every spare: no
new programs, say), in a namespace of its own that no request sees, and what it
prints never reaches the protocol stream. Whatever it leaves open is closed when
the child confines itself (the sandbox keeps only the descriptors pynox names),
so a file a package keeps open for later would be closed under the request: the
pool refuses to start when the server's run leaves one, naming it, rather than
fail requests in ways that name nothing (matplotlib's fonts it drops itself, see
display.release_warmup_leftovers).
"""

import atexit
import contextlib
import gc
import os
import posix
import sys

from pynox.engine.child import without_installed_packages
from pynox.engine.scratch import is_open
from pynox.errors import PynoxError
from pynox.policy.resolve import is_locale_variable
from pynox.pool import display

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import CodeType

FILENAME = "<pool warm-up>"

# What the host's code (a preload, the warm-up) registered with atexit: the pool's own
# handlers, which no request's process runs (drop_host_exit_handlers). A handler that
# removes the host's cache directory, say, would fail in each request, or succeed.
_host_exit_handlers: "list[Callable[..., object]]" = []
# The standard library's handlers for its own state, which a request's objects use too:
# logging's flush of its handlers, weakref.finalize(atexit=True), multiprocessing's.
_STANDARD_HANDLERS = {
    ("logging", "shutdown"),
    ("weakref", "finalize._exitfunc"),
    ("multiprocessing.util", "_exit_function"),
}


def compile_warmup(code: str) -> "CodeType":
    """The warm-up's code object; a syntax error stops the pool with one sentence."""
    try:
        return compile(code, FILENAME, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise PynoxError(
            f"the pool's warm-up code does not compile{where}: {message}; fix or remove it"
        ) from None


@contextlib.contextmanager
def printing_to_stderr() -> "Iterator[None]":
    """While the host's own code runs in the pool server (a preload, the warm-up), what it
    prints goes to the pool's stderr: stdout is the protocol's, and what Python kept in
    its buffer would reach every child forked later, to be written into its output."""
    sys.stdout.flush()
    saved_stdout_fd = os.dup(1)
    saved_stdout = sys.stdout
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = saved_stdout
        _flush_standard_streams()  # to stderr, not into the protocol stream
        os.dup2(saved_stdout_fd, 1)
        os.close(saved_stdout_fd)


@contextlib.contextmanager
def importing_as_requests(package_dirs: list[str]) -> "Iterator[None]":
    """While the host's own code imports in the pool (a preload, the warm-up): sys.path as
    a request's has it (pynox.engine.child.setup_interpreter), so that a module comes from
    where a request would import it: the pool's package directories after the standard
    library, never the site-packages of the environment pynox runs in, which a request
    cannot import from (nor read: a package found there would fail in the request).

    And os.environ as a request has it without allow_env: what a module keeps of it as it
    is imported (a key, a token) every request could read from that module."""
    saved = list(sys.path)
    sys.path[:] = list(dict.fromkeys(without_installed_packages(saved) + package_dirs))
    try:
        with _environment_as_requests(), _recording_exit_handlers(), _no_temporary_directory():
            yield
    finally:
        sys.path[:] = saved


@contextlib.contextmanager
def _no_temporary_directory() -> "Iterator[None]":
    """tempfile keeps the directory it first finds (TMPDIR, else /tmp): found by the host's
    code, it would be the pool's in every request, which a request may not write, instead
    of the request's own scratch directory (its TMPDIR). Let each process find its own."""
    try:
        yield
    finally:
        if "tempfile" in sys.modules:  # never imported for this alone
            import tempfile

            tempfile.tempdir = None


@contextlib.contextmanager
def _recording_exit_handlers() -> "Iterator[None]":
    register = atexit.register

    def recording(func: "Callable[..., object]", /, *args: object, **kwargs: object) -> object:
        _host_exit_handlers.append(func)
        return register(func, *args, **kwargs)

    atexit.register = recording  # type: ignore[assignment]
    try:
        yield
    finally:
        atexit.register = register


def drop_host_exit_handlers() -> None:
    """In a spare, before its request: the exit handlers the host's code registered are
    the pool's, not the request's, but for the standard library's (_STANDARD_HANDLERS)."""
    for func in _host_exit_handlers:
        function = getattr(func, "__func__", func)
        named = (getattr(function, "__module__", None), getattr(function, "__qualname__", None))
        if named not in _STANDARD_HANDLERS:
            atexit.unregister(func)
    _host_exit_handlers.clear()


@contextlib.contextmanager
def _environment_as_requests() -> "Iterator[None]":
    """os.environ holds only the locale and time-zone variables meanwhile.

    Only Python's view (posix.environ, which os.environ reads) changes, and it keeps the
    very bytes objects it held: the zygote overwrites those once it forks
    (pynox.engine.sandbox.scrub_environment), where copies would stay in every child's
    memory. What the host's code sets or removes itself is kept.
    """
    held = dict(posix.environ)
    shown = {name: value for name, value in held.items() if is_locale_variable(os.fsdecode(name))}
    posix.environ.clear()
    posix.environ.update(shown)
    try:
        yield
    finally:
        after = dict(posix.environ)
        posix.environ.clear()
        posix.environ.update(held)
        for name in shown.keys() - after.keys():
            del posix.environ[name]
        posix.environ.update(
            {name: value for name, value in after.items() if shown.get(name) is not value}
        )


def run_in_server(code: "CodeType", package_dirs: list[str]) -> None:
    """Runs the warm-up once, as preloading does: importing as requests do (the pool's
    package directories on sys.path), printing to the pool's stderr; a failure stops the
    pool."""
    open_before = open_descriptors()
    try:
        with importing_as_requests(package_dirs), printing_to_stderr():
            exec(code, _namespace())  # noqa: S102 - the host's own code, as a preload
    except BaseException as exc:  # noqa: BLE001 - any failure is the host's to see
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise PynoxError(
            f"the pool's warm-up code failed: {describe_failure(exc)}; fix or remove it"
        ) from None
    display.release_warmup_leftovers()
    left = left_open(open_before)
    if left:
        raise PynoxError(
            f"the pool's warm-up code leaves {left} open, which each child closes"
            " before its request runs, so a request would find it closed; close it in the"
            " warm-up, or leave out the step that opens it"
        )


def run_in_spare(code: "CodeType", package_dirs: list[str]) -> None:
    """Runs the warm-up in a spare child, before any request reaches it, importing as
    requests do.

    It already ran once in the pool server, so a failure here (code that depends on
    state the spare does not have) only means the spare is less warm; the request
    runs all the same. Its output goes nowhere.
    """
    # The spare's descriptors 1 and 2 are already its request's output pipes.
    null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    saved_fds = [os.dup(1), os.dup(2)]
    saved = sys.stdout, sys.stderr
    os.dup2(null, 1)
    os.dup2(null, 2)
    sink = open(null, "w", closefd=False)  # noqa: SIM115 - closed below
    sys.stdout = sys.stderr = sink
    try:
        with importing_as_requests(package_dirs):
            exec(code, _namespace())  # noqa: S102 - the host's own code, as a preload
    except (Exception, SystemExit):  # noqa: BLE001, S110 - see the docstring
        pass
    finally:
        sys.stdout, sys.stderr = saved
        _flush_standard_streams()  # what it wrote around sys.stdout: to the null device too
        sink.close()
        for target, fd in enumerate(saved_fds, start=1):
            os.dup2(fd, target)
            os.close(fd)
        os.close(null)
    display.release_warmup_leftovers()


def _flush_standard_streams() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass  # closed by the warm-up, or its device is gone: nothing left to write


def describe_failure(exc: BaseException) -> str:
    """The repr of what the host's code raised; its type's name when that repr fails too."""
    try:
        return repr(exc)
    except Exception:  # noqa: BLE001 - the host's own __repr__, whatever it raises
        return type(exc).__name__


def left_open(before: set[int]) -> str | None:
    """The files the host's code left open since `before` (open_descriptors()), named;
    None when it left none. A child closes them before its program runs (the sandbox keeps
    only the descriptors pynox names), so a module that kept one would find it closed, or
    another file of the request's own at its number."""
    gc.collect()  # what it dropped may close its files only once collected
    left = sorted(open_descriptors() - before)
    if not left:
        return None
    named = ", ".join(_describe_descriptor(fd) for fd in left[:3])
    return named + (f" and {len(left) - 3} more" if len(left) > 3 else "")


def open_descriptors() -> set[int]:
    """The process's open descriptors, without the ones the listing itself used."""
    return {fd for fd in map(int, os.listdir("/proc/self/fd")) if is_open(fd)}


def _describe_descriptor(fd: int) -> str:
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return f"descriptor {fd}"
    return target if target.startswith("/") else f"descriptor {fd} ({target})"


def _namespace() -> dict[str, object]:
    import builtins

    return {"__name__": "__pynox_warmup__", "__builtins__": builtins}
