"""Wheels a bundle takes files from: cffi's compiled backend and, on 3.10, tomli.

Each wheel is pinned, per target and CPython minor, in dist-config/wheels.toml
(bundler/wheel_pins.py): its file name and the sha256 PyPI gives it. The wheel
comes from a local folder of wheels (for build hosts without PyPI), the user's
cache, or PyPI through pip (`pip download` with explicit --platform tags, so any
build machine can fetch any target's wheel), and is refused unless its sha256 is
the pinned one.
"""

from __future__ import annotations

import email.parser
import hashlib
import io
import re
import sys
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from bundler import commands
from bundler.commands import CommandFailed
from bundler.config import Target
from bundler.errors import BundlerError
from bundler.paths import made_cache, wheels_cache
from bundler.runtime_layout import python_tag
from bundler.wheel_pins import PINS_FILE, PURE, WheelPin, packages, pin


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


def _pip_download(pin: WheelPin, options: list[str], into: Path, wheelhouse: Path | None) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        f"{pin.project}=={pin.version}",
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
            f"cannot get {pin.name} from {where} ({failed.last_line}); put that file, from "
            f"{pin.url}, in a folder and pass --wheelhouse FOLDER"
        ) from None


def _wheel(pin: WheelPin, options: list[str], wheelhouse: Path | None) -> tuple[Path, bytes]:
    """The pinned wheel, from the wheelhouse, the cache or PyPI, and its bytes, once their
    sha256 is the pinned one."""
    cache = wheels_cache()
    for folder in ([wheelhouse] if wheelhouse else []) + [cache]:
        if (folder / pin.name).is_file():
            return folder / pin.name, _checked(folder / pin.name, pin)
    made_cache(cache)
    _pip_download(pin, options, cache, wheelhouse)
    if not (cache / pin.name).is_file():
        raise BundlerError(
            f"pip fetched no {pin.name}; put the wheel from {pin.url} in a folder and pass "
            "--wheelhouse FOLDER"
        )
    return cache / pin.name, _checked(cache / pin.name, pin)


def _checked(wheel: Path, pin: WheelPin) -> bytes:
    """The wheel's bytes, read once: what the bundle takes is what was checked, even if
    another process replaces the file meanwhile (a program granted the cache, say)."""
    data = wheel.read_bytes()
    found = hashlib.sha256(data).hexdigest()
    if found != pin.sha256:
        raise BundlerError(
            f"{wheel} has sha256 {found}, not the {pin.sha256} that {PINS_FILE} pins (from "
            f"{pin.source}); delete it, and put the wheel from {pin.url} there or let the "
            "bundler download it again"
        )
    return data


def _contents(wheel: Path, data: bytes, keep: re.Pattern[str]) -> WheelFiles:
    """What the wheel's checked bytes hold; `wheel` only names it."""
    files: dict[str, bytes] = {}
    licenses: dict[str, bytes] = {}
    license = ""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
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
    sha256 = hashlib.sha256(data).hexdigest()
    return WheelFiles(wheel.name, version, files, licenses, sha256, license.strip())


def cffi_backend(target: Target, minor: str, wheelhouse: Path | None) -> WheelFiles:
    """cffi's `_cffi_backend` extension for the target, from its pinned cffi wheel."""
    tag = python_tag(minor)
    options = ["--implementation", "cp", "--python-version", minor, "--abi", tag]
    for platform in target.wheel_platforms:
        options += ["--platform", platform]
    wheel, data = _wheel(pin("cffi", target.name, minor), options, wheelhouse)
    found = _contents(wheel, data, re.compile(r"_cffi_backend\.[^/]*\.so"))
    if not found.files:
        raise BundlerError(f"{wheel.name} has no _cffi_backend module")
    return found


def pure_package(project: str, minor: str, wheelhouse: Path | None) -> WheelFiles | None:
    """A pure-Python dependency a CPython minor needs (tomli on 3.10), or None."""
    table = packages().get(project, {})
    pythons = table.get("pythons", [])
    if not isinstance(pythons, list) or minor not in pythons:
        return None
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
    wheel, data = _wheel(pin(project, PURE, minor), options, wheelhouse)
    return _contents(wheel, data, re.compile(rf"{re.escape(project)}/[^/]+"))
