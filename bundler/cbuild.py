"""Building runtime/ (sandbox core, cffi extension, launcher) for one target with CMake.

The same CMakeLists builds every target. With a target runtime the extension is
compiled against that runtime's own headers, the binding's C source written by
this machine's Python (cffi); without one only the launcher and the sandbox core
are built, and the result says why the extension is missing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from bundler import commands
from bundler.config import Target
from bundler.errors import BundlerError
from bundler.paths import PROJECT
from bundler.toolchain import Toolchain


@dataclass(frozen=True)
class BuildResult:
    launcher: Path
    core_library: Path
    extensions: dict[str, Path]  # module name (e.g. "_core") -> the built file
    extension_note: str  # how they were built, or why they were not
    toolchain: Toolchain


def _require_cffi() -> None:
    if importlib.util.find_spec("cffi") is None:
        raise BundlerError(
            f"the bundler's Python ({sys.executable}) needs cffi to write the binding: "
            "pip install cffi"
        )


def build(
    target: Target,
    build_dir: Path,
    toolchain: Toolchain,
    python_version: str,
    include_dir: Path | None,
) -> BuildResult:
    """Configures and builds; include_dir None builds the launcher and core library only."""
    if shutil.which("cmake") is None:
        raise BundlerError(
            "cmake is not installed; install it (apt-get install cmake or pip install cmake)"
        )
    _require_cffi()
    build_dir.mkdir(parents=True, exist_ok=True)
    log = build_dir / "build.log"
    log.write_text("", encoding="utf-8")
    configure = [
        "cmake",
        "-S",
        str(PROJECT),
        "-B",
        str(build_dir),
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DPYNOX_PYTHON_VERSION={python_version}",
        # No debug info, no build paths: the same sources give the same binaries.
        f"-DCMAKE_C_FLAGS=-g0 -ffile-prefix-map={PROJECT}=. -ffile-prefix-map={build_dir}=build"
        + _test_define(),
        "-DCMAKE_EXE_LINKER_FLAGS=-s",
        "-DCMAKE_SHARED_LINKER_FLAGS=-s",
        "-DCMAKE_MODULE_LINKER_FLAGS=-s",
        *toolchain.cmake_args,
    ]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    # CMake never runs a Python here (a cross build could not run the target's): the
    # headers are named, and this machine's Python with cffi writes the binding. Without
    # a runtime, this interpreter's headers let the project configure; only the launcher
    # and the sandbox core are built then.
    headers = include_dir or Path(sysconfig.get_path("include"))
    configure += [f"-DPYNOX_FFI_PYTHON={sys.executable}", f"-DPython_INCLUDE_DIR={headers}"]
    commands.run(configure, log_file=log)
    out = build_dir / "runtime"
    if include_dir is None:
        commands.run(
            [
                "cmake",
                "--build",
                str(build_dir),
                "--parallel",
                "2",
                "--target",
                "pynox_launcher",
                "pynox_sandbox",
            ],
            log_file=log,
        )
        return BuildResult(
            launcher=out / "pynox",
            core_library=out / "libpynox_sandbox.a",
            extensions={},
            extension_note=f"not built: no {target.name} runtime to compile against "
            "(the extensions need its CPython headers)",
            toolchain=toolchain,
        )
    commands.run(["cmake", "--build", str(build_dir), "--parallel", "2"], log_file=log)
    installed = build_dir / "installed"
    if installed.exists():
        shutil.rmtree(installed)
    commands.run(["cmake", "--install", str(build_dir), "--prefix", str(installed)], log_file=log)
    # Every extension module the build installs into the package, whatever it adds later.
    extensions = {p.name.split(".")[0]: p for p in sorted((installed / "pynox").glob("*.so"))}
    if "_core" not in extensions:
        raise BundlerError(f"the build installed no _core module into {installed}/pynox")
    return BuildResult(
        launcher=installed / "bin" / "pynox",
        core_library=out / "libpynox_sandbox.a",
        extensions=extensions,
        extension_note=f"built against {include_dir}",
        toolchain=toolchain,
    )


def _test_define() -> str:
    """` -DNAME` for PYNOX_TEST_C_DEFINE=NAME: a test's deliberately broken build (see
    runtime/syscalls.h); nothing else sets it."""
    name = os.environ.get("PYNOX_TEST_C_DEFINE", "")
    if not name:
        return ""
    if not name.isidentifier() or not name.startswith("PYNOX_TEST_"):
        raise BundlerError(f"PYNOX_TEST_C_DEFINE={name!r} is not a PYNOX_TEST_ macro name")
    return f" -D{name}"
