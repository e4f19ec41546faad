"""The bundle a cell tests, and the CPython runtime it is built from.

host: packed from the CPython running this (the host cell builds afresh every
run; the old-glibc cell reuses that bundle from dist/). rootfs: packed from the
python3 of the cell's Debian root, run there (under qemu-user for arm64), then
cross-built with zig; reused from dist/ when there. given: only from
PYNOX_CONFORMANCE_RUNTIME_<CELL>, a python-build-standalone archive; that
variable overrides the runtime of any cell.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path, PurePosixPath

from bundler import commands
from bundler.conformance import artifacts, binfmt, rootfs
from bundler.conformance.cells import Cell
from bundler.conformance.engines.bubblewrap import BubblewrapContainer
from bundler.conformance.errors import Missing
from bundler.errors import BundlerError
from bundler.host import running_minor
from bundler.paths import PROJECT, cache_dir
from bundler.pipeline import pynox_version
from bundler.source_date import source_date_epoch

# A Debian root whose python3 feeds pack-runtime: the interpreter and its C headers, and
# patchelf, which points the libraries pack-runtime carries at each other.
ROOTFS_PYTHON = ("python3", "libpython3-dev", "patchelf")
# The pure-Python packages pack-runtime reads ELF files with, copied in beside the bundler.
PACK_RUNTIME_PACKAGES = ("elftools", "auditwheel", "packaging")


# A bundle archive (with its .sha256 beside it) every cell of the run tests instead of its
# own: how a test puts a deliberately broken build in front of a cell.
BUNDLE_ENV = "PYNOX_CONFORMANCE_BUNDLE"


def env_name(cell: Cell) -> str:
    return "PYNOX_CONFORMANCE_RUNTIME_" + cell.name.upper().replace("-", "_").replace(".", "_")


def bundle_for(cell: Cell, scratch: Path, notes: list[str]) -> Path:
    bundle = os.environ.get(BUNDLE_ENV)
    if bundle:
        notes.append(f"bundle {bundle} (from {BUNDLE_ENV})")
        return Path(bundle)
    given = os.environ.get(env_name(cell))
    if given:
        minor = _minor_of(Path(given))
        notes.append(f"runtime {given} (from {env_name(cell)})")
        return artifacts.bundle(cell.target, minor, Path(given), compiler="zig")
    if cell.runtime == "host":
        minor = running_minor()
        reused = artifacts.archive_name(cell.target, minor)
        if cell.name != cell.target and _complete(reused):
            notes.append(f"bundle reused from dist/ ({reused.name})")
            return reused
        notes.append(f"runtime packed from {artifacts.host_python()}")
        return artifacts.host_bundle(cell.target, scratch)
    if cell.runtime == "rootfs":
        return _rootfs_bundle(cell, notes)
    raise Missing(
        f"no {cell.target} runtime: python-build-standalone is not reachable from this "
        f"machine and no local CPython is built for {cell.target}; give one with "
        f"{env_name(cell)}=ARCHIVE"
    )


def _complete(archive: Path) -> bool:
    return archive.is_file() and Path(f"{archive}.sha256").is_file()


def _rootfs_bundle(cell: Cell, notes: list[str]) -> Path:
    existing = sorted(artifacts.DIST.glob(f"pynox-{pynox_version()}-{cell.target}-cp*.tar.gz"))
    existing = [archive for archive in existing if _complete(archive)]
    if existing:
        notes.append(f"bundle reused from dist/ ({existing[-1].name}); delete it to rebuild")
        return existing[-1]
    runtime = rootfs_runtime(cell, notes)
    return artifacts.bundle(cell.target, _minor_of(runtime), runtime, compiler="zig")


def rootfs_runtime(cell: Cell, notes: list[str]) -> Path:
    """The runtime packed from the python3 of the cell's Debian root, cached beside the
    roots (a test rebuilds the bundle from it)."""
    root, _ = rootfs.debian(cell.suite, cell.arch, ROOTFS_PYTHON)
    runtime = cache_dir() / "conformance" / f"cpython-{root.name}.tar.gz"
    if runtime.is_file() and runtime.stat().st_mtime >= (root / rootfs.MARKER).stat().st_mtime:
        notes.append(f"runtime {runtime} (packed from /usr/bin/python3 of {root})")
        return runtime
    if cell.cpu == "aarch64":
        notes.append("runtime packed under qemu-user: aarch64 runs " + binfmt.ensure_aarch64())
    box = BubblewrapContainer(root)
    try:
        box.copy_in(PROJECT / "bundler", PurePosixPath("/conformance/src/bundler"))
        for name in PACK_RUNTIME_PACKAGES:
            box.copy_in(_package_dir(name), PurePosixPath("/conformance/src") / name)
        out = PurePosixPath("/conformance/cpython.tar.gz")
        packed = box.call(
            ["python3", "-m", "bundler", "pack-runtime", "--python", "/usr/bin/python3",
             "--output", str(out)],
            env={
                "PYTHONPATH": "/conformance/src",
                "PYTHONDONTWRITEBYTECODE": "1",
                "SOURCE_DATE_EPOCH": str(source_date_epoch()),  # no git checkout in there
            },
            cwd="/conformance/src",
        )  # fmt: skip
        if packed.returncode != 0:
            raise BundlerError(f"pack-runtime in {root} failed: {packed.stderr.strip()}")
        runtime.parent.mkdir(parents=True, exist_ok=True)
        partial = runtime.with_name(runtime.name + ".partial")
        box.copy_out(out, partial)
        partial.rename(runtime)
    finally:
        box.close()
    notes.append(f"runtime packed from /usr/bin/python3 of {root}")
    return runtime


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise Missing(f"{name} is not installed here (pip install auditwheel)")
    return Path(list(spec.submodule_search_locations)[0])


def _minor_of(runtime: Path) -> str:
    done = commands.run(
        [sys.executable, "-m", "bundler", "default-python", "--runtime", runtime],
        cwd=PROJECT,
        capture=True,
        failure=f"cannot tell the CPython of {runtime}",
    )
    return done.stdout.strip()
