"""pynox.lean_os: what a run's start takes from `os`, without importing it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.commands import pynox, python

from pynox import lean_os

# Paths made of what makes os.path's string handling differ: slashes (doubled, leading,
# trailing), dots, a home's tilde, and names.
paths = st.text(alphabet="/.ab~", max_size=14)


@pytest.mark.unit
@given(paths, st.lists(paths, max_size=3))
def test_path_strings_are_split_and_joined_as_os_path_does(path: str, parts: list[str]) -> None:
    assert lean_os.join(path, *parts) == os.path.join(path, *parts)
    assert lean_os.dirname(path) == os.path.dirname(path)
    assert lean_os.basename(path) == os.path.basename(path)
    assert lean_os.isabs(path) == os.path.isabs(path)
    assert lean_os.normpath(path) == os.path.normpath(path)
    assert lean_os.abspath(path) == os.path.abspath(path)
    assert lean_os.expanduser(path) == os.path.expanduser(path)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Files, a directory, links to each, a chain, a dangling link and a loop."""
    (tmp_path / "dir" / "sub").mkdir(parents=True)
    (tmp_path / "dir" / "file").write_text("x")
    (tmp_path / "naïve").write_text("x")
    (tmp_path / "to-dir").symlink_to("dir")
    (tmp_path / "to-file").symlink_to(tmp_path / "dir" / "file")
    (tmp_path / "chain").symlink_to("to-dir")
    (tmp_path / "dangling").symlink_to("gone")
    (tmp_path / "loop-a").symlink_to("loop-b")
    (tmp_path / "loop-b").symlink_to("loop-a")
    (tmp_path / "up").symlink_to("dir/sub/..")
    return tmp_path


NAMES = [
    "dir",
    "dir/file",
    "naïve",
    "to-dir",
    "to-file",
    "chain/sub",
    "chain/sub/../file",
    "to-dir/../dir",
    "dangling",
    "dangling/below",
    "loop-a",
    "loop-a/below",
    "gone",
    "gone/below",
    "to-dir/gone",
    "chain/sub/gone",
    "gone/deeper/still",
    "to-dir/gone/deeper",
    "dangling/below/deeper",
    "dir/file/gone",
    "gone/../dir",
    "dangling/../gone",
    "dir/file/",
    "dir/file/..",
    "up",
    "dir//sub/.",
    "a\udcff-undecodable",
]


@pytest.mark.unit
@pytest.mark.parametrize("native", [True, False], ids=["real_path", "os.path"])
def test_realpath_and_file_types_are_os_paths(
    tree: Path, monkeypatch: pytest.MonkeyPatch, native: bool
) -> None:
    """Through pynox._native where it is loaded (realpath(3), and os.path.realpath for
    what that cannot resolve); os.path.realpath alone where it is not."""
    import pynox._native

    if native:
        monkeypatch.setitem(sys.modules, "pynox._native", pynox._native)
    else:
        monkeypatch.delitem(sys.modules, "pynox._native", raising=False)
    monkeypatch.chdir(tree)
    for name in NAMES:
        for path in (str(tree / name) + ("/" if name.endswith("/") else ""), name):
            assert lean_os.realpath(path) == os.path.realpath(path), path
            assert lean_os.isfile(path) == os.path.isfile(path), path
            assert lean_os.isdir(path) == os.path.isdir(path), path
    assert lean_os.realpath("") == os.path.realpath("")
    assert lean_os.isfile("a\0b") is os.path.isfile("a\0b") is False
    assert lean_os.isdir("a\0b") is False


@pytest.mark.unit
def test_real_path_resolves_or_says_none(tree: Path) -> None:
    from pynox._native import real_path

    assert real_path(str(tree / "chain" / "sub")) == str((tree / "dir" / "sub").resolve())
    assert real_path(str(tree / "loop-a")) is None
    assert real_path(str(tree / "gone")) is None
    with pytest.raises(TypeError):
        real_path(b"/")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        real_path("a\0b")


@pytest.mark.unit
def test_the_standard_library_is_where_os_is(monkeypatch: pytest.MonkeyPatch) -> None:
    assert lean_os.stdlib_dir() == os.path.dirname(os.__file__)
    monkeypatch.setattr(sys, "_stdlib_dir", None, raising=False)  # as on 3.10
    assert lean_os.stdlib_dir() == os.path.dirname(os.__file__)


# Run with `python -I -S`: the environment changed before `os` is imported, then what
# os.environ, and the C library (for the C code a program calls), make of it.
ENVIRONMENT_PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
from pynox import lean_os
assert "os" not in sys.modules
before = lean_os.environment()
lean_os.setenv("ADDED", "new é")
removed = lean_os.popenv("REMOVED")
missing = lean_os.popenv("NEVER_SET")
import ctypes, json, os
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
print(json.dumps({
    "before": before["ODD"],
    "getenv": lean_os.getenv("ODD"),
    "removed": removed,
    "missing": missing,
    "environ": dict(os.environ),
    "libc": [(libc.getenv(name) or b"").decode("utf-8", "surrogateescape")
             for name in (b"ADDED", b"REMOVED", b"ODD")],
}))
"""


def test_environment_changes_reach_os_environ_and_the_c_library(tmp_path: Path) -> None:
    odd = b"\xff-not-utf-8".decode("utf-8", "surrogateescape")
    site_packages = str(Path(lean_os.__file__).parents[1])
    env = {"ODD": odd, "REMOVED": "old"}
    proc = python("-I", "-S", "-c", ENVIRONMENT_PROBE, site_packages, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["before"] == seen["getenv"] == odd
    assert seen["removed"] == "old" and seen["missing"] is None
    assert seen["environ"]["ADDED"] == "new é" and seen["environ"]["ODD"] == odd
    assert "REMOVED" not in seen["environ"]
    assert seen["libc"] == ["new é", "", odd]


STDLIB_PROBE = (
    "import sys; print(sorted({'os', 'stat', 'posixpath', '_collections_abc'} & set(sys.modules)))"
)


MODES = {
    "plain": [],
    "timeout": ["--timeout=30s"],
    "json": ["--json"],
    "memory": ["--memory=1g"],
    "json-memory": ["--json", "--memory=1g"],
    "config": [],  # a pynox.toml with a time limit in the working directory
    "config-named": ["--config=elsewhere/pynox.toml"],
    "read-grant": ["--allow-read=data"],
    "write-grant": ["--allow-write=out"],  # and no pynox.toml yet, which it protects
    "network": ["--allow-network"],
}


@pytest.mark.parametrize("mode", list(MODES))
def test_a_program_starts_without_os_imported(tmp_path: Path, mode: str) -> None:
    """`import os` would cost every run about 2.7 ms: no mode's start imports it (with a
    pynox.toml, once its configuration is cached), and a program that imports it gets
    it whole."""
    for directory in ("data", "out", "elsewhere"):
        (tmp_path / directory).mkdir()
    (tmp_path / "elsewhere" / "pynox.toml").write_text('[permissions]\nallow_read = ["."]\n')
    if mode == "config":
        (tmp_path / "pynox.toml").write_text('[permissions]\ntimeout = "10s"\n')
    flags = MODES[mode]
    assert pynox(*flags, "-c", "pass", cwd=tmp_path).returncode == 0  # fills a config's cache
    proc = pynox(*flags, "-c", STDLIB_PROBE, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    output = json.loads(proc.stdout)["stdout"] if "--json" in flags else proc.stdout.decode()
    assert output == "[]\n"
    uses_os = "import os; print(os.path.join('a', 'b'), os.getcwd())"
    proc = pynox(*flags, "-c", uses_os, cwd=tmp_path)
    output = json.loads(proc.stdout)["stdout"] if "--json" in flags else proc.stdout.decode()
    assert output == f"a/b {tmp_path}\n"


# A module run with -m (or a directory's __main__.py): what it finds imported, then
# runpy's run_path, the one part of runpy that uses `os`, then `os` imported whole.
MODULE_PROBE = f"""{STDLIB_PROBE}
import runpy
print(runpy.run_path("other.py")["VALUE"])
import os
print(os.path.join("a", "b"), os.getcwd(), type(os.path).__name__)
"""


@pytest.mark.parametrize("kind", ["module", "directory"])
def test_a_module_run_as_main_starts_without_os_imported(tmp_path: Path, kind: str) -> None:
    """python -m runs a module through runpy, which imports `os`: pynox defers it, as
    for a script, and runpy's functions that use it still work."""
    (tmp_path / "other.py").write_text("import os\nVALUE = os.sep * 2\n")
    if kind == "module":
        (tmp_path / "probe.py").write_text(MODULE_PROBE)
        target = ["-m", "probe"]
    else:
        (tmp_path / "app").mkdir()
        (tmp_path / "app" / "__main__.py").write_text(MODULE_PROBE)
        target = ["app"]
    proc = pynox("--allow-read=.", *target, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # Only what runpy's other imports bring: nothing from 3.12 on, where importlib.util
    # no longer imports contextlib (which imports os on 3.11).
    runpy_imports = python("-I", "-S", "-c", f"import importlib.util; {STDLIB_PROBE}")
    assert proc.stdout.decode() == f"{runpy_imports.stdout.decode()}//\na/b {tmp_path} module\n"
    if sys.version_info >= (3, 12):
        assert runpy_imports.stdout == b"[]\n"
    # python, whose site imports os first, prints the same but for the first line
    # (-E -s: -I without -P, which would leave the module's directory off sys.path).
    expected = python("-E", "-s", *target, cwd=tmp_path)
    assert expected.returncode == 0, expected.stderr
    assert expected.stdout.decode().split("\n", 1)[1] == proc.stdout.decode().split("\n", 1)[1]


# Run with `python -I -S`: a module that reads `os` while it is imported gets it whole,
# and `os` is then in sys.modules as itself.
DEFERRED_PROBE = """
import sys
sys.path[:0] = [sys.argv[1], "."]
from pynox import lean_os
assert "os" not in sys.modules
runpy = lean_os.import_deferring_os("runpy")
assert "os" not in sys.modules, "runpy imported os"
reads = lean_os.import_deferring_os("reads_os")
import os
print(reads.SEP, sys.modules["os"] is os, os.path.join("a", "b"))
"""


def test_a_module_that_reads_os_as_it_is_imported_gets_it(tmp_path: Path) -> None:
    (tmp_path / "reads_os.py").write_text("import os\nSEP = os.sep\n")
    site_packages = str(Path(lean_os.__file__).parents[1])
    proc = python("-I", "-S", "-c", DEFERRED_PROBE, site_packages, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == "/ True a/b\n"
