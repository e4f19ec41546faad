"""The record of host libraries vendored into a runtime: python/lib/vendored.json.

pack-runtime copies into the runtime's lib/ the shared libraries a local CPython
loads from its build host, and leaves this record beside them, so that a bundle
assembled later (anywhere) can name each library in its SBOM and carry its
licence. The record is JSON:

    {
      "libraries": [
        {
          "file": "libssl.so.3",              in lib/, as the runtime loads it
          "name": "libssl3",                  the package it came from (or the file name)
          "version": "3.0.13-0ubuntu3.5",     that package's version ("" if unknown)
          "origin": "/usr/lib/x86_64-linux-gnu/libssl.so.3 (Debian package libssl3)",
          "license": "vendored-licenses/libssl3.copyright"   relative to lib/, or ""
        }
      ]
    }

`license` names a copy, inside the runtime, of the licence as the origin ships
it (on Debian and Ubuntu the package's /usr/share/doc/PACKAGE/copyright).
A runtime without the file vendored nothing (a python-build-standalone build).
`from_host` fills an entry for a library copied from this machine, with dpkg
where the machine has it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from bundler.errors import BundlerError

RECORD = "vendored.json"
LICENSES = "vendored-licenses"


@dataclass(frozen=True)
class Library:
    file: str
    name: str
    version: str
    origin: str
    license: str  # path relative to the runtime's lib/, "" when none was found


def read(lib: Path) -> list[Library]:
    """The libraries a runtime's lib/ records as vendored; [] when it records none."""
    path = lib / RECORD
    if not path.is_file():
        return []
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        entries = document["libraries"]
        libraries = [
            Library(**{k: str(entry[k]) for k in Library.__dataclass_fields__}) for entry in entries
        ]
    except (ValueError, KeyError, TypeError) as exc:
        raise BundlerError(
            f"{path} is not a record of vendored libraries ({exc}); pack the runtime again"
        ) from None
    for library in libraries:
        for value in (library.file, library.license):
            if value and (value.startswith("/") or ".." in Path(value).parts):
                raise BundlerError(f"{path} names {value!r}, which is outside the runtime's lib/")
    return sorted(libraries, key=lambda library: library.file)


def write(lib: Path, libraries: list[Library]) -> Path:
    """Writes the record (sorted, so that the runtime archive stays reproducible)."""
    path = lib / RECORD
    entries = [asdict(library) for library in sorted(libraries, key=lambda x: x.file)]
    path.write_text(json.dumps({"libraries": entries}, indent=2) + "\n", encoding="utf-8")
    return path


def _dpkg(*args: str) -> str:
    """dpkg's answer, or "" where there is no dpkg or it does not know."""
    if shutil.which(args[0]) is None:
        return ""
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return done.stdout.strip() if done.returncode == 0 else ""


def debian_package(path: Path) -> str:
    """The Debian package that installed a file (merged /usr tried both ways), or ""."""
    real = path.resolve()
    candidates = [path, real]
    for one in (path, real):
        text = one.as_posix()
        candidates.append(Path(text[4:] if text.startswith("/usr/") else "/usr" + text))
    for candidate in dict.fromkeys(candidates):
        answer = _dpkg("dpkg-query", "-S", str(candidate))
        if answer:
            return answer.splitlines()[0].split(":", 1)[0].split(",")[0].strip()
    return ""


def from_host(path: Path, file: str, lib: Path) -> Library:
    """The entry for `path`, copied into lib/ as `file`; copies its licence into lib/."""
    package = debian_package(path)
    if not package:
        return Library(file, file, "", str(path), "")
    version = _dpkg("dpkg-query", "-W", "-f", "${Version}", package)
    origin = f"{path} (Debian package {package})"
    copyright = Path("/usr/share/doc") / package / "copyright"
    if not copyright.is_file():
        return Library(file, package, version, origin, "")
    (lib / LICENSES).mkdir(exist_ok=True)
    kept = lib / LICENSES / f"{package}.copyright"
    shutil.copyfile(copyright, kept)
    return Library(file, package, version, origin, kept.relative_to(lib).as_posix())
