"""Paths and command-line arguments as text: what python makes of the operating system's
bytes, so that a pool request and the API give a program the text python would give it.

python decodes them with os.fsdecode: UTF-8, each byte that is not UTF-8 as a surrogate
from \\udc80 to \\udcff. JSON and Python strings can hold text that no bytes give: another
lone surrogate (\\ud800), which is refused, or surrogates whose bytes are UTF-8
("\\udcc3\\udca9" is "é"), which are taken as python would decode those bytes.
"""

import os

# Why such text is refused, and what to send instead.
NO_BYTES = (
    "holds a lone surrogate that stands for no byte, which no path or command-line argument "
    "can; send each byte that is not UTF-8 as the surrogate os.fsdecode gives for it "
    "(\\udc80 to \\udcff)"
)


def stands_for_bytes(text: str) -> bool:
    """Whether text is the os.fsdecode of some bytes (NUL aside, checked apart)."""
    if text.isascii():
        return True
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return True


def as_python_sees(text: str) -> str:
    """text as python finds the bytes it stands for (stands_for_bytes(text) is true)."""
    return text if text.isascii() else os.fsdecode(os.fsencode(text))
