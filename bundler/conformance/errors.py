"""Why a cell did not run: a part it needs cannot be had on this machine."""

from __future__ import annotations


class Missing(Exception):
    """The cell is skipped; the message names the missing part and how to get it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
