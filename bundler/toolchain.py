"""The C toolchain for a target: zig cc (PyPI `ziglang`) or this machine's cc.

zig builds for every target from this one machine, and for gnu targets it links
against glibc 2.28's symbol versions, so the binaries run on any glibc from 2.28
on. CMake gets small wrapper scripts as its compiler, archiver and ranlib.
"""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bundler.config import Target
from bundler.errors import BundlerError
from bundler.host import host_target


@dataclass(frozen=True)
class Toolchain:
    kind: str  # "zig" or "native"
    description: str
    cmake_args: list[str] = field(default_factory=list)


def zig_available() -> bool:
    return importlib.util.find_spec("ziglang") is not None


def _wrapper(path: Path, tool: str, extra: str) -> Path:
    # -I: a build frontend's environment (pip's build isolation) must not hide ziglang.
    # zig keeps what it builds once per target (libc, compiler-rt) in its global cache.
    python = shlex.quote(sys.executable)
    path.write_text(
        f'#!/bin/sh\nexec {python} -I -m ziglang {tool}{extra} "$@"\n', encoding="utf-8"
    )
    path.chmod(0o755)
    return path


def zig_toolchain(target: Target, directory: Path) -> Toolchain:
    directory.mkdir(parents=True, exist_ok=True)
    cc = _wrapper(directory / "zig-cc", "cc", f" -target {shlex.quote(target.zig_target)}")
    ar = _wrapper(directory / "zig-ar", "ar", "")
    ranlib = _wrapper(directory / "zig-ranlib", "ranlib", "")
    args = [f"-DCMAKE_C_COMPILER={cc}", f"-DCMAKE_AR={ar}", f"-DCMAKE_RANLIB={ranlib}"]
    if target.name != host_target():
        args += ["-DCMAKE_SYSTEM_NAME=Linux", f"-DCMAKE_SYSTEM_PROCESSOR={target.cmake_processor}"]
    return Toolchain("zig", f"zig cc -target {target.zig_target}", args)


def choose(target: Target, kind: str, directory: Path) -> Toolchain:
    """kind is auto (zig when installed, else native for this machine's target), zig or native."""
    native_ok = target.name == host_target()
    if kind == "native" or (kind == "auto" and native_ok and not zig_available()):
        if not native_ok:
            raise BundlerError(
                f"this machine is {host_target()} and cannot build {target.name} natively; "
                "use --compiler zig (pip install ziglang)"
            )
        compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if compiler is None:
            raise BundlerError(
                "no C compiler (cc) is installed; install one or pip install ziglang"
            )
        return Toolchain("native", f"native {compiler}", [f"-DCMAKE_C_COMPILER={compiler}"])
    if not zig_available():
        raise BundlerError(
            f"building for {target.name} needs zig: pip install ziglang into {sys.prefix}"
        )
    return zig_toolchain(target, directory)
