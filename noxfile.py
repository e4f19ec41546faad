"""The project's jobs. `make test` runs `lint` and `tests`."""

from __future__ import annotations

import shutil

import nox

nox.options.default_venv_backend = "virtualenv"
# A CPython missing from this machine is reported as skipped, not failed.
nox.options.error_on_missing_interpreters = False

PYTHONS = ["3.10", "3.11", "3.12", "3.13", "3.14"]


@nox.session
def lint(session: nox.Session) -> None:
    """ruff and mypy over the package, the tests and the tooling."""
    session.install("ruff>=0.6", "mypy>=1.10", "tomli", "cffi", "pytest", "hypothesis", "nox")
    session.run("ruff", "check", "pynox", "tests", "runtime", "noxfile.py", "bench")
    session.run("ruff", "format", "--check", "pynox", "tests", "runtime", "noxfile.py", "bench")
    session.run("mypy", "pynox")


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """Build and install the package for one CPython, then run the suite."""
    if shutil.which(f"python{session.python}") is None:
        session.skip(f"CPython {session.python} is not installed on this machine")
    session.install(".[test]")
    session.run("pytest", *session.posargs)
