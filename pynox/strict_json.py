"""RFC 8259 JSON for whatever crosses a process boundary: strict both ways, bounded.

Python's json module accepts and writes `NaN`, `Infinity` and `-Infinity`,
which strict JSON clients reject, reads a number like `1e400` as infinity, and
raises RecursionError (not ValueError) on deeply nested input. Every parse of
data from another process (a child's report or frames, a client's request
lines) goes through `loads`, which turns all of that into one ValueError, and
every message written goes through `dumps` (or `dumps_read`, for what the pool
server writes), which refuses non-finite numbers instead of writing them. loads
and dumps take an optional `max_depth`: a bound on nesting that holds on every
Python version, well below the interpreter's own limits.
"""

from pynox.readable_json import NOT_FINITE, finite
from pynox.readable_json import NotFinite as NotFinite  # loads and dumps raise it too

# json itself is imported where it parses or writes: it imports re, which a run
# with --json that only writes its result (pynox.readable_json) need not pay for.

TYPE_CHECKING = False
if TYPE_CHECKING:
    import json


class TooDeep(ValueError):
    """The JSON nests deeper than the reader allows."""


class RepeatedKey(ValueError):
    """An object gives a key twice (parsers differ on which to keep: json keeps the last)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} appears twice in one object")
        self.key = key


def _refuse_constant(name: str) -> object:
    raise NotFinite(f"{name} is not a JSON value (RFC 8259 has no NaN or Infinity)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not finite(value):
        raise NotFinite(f"the number {text[:40]} is beyond the range of a double")
    return value


# An integer of more digits than this may be beyond the range of a double; of more than
# one more, it surely is (the largest double is about 1.8e308).
_DOUBLE_DIGITS = 308


def _double_sized_int(text: str) -> int:
    # Checked before int(): past 4300 digits, int() itself refuses, naming sys internals.
    if len(text) > _DOUBLE_DIGITS and not finite(float(text)):
        raise NotFinite(f"the number {text[:40]}... is beyond the range of a double")
    return int(text)


def _unique_keys(pairs: "list[tuple[str, object]]") -> "dict[str, object]":
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKey(key)
            seen.add(key)
    return value


_DECODERS: "dict[bool, json.JSONDecoder]" = {}


def _decoder(unique_keys: bool) -> "json.JSONDecoder":
    decoder = _DECODERS.get(unique_keys)
    if decoder is None:
        import json

        decoder = _DECODERS[unique_keys] = json.JSONDecoder(
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
            parse_int=_double_sized_int,
            object_pairs_hook=_unique_keys if unique_keys else None,
        )
    return decoder


def loads(
    data: "bytes | bytearray | str", max_depth: "int | None" = None, unique_keys: bool = False
) -> object:
    """Parses one JSON text; any malformed, non-UTF-8 or too deeply nested text is ValueError,
    and so, with unique_keys, is an object that gives a key twice (RepeatedKey)."""
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
        value = _decoder(unique_keys).decode(text)
    except RecursionError:
        # The parser recurses once per level of nesting; the interpreter's limit bounds it.
        raise TooDeep("the JSON nests too deeply") from None
    if max_depth is not None and _deeper_than(value, text, max_depth):
        raise TooDeep(f"the JSON nests deeper than {max_depth} levels")
    return value


def _compact(value: object, ascii_only: bool) -> str:
    import json

    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=ascii_only)
    except RecursionError:
        raise TooDeep("the value nests too deeply for JSON") from None
    except ValueError as exc:
        if "Out of range float" in str(exc):
            # json's message ends with the value from Python 3.13 on: "...compliant: nan".
            _, colon, found = str(exc).rpartition(": ")
            held = f", and this holds {found}" if colon else ""
            raise NotFinite(f"{NOT_FINITE}{held}") from None
        raise


def dumps(value: object, max_depth: "int | None" = None) -> str:
    """Compact JSON text; a NaN or infinite float raises ValueError instead of being written."""
    text = _compact(value, ascii_only=True)
    if max_depth is not None and _deeper_than(value, text, max_depth):
        raise TooDeep(f"the value nests deeper than {max_depth} levels")
    if len(text) > _DOUBLE_DIGITS and _holds_huge_int(value, text):
        raise NotFinite(
            "an integer beyond the range of a double is not a JSON value every reader takes "
            "(RFC 8259); send it as a string"
        )
    return text


def dumps_read(value: object) -> bytes:
    """The JSON text of a value whose integers loads() read or the writer made (so none is
    beyond a double's range), in UTF-8, each character written as itself where JSON allows.

    What the pool server writes. A reader decodes the same value as from dumps' text, from
    fewer bytes: a result holding 16 MiB of bytes that are not UTF-8 has 16 million U+FFFD
    in its output, 48 MiB this way, 96 MiB as `\\ufffd` escapes. A lone surrogate
    (`\\ud800`), which UTF-8 cannot carry, is written as its escape, as dumps writes it.
    The text is not searched for long integers, as dumps' is: for 16 MiB of digits in an
    output, that search took the server a second.
    """
    return _compact(value, ascii_only=False).encode("utf-8", "backslashreplace")


def _holds_huge_int(value: object, text: str) -> bool:
    """Whether value holds an integer that loads() would refuse. Walked only when the text
    has that many digits in a row (most text never does, and a string may)."""
    import re

    if re.search(f"[0-9]{{{_DOUBLE_DIGITS + 1}}}", text) is None:
        return False
    pending = [value]
    while pending:  # not recursive: the value may nest as deep as dumps allowed
        item = pending.pop()
        if isinstance(item, int) and not isinstance(item, bool):
            try:
                float(item)  # rounds as loads' float(text) does
            except OverflowError:
                return True
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
    return False


def _deeper_than(value: object, text: str, limit: int) -> bool:
    """Whether value (parsed from or written as text) nests more than limit levels.

    A text with at most `limit` brackets cannot nest deeper: that count, made in C,
    settles almost every message; only the others are walked, a level at a time.
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    level: list[list[object] | dict[str, object]] = (
        [value] if isinstance(value, (list, dict)) else []
    )
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[list[object] | dict[str, object]] = []
        for container in level:
            items = container.values() if isinstance(container, dict) else container
            below += [item for item in items if isinstance(item, (list, dict))]
        level = below
    return False
