"""Why a cell did not run or failed before its suite."""

from __future__ import annotations

from bundler.errors import BundlerError


class Missing(BundlerError):
    """The cell cannot run on this machine (no runtime for it reachable, no root file
    system for its C library); the message names the missing part and how to get it.

    Such a cell is listed as not run. Any other BundlerError a cell meets fails it.
    """


class Unprepared(BundlerError):
    """A tool or package the cell needs is not installed: `make conformance-deps` installs
    it. The cell could run here, so it fails (never skipped in silence)."""
