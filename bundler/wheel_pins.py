"""The pinned wheels a bundle takes files from (dist-config/wheels.toml): each wheel's
file name, URL and sha256, for every target and CPython minor.

`refresh` writes the file from PyPI's own metadata: for each wheel, pip resolves the
version packages.toml names for the target's platform tags and reports, without
downloading it, the file it chose and the sha256 PyPI's index gives for it. Nothing else
writes it, and a checksum is never typed by hand.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bundler import commands, config, log
from bundler.commands import CommandFailed
from bundler.errors import BundlerError
from bundler.paths import dist_config_dir
from bundler.runtime_layout import python_tag

PINS_FILE = "wheels.toml"
PACKAGES_FILE = "packages.toml"
INDEX = "https://pypi.org/simple"
# Where PyPI serves its files from: a report naming another host did not take its
# sha256 from PyPI (a local folder of wheels, say), and is refused.
PYPI_FILES = "https://files.pythonhosted.org/"
PURE = "any"  # the target of a pure-Python wheel: one for every target


@dataclass(frozen=True)
class WheelPin:
    project: str
    version: str
    target: str
    python: str
    name: str
    url: str
    sha256: str
    source: str


def packages() -> dict[str, dict[str, object]]:
    return config.read_file(PACKAGES_FILE)[1]


def version(project: str) -> str:
    """The version of `project` packages.toml pins."""
    path, data = config.read_file(PACKAGES_FILE)
    return str(config.require(data.get(project, {}), "version", f"[{project}] of {path}"))


def pin(project: str, target: str, minor: str) -> WheelPin:
    """The pinned wheel of `project` for a target (PURE for a pure-Python wheel) and minor."""
    wanted = version(project)
    path, data = config.read_file(PINS_FILE)
    for entry in data.get("wheel", []):
        if (entry.get("project"), entry.get("version"), entry.get("target")) == (
            project,
            wanted,
            target,
        ) and entry.get("python") == minor:
            where = f"the {project} {wanted} pin for {target} of {path}"
            fields = ("name", "url", "sha256", "source")
            name, url, sha256, source = (config.require(entry, key, where) for key in fields)
            return WheelPin(project, wanted, target, minor, name, url, sha256, source)
    raise BundlerError(
        f"{path} pins no {project} {wanted} wheel for {target} and CPython {minor}; "
        "run python -m bundler refresh-wheel-pins"
    )


def wanted_wheels() -> list[tuple[str, str, str, list[str]]]:
    """(project, target, minor, pip options) of every wheel a bundle of the matrix takes."""
    matrix = config.load_matrix()
    wanted = []
    for target in matrix.targets:
        for minor in matrix.pythons:
            tag = python_tag(minor)
            options = ["--implementation", "cp", "--python-version", minor, "--abi", tag]
            for platform in target.wheel_platforms:
                options += ["--platform", platform]
            wanted.append(("cffi", target.name, minor, options))
    for project, table in packages().items():
        pythons = table.get("pythons", [])
        if project == "cffi" or not isinstance(pythons, list):
            continue
        for minor in pythons:
            options = ["--platform", "any", "--python-version", minor]
            options += ["--implementation", "py", "--abi", "none"]
            wanted.append((project, PURE, minor, options))
    return wanted


def resolve(project: str, target: str, minor: str, options: list[str]) -> WheelPin:
    """The wheel pip picks from PyPI for these options, with PyPI's sha256 of it."""
    wanted = version(project)
    with tempfile.TemporaryDirectory() as work:
        report = Path(work) / "report.json"
        command = [
            sys.executable,
            "-m",
            "pip",
            "--isolated",  # no find-links or extra index from the user's configuration
            "install",
            "--quiet",
            "--dry-run",
            "--ignore-installed",
            "--no-deps",
            "--only-binary=:all:",
            "--index-url",
            INDEX,
            "--target",
            str(Path(work) / "target"),
            "--report",
            str(report),
            *options,
            f"{project}=={wanted}",
        ]
        try:
            commands.run(command, capture=True)
        except CommandFailed as failed:
            raise BundlerError(
                f"pip cannot resolve {project} {wanted} for {target} and CPython {minor} from "
                f"{INDEX} ({failed.last_line})"
            ) from None
        (chosen,) = json.loads(report.read_text())["install"]
    info = chosen.get("download_info", {})
    url = str(info.get("url", ""))
    sha256 = str(info.get("archive_info", {}).get("hashes", {}).get("sha256", ""))
    if not url.startswith(PYPI_FILES) or len(sha256) != 64:
        raise BundlerError(
            f"pip reported {url or 'no URL'} for {project} {wanted}, without a sha256 from "
            f"PyPI; check that {INDEX} is reachable"
        )
    name = url.rsplit("/", 1)[-1]
    return WheelPin(project, wanted, target, minor, name, url, sha256, f"{INDEX}/{project}/")


def render(pins: list[WheelPin]) -> str:
    lines = [
        "# The wheels a bundle takes files from, pinned: written by `python -m bundler",
        "# refresh-wheel-pins` from PyPI's own metadata (the sha256 its index gives each file),",
        "# never by hand. The versions are packages.toml's; a bundle refuses a wheel whose",
        "# sha256 is not the one pinned here.",
    ]
    for found in pins:
        lines.append("")
        lines.append("[[wheel]]")
        for key in ("project", "version", "target", "python", "name", "url", "sha256", "source"):
            lines.append(f"{key} = {json.dumps(getattr(found, key))}")
    return "\n".join(lines) + "\n"


def refresh() -> int:
    """Rewrites dist-config/wheels.toml; leaves it as it was when any wheel cannot be pinned."""
    pins = []
    for project, target, minor, options in wanted_wheels():
        found = resolve(project, target, minor, options)
        log.step(f"{found.name}: {found.sha256}")
        pins.append(found)
    path = dist_config_dir() / PINS_FILE
    path.write_text(render(pins))
    log.step(f"wrote {len(pins)} pins into {path}")
    return 0
