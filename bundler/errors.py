"""The one error type of the bundler: a failure the user can act on."""

from __future__ import annotations


class BundlerError(Exception):
    """One sentence that says what went wrong and what to do about it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
