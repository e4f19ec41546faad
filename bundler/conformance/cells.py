"""The cells, read from dist-config/conformance.toml: a target, the root file system it
runs in, and what the suite expects there."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bundler import config
from bundler.errors import BundlerError

CELLS_FILE = "conformance.toml"
RUNTIMES = ("host", "rootfs", "given")  # where a cell's runtime comes from (see the file)
ENGINES = ("container", "vm")  # a container on this machine's kernel, or the cell's own kernel


@dataclass(frozen=True)
class Cell:
    name: str
    target: str  # a target of dist-config/targets.toml
    cpu: str  # that target's arch (x86_64, aarch64)
    distro: str  # debian or alpine
    suite: str  # the distribution's release (bookworm, bullseye, 3.20)
    arch: str  # the distribution's name for the CPU (amd64, arm64 on Debian)
    platform: str  # the OCI platform docker or podman runs (linux/arm64)
    image: str  # the OCI image for docker or podman ('' for a vm cell)
    runtime: str  # one of RUNTIMES
    engine: str = "container"  # one of ENGINES
    kernel: str = ""  # a vm cell's kernel: a glob of Debian package names, the newest taken
    expect_sandbox: bool = True
    expect_reason: str = ""  # a part of doctor's reason when the sandbox cannot work
    absent: tuple[str, ...] = ()  # globs of system libraries made unloadable in the root


def load(config_dir: Path | None = None) -> tuple[Cell, ...]:
    """Every cell, in the file's order, checked against the targets."""
    path, data = config.read_file(CELLS_FILE, config_dir)
    matrix = config.load_matrix(config_dir)
    arches = config.require(data, "arches", str(path), dict)
    defaults = {"expect_sandbox": True, "expect_reason": "", "absent": [], "image": "",
                "engine": "container", "kernel": ""}  # fmt: skip
    cells = []
    for name, table in config.require(data, "cells", str(path), dict).items():
        where = f"{path} [cells.{name}]"
        target = matrix.target(config.require(table, "target", where))
        distro = config.require(table, "distro", where)
        names = config.require(arches, target.arch, f"{path} [arches]", dict)
        runtime = config.require(table, "runtime", where)
        if runtime not in RUNTIMES:
            raise BundlerError(f"{where} has runtime {runtime!r}, not one of {', '.join(RUNTIMES)}")
        engine = config.require(defaults | table, "engine", where)
        if engine not in ENGINES:
            raise BundlerError(f"{where} has engine {engine!r}, not one of {', '.join(ENGINES)}")
        kernel = config.require(defaults | table, "kernel", where)
        if (engine == "vm") != bool(kernel):
            raise BundlerError(f"{where}: a `kernel` is given exactly when engine is vm")
        image = config.require(defaults | table, "image", where)
        if engine == "container" and not image:
            raise BundlerError(f"{where} needs `image` as a str; fix dist-config")
        cells.append(
            Cell(
                name=name,
                target=target.name,
                cpu=target.arch,
                distro=distro,
                suite=config.require(table, "suite", where),
                arch=config.require(names, distro, f"{path} [arches.{target.arch}]"),
                platform=config.require(names, "oci_platform", f"{path} [arches.{target.arch}]"),
                image=image,
                runtime=runtime,
                engine=engine,
                kernel=kernel,
                expect_sandbox=config.require(defaults | table, "expect_sandbox", where, bool),
                expect_reason=config.require(defaults | table, "expect_reason", where),
                absent=tuple(config.require(defaults | table, "absent", where, list)),
            )
        )
    return tuple(cells)


def names() -> list[str]:
    return [cell.name for cell in load()]


def cell(name: str) -> Cell:
    for candidate in load():
        if candidate.name == name:
            return candidate
    raise BundlerError(f"no conformance cell {name!r}; the cells are {', '.join(names())}")
