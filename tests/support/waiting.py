"""Waiting for a condition, with a deadline."""

from __future__ import annotations

import time
from typing import Any


def wait_until(condition: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()
