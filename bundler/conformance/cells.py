"""The cells: a target, the root file system it runs in, and what the suite expects."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cell:
    name: str
    target: str  # a target of dist-config/targets.toml
    distro: str  # debian or alpine
    suite: str  # the distribution's release (bookworm, bullseye, 3.20)
    arch: str  # the distribution's name for the CPU (amd64, arm64)
    # Where the bundle's runtime comes from: the CPython running the runner ("host"),
    # the root file system's python3 ("rootfs"), or only a given one ("given").
    runtime: str
    expect_sandbox: bool = True
    expect_reason: str = ""  # a part of doctor's reason when the sandbox cannot work
    image: str = ""  # the OCI image for docker or podman

    @property
    def rootfs_name(self) -> str:
        return f"{self.distro}-{self.suite}-{self.arch}"


QEMU_REASON = "does not implement Landlock"

CELLS = [
    Cell(
        "x86_64-linux-gnu",
        "x86_64-linux-gnu",
        "debian",
        "bookworm",
        "amd64",
        "host",
        image="docker.io/library/debian:bookworm-slim",
    ),
    Cell(
        "aarch64-linux-gnu",
        "aarch64-linux-gnu",
        "debian",
        "bookworm",
        "arm64",
        "rootfs",
        expect_sandbox=False,
        expect_reason=QEMU_REASON,
        image="docker.io/arm64v8/debian:bookworm-slim",
    ),
    Cell(
        "x86_64-linux-musl",
        "x86_64-linux-musl",
        "alpine",
        "3.20",
        "x86_64",
        "given",
        image="docker.io/library/alpine:3.20",
    ),
    Cell(
        "aarch64-linux-musl",
        "aarch64-linux-musl",
        "alpine",
        "3.20",
        "aarch64",
        "given",
        expect_sandbox=False,
        expect_reason=QEMU_REASON,
        image="docker.io/arm64v8/alpine:3.20",
    ),
    Cell(
        "x86_64-linux-gnu-old-glibc",
        "x86_64-linux-gnu",
        "debian",
        "bullseye",
        "amd64",
        "host",
        image="docker.io/library/debian:bullseye-slim",
    ),
]
NAMES = [cell.name for cell in CELLS]


def cell(name: str) -> Cell:
    for candidate in CELLS:
        if candidate.name == name:
            return candidate
    raise KeyError(f"no conformance cell {name!r}; the cells are {', '.join(NAMES)}")
