"""What to run and how `python` would set it up: argv, sys.path[0], filename.

Everything here happens in the supervisor, before the sandbox exists, so a
missing script gets the same message and exit status as `python` gives.
"""

import posix
import sys

from pynox import lean_os
from pynox.errors import ProgramNotFound, PynoxError


class Program:
    """A script, inline code, a module or standard input, ready to run."""

    __slots__ = (
        "kind",
        "filename",
        "source",
        "seekable",
        "module",
        "argv",
        "path0",
        "implicit_read",
    )

    def __init__(self, kind: str, argv: list[str]) -> None:
        # "script", "code", "module", "stdin", "main_dir", or "request" (pool code)
        self.kind = kind
        self.filename = ""  # what tracebacks and __file__ show
        self.source: bytes | str = b""
        # Whether python could seek in the file the source came from (not in a pipe),
        # which its reading of a declared encoding needs (pynox.engine.source_file).
        self.seekable = True
        self.module = ""
        self.argv = argv
        # None: nothing is put in front of sys.path (python -I does the same).
        self.path0: str | None = None
        self.implicit_read: list[str] = []


def _cannot_open(path: str, exc: OSError) -> PynoxError:
    return ProgramNotFound(f"can't open file {path!r}: [Errno {exc.errno}] {exc.strerror}")


def _absolute(path: str) -> str:
    """The path made absolute as python makes its script's (_Py_abspath): the working
    directory, a slash and the path as given, with its "." and ".." parts and doubled
    slashes kept, as __file__, tracebacks and python's errors show it; the path itself
    when it is absolute already, or when there is no working directory any more."""
    if path.startswith("/"):
        return path
    try:
        return posix.getcwd() + "/" + path
    except OSError:
        return path


def script(path: str, args: list[str], isolated: bool) -> "Program":
    absolute = _absolute(path)
    if lean_os.isdir(absolute) or _is_zip(absolute):
        # A directory or zip application runs its __main__ module, as python does.
        program = Program("main_dir", [path, *args])
        program.path0 = absolute
        program.implicit_read = [lean_os.realpath(absolute)]
        return program
    program = Program("script", [path, *args])
    try:
        with open(absolute, "rb") as file:
            program.source = file.read()
    except OSError as exc:
        raise _cannot_open(absolute, exc) from None
    program.filename = absolute
    directory = lean_os.dirname(lean_os.realpath(absolute))
    program.implicit_read = [directory]
    if not isolated:
        program.path0 = directory
    return program


def _is_zip(path: str) -> bool:
    if not lean_os.isfile(path):
        return False
    try:
        with open(path, "rb") as file:
            return file.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def code(text: str, args: list[str], isolated: bool) -> "Program":
    program = Program("code", ["-c", *args])
    program.filename = "<string>"
    program.source = text
    if not isolated:
        program.path0 = ""
    return program


def module(name: str, args: list[str], isolated: bool, cwd: str) -> "Program":
    program = Program("module", ["-m", *args])
    program.module = name
    program.implicit_read = [cwd]
    if not isolated:
        program.path0 = cwd
    return program


def stdin(name: str, args: list[str], isolated: bool) -> "Program":
    """The program on standard input, read whole before the sandbox exists.

    `name` is "-" or "" (no program given): python's sys.argv[0] either way.
    Like python, this consumes standard input: the program then finds it at its end.
    """
    program = Program("stdin", [name, *args])
    program.filename = "<stdin>"
    if sys.stdin is not None:  # closed, python runs an empty program
        try:
            posix.lseek(0, 0, lean_os.SEEK_CUR)
        except OSError:
            program.seekable = False
        try:
            program.source = sys.stdin.buffer.read()
        except OSError as exc:
            raise ProgramNotFound(
                f"can't read the program from standard input: [Errno {exc.errno}] {exc.strerror}"
            ) from None
    if not isolated:
        program.path0 = ""
    return program


def request(text: str, name: str, args: list[str]) -> Program:
    """Code sent to the pool; errors point at `name`, as if it were a file."""
    program = Program("request", [name, *args])
    program.filename = name
    program.source = text
    return program
