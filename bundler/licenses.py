"""The licences a bundle carries: pynox's, CPython's, the runtime build's, the libraries
vendored into the runtime, cffi's and tomli's. `collect` says which file is whose (the
SBOM names them)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bundler import vendored
from bundler.errors import BundlerError
from bundler.paths import PROJECT
from bundler.runtime_layout import PACKED_MARKER, RuntimeInfo

if TYPE_CHECKING:
    from bundler.wheelhouse import WheelFiles

PBS_NOTE = """\
The runtime in python/ is CPython {version}, taken from the archive
{archive}{checksum}.

{origin}

CPython is distributed under the PSF License Agreement: see CPython-LICENSE.txt.
"""

FROM_PBS = """\
It was built by python-build-standalone
(https://github.com/astral-sh/python-build-standalone), whose build scripts are
under the Mozilla Public License 2.0. Its binaries include third-party libraries
built from source (among them OpenSSL, SQLite, libffi, zlib, bzip2, xz/liblzma,
mpdecimal, expat, ncurses, libedit or readline, and libuuid), each under its own
licence; python-build-standalone's full distributions list them with their
licence texts. This bundle leaves out Tcl/Tk and tkinter."""

FROM_PACK = """\
It was made from a local CPython installation by `python -m bundler pack-runtime`
(see PYNOX-PACKED.txt in python/). The shared libraries it loads from the machine
it was packed on, other than the C library's own, were copied into python/lib/;
each is listed, with its origin and licence, in SBOM.cdx.json and vendored/."""

PYNOX_NOTE = """\
Pynox is licensed under the Apache License, Version 2.0
(https://www.apache.org/licenses/LICENSE-2.0).
"""


def collect(
    runtime: RuntimeInfo,
    archive: str | None,
    sha256: str | None,
    wheels: list[WheelFiles],
    into: Path,
) -> dict[str, list[str]]:
    """Writes the licence files into `into`; returns {component: [paths in the bundle]}.

    Components are "pynox", "cpython", each wheel's project and "vendored:FILE" for each
    library the runtime's lib/vendored.json records.
    """
    into.mkdir(parents=True, exist_ok=True)
    written: dict[str, list[str]] = {}

    def write(component: str, name: str, content: bytes) -> None:
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        (into / name).write_bytes(content)
        written.setdefault(component, []).append(f"{into.name}/{name}")

    project_license = PROJECT / "LICENSE"
    write(
        "pynox",
        "pynox-LICENSE.txt",
        project_license.read_bytes() if project_license.is_file() else PYNOX_NOTE.encode(),
    )
    cpython = runtime.stdlib / "LICENSE.txt"
    if cpython.is_file():
        write("cpython", "CPython-LICENSE.txt", cpython.read_bytes())
    packed = (runtime.root / PACKED_MARKER).is_file()
    (into / "runtime-NOTICE.txt").write_text(
        PBS_NOTE.format(
            version=runtime.version,
            archive=archive or "(an extracted runtime folder)",
            checksum=f" (sha256 {sha256})" if sha256 else "",
            origin=FROM_PACK if packed else FROM_PBS,
        ),
        encoding="utf-8",
    )
    written.setdefault("cpython", []).append(f"{into.name}/runtime-NOTICE.txt")
    lib = runtime.root / "lib"
    for library in vendored.read(lib):
        if library.license:
            source = lib / library.license
            if not source.is_file():
                raise BundlerError(
                    f"{lib / vendored.RECORD} names the licence {library.license} of "
                    f"{library.file}, which the runtime lacks; pack the runtime again"
                )
            write(f"vendored:{library.file}", f"vendored/{source.name}", source.read_bytes())
    for wheel in wheels:
        for name, content in sorted(wheel.licenses.items()):
            write(wheel.project, f"{wheel.project}-{name}", content)
    return written
