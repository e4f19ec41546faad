"""What the bundler tells the person running it: plain lines on stderr, in one format.

    bundler: built runtime/ with zig cc in 41.2 s      step: what the bundler did or does now
      pynox: aarch64, musl; file: ELF 64-bit ...       note: a detail of the step above
      $ cmake --build build --parallel 2              (the command runner's notes)
    bundler: warning: the cached ... downloading it again
    bundler: cannot download ...; set PYNOX_RUNTIME    error: why it stopped (the last line)

A failure ends with exactly one `bundler: ` line that is not a warning, so a person or a
test finds it as the last line. What a command answers (a path, a list of targets) is
not logged: output() writes it to stdout, where scripts read it.
"""

from __future__ import annotations

import sys

PREFIX = "bundler: "
INDENT = "  "


def step(text: str) -> None:
    """A stage of the work: begun, or done with its result."""
    _write(PREFIX + text)


def note(text: str) -> None:
    """A detail under the last step; every line of a multi-line text is indented."""
    for line in text.rstrip().splitlines() or [""]:
        _write(INDENT + line)


def warning(text: str) -> None:
    """Something went wrong and the bundler carried on (said what it did instead)."""
    _write(f"{PREFIX}warning: {text}")


def error(text: str) -> None:
    """Why the bundler stopped: the one sentence a failure ends with."""
    _write(PREFIX + text)


def output(text: str) -> None:
    """The command's answer, on stdout: one line, or several for a listing."""
    print(text, flush=True)


def on_terminal() -> bool:
    """Whether live() can redraw a line: stderr is a terminal."""
    return sys.stderr.isatty()


def live(text: str, done: bool = False) -> None:
    """Redraws the current terminal line (a download's bar); done ends that line."""
    sys.stderr.write("\r" + INDENT + text + ("\n" if done else ""))
    sys.stderr.flush()


def _write(line: str) -> None:
    # Looked up on every call: tests and callers may replace sys.stderr.
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
