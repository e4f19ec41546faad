"""A pool child's run once it is confined: what no other child does.

The engine's child (pynox.engine.child) sets up and confines every child alike, then
hands a pool child here through its link (ChildLink.run). Apart from the engine's child
because every command-line run unpacks that module and this code never runs there.

A pool child reads its script itself, gives back the value of its code's last
expression, and leaves through pynox.engine.shutdown instead of CPython's full
finalization, whose teardown would dominate each request.
"""

import io
import os
import stat

from pynox._native import exec_at_top
from pynox.engine import shutdown
from pynox.engine.child import execute, remember_lines, report_exception, run_source
from pynox.errors import EXIT_CANNOT_OPEN, EXIT_SETUP_FAILURE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from pynox.engine.child_setup import ChildSetup
    from pynox.engine.program import Program
    from pynox.policy.resolve import Policy
    from pynox.pool.child_link import ChildLink


def read_script(path: str, link: "ChildLink") -> bytes:
    """A request's script, read under the request's own confinement."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        _script_unreadable(link, exc.errno or 0)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            _script_unreadable(link, 0)  # a FIFO or a device would stall or flood the run
        with io.FileIO(fd, "rb", closefd=False) as file:
            return file.readall()
    except OSError as exc:
        _script_unreadable(link, exc.errno or 0)
    finally:
        os.close(fd)


def _script_unreadable(link: "ChildLink", error: int) -> "NoReturn":
    link.script_unreadable(error)
    os._exit(EXIT_CANNOT_OPEN if error else EXIT_SETUP_FAILURE)


def run_then_finish(
    program: "Program",
    policy: "Policy",
    setup: "ChildSetup",
    link: "ChildLink",
    main: object,
    modules_before: "set[str]",
) -> "NoReturn":
    """Runs a one-shot request's program, then leaves through pynox.engine.shutdown."""
    interrupted = False
    try:
        value = None
        if link.echo:
            value = run_code(program.source, program.filename, main)  # type: ignore[arg-type]
        else:
            execute(program, main)
        link.finish_code(value)
        del value
    except SystemExit as exc:
        status = shutdown.system_exit_status(exc)
    except BaseException as exc:  # noqa: BLE001 - reported exactly as python reports it
        report_exception(exc, program, policy, setup)
        status, interrupted = 1, isinstance(exc, KeyboardInterrupt)
    else:
        status = 0
    del main  # so that the program's objects can be finalized
    shutdown.finish(status, interrupted, modules_before)


def run_code(source: str, filename: str, main: object) -> object:
    """Runs code in __main__ and returns the value of its last expression statement, as a
    notebook's cell does; None when it ends with anything else."""
    remember_lines(source, filename)
    compiled = compile_with_value(source, filename)
    if compiled is None:
        run_source(source, filename, main)  # raises python's own SyntaxError
        return None
    body, expression = compiled
    namespace = main.__dict__
    exec_at_top(body, namespace)
    return None if expression is None else exec_at_top(expression, namespace)


def compile_with_value(source: "str | bytes", filename: str) -> "tuple[Any, Any] | None":
    """The code, and apart from it its final expression statement if it ends with one.

    Compiled from one syntax tree whose nodes keep their positions, so line numbers and
    tracebacks are those of the whole code. None when it does not compile: then it is
    compiled again as a script is, which raises python's own SyntaxError.
    """
    import ast

    try:
        tree = ast.parse(source, filename)
        last = tree.body[-1] if tree.body else None
        if not isinstance(last, ast.Expr):
            return compile(tree, filename, "exec", dont_inherit=True), None
        del tree.body[-1]
        body = compile(tree, filename, "exec", dont_inherit=True)
        # `from __future__` imports of the code apply to its last expression too.
        import __future__

        flags = 0
        for feature in __future__.all_feature_names:
            flags |= body.co_flags & getattr(__future__, feature).compiler_flag
        expression = ast.Expression(last.value)
        return body, compile(expression, filename, "eval", flags=flags, dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
