"""Durations and sizes as people write them: "500ms", "10s", "2m", "512m", "1g".

Imported by every run with a limit, so it uses nothing but builtins (no `re`, no
`__future__`). How pynox writes them back is pynox.unit_format's.
"""

from pynox.errors import PynoxError, UsageError
from pynox.limits import MAX_TIMEOUT
from pynox.unit_format import format_duration, format_size

# Limits end up in setrlimit() as signed 64-bit numbers; no real limit comes near 2**60.
LARGEST_SIZE = 1 << 60

_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_NUMBER_CHARS = frozenset("0123456789.")
# The digits of a size's fraction that are read: 1t is 2**40, about 1.1e12 bytes.
_FRACTION_DIGITS = 60
# A count with more digits is beyond any machine (and int() refuses more than 4300).
_MAX_COUNT_DIGITS = 18
LARGEST_COUNT = 10**_MAX_COUNT_DIGITS - 1
# log10(2), rounded down: how many decimal digits a number of so many bits has, at least.
_DIGITS_PER_BIT = 0.30102
_DURATION_HINT = "write it like 500ms, 5s, 2m or 1h"
_SIZE_HINT = "write it like 65536, 64k, 512m or 1g"


def parse_duration(value: object, what: str, *, error: type[PynoxError] = UsageError) -> float:
    """Seconds, rounded to whole milliseconds, from a number of seconds or a string like
    "500ms", "5s", "2m", "1h" or "90".

    `what` names the setting: a flag or variable ("--timeout") or a phrase starting with the
    key ("timeout in [permissions] of /p/pynox.toml"); see `describe_setting`.
    """
    seconds = _duration_seconds(value)
    subject = describe_setting(what, value)
    if seconds is None:
        raise error(f"{subject} is not a duration; {_DURATION_HINT}")
    if seconds <= 0:
        raise error(f"{subject} is not more than zero; give a positive duration, like 5s")
    if seconds > MAX_TIMEOUT:
        limit = format_duration(MAX_TIMEOUT)
        raise error(f"{subject} is above the {limit} maximum; give at most {limit}")
    # Whole milliseconds: what the launcher's clock enforces, timeout_ms reports and
    # format_duration shows, so a limit is compared and named as it is enforced.
    milliseconds = round(seconds * 1000)
    if milliseconds < 1:
        raise error(f"{subject} is below the 1ms minimum; give at least 1ms")
    return milliseconds / 1000


def _worded_size(size: int) -> str:
    """A size in a sentence: "32m", and a number of bytes with its unit ("1 byte"), which
    "below the 1 minimum" would leave out."""
    shown = format_size(size)
    if not shown.isdigit() or size == 0:
        return shown
    return f"{shown} byte" if size == 1 else f"{shown} bytes"


def parse_size(
    value: object,
    what: str,
    minimum: int = 0,
    maximum: int | None = None,
    *,
    error: type[PynoxError] = UsageError,
) -> int:
    """Bytes from an int or a string like "100", "64k", "512m", "1.5g", "2TiB" (1k = 1024).

    Fractions round down to whole bytes. `what` is as for `parse_duration`.
    """
    size = _size_bytes(value)
    subject = describe_setting(what, value)
    if size is None:
        raise error(f"{subject} is not a size; {_SIZE_HINT}")
    limit = LARGEST_SIZE if maximum is None else maximum
    if size < 0:
        raise error(f"{subject} is negative; give a size of at least {_worded_size(minimum)}")
    if size < minimum:
        floor = _worded_size(minimum)
        raise error(f"{subject} is below the {floor} minimum; give at least {floor}")
    if size > limit:
        ceiling = _worded_size(limit)
        raise error(f"{subject} is above the {ceiling} maximum; give at most {ceiling}")
    return size


def parse_count(text: str, what: str) -> int:
    """A whole number of at least 1 in ASCII digits, as --workers takes it (str.isdigit()
    alone also takes "²", which int() refuses); `what` names the flag."""
    if not (text.isascii() and text.isdigit()) or not text.strip("0"):
        raise UsageError(f"{what}={text} is not a whole number of at least 1; give one, such as 2")
    if len(text.lstrip("0")) > _MAX_COUNT_DIGITS:
        raise UsageError(f"{what}={text} is more than any machine can run; give a number like 4")
    return int(text)


def describe_setting(what: str, value: object) -> str:
    """How an error names a setting and its value.

    A bare name becomes `--timeout=abc`; a phrase `KEY in PLACE` becomes
    `KEY = "abc" in PLACE`, the way the value is written in the file.
    """
    key, space, place = what.partition(" ")
    if not space:
        shown = value if isinstance(value, str) else _toml_literal(value)
        return f"{what}={shown}"
    return f"{key} = {_toml_literal(value)} {place}"


def _duration_seconds(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:  # a huge int is out of range either way
            return float("inf") if value > 0 else float("-inf")
    if isinstance(value, float):
        return None if value != value else value  # NaN is no duration
    if not isinstance(value, str):
        return None
    sign, number, unit = _split_quantity(value)
    factor = _DURATION_UNITS.get(unit or "s")
    if number is None or factor is None:
        return None
    return sign * float(number) * factor


def _size_bytes(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        return None
    sign, number, unit = _split_quantity(value)
    factor = _size_factor(unit)
    if number is None or factor is None:
        return None
    whole, _, fraction = number.partition(".")
    whole = whole.lstrip("0")  # leading zeros say nothing of the size
    if len(whole) > 40:  # beyond any limit; also keeps int() under its digit cap
        return sign * (LARGEST_SIZE + 1)
    # Digits past these are far below a byte of any unit; int() reads the rest.
    fraction = fraction[:_FRACTION_DIGITS]
    # Integer arithmetic keeps "1.1g" exact where float would round.
    divisor: int = 10 ** len(fraction)
    return sign * (int(whole + fraction or "0") * factor // divisor)


def _size_factor(unit: str) -> int | None:
    if unit.endswith("ib"):
        unit = unit[:-2]
        if not unit:
            return None
    elif unit.endswith("b"):
        unit = unit[:-1]
    return _SIZE_UNITS.get(unit)


def _split_quantity(text: str) -> tuple[int, str | None, str]:
    """(sign, digits with at most one '.', lower-case unit); digits are None if malformed."""
    text = text.strip().lower()
    sign = 1
    if text[:1] in ("-", "+"):
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    end = 0
    while end < len(text) and text[end] in _NUMBER_CHARS:
        end += 1
    number, unit = text[:end], text[end:].strip()
    if number.count(".") > 1 or not number.strip("."):
        return sign, None, unit
    return sign, number, unit


def _toml_literal(value: object) -> str:
    """The value as it would be written in pynox.toml, for error messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_literal(v)}" for k, v in value.items()) + "}"
    if hasattr(value, "isoformat"):  # a TOML date or time, as TOML writes it
        return str(value.isoformat())
    if isinstance(value, int):
        try:
            return repr(value)
        except ValueError:  # past Python's limit on digits (sys.get_int_max_str_digits)
            return f"<an integer of {int(value.bit_length() * _DIGITS_PER_BIT)} digits or more>"
    return repr(value)
