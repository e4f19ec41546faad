"""Why a cell did not run: a part it needs cannot be had on this machine."""

from __future__ import annotations

from bundler.errors import BundlerError


class Missing(BundlerError):
    """The cell is skipped; the message names the missing part and how to get it.

    Any other BundlerError a cell meets (a command that failed) fails the cell.
    """
