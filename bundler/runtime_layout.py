"""What a runtime folder (PBS install_only layout) holds, read without running it.

Reading files instead of starting the interpreter works for every target,
including those this machine cannot execute.
"""

from __future__ import annotations

import ast
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundler import elf, unpack
from bundler.errors import BundlerError

# pack-runtime leaves this file in the runtimes it makes (python/PYNOX-PACKED.txt).
PACKED_MARKER = "PYNOX-PACKED.txt"


@dataclass(frozen=True)
class RuntimeInfo:
    root: Path  # the folder with bin/, lib/ and include/
    version: str  # e.g. 3.12.12
    minor: str  # e.g. 3.12
    stdlib: Path  # root/lib/python3.12
    include: Path  # root/include/python3.12
    executable: Path  # root/bin/python3.12
    sysconfigdata: Path | None
    build_vars: dict[str, Any]
    arch: str
    libc: str

    @property
    def ext_suffix(self) -> str:
        value = self.build_vars.get("EXT_SUFFIX")
        if not isinstance(value, str) or not value:
            raise BundlerError(f"{self.sysconfigdata} has no EXT_SUFFIX; the runtime is incomplete")
        return value

    @property
    def python_tag(self) -> str:
        return python_tag(self.minor)


def python_tag(minor: str) -> str:
    """The wheel and bundle tag of a CPython minor: cp312 for 3.12."""
    return "cp" + minor.replace(".", "")


def find_root(folder: Path) -> Path:
    """The runtime's root inside an unpacked archive or a given folder."""
    for candidate in (folder / "python", folder):
        if (candidate / "bin").is_dir() and (candidate / "lib").is_dir():
            return candidate
    raise BundlerError(
        f"{folder} is not a Python runtime: it has neither python/bin and python/lib nor "
        "bin and lib; give a python-build-standalone install_only archive or folder"
    )


def read_build_vars(path: Path) -> dict[str, Any]:
    """build_time_vars of a _sysconfigdata module, a literal dict."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "build_time_vars" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            if isinstance(value, dict):
                return value
    raise BundlerError(f"{path} has no build_time_vars; the runtime is incomplete")


def minor_of(runtime: Path) -> str:
    """The CPython minor of a runtime archive or folder, from its lib/python3.X/os.py."""
    names: list[str] = []
    if runtime.is_dir():
        root = find_root(runtime)
        names = [p.as_posix() for p in (root / "lib").glob("python3.*/os.py")]
    elif runtime.is_file():
        try:
            with tarfile.open(runtime) as tar:
                names = [n for n in tar.getnames() if n.endswith("/os.py")]
        except unpack.DAMAGED as exc:
            raise unpack.damaged(runtime, exc, "read") from None
    for name in names:
        match = re.search(r"lib/python(3\.\d+)/os\.py$", name)
        if match:
            return match.group(1)
    raise BundlerError(f"{runtime} holds no CPython standard library (lib/python3.X/os.py)")


def headers_version(include: Path) -> str:
    """PY_VERSION of a CPython include folder (from patchlevel.h)."""
    patchlevel = include / "patchlevel.h"
    try:
        match = re.search(r'#define\s+PY_VERSION\s+"([^"]+)"', patchlevel.read_text())
    except OSError:
        match = None
    if not match:
        raise BundlerError(f"{patchlevel} is missing or has no PY_VERSION; give CPython's headers")
    return match.group(1)


def inspect(folder: Path) -> RuntimeInfo:
    root = find_root(folder)
    stdlibs = sorted(
        p for p in (root / "lib").glob("python3.*") if re.fullmatch(r"python3\.\d+", p.name)
    )
    stdlibs = [p for p in stdlibs if (p / "os.py").is_file()]
    if len(stdlibs) != 1:
        raise BundlerError(f"{root}/lib should hold exactly one python3.X standard library")
    stdlib = stdlibs[0]
    minor = stdlib.name.removeprefix("python")
    include = root / "include" / f"python{minor}"
    version = headers_version(include)
    executable = root / "bin" / f"python{minor}"
    binary = elf.read(executable) if executable.is_file() else None
    if binary is None:
        raise BundlerError(f"{executable} is missing or not an ELF executable")
    datas = sorted(stdlib.glob("_sysconfigdata_*.py"))
    data = datas[0] if datas else None
    return RuntimeInfo(
        root=root,
        version=version,
        minor=minor,
        stdlib=stdlib,
        include=include,
        executable=executable,
        sysconfigdata=data,
        build_vars=read_build_vars(data) if data else {},
        arch=binary.machine,
        libc=binary.libc,
    )
