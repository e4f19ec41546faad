"""Failures Pynox reports to the user as a single `pynox: ...` line."""


class PynoxError(Exception):
    """A failure the user can fix; `message` is one sentence: what is wrong and what to do.

    The exit codes follow env(1) and container runtimes: 125 means pynox itself failed,
    so it never collides with the sandboxed program's own exit status.
    """

    exit_code: int = 125

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def user_line(self) -> str:
        """The line printed on stderr."""
        return f"pynox: {self.message}"


class UsageError(PynoxError):
    """A bad command line (2, the exit status argparse uses too)."""

    exit_code = 2


class ConfigError(PynoxError):
    """A pynox.toml that cannot be used."""

    exit_code = 125


class PolicyError(PynoxError):
    """A policy that cannot be built, e.g. a grant path that does not exist."""

    exit_code = 125
