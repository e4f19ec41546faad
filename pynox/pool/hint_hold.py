"""A streaming run's stderr from a `pynox: ` line on, held until its result is made.

The child writes its hint line after the traceback in an API caller's words; the result
says the hint as the pool judges it ([pool.limits], sessions) and rewrites that line in
its stderr (pynox.engine.result). So that the output events say what the result says, a
line that may be the hint waits here, with what follows it on stderr, and goes out
rewritten just before the result. What comes before it goes out at once, as does stdout:
only a run that writes a `pynox: ` line has any of its stderr held.
"""

PREFIX = b"pynox: "
# Beyond this much, what is held goes out as it is: the pool's memory stays bounded
# whatever a program writes after such a line (a hint line takes a few KiB at most).
MOST_HELD = 64 << 10


class HintHold:
    def __init__(self) -> None:
        self.held: bytearray | None = None
        # Whether what is held starts with the whole PREFIX (else only with its start).
        self.confirmed = False
        self.at_line_start = True
        self.given_up = False

    def feed(self, data: bytes) -> bytes:
        """What of data to stream now; the rest is held."""
        if self.held is not None and not self.confirmed:
            data, self.held, self.at_line_start = bytes(self.held) + data, None, True
        if self.held is not None:
            self.held += data
            if len(self.held) > MOST_HELD:
                self.given_up = True
                return self.release()
            return b""
        if self.given_up:
            return data
        at = self._possible_line(data)
        if at is None:
            if data:
                self.at_line_start = data.endswith(b"\n")
            return data
        self.held = bytearray(data[at:])
        self.confirmed = self.held.startswith(PREFIX)
        return data[:at]

    def release(self, line: "bytes | None" = None, judged: "bytes | None" = None) -> bytes:
        """What is held, its last `line` (at a line's start) replaced with `judged`, as
        the result's stderr has it."""
        held, self.held = self.held, None
        if held is None:
            return b""
        if line is not None and judged is not None:
            at = held.rfind(b"\n" + line) + 1
            if at or held.startswith(line):
                held[at : at + len(line)] = judged
        self.at_line_start = held.endswith(b"\n")
        return bytes(held)

    def _possible_line(self, data: bytes) -> "int | None":
        """Where the first line of data that starts, or may start, with PREFIX begins."""
        if self.at_line_start and data and PREFIX.startswith(data[: len(PREFIX)]):
            return 0
        at = data.find(b"\n" + PREFIX)
        if at >= 0:
            return at + 1
        # The last line's start, cut before the whole prefix came.
        at = data.rfind(b"\n", max(0, len(data) - len(PREFIX)))
        if at >= 0 and at + 1 < len(data) and PREFIX.startswith(data[at + 1 :]):
            return at + 1
        return None
