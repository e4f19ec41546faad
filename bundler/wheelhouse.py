"""Wheels a bundle takes files from: cffi's compiled backend and, on 3.10, tomli.

The wheel for the target's platform comes from PyPI through pip (`pip download`
with explicit --platform tags, so any build machine can fetch any target's
wheel), or from a local folder of wheels for build hosts without PyPI. Wheels
are kept in the user's cache and taken from there when present.
"""

from __future__ import annotations

import email.parser
import re
import sys
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from bundler import commands
from bundler.commands import CommandFailed
from bundler.config import Target, read_file
from bundler.digest import sha256_file
from bundler.errors import BundlerError
from bundler.paths import made_cache, wheels_cache
from bundler.runtime_layout import python_tag

PACKAGES_FILE = "packages.toml"


@dataclass(frozen=True)
class WheelFiles:
    wheel: str  # the wheel's file name
    version: str
    files: dict[str, bytes]  # path in site-packages -> content
    licenses: dict[str, bytes]  # licence file name -> content
    sha256: str = ""  # of the wheel file
    license: str = ""  # its METADATA's License-Expression, else its License field

    @property
    def project(self) -> str:
        return self.wheel.split("-")[0]


def packages() -> dict[str, dict[str, object]]:
    return read_file(PACKAGES_FILE)[1]


def _tags(name: str) -> tuple[set[str], set[str], set[str]]:
    """(pythons, abis, platforms) of a wheel file name."""
    parts = name[: -len(".whl")].split("-")
    return set(parts[-3].split(".")), set(parts[-2].split(".")), set(parts[-1].split("."))


def _find(
    folder: Path, project: str, version: str, pythons: set[str], abis: set[str], platforms: set[str]
) -> Path | None:
    if not folder.is_dir():
        return None
    for path in sorted(folder.glob(f"{project}-{version}-*.whl")):
        py, abi, plat = _tags(path.name)
        if py & pythons and abi & abis and plat & platforms:
            return path
    return None


def _pip_download(
    project: str, version: str, options: list[str], into: Path, wheelhouse: Path | None
) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        f"{project}=={version}",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
        str(into),
        *options,
    ]
    if wheelhouse is not None:
        command += ["--no-index", "--find-links", str(wheelhouse)]
    try:
        commands.run(command, capture=True)
    except CommandFailed as failed:
        where = f"the folder {wheelhouse}" if wheelhouse else "PyPI"
        raise BundlerError(
            f"cannot get the {project} {version} wheel from {where} ({failed.last_line}); "
            "put it in a folder and pass --wheelhouse FOLDER"
        ) from None


def _wheel(
    project: str,
    version: str,
    pythons: set[str],
    abis: set[str],
    platforms: list[str],
    options: list[str],
    wheelhouse: Path | None,
) -> Path:
    cache = wheels_cache()
    for folder in ([wheelhouse] if wheelhouse else []) + [cache]:
        found = _find(folder, project, version, pythons, abis, set(platforms))
        if found:
            return found
    made_cache(cache)
    _pip_download(project, version, options, cache, wheelhouse)
    found = _find(cache, project, version, pythons, abis, set(platforms))
    if found is None:
        raise BundlerError(f"pip fetched no {project} {version} wheel for {', '.join(platforms)}")
    return found


def _contents(wheel: Path, keep: re.Pattern[str]) -> WheelFiles:
    files: dict[str, bytes] = {}
    licenses: dict[str, bytes] = {}
    license = ""
    try:
        with zipfile.ZipFile(wheel) as archive:
            for name in sorted(archive.namelist()):
                if name.endswith("/"):
                    continue
                if re.fullmatch(r"[^/]+\.dist-info/METADATA", name):
                    headers = email.parser.BytesHeaderParser().parsebytes(archive.read(name))
                    license = headers.get("License-Expression") or headers.get("License") or ""
                elif ".dist-info/" in name and re.search(
                    r"(LICEN[CS]E|COPYING|NOTICE)", name, re.I
                ):
                    licenses[name.rsplit("/", 1)[-1]] = archive.read(name)
                elif keep.fullmatch(name):
                    files[name] = archive.read(name)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        # A wheel cut short when it was copied or downloaded: never half of one in a bundle.
        raise BundlerError(
            f"{wheel} is not a whole wheel ({exc}); delete it, and put a good copy there "
            "or let the bundler download it again"
        ) from None
    version = wheel.name.split("-")[1]
    return WheelFiles(wheel.name, version, files, licenses, sha256_file(wheel), license.strip())


def cffi_backend(target: Target, minor: str, version: str, wheelhouse: Path | None) -> WheelFiles:
    """cffi's `_cffi_backend` extension for the target, from the cffi wheel of `version`."""
    tag = python_tag(minor)
    options = ["--implementation", "cp", "--python-version", minor, "--abi", tag]
    for platform in target.wheel_platforms:
        options += ["--platform", platform]
    wheel = _wheel("cffi", version, {tag}, {tag}, list(target.wheel_platforms), options, wheelhouse)
    found = _contents(wheel, re.compile(r"_cffi_backend\.[^/]*\.so"))
    if not found.files:
        raise BundlerError(f"{wheel.name} has no _cffi_backend module")
    return found


def pure_package(project: str, minor: str, wheelhouse: Path | None) -> WheelFiles | None:
    """A pure-Python dependency a CPython minor needs (tomli on 3.10), or None."""
    table = packages().get(project, {})
    pythons = table.get("pythons", [])
    if not isinstance(pythons, list) or minor not in pythons:
        return None
    version = str(table["version"])
    options = [
        "--platform",
        "any",
        "--python-version",
        minor,
        "--implementation",
        "py",
        "--abi",
        "none",
    ]
    wheel = _wheel(project, version, {"py3", "py2.py3"}, {"none"}, ["any"], options, wheelhouse)
    return _contents(wheel, re.compile(rf"{re.escape(project)}/[^/]+"))
