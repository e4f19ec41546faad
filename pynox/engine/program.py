"""What to run and how `python` would set it up: argv, sys.path[0], filename.

Everything here happens in the supervisor, before the sandbox exists, so a
missing script gets the same message and exit status as `python` gives.
"""

import posix
import sys

from pynox import lean_os
from pynox.errors import CommandNotText, ProgramNotFound, PynoxError

TYPE_CHECKING = False  # typing itself costs milliseconds to import
if TYPE_CHECKING:
    from collections.abc import Container
    from typing import BinaryIO


class Program:
    """A script, inline code, a module or standard input, ready to run."""

    __slots__ = (
        "kind",
        "filename",
        "earlier_files",
        "source",
        "seekable",
        "module",
        "argv",
        "path0",
        "implicit_read",
        "options",
        "command_line",
    )

    def __init__(self, kind: str, argv: list[str]) -> None:
        # "script", "code", "module", "stdin", "main_dir", or "request" (pool code)
        self.kind = kind
        self.filename = ""  # what tracebacks and __file__ show
        # The file names of code of the program's that ran before (a session's earlier
        # steps): an error in a function they defined is the program's own too.
        self.earlier_files: Container[str] = ()
        self.source: bytes | str = b""
        # Whether python could seek in the file the source came from (not in a pipe),
        # which its reading of a declared encoding needs (pynox.engine.source_file).
        self.seekable = True
        self.module = ""
        self.argv = argv
        # None: nothing is put in front of sys.path (python -I does the same).
        self.path0: str | None = None
        self.implicit_read: list[str] = []
        # The interpreter options python would run it with (letters such as "B" and
        # "u", given or read from the environment), which sys.flags shows (None keeps
        # the interpreter's), and python's command line after its
        # executable, which sys.orig_argv shows (None: argv, as for a script).
        self.options: frozenset[str] | None = None
        self.command_line: list[str] | None = None


def cannot_open_text(path: str, errno: "int | None", strerror: "str | None") -> str:
    """What python says of a script it cannot open (the pool's words for it too)."""
    return f"can't open file {path!r}: [Errno {errno}] {strerror}"


def _cannot_open(path: str, exc: OSError) -> PynoxError:
    return ProgramNotFound(cannot_open_text(path, exc.errno, exc.strerror))


def _absolute(path: str) -> str:
    """The path made absolute as python makes its script's (_Py_abspath): the working
    directory, a slash and the path as given, with its "." and ".." parts and doubled
    slashes kept, as __file__, tracebacks and python's errors show it; the path itself
    when it is absolute already, or when there is no working directory any more."""
    if path.startswith("/"):
        return path
    try:
        if path in ("", ".") and sys.version_info >= (3, 11):
            return posix.getcwd()  # as _Py_abspath makes these two from 3.11 on
        return posix.getcwd() + "/" + path
    except OSError:
        return path


def script(path: str, args: list[str], safe_path: bool) -> "Program":
    absolute = _absolute(path)
    source = None
    if not lean_os.isdir(absolute):
        try:
            with open(absolute, "rb") as file:
                source = _source_unless_zip(file)
        except OSError as exc:
            raise _cannot_open(absolute, exc) from None
    if source is None:
        # A directory or zip application runs its __main__ module, as python does.
        program = Program("main_dir", [path, *args])
        program.path0 = absolute
        program.implicit_read = [lean_os.realpath(absolute)]
        return program
    program = Program("script", [path, *args])
    program.source = source
    program.filename = absolute
    directory = lean_os.dirname(lean_os.realpath(absolute))
    program.implicit_read = [directory]
    if not safe_path:
        program.path0 = directory
    return program


# How zipimport, which python offers a file to before it runs it as source, knows a zip
# archive: by the record that ends its central directory, in its last 22 bytes or before a
# comment of up to 64 KiB. Whatever comes first (a #! line, a launcher) does not matter.
_END_RECORD = b"PK\x05\x06"
_END_RECORD_SIZE = 22
_LONGEST_COMMENT = 0xFFFF
_DIRECTORY_ENTRY = b"PK\x01\x02"
# A ZIP64 end record and its locator, right before the end record.
_ZIP64_END_RECORD = b"PK\x06\x06"
_ZIP64_END_SIZES = 56 + 20


def _source_unless_zip(file: "BinaryIO") -> "bytes | None":
    """The script's bytes, or None when python would run the file as a zip application.
    Only a regular file can be one; a script of up to 64 KiB is read once."""
    if not lean_os.is_regular_file(posix.fstat(file.fileno()).st_mode):
        return file.read()  # a pipe or a device: read as python reads it, from its start
    try:
        size = file.seek(0, 2)
    except OSError:  # a file of /proc, say: zipimport cannot seek it either
        return file.read()
    tail_start = max(size - _END_RECORD_SIZE - _LONGEST_COMMENT - _ZIP64_END_SIZES, 0)
    file.seek(tail_start)
    tail = file.read()
    if _ends_a_zip(file, tail, tail_start):
        return None
    if tail_start == 0:
        return tail
    file.seek(0)
    return file.read()


def _ends_a_zip(file: "BinaryIO", tail: bytes, tail_start: int) -> bool:
    """zipimport's checks of the end record (Lib/zipimport.py, _read_directory) that decide
    whether it takes the file at all."""
    at = len(tail) - _END_RECORD_SIZE
    if at < 0:
        return False
    if tail[at : at + 4] != _END_RECORD:
        at = tail.rfind(_END_RECORD)
        if at < 0 or len(tail) - at < _END_RECORD_SIZE:
            return False
    modern = sys.version_info >= (3, 13)
    if modern and at >= _ZIP64_END_SIZES and tail.rfind(_ZIP64_END_RECORD) == at - _ZIP64_END_SIZES:
        return True  # ZIP64, which zipimport reads from 3.13 on
    entries = int.from_bytes(tail[at + 8 : at + 10], "little")
    directory_size = int.from_bytes(tail[at + 12 : at + 16], "little")
    directory_offset = int.from_bytes(tail[at + 16 : at + 20], "little")
    position = tail_start + at
    prefix = position - directory_size - directory_offset  # bytes before the archive
    if directory_size > position or directory_offset > position or prefix < 0:
        return False
    if not modern or entries == 0:
        return True  # before 3.13, a directory that is not there is an empty one
    file.seek(prefix + directory_offset)
    return file.read(4) == _DIRECTORY_ENTRY


def code(text: str, args: list[str], safe_path: bool) -> "Program":
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError as exc:  # bytes that were not UTF-8, kept as surrogates
            raise CommandNotText(f"UnicodeEncodeError: {exc}") from None
    program = Program("code", ["-c", *args])
    program.filename = "<string>"
    program.source = text
    if not safe_path:
        program.path0 = ""
    return program


def module(name: str, args: list[str], safe_path: bool, cwd: str) -> "Program":
    program = Program("module", ["-m", *args])
    program.module = name
    if lean_os.isdir(cwd):  # not when it was removed: python runs there all the same
        program.implicit_read = [cwd]
    if not safe_path:
        program.path0 = cwd
    return program


def stdin(name: str, args: list[str], safe_path: bool) -> "Program":
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
    if not safe_path:
        program.path0 = ""
    return program


def request(text: str, name: str, args: list[str]) -> Program:
    """Code sent to the pool; errors point at `name`, as if it were a file."""
    program = Program("request", [name, *args])
    program.filename = name
    program.source = text
    return program
