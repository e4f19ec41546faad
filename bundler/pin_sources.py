"""Where refresh-pins reads checksums from, offline: three formats, one record.

- a release's own SHA256SUMS (`{hex}  {filename}` lines, sha256sum's format);
- a table of dist-config/pbs-checksums/ (tab-separated `name`, `sha256`, `source`);
- the `pbs-installer` package's `pbs_installer/versions.json` (a list of CPython
  versions, each with `files`: `filename`, `sha256`, `url`, `platform`, ...).

Each reader gives a Listing: the source's name for messages and the pins, and per
asset file name its sha256 and where the source itself says it read it. A source
that names one file twice with two checksums, or a table row without one, is
refused: a pin is never written from a source that contradicts itself.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundler.digest import HEX64
from bundler.errors import BundlerError
from bundler.paths import PROJECT

TABLE_HEADER = ["name", "sha256", "source"]
PBS_INSTALLER = "pbs-installer"


@dataclass
class Listing:
    """What one source says: {asset file name: sha256}, and the provenance of each."""

    origin: str  # names the source in messages, e.g. "dist-config/pbs-checksums/x.tsv"
    sums: dict[str, str] = field(default_factory=dict)
    provenance: dict[str, str] = field(default_factory=dict)  # name -> where it was read

    def add(self, name: str, sha256: str, provenance: str | None = None) -> None:
        known = self.sums.get(name)
        if known is not None and known != sha256:
            raise BundlerError(
                f"{self.origin} lists {name} twice, with sha256 {known} and {sha256}; "
                "refusing it: correct or drop that source"
            )
        self.sums[name] = sha256
        self.provenance[name] = provenance or self.origin


def shown(path: Path) -> str:
    """A path as pins and messages name it: relative to the project, else its file name.

    The pins are committed, so they never carry where a copy lay on the build machine.
    """
    try:
        return path.resolve().relative_to(PROJECT).as_posix()
    except ValueError:
        return path.name


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BundlerError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise BundlerError(f"{path} is not UTF-8 text; give the checksum file itself") from None


def parse_sums(text: str, origin: str) -> Listing:
    """SHA256SUMS text; any line that is not `{hex}  {filename}` refuses the file."""
    listing = Listing(origin)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        sha256 = parts[0].lower() if parts else ""
        if len(parts) != 2 or not HEX64.fullmatch(sha256):
            raise BundlerError(
                f"{origin} line {number} is not `SHA256  FILENAME`: {line[:120]!r}; "
                "give the release's SHA256SUMS as published"
            )
        listing.add(parts[1].lstrip("*"), sha256)
    return listing


def read_sums(path: Path) -> Listing:
    return parse_sums(_read(path), f"SHA256SUMS file {shown(path)}")


def read_table(path: Path) -> Listing:
    """A dist-config/pbs-checksums/ table; each row's own `source` is its provenance."""
    origin = shown(path)
    lines = _read(path).splitlines()
    if not lines or lines[0].split("\t") != TABLE_HEADER:
        raise BundlerError(
            f"{origin} does not start with the header `name<TAB>sha256<TAB>source`; "
            "see dist-config/pbs-checksums/README.md for the format"
        )
    listing = Listing(origin)
    for number, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != 3 or not all(c.strip() for c in (cells[0], cells[2])):
            raise BundlerError(
                f"{origin} line {number} does not have the three cells name, sha256, source; "
                "fix the table"
            )
        name, sha256, source = (c.strip() for c in cells)
        if not HEX64.fullmatch(sha256.lower()):
            raise BundlerError(
                f"{origin} line {number} gives {name} no sha256 (64 hex digits), "
                f"but {sha256!r}; refusing the table: a pin is never written without a checksum"
            )
        listing.add(name, sha256.lower(), f"{source} (via {origin})")
    return listing


def installed_versions_json() -> tuple[Path, str]:
    """The versions.json of the installed pbs-installer, and its version.

    Found without importing the package: its file is data, not code to run.
    """
    spec = importlib.util.find_spec("pbs_installer")
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0]) / "versions.json" if locations else None
    if path is None or not path.is_file():
        raise BundlerError(
            f"--pbs-installer needs the {PBS_INSTALLER} package (pip install {PBS_INSTALLER}) "
            "or the path of a copy of its pbs_installer/versions.json"
        )
    return path, importlib.metadata.version(PBS_INSTALLER)


def parse_versions_json(data: Any, origin: str) -> Listing:
    """pbs-installer's table: every file with a sha256 (the others name no checksum)."""
    listing = Listing(origin)
    wrong = BundlerError(
        f"{origin} is not laid out as pbs-installer's versions.json (a list of "
        "{{python_version, files: [{{filename, sha256, ...}}]}}); give that file"
    )
    if not isinstance(data, list):
        raise wrong
    for entry in data:
        files = entry.get("files") if isinstance(entry, dict) else None
        if not isinstance(files, list):
            raise wrong
        for item in files:
            if not isinstance(item, dict) or not isinstance(item.get("filename"), str):
                raise wrong
            sha256 = item.get("sha256")
            if sha256 is None:
                continue
            if not isinstance(sha256, str) or not HEX64.fullmatch(sha256.lower()):
                raise BundlerError(
                    f"{origin} gives {item['filename']} a malformed sha256 {sha256!r}; refusing it"
                )
            listing.add(item["filename"], sha256.lower())
    return listing


def read_versions_json(path: Path | None) -> Listing:
    """A versions.json given by path, or the installed package's (path None)."""
    if path is None:
        path, version = installed_versions_json()
        origin = f"{PBS_INSTALLER} {version} (pbs_installer/versions.json)"
    else:
        origin = f"{PBS_INSTALLER} versions.json file {shown(path)}"
    try:
        data = json.loads(_read(path))
    except json.JSONDecodeError as exc:
        raise BundlerError(f"{origin} is not valid JSON ({exc}); give that file") from None
    return parse_versions_json(data, origin)
