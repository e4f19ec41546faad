"""json.dump with the C encoder: what json.dumps does, written once, same bytes.

CPython's `json.dump` encodes with the pure-Python encoder and writes every
small piece as it goes; `json.dumps` encodes in one shot with the C encoder,
several times faster. `patch()` gives `json.dump` that one-shot path for the
calls where it provably gives what CPython's own code gives, and leaves every
other call to that code, unchanged:

- The data holds nothing but exact dict, list, tuple, str, int, float, bool and
  None, checked before encoding (no subclasses, nothing `default` must turn
  into JSON), and nests shallowly enough that CPython's own encoder would not
  hit the recursion limit. Then no code of the program's runs while the C
  encoder works, so when it raises (NaN without allow_nan, keys sort_keys
  cannot order, a circular reference, ...) CPython's code simply runs instead,
  writes what it writes and raises what it raises.
- No `cls`, no extra keyword arguments, `skipkeys` off, flags that are plain
  bools, separators a pair of str, and `indent` only where the C encoder of
  this Python indents (3.13 on, probed, not assumed).
- The file is an exact `io.StringIO`, or an exact `io.TextIOWrapper` over a
  buffered regular file other than the standard streams, neither line-buffered
  nor write-through, with a UTF-8, ASCII or Latin-1 encoding that can encode
  the text; and a file-size limit, if any, leaves room for the text.

Without indent and sort_keys, the text comes from `pynox._jsonscan.encode`,
which checks and encodes plain data in one walk and writes ASCII into one
buffer, where CPython's C encoder makes a string for every key, number and
piece; floats and long ints go through the same repr functions. What it does
not write itself (text kept non-ASCII, a non-finite float without allow_nan,
an int too long for str()) goes to the C encoder as before.

`json.dump` keeps its identity, signature and docstring. Its code is rebuilt
from its own source with only the docstring's lines replaced by one call, so
every line that can raise keeps its number and columns, and the text is
written by dump's own `fp.write(chunk)` line: tracebacks are CPython's. The
rebuild is checked first: the unmodified source must compile to exactly the
loaded code, or nothing is patched.

What differs is only how the text reaches the file: in pieces of 1 MiB rather
than in small chunks, so at any moment a different amount may sit in the
file's buffer. Files are equal once closed or flushed; a process killed during
or after the call, or a disk that fills during it, leaves a different-sized
prefix of the same text than CPython would have.
"""

import io
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import CodeType, ModuleType
    from typing import Any

# A placeholder constant in the rebuilt code, replaced by the hook object.
_PLACEHOLDER = "\x00pynox json fast path\x00"
_CALL = (
    f"    cls = {_PLACEHOLDER!r}.encode_once(obj, fp, cls, skipkeys, ensure_ascii, "
    "check_circular, allow_nan, indent, separators, default, sort_keys, kw)\n"
)
_TEXT_ENCODINGS = frozenset(
    {"utf-8", "utf8", "ascii", "us-ascii", "latin-1", "latin1", "iso-8859-1"}
)
_UTF8 = frozenset({"utf-8", "utf8"})
_PIECE = 1 << 20  # characters written per fp.write
# Room left under a file-size limit for what the file's buffers may hold.
_BUFFER_ROOM = 1 << 22
# Frames beyond the nesting that CPython's own encoder may need on the stack.
_STACK_ROOM = 16
# The C walk, and CPython's C encoder with indent or sort_keys, take C stack for every
# level of nesting, where CPython's json.dump (3.12 on) nests on the heap. Deeper data
# (a program may raise the recursion limit), or deeper than the C stack left to the
# calling thread allows at _STACK_PER_LEVEL bytes a level beyond _STACK_MARGIN, is left
# to CPython's own code: a C stack overflow would crash.
_C_DEPTH = 1000
_STACK_PER_LEVEL = 1 << 10  # several times what a level of either takes
_STACK_MARGIN = 64 << 10


def patch(json: "ModuleType", dump: "Any" = None) -> bool:
    """Gives json.dump (or dump, a copy of it) the one-shot path.

    Returns False, with nothing changed, where it cannot.
    """
    try:
        if dump is None:
            dump = json.dump
        if dump.__code__ is _STATE.get("code"):
            return True
        state = _capture(json)
        if state is None:
            return False
        code = _rebuild(dump.__code__)
        if code is None:
            return False
        state["code"] = code
        _STATE.clear()
        _STATE.update(state)
        dump.__code__ = code
        return True
    except Exception:  # noqa: BLE001 - anything unexpected: CPython's json stays as it is
        return False


_STATE: "dict[str, Any]" = {}


def _capture(json: "ModuleType") -> "dict[str, Any] | None":
    """What dump and the encoder look up at call time, as they are now."""
    encoder = sys.modules.get("json.encoder")
    if encoder is None or json.__dict__.get("JSONEncoder") is not encoder.JSONEncoder:
        return None
    c_make_encoder = encoder.c_make_encoder
    if c_make_encoder is None:
        return None
    if encoder.encode_basestring_ascii is not encoder.c_encode_basestring_ascii:
        return None
    if encoder.encode_basestring is not encoder.c_encode_basestring:
        return None
    if encoder.c_encode_basestring_ascii is None or encoder.c_encode_basestring is None:
        return None
    cls: Any = encoder.JSONEncoder
    state: dict[str, Any] = {
        "json": json.__dict__,
        "encoder": encoder.__dict__,
        "JSONEncoder": cls,
        "make_iterencode": encoder._make_iterencode,
        "c_make_encoder": c_make_encoder,
        "ascii": encoder.c_encode_basestring_ascii,
        "unicode": encoder.c_encode_basestring,
        "methods": (cls.__init__, cls.iterencode, cls.default, cls.encode),
    }
    # The C encoder indents from 3.13 on; ask it rather than the version number.
    probe = c_make_encoder(None, None, state["ascii"], "  ", ": ", ",", False, False, True)
    state["c_indents"] = "\n" in "".join(probe([1], 0))
    return state


def _unchanged(state: "dict[str, Any]") -> bool:
    """Whether what dump's and the encoder's code look up is still what was captured."""
    cls = state["JSONEncoder"]
    encoder = state["encoder"]
    return (
        state["json"].get("JSONEncoder") is cls
        and encoder.get("JSONEncoder") is cls
        and encoder.get("c_make_encoder") is state["c_make_encoder"]
        and encoder.get("_make_iterencode") is state["make_iterencode"]
        and encoder.get("encode_basestring_ascii") is state["ascii"]
        and encoder.get("encode_basestring") is state["unicode"]
        and (cls.__init__, cls.iterencode, cls.default, cls.encode) == state["methods"]
    )


def _rebuild(code: "CodeType") -> "CodeType | None":
    """dump's code with its docstring's lines replaced by the call to encode_once."""
    with open(code.co_filename, encoding="utf-8") as file:
        lines = file.readlines()
    first = code.co_firstlineno - 1
    if not lines[first].startswith("def dump("):
        return None
    end = first + 1
    while end < len(lines) and (lines[end][:1] in (" ", "\n", "#") or not lines[end].strip()):
        end += 1
    body = lines[first:end]
    # The docstring: its opening line comes right after the signature.
    opening = next((i for i, line in enumerate(body) if line.rstrip().endswith(":")), None)
    if opening is None or not body[opening + 1].lstrip().startswith('"""'):
        return None
    start = opening + 1
    closing = next((i for i in range(start + 1, len(body)) if '"""' in body[i]), None)
    if closing is None or body[closing].strip() != '"""':
        return None
    replaced = body[:start] + [_CALL] + ["\n"] * (closing - start) + body[closing + 1 :]
    rebuilt = _function_code("\n" * first + "".join(replaced), code)
    if rebuilt is None or not _same_after(rebuilt, code, first + closing + 1):
        return None
    consts = tuple(_HOOK if c == _PLACEHOLDER else c for c in rebuilt.co_consts)
    return rebuilt.replace(co_consts=consts)


def _function_code(source: str, code: "CodeType") -> "CodeType | None":
    # What compile(source, filename, "exec", dont_inherit=True) gives, without the
    # ~1.8 ms that compile() spends building the ast module's classes on first use.
    from pynox._native import compile_source

    module = compile_source(source.encode(), code.co_filename, True)
    for const in module.co_consts:
        if getattr(const, "co_name", None) == code.co_name:
            return const  # type: ignore[no-any-return]
    return None


def _same_after(rebuilt: "CodeType", original: "CodeType", line: int) -> bool:
    """Whether rebuilt is the original plus the call: same names, constants and positions.

    Every instruction past `line` (the docstring's end) must sit where the
    original's does, which also tells that the file holds the source the loaded
    code came from.
    """
    for name in ("co_varnames", "co_argcount", "co_kwonlyargcount", "co_flags", "co_freevars"):
        if getattr(rebuilt, name) != getattr(original, name):
            return False
    if [n for n in rebuilt.co_names if n != "encode_once"] != list(original.co_names):
        return False
    docstring = original.co_consts[0] if original.co_consts else None
    if _plain_consts(rebuilt.co_consts, _PLACEHOLDER) != _plain_consts(
        original.co_consts, docstring
    ):
        return False
    positions = getattr(original, "co_positions", None)
    if positions is None:  # 3.10: lines only, no columns
        return _lines_after(rebuilt, line) == _lines_after(original, line)
    return _positions_after(rebuilt, line) == _positions_after(original, line)


def _plain_consts(consts: "tuple[object, ...]", left_out: object) -> "list[str]":
    return sorted(repr(c) for c in consts if c is not None and c != left_out)


def _lines_after(code: "CodeType", line: int) -> list[int]:
    return sorted(n for _, _, n in code.co_lines() if n is not None and n > line)


def _positions_after(code: "CodeType", line: int) -> "list[tuple[int, int, int, int]]":
    positions = code.co_positions()  # type: ignore[attr-defined]
    return sorted({p for p in positions if p[0] is not None and p[0] > line})


class _Written:
    """Stands in for the encoder class: dump's own loop then writes the text."""

    __slots__ = ("pieces",)

    def __init__(self, text: str) -> None:
        # An iterator in C: no frame of ours between dump and fp.write.
        self.pieces = map(text.__getitem__, map(slice, range(0, len(text), _PIECE), _ends(text)))

    def __call__(self, **options: object) -> "_Written":
        return self

    def iterencode(self, o: object) -> "Any":
        return self.pieces


def _ends(text: str) -> range:
    return range(_PIECE, len(text) + _PIECE, _PIECE)


def encode_once(
    obj: object,
    fp: object,
    cls: object,
    skipkeys: object,
    ensure_ascii: object,
    check_circular: object,
    allow_nan: object,
    indent: object,
    separators: object,
    default: object,
    sort_keys: object,
    kw: "dict[str, object]",
) -> object:
    """dump's `cls`, or the text in a stand-in for it when the fast path applies."""
    if cls is not None or kw or skipkeys is not False:
        return cls
    kind = type(fp)
    if kind is not io.StringIO and kind is not io.TextIOWrapper:
        return cls
    try:
        text = _encode(
            obj, ensure_ascii, check_circular, allow_nan, indent, separators, default, sort_keys
        )
        if text is None or not _takes_once(fp, kind, text):
            return cls
        return _Written(text)
    except Exception:  # noqa: BLE001 - CPython's own code does it, as ever
        return cls


def _encode(
    obj: object,
    ensure_ascii: object,
    check_circular: object,
    allow_nan: object,
    indent: object,
    separators: object,
    default: object,
    sort_keys: object,
) -> "str | None":
    state = _STATE
    if not _unchanged(state):
        return None
    flags = (ensure_ascii, check_circular, allow_nan, sort_keys)
    if any(type(flag) is not bool for flag in flags):
        return None
    if separators is not None and not (
        type(separators) is tuple
        and len(separators) == 2
        and type(separators[0]) is str
        and type(separators[1]) is str
    ):
        return None
    if indent is not None and type(indent) is not int and type(indent) is not str:
        return None
    cls = state["JSONEncoder"]
    if (
        ensure_ascii
        and check_circular
        and allow_nan
        and indent is None
        and separators is None
        and default is None
        and not sort_keys
    ):
        encoder = state["json"].get("_default_encoder")
    else:
        encoder = cls(
            skipkeys=False,
            ensure_ascii=ensure_ascii,
            check_circular=check_circular,
            allow_nan=allow_nan,
            indent=indent,
            separators=separators,
            default=default,
            sort_keys=sort_keys,
        )
    if type(encoder) is not cls:
        return None
    settings = vars(encoder)
    if settings.get("skipkeys") is not False:
        return None
    for name in ("ensure_ascii", "check_circular", "allow_nan", "sort_keys"):
        if type(settings.get(name)) is not bool:
            return None
    key_separator, item_separator = encoder.key_separator, encoder.item_separator
    if type(key_separator) is not str or type(item_separator) is not str:
        return None
    indent = encoder.indent
    if indent is not None:
        if not state["c_indents"]:
            return None
        if type(indent) is int:
            indent = " " * indent
        elif type(indent) is not str:
            return None
    room = _stack_room()
    if room <= 0:
        return None  # CPython's own encoder may hit the recursion limit here
    if indent is None and not encoder.sort_keys:
        from pynox._jsonscan import encode

        text = encode(
            obj, room, encoder.ensure_ascii, encoder.allow_nan, item_separator, key_separator
        )
        if text is not NotImplemented:
            return text  # type: ignore[no-any-return]
    if not _plain(obj, room):
        return None
    # _plain found no cycle (it would not have ended): nothing for markers to catch.
    make = state["c_make_encoder"](
        None,
        encoder.default,
        state["ascii"] if encoder.ensure_ascii else state["unicode"],
        indent,
        key_separator,
        item_separator,
        encoder.sort_keys,
        False,
        encoder.allow_nan,
    )
    return "".join(make(obj, 0))


def _plain(obj: object, room: int) -> bool:
    """Whether obj holds only exact JSON types, nested at most room deep.

    pynox._jsonscan walks it in C, depth first: no code of the program's runs, and a
    cycle fails after one path down (so CPython's own code then reports it).
    """
    from pynox._jsonscan import plain

    return bool(plain(obj, room))


def _stack_room() -> int:
    """How deep data may nest for CPython's own encoder to encode it from here,
    and for the C walk not to overflow the C stack."""
    from pynox._jsonscan import stack_left

    # Of this thread: threading.stack_size() tells only of threads started from now on.
    levels = (stack_left() - _STACK_MARGIN) // _STACK_PER_LEVEL
    if levels <= 0:
        return 0  # unknown (-1), or too little
    frame = sys._getframe()
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    return min(sys.getrecursionlimit() - depth - _STACK_ROOM, _C_DEPTH, levels)


def _takes_once(fp: "Any", kind: type, text: str) -> bool:
    """Whether writing text at once leaves in fp exactly what many small writes would."""
    if "write" in vars(fp):
        return False
    if kind is io.StringIO:
        # A StringIO with newline=None ends a line at a "\r" that ends a write, so a
        # "\r\n" (from separators or indent) split between two pieces would become two.
        return "\r" not in text
    if fp.line_buffering or fp.write_through:
        return False
    buffer = fp.buffer
    if type(buffer) is not io.BufferedWriter and type(buffer) is not io.BufferedRandom:
        return False
    raw = buffer.raw
    if type(raw) is not io.FileIO or raw.closed:
        return False
    fd = raw.fileno()
    if fd <= 2:
        return False  # a standard stream may share its file with another one
    encoding = fp.encoding.lower()
    if encoding not in _TEXT_ENCODINGS:
        return False
    if not text.isascii():
        if encoding not in _UTF8 or fp.errors != "strict":
            return False
        text.encode("utf-8")  # lone surrogates raise: CPython then writes a prefix
    import stat

    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        return False
    import resource

    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        end = max(status.st_size, os.lseek(fd, 0, os.SEEK_CUR))
        if end + 4 * len(text) + _BUFFER_ROOM > limit:
            return False
    return True


class _Hook:
    __slots__ = ()

    encode_once = staticmethod(encode_once)


_HOOK = _Hook()
