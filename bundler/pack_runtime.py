"""`pack-runtime`: a local CPython as a python-build-standalone install_only archive.

The archive has PBS's layout (python/bin/python3.X with python3 and python
links, python/lib/libpython3.X.so* when the build is shared, python/lib/python3.X,
python/include/python3.X), so everything downstream treats it as a PBS runtime.
It is relocatable: the executable finds libpython through RUNPATH $ORIGIN/../lib.
It needs nothing from the machine it was packed on but the C library: the other
libraries its files load (libssl, libsqlite3, libffi, readline...) are copied into
lib/ and found there through $ORIGIN-relative RUNPATHs (see vendor.py).
Site-packages stays empty and the test suite is left out unless asked for.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from bundler import commands, elf, vendor
from bundler.archive import write_tar_gz
from bundler.commands import CommandFailed
from bundler.errors import BundlerError
from bundler.paths import scratch_folder
from bundler.relocate import relocate_tree, set_runpath
from bundler.runtime_layout import PACKED_MARKER
from bundler.source_date import source_date_epoch

PROBE = """
import json, platform, sys, sysconfig
v = sysconfig.get_config_var
print(json.dumps({
    "version": "%d.%d.%d" % sys.version_info[:3],
    "minor": "%d.%d" % sys.version_info[:2],
    "implementation": sys.implementation.name,
    "prefix": sys.base_prefix,
    "executable": getattr(sys, "_base_executable", "") or sys.executable,
    "stdlib": sysconfig.get_path("stdlib"),
    "include": sysconfig.get_path("include"),
    "platinclude": sysconfig.get_path("platinclude"),
    "multiarch": v("MULTIARCH") or "",
    "libdir": v("LIBDIR") or "",
    "ldlibrary": v("LDLIBRARY") or "",
    "instsoname": v("INSTSONAME") or "",
    "shared": bool(v("Py_ENABLE_SHARED")),
    "destshared": v("DESTSHARED") or "",
    "abiflags": getattr(sys, "abiflags", ""),
}))
"""

# Never packed: what a runtime does not need and a PBS install_only archive lacks.
SKIP_NAMES = {"__pycache__"}
TEST_DIRS = {"test", "idle_test", "tests"}
SKIP_SUFFIXES = (".a", ".o", ".pyc")


def probe(python: str) -> dict[str, object]:
    try:
        done = commands.run(
            [python, "-I", "-c", PROBE],
            capture=True,
            timeout=60,
            failure=f"{python} failed to describe itself",
        )
    except CommandFailed as failed:
        if failed.returncode is None:  # it did not start, or hung
            raise BundlerError(f"{failed.message}; give a CPython executable") from None
        raise
    info: dict[str, object] = json.loads(done.stdout)
    if info["implementation"] != "cpython":
        raise BundlerError(f"{python} is {info['implementation']}, not CPython; give a CPython")
    return info


def _copy_stdlib(stdlib: Path, destination: Path, with_tests: bool) -> None:
    site = stdlib / "site-packages"

    def ignore(directory: str, names: list[str]) -> set[str]:
        if Path(directory) == site:
            return {n for n in names if n != "README.txt"}
        skipped = {n for n in names if n in SKIP_NAMES or n.endswith(SKIP_SUFFIXES)}
        if not with_tests:
            skipped |= {n for n in names if n in TEST_DIRS}
        return skipped

    # Links are followed: a distribution links files to /etc (Debian: sitecustomize.py).
    shutil.copytree(stdlib, destination, ignore=ignore, ignore_dangling_symlinks=True)
    (destination / "site-packages").mkdir(exist_ok=True)


def _copy_libpython(info: dict[str, object], lib: Path) -> None:
    libdir = Path(str(info["libdir"]))
    soname = str(info["instsoname"]) or str(info["ldlibrary"])
    source = libdir / soname
    if not source.is_file():
        raise BundlerError(f"{source} is missing, yet the CPython is a shared build")
    shutil.copy2(source.resolve(), lib / soname)
    ldlibrary = str(info["ldlibrary"])
    if ldlibrary and ldlibrary != soname:
        (lib / ldlibrary).symlink_to(soname)
    stable = libdir / "libpython3.so"
    if stable.is_file():
        shutil.copy2(stable.resolve(), lib / "libpython3.so")


def stage(python: str, root: Path, with_tests: bool = False) -> dict[str, object]:
    """Copies the CPython into root (the future python/ folder) and relocates it."""
    info = probe(python)
    minor = str(info["minor"])
    executable = Path(str(info["executable"])).resolve()
    stdlib = Path(str(info["stdlib"]))
    include = Path(str(info["include"]))
    if not (include / "Python.h").is_file():
        raise BundlerError(
            f"the CPython at {info['prefix']} has no C headers in {include}; "
            "install its development files and run again"
        )
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "include").mkdir()
    shutil.copy2(executable, root / "bin" / f"python{minor}")
    for alias in ("python3", "python"):
        (root / "bin" / alias).symlink_to(f"python{minor}")
    # Whether the executable loads libpython, whatever Py_ENABLE_SHARED says (Debian builds
    # a shared libpython for embedding yet links its python3.X statically).
    binary = elf.read(executable)
    shared = binary is not None and any(n.startswith("libpython") for n in binary.needed)
    if shared:
        _copy_libpython(info, root / "lib")
    _copy_stdlib(stdlib, root / "lib" / f"python{minor}", with_tests)
    dynload = Path(str(info["destshared"]))
    if dynload.is_dir() and stdlib not in dynload.parents:
        shutil.copytree(dynload, root / "lib" / f"python{minor}" / "lib-dynload")
    headers = root / "include" / f"python{minor}{info['abiflags']}"
    shutil.copytree(include, headers)
    # Multiarch distributions (Debian) keep the real pyconfig.h apart from the headers,
    # which then hold a stub that includes it: the archive gets the real one.
    platinclude = Path(str(info["platinclude"]))
    candidates = [platinclude] if platinclude != include else []
    if info["multiarch"]:
        candidates.append(include.parent / str(info["multiarch"]) / include.name)
    for folder in candidates:
        if (folder / "pyconfig.h").is_file():
            (headers / "pyconfig.h").unlink(missing_ok=True)
            shutil.copyfile(folder / "pyconfig.h", headers / "pyconfig.h")
            break
    olds = [str(info["prefix"]), str(info["libdir"])]
    relocate_tree(root, [o for o in dict.fromkeys(olds) if o])
    if shared:
        set_runpath(root / "bin" / f"python{minor}", "$ORIGIN/../lib")
    os.chmod(root / "bin" / f"python{minor}", 0o755)
    carried = vendor.vendor(root, binary.libc if binary is not None else "gnu")
    info["vendored"] = carried
    (root / PACKED_MARKER).write_text(
        f"This runtime was packed by `python -m bundler pack-runtime` from CPython "
        f"{info['version']} installed in {info['prefix']}.\n"
        f"Libraries copied into lib/ from that machine: {', '.join(carried) or 'none'}.\n",
        encoding="utf-8",
    )
    return info


def pack_runtime(python: str, output: Path, with_tests: bool = False) -> dict[str, object]:
    """Writes the archive and returns what the probe found out about the CPython."""
    with scratch_folder("pynox-pack-") as work:
        root = work / "python"
        info = stage(python, root, with_tests)
        write_tar_gz(root, "python", output, source_date_epoch())
    return info
