"""Which target of the matrix this machine is."""

from __future__ import annotations

import os
import platform
import sys

from bundler.errors import BundlerError

ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def host_libc() -> str:
    """gnu or musl, from the C library this interpreter runs on."""
    name, _ = platform.libc_ver()
    if name == "glibc":
        return "gnu"
    if any(os.path.exists(f"/lib/ld-musl-{arch}.so.1") for arch in set(ARCHES.values())):
        return "musl"
    return "gnu" if os.path.exists("/lib64/ld-linux-x86-64.so.2") else "musl"


def host_arch() -> str:
    machine = platform.machine().lower()
    if machine not in ARCHES:
        raise BundlerError(f"this machine is {machine}; bundles exist for x86_64 and aarch64 only")
    return ARCHES[machine]


def running_minor() -> str:
    """The CPython minor running the bundler: a bundle's default, and a host cell's."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def host_target() -> str:
    return f"{host_arch()}-linux-{host_libc()}"
