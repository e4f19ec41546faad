"""Host libraries carried inside a runtime, and the audit that a bundle needs nothing else.

A CPython built on a machine (pyenv, a distribution's python3) links that
machine's libssl, libsqlite3, libffi, readline and more. `vendor` copies each
library that a file of the runtime loads, and that is not part of the C library,
into the runtime's lib/ and points the files that need it there with an
$ORIGIN-relative RUNPATH, as `auditwheel repair` does for wheels (auditwheel's
lddtree finds them). `audit` then checks a whole bundle: every DT_NEEDED of every
ELF file is found inside the bundle, or is the C library's own (glibc's libraries
and loader as the manylinux policy lists them; musl's loader).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from importlib import resources
from pathlib import Path, PurePosixPath

from auditwheel.lddtree import LIBPYTHON_RE, ldd

from bundler import elf, vendored
from bundler.errors import BundlerError
from bundler.prune import dropped
from bundler.relocate import set_runpath

# In the manylinux policy's list but not built by glibc: a bundle carries these itself.
NOT_GLIBC = {"libatomic", "libgcc_s", "libstdc++", "libz", "libexpat", "libGL", "libICE", "libSM"}
NOT_GLIBC_PREFIXES = ("libX", "libglib-", "libgobject-", "libgthread-")
LOADER_PREFIXES = {"gnu": ("ld-linux", "ld64.so"), "musl": ("ld-musl-", "libc.musl-")}


def _policy_libraries(file: str) -> set[str]:
    policies = json.loads(resources.files("auditwheel.policy").joinpath(file).read_text())
    return {name for policy in policies for name in policy.get("lib_whitelist", [])}


def libc_libraries(libc: str) -> frozenset[str]:
    """The sonames a bundle for this C library may take from the machine it runs on."""
    if libc == "musl":
        # musllinux lists libc.so (and libz, which musl does not build).
        return frozenset(n for n in _policy_libraries("musllinux-policy.json") if n == "libc.so")
    names = _policy_libraries("manylinux-policy.json")
    return frozenset(
        n
        for n in names
        if n.split(".so")[0] not in NOT_GLIBC and not n.startswith(NOT_GLIBC_PREFIXES)
    )


def is_libc(soname: str, libc: str) -> bool:
    prefixes = LOADER_PREFIXES.get(libc, ())
    return soname in libc_libraries(libc) or soname.startswith(prefixes)


def _elf_files(root: Path) -> list[Path]:
    return [
        p
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and elf.is_elf(p) and elf.read(p) is not None
    ]


def _inside(path: Path, root: Path) -> bool:
    return root.resolve() in path.resolve().parents


def _origin_entry(file: Path, folder: Path) -> str:
    relative = os.path.relpath(folder, file.parent)
    return "$ORIGIN" if relative == "." else f"$ORIGIN/{relative}"


def vendor(root: Path, libc: str) -> list[str]:
    """Copies into root/lib what root's ELF files load from this machine; their sonames.

    Files a bundle leaves out (prune.py: _tkinter, test modules) get nothing: Tk's X11
    libraries would only weigh the bundle down."""
    lib = root / "lib"
    files = [p for p in _elf_files(root) if not dropped(PurePosixPath(p.relative_to(root)))]
    found: dict[str, Path] = {}
    for path in files:
        tree = ldd(path)
        for soname, library in tree.libraries.items():
            # lddtree leaves libpython unresolved: it is the runtime's own (checked by audit).
            if is_libc(soname, libc) or soname in found or LIBPYTHON_RE.match(soname):
                continue
            if library.realpath is None or not library.realpath.exists():
                raise BundlerError(
                    f"{path.relative_to(root)} needs {soname}, which this machine lacks; "
                    "install it and pack the runtime again"
                )
            if not _inside(library.realpath, root):
                found[soname] = library.realpath
    records = []
    for soname, source in sorted(found.items()):
        copy = lib / soname
        shutil.copyfile(source, copy)
        copy.chmod(0o755)
        records.append(vendored.from_host(source, soname, lib))
    if records:
        # What the bundle's SBOM and licences name (bundler/vendored.py).
        vendored.write(lib, records)
    for path in [*files, *(lib / s for s in sorted(found))]:
        info = elf.read(path)
        if info is None or not set(info.needed) & set(found):
            continue
        # Only $ORIGIN entries stay: a runtime never searches the build machine's folders.
        kept = [e for e in (info.runpath or "").split(":") if e.startswith("$ORIGIN")]
        set_runpath(path, ":".join(dict.fromkeys([*kept, _origin_entry(path, lib)])))
    return sorted(found)


def _search(info: elf.ElfFile, root: Path) -> list[Path]:
    """The folders inside root that the file's RUNPATH (or RPATH) names."""
    folders = []
    for entry in (info.runpath or "").split(":"):
        if entry.startswith(("$ORIGIN", "${ORIGIN}")):
            rest = entry.replace("${ORIGIN}", "$ORIGIN").removeprefix("$ORIGIN").lstrip("/")
            folder = info.path.parent / rest
            if folder.resolve() == root.resolve() or _inside(folder, root):
                folders.append(folder)
    return folders


def _refuse_links_out(root: Path, runtime: bool, shown: Callable[[Path], str]) -> None:
    """A symbolic link to an absolute path, or out of root, would make the bundle use
    whatever the installed machine has there (a runtime folder can hold such links)."""
    top = root.resolve()
    for path in sorted(root.rglob("*")):
        if not path.is_symlink() or (runtime and dropped(PurePosixPath(path.relative_to(root)))):
            continue
        target = os.readlink(path)
        where = Path(os.path.realpath(path))
        if os.path.isabs(target) or (where != top and top not in where.parents):
            raise BundlerError(
                f"{shown(path)} is a link to {target}, outside the bundle; replace it with "
                "a copy of what it leads to, or pack the runtime with "
                "`python -m bundler pack-runtime`"
            )


def audit(root: Path, libc: str, runtime: bool = False) -> None:
    """Fails, naming the file and the library, unless every ELF file under root needs only
    what root holds and the C library's own libraries, and no link leads out of root.

    runtime: root is a runtime about to be bundled (checked before the build, to fail
    early): files the bundle leaves out are not checked, and files are named as the
    bundle names them (python/...)."""

    def shown(path: Path) -> str:
        relative = path.relative_to(root)
        return ("python" / relative if runtime else relative).as_posix()

    _refuse_links_out(root, runtime, shown)
    files = _elf_files(root)
    if runtime:
        files = [p for p in files if not dropped(PurePosixPath(p.relative_to(root)))]
    infos = [i for i in (elf.read(p) for p in files) if i is not None]
    # What the runtime's executables load at start is found by soname by every later
    # dlopen (extension modules need libpython without a RUNPATH to it).
    loaded: set[str] = set()
    pending = [i for i in infos if i.kind == "executable" and i.path.parent.name == "bin"]
    by_path = {i.path.resolve(): i for i in infos}
    while pending:
        info = pending.pop()
        for soname in info.needed:
            for folder in _search(info, root):
                hit = (folder / soname).resolve()
                if hit.is_file() and soname not in loaded:
                    loaded.add(soname)
                    if hit in by_path:
                        pending.append(by_path[hit])
                    break
    for info in infos:
        for soname in info.needed:
            if is_libc(soname, libc) or soname in loaded:
                continue
            if any((folder / soname).is_file() for folder in _search(info, root)):
                continue
            raise BundlerError(
                f"{shown(info.path)} needs {soname}, which is neither in the bundle "
                f"(on its RUNPATH) nor part of the {libc} C library; pack the runtime with "
                "`python -m bundler pack-runtime`, which carries such libraries"
            )
