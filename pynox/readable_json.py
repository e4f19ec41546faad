"""The text json.dumps writes, for the plain data of a result, without importing json.

Apart from pynox.strict_json, which parses and writes what crosses a process
boundary with the json module: a run with --json hands its result's fixed text to
the launcher before the program starts, and importing json (which imports re)
would cost that run more than writing the text takes.
"""


class NotFinite(ValueError):
    """NaN, Infinity, or a number too large for a double: none of them is JSON's to carry."""


NOT_FINITE = "NaN and Infinity are not JSON values (RFC 8259)"  # NotFinite's message


def finite(value: float) -> bool:
    """math.isfinite, without loading math's shared library (~0.5 ms of a --json run):
    for NaN and the infinities, value - value is NaN."""
    return value - value == 0.0


def _json_string(text: str) -> str:
    """A string as json.dumps writes it. Most are printable ASCII without a quote or a
    backslash, written as they are: a run with --json then need not load the shared
    library of _json (~0.3 ms) for the few strings of its result."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    from _json import encode_basestring_ascii

    return encode_basestring_ascii(text)


def _key(key: object) -> str:
    """A dict key as json.dumps turns it into a string (not str(): True is "true")."""
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, float) and not finite(key):
        return "NaN" if key != key else ("Infinity" if key > 0 else "-Infinity")
    if isinstance(key, (int, float)):
        return dumps_readable(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def dumps_readable(value: object) -> str:
    """The text json.dumps(value) writes (", " and ": " between items, ASCII only), for
    the plain data of a result (dict, list, str, int, float, bool, None); a NaN or
    infinite float raises NotFinite."""
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
        if not finite(value):
            raise NotFinite(NOT_FINITE)
        return float.__repr__(value)
    if isinstance(value, dict):
        items = (f"{_json_string(_key(k))}: {dumps_readable(item)}" for k, item in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(dumps_readable(item) for item in value) + "]"
    raise TypeError(f"{type(value).__name__} is not plain JSON data")
