"""`bundle`: runtime, build, assembly and archive for one target and CPython minor."""

from __future__ import annotations

import importlib.metadata
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bundler import (
    archive,
    checks,
    config,
    fetch,
    log,
    manifest,
    runtime_layout,
    signing,
    toolchain,
    vendor,
    wheel_pins,
    wheelhouse,
)
from bundler.assemble import Parts, assemble
from bundler.cbuild import BuildResult, build
from bundler.digest import write_sums
from bundler.errors import BundlerError
from bundler.host import host_target, running_minor
from bundler.paths import PROJECT, room_for_work, scratch_folder
from bundler.source_date import source_date_epoch
from bundler.unpack import unpack


@dataclass(frozen=True)
class Request:
    target: str | None
    minor: str | None
    runtime: str | None
    mirror: str | None
    sha256: str | None
    compiler: str = "auto"
    wheelhouse: Path | None = None
    sign_key: Path | None = None


def check_cffi_version() -> None:
    """The bundle ships the pinned cffi's backend; the binding is written by the cffi that
    runs here, which reads the same when it is the same version."""
    try:
        here = importlib.metadata.version("cffi")
    except importlib.metadata.PackageNotFoundError:
        raise BundlerError(
            f"cffi is not installed for {sys.executable}; pip install cffi"
        ) from None
    pinned = wheel_pins.version("cffi")
    if here != pinned:
        log.warning(
            f"cffi {here} writes the binding here, and the bundle ships cffi {pinned}'s "
            f"backend ({wheel_pins.PACKAGES_FILE}); for a bundle other hosts build byte for "
            f"byte, pip install cffi=={pinned} (nox -s bundle does)"
        )


def pynox_version() -> str:
    data = config.read_toml(PROJECT / "pyproject.toml")
    version = data.get("project", {}).get("version")
    if not isinstance(version, str):
        raise BundlerError("pyproject.toml has no [project] version")
    return version


def bundle_name(version: str, target: str, minor: str) -> str:
    """A bundle's top folder, and its archive's name before .tar.gz."""
    return f"pynox-{version}-{target}-{runtime_layout.python_tag(minor)}"


def runtime_for(
    request: Request, target: config.Target, work: Path
) -> tuple[runtime_layout.RuntimeInfo, fetch.RuntimeSource]:
    minor = request.minor or running_minor()
    source = fetch.resolve(target, minor, request.runtime, request.mirror, request.sha256)
    if source.kind == "archive":
        # Checked again as it is read: the cache or a local file could change meanwhile.
        unpack(source.path, work / "runtime", source.sha256)
        info = runtime_layout.inspect(work / "runtime")
    else:
        info = runtime_layout.inspect(source.path)
    if info.arch != target.arch or info.libc not in (target.libc, "static"):
        own = f"{info.arch}-linux-{info.libc}"
        known = own in {t.name for t in config.load_matrix().targets}
        raise BundlerError(
            f"the runtime {source.name} is for {info.arch} with {info.libc}, not {target.name}; "
            f"give a runtime for {target.name}"
            + (f", or build for the runtime's own target with --target {own}" if known else "")
        )
    # Before the build, so that a runtime needing the build machine's libraries fails fast.
    vendor.audit(info.root, target.libc, runtime=True)
    if request.minor and info.minor != request.minor:
        raise BundlerError(
            f"the runtime {source.name} is CPython {info.version}, not {request.minor}; "
            f"ask for --python {info.minor} or give a {request.minor} runtime"
        )
    return info, source


def build_parts(
    target: config.Target, info: runtime_layout.RuntimeInfo, work: Path, compiler: str
) -> BuildResult:
    chain = toolchain.choose(target, compiler, work / "toolchain")
    started = time.monotonic()
    result = build(target, work / "build", chain, info.version, info.include)
    log.step(f"built runtime/ with {chain.description} in {time.monotonic() - started:.1f} s")
    cap = target.glibc if chain.kind == "zig" else None
    for binary in (result.launcher, *result.extensions.values()):
        log.note(checks.check_binary(binary, target, cap).line())
    return result


def make_bundle(request: Request, out: Path, work: Path) -> Path:
    """Builds the archive and its .sha256 in out; returns the archive's path."""
    target = config.load_matrix().target(request.target or host_target())
    if request.sign_key is not None:
        signing.check_key(request.sign_key)  # now, not after the build
    info, source = runtime_for(request, target, work)
    log.step(f"runtime: CPython {info.version} for {target.name} from {source.origin}")
    check_cffi_version()
    result = build_parts(target, info, work, request.compiler)
    parts = Parts(
        target=target,
        runtime=info,
        runtime_archive=source.name if source.kind == "archive" else None,
        runtime_sha256=source.sha256,
        pynox_version=pynox_version(),
        launcher=result.launcher,
        extensions=result.extensions,
        cffi=wheelhouse.cffi_backend(target, info.minor, request.wheelhouse),
        extra=[w for w in [wheelhouse.pure_package("tomli", info.minor, request.wheelhouse)] if w],
        runtime_release=source.release,
        runtime_url=source.url,
    )
    top = bundle_name(parts.pynox_version, target.name, info.minor)
    stage = work / "stage" / top
    started = time.monotonic()
    fields = assemble(parts, stage)
    manifest.write(stage, fields)
    output = out / f"{top}.tar.gz"
    archive.write_tar_gz(stage, top, output, source_date_epoch())
    write_sums(output)
    if signing.sign(output, request.sign_key):
        log.step(f"signed {output.name} with {request.sign_key} (namespace {signing.NAMESPACE})")
    size = output.stat().st_size / (1024 * 1024)
    log.step(f"wrote {output} ({size:.1f} MB) in {time.monotonic() - started:.1f} s")
    return output


def bundle(request: Request, out: Path, work: Path | None = None) -> Path:
    if work is not None:
        # The bundler replaces what it finds under its own names there (runtime/, build/):
        # a folder of the user's would lose them.
        if work.exists() and (not work.is_dir() or any(work.iterdir())):
            raise BundlerError(
                f"the --work folder {work} is not empty; give a new or empty folder, "
                "or leave --work out for a temporary one"
            )
        with room_for_work(work, "give --work a folder on a disk with more room"):
            work.mkdir(parents=True, exist_ok=True)
            return make_bundle(request, out, work)
    with scratch_folder("pynox-bundle-") as folder:
        return make_bundle(request, out, folder)
