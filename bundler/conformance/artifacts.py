"""What a cell copies into its container: the bundle, and pytest for the bundle's python."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bundler import commands
from bundler.commands import CommandFailed
from bundler.conformance.errors import Missing
from bundler.errors import BundlerError
from bundler.host import running_minor
from bundler.paths import PROJECT, cache_dir
from bundler.pipeline import bundle_name, pynox_version
from bundler.runtime_layout import python_tag

DIST = PROJECT / "dist"


def host_python() -> str:
    """The base interpreter behind the one running this (a venv's python is not packable)."""
    base = Path(getattr(sys, "_base_executable", "") or sys.executable).resolve()
    if Path(sys.base_prefix) in base.parents:
        return str(base)
    return str(Path(sys.base_prefix) / "bin" / f"python{running_minor()}")


def archive_name(target: str, minor: str) -> Path:
    """Where the bundler writes the bundle of TARGET and CPython MINOR in dist/."""
    return DIST / f"{bundle_name(pynox_version(), target, minor)}.tar.gz"


def _bundler(args: list[str]) -> None:
    commands.run(
        [sys.executable, "-m", "bundler", *args],
        cwd=PROJECT,
        failure=f"python -m bundler {args[0]} failed",
    )


def bundle(target: str, minor: str, runtime: Path, compiler: str = "auto") -> Path:
    """Builds the bundle for TARGET from the runtime archive into dist/."""
    where = ["--target", target, "--python", minor, "--runtime", str(runtime), "--out", str(DIST)]
    _bundler(["bundle", *where, "--compiler", compiler])
    archive = archive_name(target, minor)
    if not archive.is_file():
        raise BundlerError(f"the bundler did not write {archive}")
    return archive


def host_bundle(target: str, scratch: Path) -> Path:
    """pack-runtime from this machine's CPython, then the bundle with it as its runtime."""
    runtime = scratch / "cpython-host.tar.gz"
    _bundler(["pack-runtime", "--python", host_python(), "--output", str(runtime)])
    return bundle(target, running_minor(), runtime, compiler="native")


def pytest_for(minor: str) -> Path:
    """A folder with pytest and its dependencies for CPython MINOR, cached, for PYTHONPATH."""
    folder = cache_dir() / "conformance" / f"pytest-{python_tag(minor)}"
    if (folder / ".complete").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        commands.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--target", partial, "--python-version", minor, "--only-binary=:all:",
             "--no-compile", "pytest>=8"],
            capture=True,
        )  # fmt: skip
    except CommandFailed as failed:
        why = failed.last_line
        raise Missing(f"pytest for CPython {minor} could not be had from PyPI: {why}") from None
    (partial / ".complete").write_text("pytest>=8\n")
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    partial.rename(folder)
    return folder
