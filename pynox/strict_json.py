"""RFC 8259 JSON for whatever crosses a process boundary: strict both ways, bounded.

Python's json module accepts and writes `NaN`, `Infinity` and `-Infinity`,
which strict JSON clients reject, and raises RecursionError (not ValueError)
on deeply nested input. Every parse of data from another process (a child's
report or frames, a client's request lines) goes through `loads`, which turns
all of that into one ValueError, and every message written goes through
`dumps`, which refuses non-finite numbers instead of writing them.
"""

import json


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value (RFC 8259 has no NaN or Infinity)")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def loads(data: "bytes | bytearray | str") -> object:
    """Parses one JSON text; any malformed, non-UTF-8 or too deeply nested text is ValueError."""
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
        return _DECODER.decode(text)
    except RecursionError:
        # The parser recurses once per level of nesting; the interpreter's limit bounds it.
        raise ValueError("the JSON nests too deeply") from None


def dumps(value: object) -> str:
    """Compact JSON text; a NaN or infinite float raises ValueError instead of being written."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)
