"""Running other programs (cmake, pip, patchelf, git, a container engine): the one way.

Every command is shown as a note (`  $ cmake --build ...`) before it runs, reads
nothing from the terminal, and has its output collected, never mixed into the
bundler's own lines: stdout and stderr merged into one transcript (streamed into a
log file when one is given), or with capture=True kept apart, stdout being data the
caller reads. A command that cannot start, runs out of time or (unless check=False)
exits non-zero raises CommandFailed, a BundlerError whose message ends with the
command's last lines of output; check=False hands a failed result back instead, to a
caller for which failing is an answer (a probe).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from bundler import log
from bundler.errors import BundlerError

# returncode, stdout (the transcript, or the data with capture), stderr ("" unless capture)
Result = subprocess.CompletedProcess

TAIL_LINES = 6  # of a failed command's output, in the error


class CommandFailed(BundlerError):
    """A command that failed, with its last lines of output (none if it did not run)."""

    def __init__(self, message: str, lines: list[str], returncode: int | None) -> None:
        super().__init__(message)
        self.lines = lines
        self.returncode = returncode  # None when it did not start or did not finish

    @property
    def last_line(self) -> str:
        """What the command said last (usually why it failed), else the message."""
        return self.lines[-1] if self.lines else self.message


def run(
    command: Sequence[str | os.PathLike[str]],
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    capture: bool = False,
    check: bool = True,
    log_file: Path | None = None,
    failure: str | None = None,
) -> Result[str]:
    """Runs command and returns its result; failure starts the error's sentence.

    env replaces the environment, as subprocess's does. With log_file (not with
    capture) the transcript is appended to that file and the error names it.
    """
    argv = [os.fspath(part) for part in command]
    shown = show(argv)
    log.note(f"$ {shown}")
    short = shlex.join(argv[:4]) + (" ..." if len(argv) > 4 else "")
    failure = failure or f"`{short}` failed"
    try:
        with _output(log_file, shown) as out:
            done = subprocess.run(
                argv,
                cwd=cwd,
                env=env,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.PIPE if capture else subprocess.STDOUT,
                text=True,
                errors="replace",
            )
    except OSError as exc:
        raise CommandFailed(f"cannot run {argv[0]}: {exc.strerror or exc}", [], None) from None
    except subprocess.TimeoutExpired:
        raise CommandFailed(f"{failure}: it did not finish in {timeout:g} s", [], None) from None
    done.stdout, done.stderr = done.stdout or "", done.stderr or ""
    if check and done.returncode != 0:
        lines = last_lines(done, log_file)
        where = f" (log: {log_file})" if log_file is not None else ""
        said = f": {' | '.join(lines)}" if lines else f" with exit status {done.returncode}"
        raise CommandFailed(f"{failure}{where}{said}", lines, done.returncode)
    return done


def last_lines(done: Result[str], log_file: Path | None = None) -> list[str]:
    """The last lines of what a command wrote (of its log file, with one)."""
    if log_file is not None:
        text = log_file.read_text(encoding="utf-8", errors="replace")
    else:
        text = done.stdout + done.stderr
    return text.strip().splitlines()[-TAIL_LINES:]


def show(argv: Sequence[str]) -> str:
    """The command as a shell would take it; a multi-line argument (a -c program) shortened."""
    parts = []
    for part in argv:
        if "\n" in part.strip():
            first = part.strip().splitlines()[0]
            part = f"{first} ..."
        parts.append(shlex.quote(part))
    return " ".join(parts)


@contextmanager
def _output(log_file: Path | None, shown: str) -> Iterator[IO[str] | int]:
    """Where a command's stdout goes: the log file (after a `$ command` line), or a pipe."""
    if log_file is None:
        yield subprocess.PIPE
        return
    with log_file.open("a", encoding="utf-8") as out:
        out.write(f"$ {shown}\n")
        out.flush()
        yield out
