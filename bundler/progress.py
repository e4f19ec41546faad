"""A download's progress on stderr: a live bar on a terminal, two lines elsewhere."""

from __future__ import annotations

import sys
import time
from typing import TextIO

MB = 1024 * 1024


class Progress:
    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty()
        self.total: int | None = None
        self.done = 0
        self.started = time.monotonic()
        self.shown = 0.0

    def start(self, total: int | None, resumed_at: int = 0) -> None:
        self.total = total
        self.done = resumed_at
        self.started = time.monotonic()
        size = f" ({total / MB:.1f} MB)" if total else ""
        verb = f"resuming at {resumed_at / MB:.1f} MB:" if resumed_at else "downloading"
        if not self.live:
            self._line(f"{verb} {self.label}{size}")

    def advance(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if self.live and now - self.shown >= 0.1:
            self.shown = now
            self._bar(now)

    def finish(self) -> None:
        if self.live:
            self._bar(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
        else:
            self._line(f"downloaded {self.label} ({self.done / MB:.1f} MB)")

    def _bar(self, now: float) -> None:
        rate = self.done / max(now - self.started, 1e-3) / MB
        if self.total:
            fraction = min(self.done / self.total, 1.0)
            filled = int(fraction * 30)
            bar = "#" * filled + "." * (30 - filled)
            text = (
                f"\r{self.label} [{bar}] {fraction:4.0%} "
                f"{self.done / MB:.1f}/{self.total / MB:.1f} MB {rate:.1f} MB/s"
            )
        else:
            text = f"\r{self.label} {self.done / MB:.1f} MB {rate:.1f} MB/s"
        self.stream.write(text)
        self.stream.flush()

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()
