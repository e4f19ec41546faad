"""Where the tests and the project are."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
