"""A download's progress: a live bar on a terminal, two notes elsewhere (see log)."""

from __future__ import annotations

import time

from bundler import log

MB = 1024 * 1024


class Progress:
    def __init__(self, label: str) -> None:
        self.label = label
        self.live = log.on_terminal()
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
            log.note(f"{verb} {self.label}{size}")

    def advance(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if self.live and now - self.shown >= 0.1:
            self.shown = now
            log.live(self._bar(now))

    def finish(self) -> None:
        if self.live:
            log.live(self._bar(time.monotonic()), done=True)
        else:
            log.note(f"downloaded {self.label} ({self.done / MB:.1f} MB)")

    def _bar(self, now: float) -> str:
        rate = self.done / max(now - self.started, 1e-3) / MB
        if self.total:
            fraction = min(self.done / self.total, 1.0)
            filled = int(fraction * 30)
            bar = "#" * filled + "." * (30 - filled)
            return (
                f"{self.label} [{bar}] {fraction:4.0%} "
                f"{self.done / MB:.1f}/{self.total / MB:.1f} MB {rate:.1f} MB/s"
            )
        return f"{self.label} {self.done / MB:.1f} MB {rate:.1f} MB/s"
