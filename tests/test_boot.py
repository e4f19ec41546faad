"""pynox._boot: the start-up image of pynox's hot modules, and when it is not used."""

from __future__ import annotations

import marshal
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import pynox as run_pynox
from conftest import python

import pynox
from pynox import _boot

PACKAGE = Path(pynox.__file__).parent


@pytest.fixture
def package_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """_boot pointed at a copy of the package's sources, so tests can change them."""
    copy = tmp_path / "pynox"
    copy.mkdir()
    for source in PACKAGE.glob("*.py"):
        shutil.copy2(source, copy / source.name)
    monkeypatch.setattr(_boot, "_PACKAGE_DIR", str(copy))
    image = copy / "__pycache__" / Path(_boot._IMAGE).name
    monkeypatch.setattr(_boot, "_IMAGE", str(image))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as pynox itself runs
    yield copy


def image_of(copy: Path) -> Path:
    return copy / "__pycache__" / Path(_boot._IMAGE).name


def test_written_image_loads_every_hot_module(package_copy: Path) -> None:
    assert _boot._load_image() is None  # none yet
    _boot._write_image()
    codes = _boot._load_image()
    assert codes is not None
    assert set(codes) == set(_boot.HOT_MODULES)
    cli = codes["pynox.cli"]
    assert cli.co_filename == str(package_copy / "cli.py")
    # Nothing else is left in the cache directory (the temporary file is renamed).
    assert [p.name for p in image_of(package_copy).parent.iterdir()] == [
        image_of(package_copy).name
    ]


@pytest.mark.parametrize("change", ["size", "mtime"])
def test_a_changed_source_makes_the_image_unused(package_copy: Path, change: str) -> None:
    _boot._write_image()
    source = package_copy / "child.py"
    if change == "size":
        source.write_text(source.read_text() + "\n# changed\n")
    else:
        stat = source.stat()
        os.utime(source, (stat.st_atime, stat.st_mtime + 10))
    assert _boot._load_image() is None


def test_a_damaged_image_or_another_magic_is_unused(package_copy: Path) -> None:
    _boot._write_image()
    image = image_of(package_copy)
    data = image.read_bytes()
    image.write_bytes(data[: len(data) // 2])
    assert _boot._load_image() is None
    magic, entries = marshal.loads(data)
    image.write_bytes(marshal.dumps((b"\0\0\r\n", entries)))
    assert _boot._load_image() is None
    del entries["pynox.cli"]
    image.write_bytes(marshal.dumps((magic, entries)))
    assert _boot._load_image() is None


def test_nothing_is_written_where_python_would_write_no_pyc(
    package_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    _boot._write_image()
    assert not image_of(package_copy).exists()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    package_copy.chmod(0o555)
    try:
        if os.access(package_copy, os.W_OK):  # root ignores modes
            pytest.skip("running as root: a read-only directory is still writable")
        _boot._write_image()
        assert not image_of(package_copy).exists()
    finally:
        package_copy.chmod(0o755)


PROBE = (
    "import gc, sys\n"
    "print(type(sys.modules['pynox.cli'].__spec__.loader).__name__)\n"
    "print(any(type(f).__name__ == '_ImageFinder' for f in sys.meta_path), gc.isenabled())\n"
)


@pytest.mark.parametrize("mode", [[], ["--timeout=30s"]], ids=["in-process", "supervised"])
def test_runs_load_pynox_from_the_image_and_the_program_never_sees_it(mode: list[str]) -> None:
    run_pynox("-c", "pass")  # writes the image if the installed package lacks one
    if not Path(_boot._IMAGE).exists():
        pytest.skip("the installed package's directory is not writable: no image")
    proc = run_pynox(*mode, "-c", PROBE)
    assert proc.returncode == 0, proc.stderr
    # pynox came from the image; the finder left sys.meta_path and the
    # collector is on, as python starts the program.
    assert proc.stdout.decode() == "_ImageFinder\nFalse True\n"


def test_the_image_holds_code_that_optimize_2_leaves_unchanged_but_for_docstrings() -> None:
    """The image compiles as `python -OO` does: no hot module may rely on assert or __debug__."""
    import ast

    for name in _boot.HOT_MODULES:
        tree = ast.parse((PACKAGE / (name.rpartition(".")[2] + ".py")).read_text())
        asserts = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)]
        debug = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Name) and node.id == "__debug__"
        ]
        assert asserts == [] and debug == [], (name, asserts, debug)


MODULES = "import sys\nprint(' '.join(sorted(sys.modules)))\n"
# What pynox itself brings along: its own modules, its cffi binding's backend, gc.
OWN = ("pynox", "_cffi_backend", "gc")


def test_a_plain_run_imports_nothing_python_would_not(tmp_path: Path) -> None:
    """Every module on the start-up path costs every run: only pynox's own may be extra."""
    script = tmp_path / "modules.py"
    script.write_text(MODULES)
    run_pynox(str(script))  # writes the image if it is missing
    python_modules = set(python("-I", str(script)).stdout.decode().split())
    proc = run_pynox(str(script))
    assert proc.returncode == 0, proc.stderr
    extra = set(proc.stdout.decode().split()) - python_modules
    assert sorted(m for m in extra if m.partition(".")[0] not in OWN) == []
