"""Assembling a relocatable bundle folder from a runtime and the built parts.

bin/pynox                       the launcher (finds ../python/bin/python3)
python/                         the runtime, pruned, sysconfig relocated
python/lib/python3.X/site-packages/
    pynox/                      the package, with _core for the target
    _cffi_backend....so         cffi's backend for the target
    pynox-json.pth, _pynox_json.py   json.dump's fast path under --no-sandbox
    tomli/                      on CPython 3.10 only
licenses/                       pynox, CPython, the runtime's build, cffi, tomli,
                                vendored/: the libraries vendored into the runtime
SBOM.cdx.json                   the components above as CycloneDX JSON (bundler/sbom.py)
MANIFEST.json                   target, versions, sha256 of every file
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from bundler import bytecode, licenses, manifest, sbom, vendor
from bundler.checks import highest_glibc
from bundler.config import Target
from bundler.errors import BundlerError
from bundler.host import host_target
from bundler.paths import PROJECT
from bundler.prune import dropped
from bundler.runtime_layout import RuntimeInfo
from bundler.source_date import source_date_epoch
from bundler.sysconfig_fix import fix_sysconfigdata
from bundler.wheelhouse import WheelFiles

# Beside pynox in site-packages: json.dump's fast path under `pynox --no-sandbox`.
SITE_HOOK_FILES = ("pynox-json.pth", "_pynox_json.py")


@dataclass(frozen=True)
class Parts:
    """Everything a bundle is made of."""

    target: Target
    runtime: RuntimeInfo
    runtime_archive: str | None
    runtime_sha256: str | None
    pynox_version: str
    launcher: Path
    extensions: dict[str, Path]  # module name -> built file, renamed to the runtime's suffix
    cffi: WheelFiles
    extra: list[WheelFiles]
    runtime_release: str | None = None  # the pinned release's tag; None for a local runtime
    runtime_url: str | None = None  # the pinned asset's upstream address


def copy_runtime(source: Path, destination: Path) -> None:
    def ignore(directory: str, names: list[str]) -> set[str]:
        base = PurePosixPath(Path(directory).relative_to(source).as_posix())
        return {n for n in names if dropped(base / n)}

    shutil.copytree(source, destination, symlinks=True, ignore=ignore)


def copy_package(site: Path) -> None:
    """The pynox package from the source tree, without bytecode or locally built modules."""
    shutil.copytree(
        PROJECT / "pynox",
        site / "pynox",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"),
    )


def _write_files(site: Path, files: dict[str, bytes], mode: int = 0o644) -> None:
    for name, content in files.items():
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode)


def assemble(parts: Parts, stage: Path) -> dict[str, Any]:
    """Fills stage (which must not exist) and returns the manifest's fields."""
    runtime = parts.runtime
    python = stage / "python"
    copy_runtime(runtime.root, python)
    stdlib = python / "lib" / runtime.stdlib.name
    fix_sysconfigdata(stdlib)
    site = stdlib / "site-packages"
    site.mkdir(exist_ok=True)
    copy_package(site)
    for name in SITE_HOOK_FILES:
        shutil.copyfile(PROJECT / "sitehook" / name, site / name)
    extension_names = []
    for module, built in sorted(parts.extensions.items()):
        name = module + runtime.ext_suffix
        shutil.copyfile(built, site / "pynox" / name)
        (site / "pynox" / name).chmod(0o755)
        extension_names.append(f"pynox/{name}")
    _write_files(site, parts.cffi.files, 0o755)
    for wheel in parts.extra:
        _write_files(site, wheel.files)
    (stage / "bin").mkdir()
    shutil.copyfile(parts.launcher, stage / "bin" / "pynox")
    (stage / "bin" / "pynox").chmod(0o755)
    license_files = licenses.collect(
        runtime,
        parts.runtime_archive,
        parts.runtime_sha256,
        [parts.cffi, *parts.extra],
        stage / "licenses",
    )
    sbom.write(stage, parts, license_files, source_date_epoch())
    own = python / "bin" / f"python{runtime.minor}"
    if parts.target.name == host_target():
        # This machine's own target: its interpreter runs here unless something stops it
        # (a TMPDIR mounted noexec), and a bundle without bytecode starts every run slower.
        why = bytecode.why_not_running(own)
        if why:
            raise BundlerError(
                f"the bundle's own {own.name} does not run on this machine ({why}), so its "
                "Python files cannot be compiled; if the work folder is on a file system "
                "mounted noexec, set TMPDIR (or --work) to a folder on another one"
            )
    compiler = bytecode.compiler_for(own, runtime.minor)
    if compiler is not None:
        bytecode.write_boot_image(compiler, site / "pynox")
        bytecode.compile_tree(compiler, runtime.minor, stage, [stdlib])
        pyc = "unchecked-hash"
    else:
        pyc = f"none (no CPython {runtime.minor} on the build machine to compile with)"
    # Refused unless every ELF file needs only the bundle and the target's C library.
    vendor.audit(stage, parts.target.libc)
    glibc = highest_glibc(
        [p for p in sorted(stage.rglob("*")) if p.is_file() and not p.is_symlink()]
    )
    return {
        "name": "pynox",
        "version": parts.pynox_version,
        "target": parts.target.name,
        "arch": parts.target.arch,
        "libc": parts.target.libc,
        "glibc_min": glibc if parts.target.libc == "gnu" else None,
        "kernel_min": manifest.KERNEL_FOR_SANDBOX,
        "python": runtime.version,
        "python_tag": runtime.python_tag,
        "extensions": extension_names,
        "cffi": parts.cffi.version,
        "bytecode": pyc,
        "runtime": {"archive": parts.runtime_archive, "sha256": parts.runtime_sha256},
        "sbom": sbom.NAME,
    }
