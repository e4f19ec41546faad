"""Every failure Pynox reports as a `pynox: ...` line, and every exit status it gives.

The statuses follow env(1) and container runtimes: 125 means pynox itself failed (or
refused), so it never collides with the sandboxed program's own exit status.
"""

EXIT_SETUP_FAILURE = 125  # refused, or the sandbox could not be set up
EXIT_TIMEOUT = 124  # stopped at its wall-clock limit
EXIT_USAGE = 2  # a bad command line, as argparse and python give it
EXIT_CANNOT_OPEN = 2  # python's status for a script it cannot open
EXIT_COMMAND_NOT_TEXT = 1  # python's status for -c code it cannot encode
EXIT_FLUSH_FAILED = 120  # python's status when flushing stdout or stderr fails at exit
EXIT_CANCELLED = 137  # cancelled by the pool's client, as a shell reports a SIGKILL


class PynoxError(Exception):
    """A failure the user can fix; `message` is one sentence: what is wrong and what to do."""

    exit_code: int = EXIT_SETUP_FAILURE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def user_line(self) -> str:
        """The line printed on stderr."""
        return f"pynox: {self.message}"


class UsageError(PynoxError):
    """A bad command line."""

    exit_code = EXIT_USAGE


class ConfigError(PynoxError):
    """A pynox.toml that cannot be used."""


class PolicyError(PynoxError):
    """A policy that cannot be built, e.g. a grant path that does not exist."""


class SandboxError(PynoxError):
    """The kernel could not confine the process; nothing of the program ran."""


class ProgramNotFound(PynoxError):
    """The script cannot be opened: python's wording and exit status."""

    exit_code = EXIT_CANNOT_OPEN


class CommandNotText(PynoxError):
    """-c code holding bytes that were not UTF-8 on the command line, which python refuses
    to run: its wording (two lines) and exit status."""

    exit_code = EXIT_COMMAND_NOT_TEXT

    def user_line(self) -> str:
        return f"Unable to decode the command from the command line:\n{self.message}"
