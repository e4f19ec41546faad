"""The data in dist-config/: the target matrix and the runtime pins.

dist-config/ holds data only; this module reads it into typed records and
checks it, so that every other module can rely on what it gets.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundler.errors import BundlerError
from bundler.paths import dist_config_dir

TARGETS_FILE = "targets.toml"
RUNTIMES_FILE = "runtimes.toml"


@dataclass(frozen=True)
class Target:
    """One CPU architecture with one C library, e.g. aarch64-linux-musl."""

    name: str
    arch: str
    libc: str
    pbs_triple: str
    zig_target: str
    cmake_processor: str
    wheel_platforms: tuple[str, ...]
    glibc: str | None = None


@dataclass(frozen=True)
class Asset:
    """One pinned runtime archive of the release."""

    target: str
    python: str  # full version, e.g. 3.12.12
    name: str
    url: str
    sha256: str  # "" when it could not be obtained: such an asset is never used unchecked
    sources: tuple[str, ...] = ()  # where refresh-pins read the sha256 (all agreed)

    @property
    def minor(self) -> str:
        return ".".join(self.python.split(".")[:2])


@dataclass(frozen=True)
class Release:
    tag: str
    url_template: str
    flavor: str
    sums_asset: str
    assets: tuple[Asset, ...]

    def asset(self, target: str, minor: str) -> Asset:
        for asset in self.assets:
            if asset.target == target and asset.minor == minor:
                return asset
        raise BundlerError(
            f"{RUNTIMES_FILE} pins no runtime for CPython {minor} on {target}; "
            "add it with `nox -s refresh_pins` or set PYNOX_RUNTIME to a local runtime"
        )


@dataclass(frozen=True)
class Matrix:
    pythons: tuple[str, ...]
    targets: tuple[Target, ...]

    def target(self, name: str) -> Target:
        for target in self.targets:
            if target.name == name:
                return target
        known = ", ".join(t.name for t in self.targets)
        raise BundlerError(f"unknown target {name!r}; the targets are {known}")

    def cells(self) -> list[tuple[str, str]]:
        return [(t.name, p) for t in self.targets for p in self.pythons]


def read_toml(path: Path) -> dict[str, Any]:
    # Imported here: pack-runtime and host-target run on a bare CPython 3.10 without tomli.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise BundlerError(
                f"reading {path.name} on Python 3.10 needs tomli: pip install tomli"
            ) from None
    try:
        with path.open("rb") as file:
            data: dict[str, Any] = tomllib.load(file)
            return data
    except FileNotFoundError:
        raise BundlerError(f"{path} is missing; restore it from the repository") from None
    except tomllib.TOMLDecodeError as exc:
        raise BundlerError(f"{path} is not valid TOML ({exc}); fix it") from None


def read_file(name: str, config_dir: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """A file of dist-config/ (or of config_dir), with its path to name in errors."""
    path = (config_dir or dist_config_dir()) / name
    return path, read_toml(path)


def require(table: dict[str, Any], key: str, where: str, kind: type = str) -> Any:
    """table[key], refused unless it is a `kind`; where names the table for the error."""
    value = table.get(key)
    if not isinstance(value, kind):
        raise BundlerError(f"{where} needs `{key}` as a {kind.__name__}; fix dist-config")
    return value


def load_matrix(config_dir: Path | None = None) -> Matrix:
    path, data = read_file(TARGETS_FILE, config_dir)
    pythons = tuple(require(data, "pythons", str(path), list))
    targets = []
    # In the file's order: the order people read, kept for listings.
    for name, table in require(data, "targets", str(path), dict).items():
        where = f"{path} [targets.{name}]"
        targets.append(
            Target(
                name=name,
                arch=require(table, "arch", where),
                libc=require(table, "libc", where),
                pbs_triple=require(table, "pbs_triple", where),
                zig_target=require(table, "zig_target", where),
                cmake_processor=require(table, "cmake_processor", where),
                wheel_platforms=tuple(require(table, "wheel_platforms", where, list)),
                glibc=table.get("glibc"),
            )
        )
    return Matrix(pythons=pythons, targets=tuple(targets))


def load_release(config_dir: Path | None = None) -> Release:
    path, data = read_file(RUNTIMES_FILE, config_dir)
    release = require(data, "release", str(path), dict)
    where = f"{path} [release]"
    assets = []
    for index, table in enumerate(data.get("assets", [])):
        item = f"{path} [[assets]] #{index + 1}"
        sha256 = require(table, "sha256", item)
        sources = table.get("sources", [])
        if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
            raise BundlerError(f"{item} needs `sources` as a list of strings; fix dist-config")
        if sha256 and (len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256)):
            raise BundlerError(f"{item} has a malformed sha256; it must be 64 lowercase hex digits")
        assets.append(
            Asset(
                target=require(table, "target", item),
                python=require(table, "python", item),
                name=require(table, "name", item),
                url=require(table, "url", item),
                sha256=sha256,
                sources=tuple(sources),
            )
        )
    return Release(
        tag=require(release, "tag", where),
        url_template=require(release, "url", where),
        flavor=require(release, "flavor", where),
        sums_asset=require(release, "sums", where),
        assets=tuple(assets),
    )
