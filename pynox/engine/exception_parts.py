"""An exception as it was raised, read without running any code of the program's: its
arguments, the errors it came from, the frame and module it was raised in, and the
functions called on the line that raised it.

A program's exception class may define properties and methods of its own; these read
what CPython keeps, through BaseException's own descriptors.
"""

import builtins
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType, TracebackType

_ARGS = BaseException.__dict__["args"]
_CAUSE = BaseException.__dict__["__cause__"]
_CONTEXT = BaseException.__dict__["__context__"]
_ERRNO = OSError.__dict__["errno"]
# Exception groups, builtin from 3.11 on (None before: see _group).
_BUILTIN_GROUP = getattr(builtins, "BaseExceptionGroup", None)
# The most exceptions of an exception group looked at, nested groups included.
_MAX_MEMBERS = 64


def args_of(exc: BaseException) -> "tuple[object, ...]":
    """exc's arguments as BaseException keeps them."""
    return _ARGS.__get__(exc)  # type: ignore[no-any-return]


def context_of(exc: BaseException) -> "BaseException | None":
    """The error exc was raised while handling, as BaseException keeps it."""
    return _CONTEXT.__get__(exc)  # type: ignore[no-any-return]


def errno_of(exc: OSError) -> "int | None":
    """exc's errno as OSError keeps it."""
    return _ERRNO.__get__(exc)  # type: ignore[no-any-return]


def members(exc: BaseException) -> "list[BaseException]":
    """The exceptions an exception group holds (asyncio.TaskGroup raises what its tasks
    raised as one), those of the groups in it included, in the order its traceback shows
    them; [exc] for any other exception. A few, read as BaseExceptionGroup keeps them."""
    group = _group()
    if group is None or not isinstance(exc, group):
        return [exc]
    held = group.__dict__["exceptions"]
    found: list[BaseException] = []
    pending = [exc]
    for _ in range(_MAX_MEMBERS):
        if not pending:
            break
        current = pending.pop()
        if isinstance(current, group):
            pending.extend(reversed(held.__get__(current)))
        else:
            found.append(current)
    return found


def _group() -> "type[BaseException] | None":
    """The class of exception groups: the builtin one from 3.11 on; before, the
    exceptiongroup backport's, when the program imported it (anyio and trio raise its
    groups)."""
    if _BUILTIN_GROUP is not None:
        return _BUILTIN_GROUP  # type: ignore[no-any-return]
    group = getattr(sys.modules.get("exceptiongroup"), "BaseExceptionGroup", None)
    return group if isinstance(group, type) and issubclass(group, BaseException) else None


def chain(exc: BaseException) -> "list[BaseException]":
    """exc and the errors it came from, as a traceback shows them: urllib's URLError and
    requests' errors are raised while handling the ssl module's. A few levels, each once."""
    chain: list[BaseException] = []
    pending: list[BaseException] = [exc]
    while pending and len(chain) < 16:
        current = pending.pop()
        if any(current is seen for seen in chain):
            continue
        chain.append(current)
        for following in (_CAUSE.__get__(current), _CONTEXT.__get__(current)):
            if following is not None:
                pending.append(following)
    return chain


def innermost(exc: BaseException) -> "TracebackType | None":
    """The traceback entry of the frame exc was raised in."""
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb


def passes_through(exc: BaseException, module: str, function: str) -> bool:
    """Whether a function of module (move of shutil) is among the frames exc left."""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == function and frame.f_globals.get("__name__") == module:
            return True
        tb = tb.tb_next
    return False


def local_in(exc: BaseException, module: str, function: str, name: str) -> object:
    """The local `name` of the innermost frame of module's function among the frames exc
    left (self of fileinput's _readline); None when there is none."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == function and frame.f_globals.get("__name__") == module:
            found = frame.f_locals.get(name)
        tb = tb.tb_next
    return found


def innermost_module(exc: BaseException) -> str | None:
    """The module of the innermost frame of exc's traceback."""
    tb = innermost(exc)
    if tb is None:
        return None
    module = tb.tb_frame.f_globals.get("__name__")
    return module if isinstance(module, str) else None


def called_names(exc: BaseException) -> "set[str]":
    """The name of the function whose call raised exc in its innermost frame (setpgid for
    `os.setpgid(0, 1)`), for calls that raise no audit event: read from the call's source
    where the traceback shows it, as CPython finds where to put its carets. Before Python
    3.11 (no column positions), the names of every call whose source spans the traceback's
    line. Empty without the source."""
    tb = innermost(exc)
    if tb is None:
        return set()
    import ast
    import linecache

    frame = tb.tb_frame
    code = frame.f_code
    lines = linecache.getlines(code.co_filename, frame.f_globals)
    positions = getattr(code, "co_positions", None)
    nodes: list[ast.AST]
    if positions is None:
        try:
            tree = ast.parse("".join(lines))
        except (SyntaxError, ValueError):
            return set()
        line = tb.tb_lineno
        nodes = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and node.lineno <= line <= (node.end_lineno or 0)
        ]
    else:
        import itertools

        position = next(itertools.islice(positions(), tb.tb_lasti // 2, None), None)
        if position is None or None in position:
            return set()
        first, last, start, end = position
        picked = lines[first - 1 : last]
        if len(picked) != last - first + 1:
            return set()
        # Columns count UTF-8 bytes, from the start of the first line and of the last.
        encoded = [text.encode() for text in picked]
        encoded[-1] = encoded[-1][:end]
        encoded[0] = encoded[0][start:]
        try:
            source = b"".join(encoded).decode()
            nodes = [ast.parse("(" + source + ")", mode="eval").body]
        except (SyntaxError, ValueError):  # UnicodeDecodeError is a ValueError
            return set()
    return {name for node in nodes if (name := _function_name(node, frame)) is not None}


def _function_name(call: object, frame: "FrameType") -> str | None:
    """The name of the function a call node calls, as the function knows itself."""
    import ast

    if not isinstance(call, ast.Call):
        return None
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if not isinstance(call.func, ast.Name):
        return None
    # A name may be another's import (`from os import setpgid as sp`): a C function
    # knows its own name. Looked up, never evaluated: no code of the program runs.
    scope = frame.f_locals if call.func.id in frame.f_locals else frame.f_globals
    function = scope.get(call.func.id)
    if type(function) is type(len):
        return function.__name__
    return call.func.id
