"""The verbs of `python -m bundler`, each a thin call into one module (parsing is in __main__)."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from bundler import config, log
from bundler.errors import BundlerError
from bundler.host import running_minor

if TYPE_CHECKING:
    from bundler.pipeline import Request


def list_targets(as_json: bool) -> int:
    matrix = config.load_matrix()
    if as_json:
        log.output(json.dumps([{"target": t, "python": p} for t, p in matrix.cells()]))
    else:
        for target, python in matrix.cells():
            log.output(f"{target} {python}")
    return 0


def check_cell(target: str, python: str) -> int:
    """Before `make bundle` asks nox for the cell's session: nox would only say it has
    no session of that name."""
    matrix = config.load_matrix()
    if (target, python) in matrix.cells():
        return 0
    targets = ", ".join(t.name for t in matrix.targets)
    pythons = ", ".join(matrix.pythons)
    raise BundlerError(
        f"no bundle for TARGET={target} PYTHON={python}; give TARGET as one of {targets}, "
        f"and PYTHON as one of {pythons}"
    )


def default_python(runtime: str | None) -> int:
    """The minor of PYNOX_RUNTIME's CPython if one is set, else this interpreter's."""
    import os

    from bundler.fetch import RUNTIME_ENV, runtime_path
    from bundler.runtime_layout import minor_of

    value = runtime or os.environ.get(RUNTIME_ENV)
    log.output(minor_of(runtime_path(value)) if value else running_minor())
    return 0


def out_folder(path: Path) -> Path:
    """The --out folder, refused before any work when a file stands at its place or when
    nothing can be written there (a read-only disk, a folder of another user)."""
    if path.exists() and not path.is_dir():
        raise BundlerError(f"--out {path} is a file; give the folder to write into")
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as exc:
        raise BundlerError(
            f"cannot write into --out {path} ({exc.strerror or exc}); "
            "give a folder you may write to"
        ) from None
    return path


def pack(python: str, output: Path, with_tests: bool) -> int:
    from bundler.pack_runtime import pack_runtime

    if output.is_dir():
        raise BundlerError(
            f"--output {output} is a folder; give the archive to write, such as "
            f"{output / 'cpython.tar.gz'}"
        )
    info = pack_runtime(python, output, with_tests)
    size = output.stat().st_size / (1024 * 1024)
    log.step(f"packed CPython {info['version']} into {output} ({size:.1f} MB)")
    return 0


def _request(args: argparse.Namespace) -> Request:
    from bundler.pipeline import Request

    wheelhouse = getattr(args, "wheelhouse", None)
    if wheelhouse is not None and not wheelhouse.is_dir():
        # Now, not after the runtime was fetched and built, when its first wheel is wanted.
        raise BundlerError(f"--wheelhouse {wheelhouse} is not a folder; give the folder of wheels")
    return Request(
        target=args.target,
        minor=args.minor,
        runtime=args.runtime,
        mirror=args.mirror,
        sha256=args.sha256,
        compiler=getattr(args, "compiler", "auto"),
        wheelhouse=wheelhouse,
        sign_key=getattr(args, "sign_key", None),
    )


def fetch(args: argparse.Namespace) -> int:
    from bundler import fetch as fetching
    from bundler.host import host_target

    target = config.load_matrix().target(args.target or host_target())
    minor = args.minor or running_minor()
    source = fetching.resolve(target, minor, args.runtime, args.mirror, args.sha256)
    log.output(str(source.path))
    return 0


def build_runtime(args: argparse.Namespace) -> int:
    """Builds runtime/ for a target and prints the checks of what it built."""
    from bundler import checks, runtime_layout, toolchain
    from bundler.cbuild import build
    from bundler.emulation import run_launcher
    from bundler.host import host_target
    from bundler.pipeline import runtime_for

    target = config.load_matrix().target(args.target or host_target())
    with tempfile.TemporaryDirectory(prefix="pynox-build-") as scratch:
        work = Path(scratch)
        build_dir = args.build_dir or work / "build"
        include: Path | None = None
        version = _pinned_version(target, args.minor)
        if args.headers is not None:
            include = args.headers
            version = runtime_layout.headers_version(include)
        elif not args.no_runtime:
            info, _ = runtime_for(_request(args), target, work)
            include, version = info.include, info.version
        chain = toolchain.choose(target, args.compiler, build_dir / "toolchain")
        result = build(target, build_dir, chain, version, include)
        cap = target.glibc if chain.kind == "zig" else None
        log.output(f"{target.name}: {chain.description}")
        for binary in (result.launcher, result.core_library, *result.extensions.values()):
            if binary.suffix == ".a":
                log.output(f"{binary.name}: static library, {binary.stat().st_size} bytes")
            else:
                log.output(checks.check_binary(binary, target, cap).line())
        note = result.extension_note
        if args.headers is not None:
            note += " (a compile check: a bundle builds them against its runtime's own headers)"
        log.output(f"extensions: {note}")
        if args.run:
            log.output(run_launcher(result.launcher, target))
    return 0


def _pinned_version(target: config.Target, minor: str | None) -> str:
    minor = minor or running_minor()
    try:
        return config.load_release().asset(target.name, minor).python
    except BundlerError:
        return minor


def bundle(args: argparse.Namespace) -> int:
    from bundler.pipeline import bundle as make

    output = make(_request(args), out_folder(args.out), args.work)
    log.output(str(output))
    return 0
