"""How python reads a program's file: what it refuses before parsing a line of it, and
a file of bytecode.

python reads a script, or a program on standard input, with its file reader, which
checks each line as it reads it. pynox holds the program's bytes and compiles them as a
string, and compile() checks them differently, or not at all. So for a program that
is not plain ASCII, declares an encoding or holds a NUL byte, refusal() finds the error
python's reader raises first, worded as the running CPython words it:

- no encoding declared and no BOM, and a line that is not UTF-8: "Non-UTF-8 code
  starting with '\\xNN' in file NAME on line N, ...";
- a declared encoding python cannot read the file in (an unknown one, one that cannot
  decode the text after the declaration, any but UTF-8 from a pipe, or any but UTF-8
  after a UTF-8 BOM): "encoding problem: NAME";
- from 3.11, a NUL byte: "source code cannot contain null bytes", at its line.

Lines are checked in order, as python reads them. Whatever is past these checks is
compile()'s to find, as it is for python.
"""

import sys
from _frozen_importlib_external import MAGIC_NUMBER
from types import CodeType

_BOM = b"\xef\xbb\xbf"
# How many bytes python's text reader decodes at a time (io.TextIOWrapper._CHUNK_SIZE).
_CHUNK = 8192
# From 3.11, strict UTF-8 (no surrogates, no overlong forms), NUL bytes refused, each
# line counted from 1 and the PEP's current address; 3.10 checks only the shape of each
# sequence and names the line after.
_FROM_3_11 = sys.version_info >= (3, 11)
_PEP_263 = (
    "https://peps.python.org/pep-0263/" if _FROM_3_11 else "https://python.org/dev/peps/pep-0263/"
)


def refusal(source: bytes, filename: str, seekable: bool = True) -> "SyntaxError | None":
    """The SyntaxError python's file reader raises for source, or None.

    seekable: whether python could seek in the file (standard input may be a pipe).
    pynox.engine.child.file_reader_may_refuse says which source may be refused; only
    that is asked about."""
    check_nul = b"\0" in source
    if check_nul and not _FROM_3_11:
        return None  # 3.10 reads a line with a NUL in it in ways of its own: left to compile()
    bom = source.startswith(_BOM)
    body = source[len(_BOM) :] if bom else source
    check_utf8 = not bom and not body.isascii()  # until a line declares an encoding
    declaring = True  # the first line, or the second after a comment or blank first line
    number = start = 0
    while start < len(body):
        if not declaring and not (check_nul or check_utf8):
            return None
        end = _line_end(body, start)
        line, number = body[start:end], number + 1
        if declaring:
            encoding, comment_or_blank = _declaration(line)
            if encoding is not None:
                offset = end + (len(_BOM) if bom else 0)
                problem = _encoding_problem(encoding, bom, source, offset, seekable)
                if problem is not None:
                    return problem
                check_utf8 = False
            declaring = encoding is None and comment_or_blank and number == 1
            if not declaring:
                # Past the declaration: reading on line by line only pays when this
                # line or one ahead is to be refused.
                rest = body[start:]
                check_nul = check_nul and b"\0" in rest
                check_utf8 = check_utf8 and _first_bad_index(rest) >= 0
        text, nul, _ = line.partition(b"\0")  # python checks a line up to its NUL
        bad = _first_bad_index(text) if check_utf8 else -1
        if bad >= 0:
            return SyntaxError(_not_utf8(text[bad], filename, number))
        if nul and check_nul:
            shown = text.decode("utf-8", "replace")
            location = (filename, number, 0, shown, number, 0)
            return SyntaxError("source code cannot contain null bytes", location)
        start = end
    return None


def _encoding_problem(
    encoding: str, bom: bool, source: bytes, end: int, seekable: bool
) -> "SyntaxError | None":
    """Why python cannot read on in the encoding a line ending at end declares, if so."""
    if bom and encoding != "utf-8":
        return SyntaxError(f"encoding problem: {encoding} with BOM")
    if encoding != "utf-8" and not (seekable and _readable(source, end, encoding)):
        return SyntaxError(f"encoding problem: {encoding}")
    return None


def _not_utf8(first_bad: int, filename: str, number: int) -> str:
    return (
        f"Non-UTF-8 code starting with '\\x{first_bad:02x}' in file {filename} on line "
        f"{number if _FROM_3_11 else number + 1}, but no encoding declared; "
        f"see {_PEP_263} for details"
    )


def _first_bad_index(data: bytes) -> int:
    """Where the first sequence python's reader takes for not UTF-8 starts, or -1."""
    if _FROM_3_11:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return exc.start
        return -1
    i = 0
    while i < len(data):  # 3.10: a lead byte and as many continuation bytes as it says
        lead = data[i]
        follow = 0 if lead < 0x80 else 1 if 0xC0 <= lead < 0xE0 else 2 if 0xE0 <= lead < 0xF0 else 3
        if lead >= 0xF8 or 0x80 <= lead < 0xC0:
            return i
        continuation = data[i + 1 : i + 1 + follow]
        if len(continuation) < follow or any(not 0x80 <= byte < 0xC0 for byte in continuation):
            return i
        i += 1 + follow
    return -1


def _line_end(data: bytes, start: int) -> int:
    """Where the line that starts at start ends, past its \\n, \\r\\n or \\r."""
    newline, carriage = data.find(b"\n", start), data.find(b"\r", start)
    ends = [i for i in (newline, carriage) if i >= 0]
    if not ends:
        return len(data)
    end = min(ends)
    return end + 2 if data[end : end + 2] == b"\r\n" else end + 1


def _declaration(line: bytes) -> "tuple[str | None, bool]":
    """The encoding a line declares as python's reader finds it (a comment holding
    "coding:" or "coding=" and a name), and whether the line holds only a comment or
    nothing, so that the next one may declare it."""
    stripped = line.lstrip(b" \t\f")
    if not stripped.startswith(b"#"):
        return None, stripped[:1] in (b"", b"\n", b"\r")
    limit = len(line) - 6  # as python's reader bounds its search
    at = line.find(b"#")
    while True:
        at = line.find(b"coding", at)
        if at < 0 or at >= limit:
            return None, True
        end = at + 6
        if line[end : end + 1] in (b":", b"="):
            end += 1
            while line[end : end + 1] in (b" ", b"\t"):
                end += 1
            begin = end
            while end < len(line) and (line[end : end + 1].isalnum() or line[end] in b"-_."):
                end += 1
            if end > begin:
                return _normal_name(line[begin:end].decode("ascii")), True
        at += 1


def _normal_name(name: str) -> str:
    """UTF-8 and Latin-1 under their other names, as python's reader renames them."""
    folded = name[:12].replace("_", "-").lower()
    if folded == "utf-8" or folded.startswith("utf-8-"):
        return "utf-8"
    if folded in ("latin-1", "iso-8859-1", "iso-latin-1") or folded.startswith(
        ("latin-1-", "iso-8859-1-", "iso-latin-1-")
    ):
        return "iso-8859-1"
    return name


def _readable(source: bytes, start: int, encoding: str) -> bool:
    """Whether python's reader can go on in encoding after its declaration: it opens the
    file in a text reader of that encoding from the declaring line's last byte, and
    reads the rest of that line, a chunk at a time, at once."""
    import codecs  # only for a program that declares an encoding

    try:
        info = codecs.lookup(encoding)
    except LookupError:
        return False
    if not getattr(info, "_is_text_encoding", True):
        return False  # a bytes-to-bytes codec, which no text reader takes
    decoder = info.incrementaldecoder()
    position = start - 1
    try:
        while True:
            chunk = source[position : position + _CHUNK]
            position += len(chunk)
            text = decoder.decode(chunk, not chunk)
            if not chunk or "\n" in text or "\r" in text:
                return True
    except Exception:  # noqa: BLE001 - whatever the reader raises, python gives up on it
        return False


def compiled_code(data: bytes) -> "CodeType":
    """The code of a .pyc file's bytes, refused as python refuses them (run_pyc_file in
    CPython's Python/pythonrun.c)."""
    if len(data) < 4:
        raise EOFError("EOF read where not expected")
    if data[:4] != MAGIC_NUMBER:
        raise RuntimeError("Bad magic number in .pyc file")
    if len(data) < 16:
        raise EOFError("EOF read where not expected")
    import marshal

    try:
        code = marshal.loads(data[16:])  # the header's other twelve bytes are not checked
    except Exception:  # noqa: BLE001 - python words every failure alike
        code = None
    if not isinstance(code, CodeType):
        raise RuntimeError("Bad code object in .pyc file")
    return code
