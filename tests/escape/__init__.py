"""Escape attempts from inside `pynox`, end to end through the command, by mechanism.

Each probe is a small program written into the script directory of a fresh world
(support/probes.py). A probe makes many attempts and prints one line per attempt,
`name: <outcome>`, where the outcome is `ok <value>` or `<ExceptionType> <ERRNO>`
(`errno <NAME>` for raw system calls). The tests assert each line, the `pynox:` hint
line where the CLI prints one, and from this process that nothing outside changed. A
probe that runs once serves a whole parametrized table through a module-scoped fixture
kept in the table's module, so the package stays fast.
"""
