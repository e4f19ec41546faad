"""RFC 8259 JSON for whatever crosses a process boundary: strict both ways, bounded.

Python's json module accepts and writes `NaN`, `Infinity` and `-Infinity`,
which strict JSON clients reject, reads a number like `1e400` as infinity, and
raises RecursionError (not ValueError) on deeply nested input. Every parse of
data from another process (a child's report or frames, a client's request
lines) goes through `loads`, which turns all of that into one ValueError, and
every message written goes through `dumps`, which refuses non-finite numbers
instead of writing them. Both take an optional `max_depth`: a bound on nesting
that holds on every Python version, well below the interpreter's own limits.
"""

# json itself is imported where it parses or writes: it imports re, which a run
# with --json that only writes its result (dumps_readable) need not pay for.

TYPE_CHECKING = False
if TYPE_CHECKING:
    import json


class NotFinite(ValueError):
    """NaN, Infinity, or a number too large for a double: none of them is JSON's to carry."""


class TooDeep(ValueError):
    """The JSON nests deeper than the reader allows."""


def _finite(value: float) -> bool:
    """math.isfinite, without loading math's shared library (~0.5 ms of a --json run):
    for NaN and the infinities, value - value is NaN."""
    return value - value == 0.0


def _refuse_constant(name: str) -> object:
    raise NotFinite(f"{name} is not a JSON value (RFC 8259 has no NaN or Infinity)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not _finite(value):
        raise NotFinite(f"the number {text[:40]} is beyond the range of a double")
    return value


_DECODER: "json.JSONDecoder | None" = None


def _decoder() -> "json.JSONDecoder":
    global _DECODER
    if _DECODER is None:
        import json

        _DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
    return _DECODER


def loads(data: "bytes | bytearray | str", max_depth: "int | None" = None) -> object:
    """Parses one JSON text; any malformed, non-UTF-8 or too deeply nested text is ValueError."""
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
        value = _decoder().decode(text)
    except RecursionError:
        # The parser recurses once per level of nesting; the interpreter's limit bounds it.
        raise TooDeep("the JSON nests too deeply") from None
    if max_depth is not None and _deeper_than(value, text, max_depth):
        raise TooDeep(f"the JSON nests deeper than {max_depth} levels")
    return value


def dumps(value: object, max_depth: "int | None" = None) -> str:
    """Compact JSON text; a NaN or infinite float raises ValueError instead of being written."""
    import json

    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise TooDeep("the value nests too deeply for JSON") from None
    except ValueError as exc:
        if "Out of range float" in str(exc):
            raise NotFinite(f"NaN and Infinity are not JSON values (RFC 8259): {exc}") from None
        raise
    if max_depth is not None and _deeper_than(value, text, max_depth):
        raise TooDeep(f"the value nests deeper than {max_depth} levels")
    return text


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


def _json_string(text: str) -> str:
    """A string as json.dumps writes it. Most are printable ASCII without a quote or a
    backslash, written as they are: a run with --json then need not load the shared
    library of _json (~0.3 ms) for the few strings of its result."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    from _json import encode_basestring_ascii

    return encode_basestring_ascii(text)


def dumps_readable(value: object) -> str:
    """The text json.dumps(value) writes (", " and ": " between items, ASCII only), for
    the plain data of a result (dict, list, str, int, float, bool, None); a NaN or
    infinite float raises NotFinite. Written here, since importing json (which imports
    re) would cost a run with --json more than writing its one result takes."""
    if isinstance(value, str):
        return _json_string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if not _finite(value):
            raise NotFinite("NaN and Infinity are not JSON values (RFC 8259)")
        return float.__repr__(value)
    if isinstance(value, dict):
        items = (f"{_json_string(str(key))}: {dumps_readable(item)}" for key, item in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(dumps_readable(item) for item in value) + "]"
    raise TypeError(f"{type(value).__name__} is not plain JSON data")
