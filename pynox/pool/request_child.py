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
import re
import stat
import sys

# Loaded once in the zygote: pool code has no file, and the compiler's warnings
# (SyntaxWarning) find their line in linecache only through this module. Without it
# (3.10, whose re does not import it), CPython shows them from the file itself: no line.
import warnings  # noqa: F401
from ast import PyCF_ONLY_AST as _ONLY_AST

from pynox._native import compile_source, exec_at_top
from pynox.engine import (
    shutdown,
    source_file,  # noqa: F401 - loaded once in the zygote, for scripts
)
from pynox.engine.child import (
    FLUSHED_AT_END,
    execute,
    flush_at_end,
    remember_lines,
    report_exception,
    run_source,
)
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
    modules_before: "set[str]",
) -> "NoReturn":
    """Runs a one-shot request's program in __main__, then leaves through
    pynox.engine.shutdown."""
    main = sys.modules["__main__"]  # held by this frame alone, and let go of at the end
    interrupted = False
    try:
        value = None
        if link.echo:
            value = run_code(program.source, program.filename, main)  # type: ignore[arg-type]
        else:
            try:
                execute(program, main)
            finally:
                if program.kind in FLUSHED_AT_END:  # a script, as python runs a file
                    flush_at_end()
        link.finish_code(value)
        del value
    except SystemExit as exc:
        status = shutdown.system_exit_status(exc)
        link.send_open_figures()
    except BaseException as exc:  # noqa: BLE001 - reported exactly as python reports it
        try:
            report_exception(exc, program, policy, setup)
            status, interrupted = 1, isinstance(exc, KeyboardInterrupt)
        except SystemExit as hook_exit:  # from the program's sys.excepthook: python exits so
            status = shutdown.system_exit_status(hook_exit)
        if not interrupted:  # cancelled: no time to draw
            link.send_open_figures()
    else:
        status = 0
    del main  # so that the program's objects can be finalized
    shutdown.finish(status, interrupted, modules_before)


class FutureFeatures:
    """The `from __future__` features a session's steps imported so far: python's REPL
    compiles each input under those of the inputs before it, as a notebook does."""

    __slots__ = ("flags",)

    def __init__(self) -> None:
        self.flags = 0


def run_code(
    source: str, filename: str, main: object, future: "FutureFeatures | None" = None
) -> object:
    """Runs code in __main__ and returns the value of its last expression statement, as a
    notebook's cell does; None when it ends with anything else. future: a session's, which
    the code compiles under and adds its own to."""
    remember_lines(source, filename, as_file=True)
    inherited = 0 if future is None else future.flags
    compiled = compile_with_value(source, filename, inherited)
    if compiled is None:
        try:
            if inherited:  # its error may be one of those features' (barry_as_FLUFL's !=)
                compile(source, filename, "exec", inherited, dont_inherit=True)
            run_source(source, filename, main)  # raises python's own SyntaxError
        except SyntaxError as error:
            _show_its_line(error, source, filename)
            raise
        return None
    body, expression = compiled
    if future is not None:  # once compiled, as the REPL keeps them, whether it runs or not
        future.flags |= (expression if body is None else body).co_flags & _FUTURE_FLAGS
    namespace = main.__dict__
    if body is not None:
        exec_at_top(body, namespace)
    return None if expression is None else exec_at_top(expression, namespace)


def _show_its_line(error: SyntaxError, source: str, filename: str) -> None:
    """An error python's compiler finds once the code parsed ('return' outside function)
    carries the line python reads from the file, to show under it; code that has no file
    gets it from its source, split as python reads a file."""
    if error.text is not None or error.filename != filename or not error.lineno:
        return
    lines = io.StringIO(source, newline=None).readlines()
    if error.lineno <= len(lines):
        error.text = lines[error.lineno - 1]


def compile_with_value(
    source: "str | bytes", filename: str, inherited: int = 0
) -> "tuple[Any, Any] | None":
    """The code, and apart from it its final expression statement if it ends with one
    (then the code before it is None when there is none).

    Line numbers and tracebacks are those of the whole code. None when it does not
    compile: then it is compiled again as a script is, which raises python's own
    SyntaxError. inherited: `from __future__` features it compiles under besides its own.
    """
    if isinstance(source, str) and not inherited:  # bytes may declare an encoding of their own
        compiled = _compile_last_line_apart(source, filename)
        if compiled is not None:
            return compiled
    return _compile_from_tree(source, filename, inherited)


def _compile_last_line_apart(text: str, filename: str) -> "tuple[Any, Any] | None":
    """The common case without a syntax tree, which costs more than compiling: code
    whose last line is an expression on its own, flush left, after complete statements.

    The lines before it then compile on their own, and it starts a statement of its own:
    an open bracket or string before it would leave them incomplete, and a line flush
    left is inside no block. None for anything else (the tree decides). Each line is
    compiled once, in order, so python's SyntaxWarnings come out once each, in order.
    """
    if "\r" in text:
        return None  # a line may end at a lone carriage return: the tree counts lines then
    text = text.rstrip(" \t\n")
    cut = text.rfind("\n") + 1
    before, last = text[:cut], text[cut:]
    if not last or last[0] in " \t\f#" or before.rstrip("\n").endswith("\\"):
        return None
    if _PARSER_WARNS.search(last):
        return None  # parsing it twice would print the warning twice
    if _STATEMENT.match(last):
        return None  # spares a failed compile: raising its SyntaxError costs as much
    if "__future__" in before:
        # The last line compiles under the lines' future imports, and may fail only then
        # (barry_as_FLUFL refuses !=): after the lines before had warned, so the tree,
        # which would warn again, decides from the start instead.
        return None
    padded = "\n" * before.count("\n") + last  # on its own line number
    if not before.strip():
        try:  # the whole code: nothing to compile before it
            return None, compile(padded, filename, "eval", dont_inherit=True)
        except (SyntaxError, ValueError):
            return None
    try:
        # Whether it is an expression: only parsed (it is compiled below, after the
        # lines before it, as python would).
        compile(padded, filename, "eval", _ONLY_AST, dont_inherit=True)
        body = compile_source(before.encode("utf-8", "surrogatepass"), filename, True)
        # The `from __future__` imports of the lines before apply to it too.
        flags = body.co_flags & _FUTURE_FLAGS
        expression = compile(padded, filename, "eval", flags=flags, dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    return body, expression


def _compile_from_tree(
    source: "str | bytes", filename: str, inherited: int = 0
) -> "tuple[Any, Any] | None":
    """compile_with_value through one syntax tree whose nodes keep their positions."""
    import ast

    try:
        tree = compile(source, filename, "exec", _ONLY_AST | inherited, dont_inherit=True)
        last = tree.body[-1] if tree.body else None
        if not isinstance(last, ast.Expr):
            return compile(tree, filename, "exec", flags=inherited, dont_inherit=True), None
        del tree.body[-1]
        body = compile(tree, filename, "exec", flags=inherited, dont_inherit=True)
        # `from __future__` imports of the code apply to its last expression too.
        flags = body.co_flags & _FUTURE_FLAGS
        expression = ast.Expression(last.value)
        return body, compile(expression, filename, "eval", flags=flags, dont_inherit=True)
    except (SyntaxError, ValueError):
        return None


def _future_flags() -> int:
    import __future__

    flags = 0
    for feature in __future__.all_feature_names:
        flags |= getattr(__future__, feature).compiler_flag
    return flags


_FUTURE_FLAGS = _future_flags()
# What may make python's parser warn, rather than its compiler: an escape sequence in a
# string, a number run into a keyword ("1if"). A digit then a letter is often neither.
_PARSER_WARNS = re.compile(r"\\|[0-9][A-Za-z]")
# A line that is surely a statement: a keyword no expression starts with, or an
# assignment (augmented or annotated) to a name, attribute or item.
_STATEMENT = re.compile(
    r"(?:import|from|def|class|for|while|if|with|try|return|raise|assert|del|pass|global"
    r"|nonlocal|async|break|continue|yield)\b"
    r"|(?!lambda\b)[\w., ]+(?:\[[^\]]*\])?\s*(?::|(?:[-+*/%@&|^]|//|\*\*|<<|>>)?=(?!=))"
)
