"""Durations and sizes as pynox writes them, in forms pynox.units reads back.

Apart from pynox.units, which parses what people write: a run with --json words
its limits for the launcher before the program starts, and needs only this.
"""

# format_size only uses units from a mebibyte up: smaller limits read fine in bytes.
_FORMAT_SIZE_UNITS = (("t", 1 << 40), ("g", 1 << 30), ("m", 1 << 20))
# Larger ones in kibibytes, which ulimit -v and -d count in: a limit set with them, such
# as the 300000k of ulimit -v 300000, is rarely a whole number of mebibytes.
_KIB = 1 << 10


def format_duration(seconds: float) -> str:
    """The shortest of "1h", "2m", "1.5s", "500ms" that pynox.units.parse_duration reads back."""
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    if seconds >= 1 or seconds == 0:
        return _trim_decimals(seconds) + "s"
    return _trim_decimals(seconds * 1000) + "ms"


def format_size(size: int) -> str:
    """ "512m", "1g", "2t" when the size is a whole number of those units, "300000k" when
    one of at least a mebibyte is a whole number of kibibytes, else plain bytes."""
    for unit, factor in _FORMAT_SIZE_UNITS:
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    if size >= 1 << 20 and size % _KIB == 0:
        return f"{size // _KIB}k"
    return str(size)


def _trim_decimals(number: float) -> str:
    return f"{number:.3f}".rstrip("0").rstrip(".")
