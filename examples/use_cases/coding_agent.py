"""A coding agent running the test suite: a test that deletes a file in HOME fails instead.

The agent edits a small project and runs its tests with `pynox -m pytest`: the project
directory is readable, the installed packages (pytest among them) importable through
--package-dir, HOME visible through --allow-env, and nothing writable. One test the agent
wrote removes ~/important-notes.txt for real; under Pynox that test fails with a
PermissionError and the notes are still there afterwards.

    python examples/use_cases/coding_agent.py     # needs pytest installed

The project and the HOME it uses are temporary directories, removed at the end; the real
HOME is never touched.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from transcript import quoted, show_call

NOTES = "Call the landlord on Monday.\n"

TIDY = '''\
import os


def remove_if_exists(path):
    """Removes a file, `~` allowed; returns whether there was one."""
    path = os.path.expanduser(path)
    if not os.path.exists(path):
        return False
    os.remove(path)
    return True
'''

# The test file the agent writes: the second test deletes a real file in HOME.
TEST_TIDY = """\
from tidy import remove_if_exists


def test_a_missing_file_is_not_an_error():
    assert remove_if_exists("~/no-such-file.txt") is False


def test_removes_an_existing_file():
    assert remove_if_exists("~/important-notes.txt") is True
"""

# The project directory is read-only to the tests, so no cache; pytest's temporary files
# go to the run's scratch directory.
PYTEST_ARGS = ["-m", "pytest", "-q", "-p", "no:cacheprovider"]


def pynox_command() -> list[str]:
    """The `pynox` installed beside this interpreter, else `python -m pynox`."""
    beside = Path(sys.executable).with_name("pynox")
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "pynox"]


def package_dirs() -> list[str]:
    """Where this interpreter's packages (pytest and its dependencies) are installed."""
    paths = sysconfig.get_paths()
    return sorted({paths["purelib"], paths["platlib"]})


@contextmanager
def workspace() -> Iterator[tuple[Path, Path]]:
    """A temporary project with one module, and a temporary HOME holding the notes."""
    with tempfile.TemporaryDirectory(prefix="pynox-coding-") as tmp:
        project, home = Path(tmp) / "project", Path(tmp) / "home"
        (project / "tests").mkdir(parents=True)
        (project / "tidy.py").write_text(TIDY)
        home.mkdir()
        (home / "important-notes.txt").write_text(NOTES)
        yield project, home


def run_tests(project: Path, home: Path) -> str:
    """The agent's tool: `pynox -m pytest` in the project, its output as the model reads it."""
    grants = [f"--package-dir={path}" for path in package_dirs()] + ["--allow-env=HOME"]
    completed = subprocess.run(
        [*pynox_command(), *grants, *PYTEST_ARGS],
        cwd=project,
        env={**os.environ, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = (completed.stdout + completed.stderr).rstrip()
    return f"{output}\n[exit status {completed.returncode}]"


def main() -> None:
    if importlib.util.find_spec("pytest") is None:
        sys.exit("this example runs pytest under Pynox: install pytest first")
    with workspace() as (project, home):
        # The agent's file-editing tool writes the test; then it runs the suite.
        (project / "tests" / "test_tidy.py").write_text(TEST_TIDY)
        print("model: add tests for remove_if_exists")
        print("  wrote tests/test_tidy.py:")
        print(quoted(TEST_TIDY, "    |"))
        print()
        reply = run_tests(project, home)
        show_call("run the test suite", reply, tool="run_tests")
        notes = home / "important-notes.txt"
        kept = notes.exists() and notes.read_text() == NOTES
    print("denied: deleting ~/important-notes.txt;", "the notes are intact" if kept else "GONE")
    counts = re.search(r"\d+ failed, \d+ passed", reply)
    print("done:   the suite ran:", counts.group() if counts else "no summary")


if __name__ == "__main__":
    main()
