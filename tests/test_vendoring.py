"""Bundles that need nothing from the machine but its C library.

pack-runtime copies what a local CPython links (libssl, libsqlite3, libffi, readline...)
into the runtime's lib/; the bundler refuses a bundle whose files need a library it does
not carry, naming the file and the library; the manifest records the glibc floor.
The bundle is the session's (tests/support/bundles/artifacts.py), read here with
auditwheel's lddtree and readelf, not with the bundler's own audit.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.bundles import extract
from support.bundles.artifacts import (
    SHARES_BUNDLES,
    Bundles,
    Runtime,
    bundler,
    bundles,
    clean_env,
    minor,
    runtime,
)

pytestmark = SHARES_BUNDLES  # the bundles' tests run on one worker

BUILDS_BUNDLES = pytest.mark.slow


@pytest.fixture(scope="session")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Runtime:
    return runtime(tmp_path_factory)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Bundles:
    return bundles(tmp_path_factory)


@pytest.fixture(scope="session")
def unpacked(built: Bundles, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("unpacked")
    extract(built.from_archive, folder)
    return next(folder.iterdir())


def elf_files(root: Path) -> list[Path]:
    return [
        p
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and p.read_bytes()[:4] == b"\x7fELF"
    ]


def glibc_own(soname: str) -> bool:
    from bundler.vendor import is_libc

    return is_libc(soname, "gnu")


def host_links(module: str) -> str | None:
    """The non-libc library a module of this CPython links from the machine, if any."""
    from auditwheel.lddtree import ldd

    spec = __import__(module)
    path = getattr(spec, "__file__", None)
    if not path or not path.endswith(".so"):
        return None
    for soname, library in ldd(Path(path)).libraries.items():
        real = library.realpath
        mine = "libpython" in soname or (real and Path(sys.base_prefix) in real.parents)
        if real and not glibc_own(soname) and not mine:
            return soname
    return None


@BUILDS_BUNDLES
def test_every_elf_file_needs_only_the_bundle_and_glibc(unpacked: Path) -> None:
    """lddtree, searching only RUNPATHs (no system folders): whatever it cannot find is
    glibc's, whatever it finds is inside the bundle."""
    from auditwheel.lddtree import ldd

    from bundler import elf

    if not re.search(r"-linux-gnu-", unpacked.name):
        pytest.skip("a glibc bundle is checked here")
    outside = []
    files = elf_files(unpacked)
    assert files
    for path in files:
        tree = ldd(path, ldpaths={"conf": [], "env": [], "interp": []})
        for soname, library in tree.libraries.items():
            if glibc_own(soname) or soname.startswith("libpython"):
                continue  # libpython: the interpreter loads it (checked just below)
            real = library.realpath
            if real is None or unpacked.resolve() not in real.resolve().parents:
                outside.append(f"{path.relative_to(unpacked)} -> {soname} ({real})")
    assert outside == []
    # libpython is found through the interpreter's RUNPATH, in the bundle's lib/.
    python = elf.read(unpacked / "python" / "bin" / f"python{minor()}")
    assert python is not None
    for soname in python.needed:
        if soname.startswith("libpython"):
            assert (unpacked / "python" / "lib" / soname).is_file()


@BUILDS_BUNDLES
def test_what_the_cpython_links_from_the_machine_is_carried(unpacked: Path) -> None:
    carried = {p.name for p in (unpacked / "python" / "lib").glob("lib*.so*")}
    checked = 0
    for module in ("_ssl", "_sqlite3", "_ctypes", "_lzma", "_bz2", "readline", "_uuid"):
        try:
            soname = host_links(module)
        except ImportError:
            continue
        if soname is not None:
            assert soname in carried, f"{module} links {soname}, which the bundle lacks"
            checked += 1
    if not checked:
        pytest.skip("this CPython links no library from the machine")


@BUILDS_BUNDLES
def test_manifest_records_the_highest_glibc_version(unpacked: Path) -> None:
    if not shutil.which("readelf"):
        pytest.skip("readelf (binutils) is not installed")
    found: set[tuple[int, ...]] = set()
    for path in elf_files(unpacked):
        text = subprocess.run(
            ["readelf", "-V", "-W", str(path)], capture_output=True, text=True, check=True
        ).stdout
        for version in re.findall(r"Name: GLIBC_(\d+(?:\.\d+)+)", text):
            found.add(tuple(int(p) for p in version.split(".")))
    manifest = json.loads((unpacked / "MANIFEST.json").read_text())
    if not found:
        assert manifest["glibc_min"] is None
        return
    assert manifest["glibc_min"] == ".".join(map(str, max(found)))


def test_audit_names_the_file_and_the_library(tmp_path: Path) -> None:
    """A tree holding an extension module whose library was left on the machine."""
    from bundler.errors import BundlerError
    from bundler.vendor import audit

    extension = None
    for module in ("_ssl", "_sqlite3", "_ctypes", "_lzma", "_bz2"):
        try:
            if host_links(module):
                extension = Path(__import__(module).__file__)
                soname = host_links(module)
                break
        except ImportError:
            continue
    if extension is None:
        pytest.skip("this CPython has no extension module that links a machine library")
    dynload = tmp_path / "python" / "lib" / "python3.X" / "lib-dynload"
    dynload.mkdir(parents=True)
    shutil.copyfile(extension, dynload / extension.name)
    with pytest.raises(BundlerError) as refused:
        audit(tmp_path, "gnu")
    assert refused.value.message.startswith(
        f"python/lib/python3.X/lib-dynload/{extension.name} needs {soname}, which is neither "
        "in the bundle"
    )


@pytest.mark.parametrize("target", ["/usr/lib/libz.so.1", "../../../outside/libz.so.1"])
def test_audit_refuses_a_link_out_of_the_bundle(tmp_path: Path, target: str) -> None:
    """A runtime folder's link to the machine's library would ship as that link."""
    from bundler.errors import BundlerError
    from bundler.vendor import audit

    root = tmp_path / "runtime" / "python"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python3").symlink_to("python3.99")  # inside: fine
    (root / "lib").mkdir()
    (root / "lib" / "libz.so.1").symlink_to(target)
    with pytest.raises(BundlerError) as refused:
        audit(root, "gnu", runtime=True)
    assert refused.value.message == (
        f"python/lib/libz.so.1 is a link to {target}, outside the bundle; replace it with a copy"
        " of what it leads to, or pack the runtime with `python -m bundler pack-runtime`"
    )
    (root / "lib" / "libz.so.1").unlink()
    audit(root, "gnu", runtime=True)


@BUILDS_BUNDLES
def test_bundler_refuses_a_runtime_with_a_machine_library_left_in(
    packed: Runtime, tmp_path: Path
) -> None:
    """The packed runtime without its copy of a library one of its modules needs."""
    extract(packed.archive, tmp_path / "runtime")
    lib = tmp_path / "runtime" / "python" / "lib"
    dynload = lib / f"python{minor()}" / "lib-dynload"
    from bundler import elf

    needing = None
    for module in sorted(dynload.glob("*.so")):
        info = elf.read(module)
        carried = [n for n in (info.needed if info else []) if (lib / n).is_file()]
        if carried:
            needing, soname = module, carried[0]
            break
    if needing is None:
        pytest.skip("the packed runtime carries no library")
    (lib / soname).unlink()
    # An extracted runtime folder is a runtime too (PYNOX_RUNTIME takes either).
    env = clean_env(XDG_CACHE_HOME=str(packed.cache), PYNOX_RUNTIME=str(tmp_path / "runtime"))
    done = bundler(
        ["bundle", "--out", str(tmp_path / "out"), "--python", minor(), "--compiler", "native"],
        env,
    )
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    relative = needing.relative_to(tmp_path / "runtime").as_posix()
    assert last.startswith(f"bundler: {relative} needs {soname}, which is neither"), last
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.tar.gz"))


@pytest.mark.unit
def test_the_sandbox_reads_the_interpreters_own_lib_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A bundle's carried libraries load after confinement (ctypes, sqlite3): its lib/ is
    readable; a system interpreter's /usr/lib is not granted as a whole for that."""
    from pynox.policy import system_paths

    (tmp_path / "python" / "lib").mkdir(parents=True)
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path / "python"))
    assert str(tmp_path / "python" / "lib") in system_paths.library_dirs()
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    assert system_paths.runtime_library_dirs() == []
    assert "/usr/lib" not in system_paths.library_dirs() or not getattr(
        sys.implementation, "_multiarch", ""
    )
