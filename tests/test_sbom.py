"""The bundle's SBOM and licence files, from the parts a bundle is assembled from.

The documents are checked with cyclonedx-python-lib's own strict JSON validator
(CycloneDX 1.6), then read as a user of the SBOM reads them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from support.bundles import PROJECT  # (also puts the source tree's bundler/ on sys.path)

# isort: split
from bundler import fetch, licenses, sbom, vendored
from bundler.assemble import Parts
from bundler.config import load_matrix
from bundler.errors import BundlerError
from bundler.runtime_layout import RuntimeInfo
from bundler.wheelhouse import WheelFiles

pytestmark = pytest.mark.unit

PBS_SHA = "a" * 64
ASSET = "cpython-3.12.14+20260814-x86_64-unknown-linux-gnu-install_only_stripped.tar.gz"
URL = "https://github.com/astral-sh/python-build-standalone/releases/download/20260814/x"
SSL_COPYRIGHT = b"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"


def fake_runtime(root: Path) -> RuntimeInfo:
    stdlib = root / "lib" / "python3.12"
    stdlib.mkdir(parents=True)
    (stdlib / "LICENSE.txt").write_text("PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2\n")
    return RuntimeInfo(
        root=root,
        version="3.12.14",
        minor="3.12",
        stdlib=stdlib,
        include=root / "include" / "python3.12",
        executable=root / "bin" / "python3.12",
        sysconfigdata=None,
        build_vars={},
        arch="x86_64",
        libc="gnu",
    )


def wheel(project: str, version: str, license: str, files: dict[str, bytes]) -> WheelFiles:
    return WheelFiles(
        wheel=f"{project}-{version}-py3-none-any.whl",
        version=version,
        files={},
        licenses=files,
        sha256="b" * 64,
        license=license,
    )


def parts(root: Path, pinned: bool = True, **changes: Any) -> Parts:
    values: dict[str, Any] = {
        "target": load_matrix().target("x86_64-linux-gnu"),
        "runtime": fake_runtime(root),
        "runtime_archive": ASSET if pinned else "packed.tar.gz",
        "runtime_sha256": PBS_SHA if pinned else "c" * 64,
        "pynox_version": "0.1.0",
        "launcher": root / "launcher",
        "extensions": {},
        "cffi": wheel("cffi", "2.0.0", "MIT", {"LICENSE": b"MIT cffi", "AUTHORS": b"people"}),
        "extra": [wheel("tomli", "2.2.1", "MIT License", {"LICENSE": b"MIT tomli"})],
        "runtime_release": "20260814" if pinned else None,
        "runtime_url": URL if pinned else None,
    }
    values.update(changes)
    return Parts(**values)


def write(stage: Path, made: Parts, epoch: int = 1_700_000_000) -> dict[str, Any]:
    files = licenses.collect(
        made.runtime,
        made.runtime_archive,
        made.runtime_sha256,
        [made.cffi, *made.extra],
        stage / "licenses",
    )
    text = sbom.write(stage, made, files, epoch).read_text(encoding="utf-8")
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    document: dict[str, Any] = json.loads(text)
    return document


def components(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["bom-ref"]: c for c in document["components"]}


def properties(component: dict[str, Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for item in component.get("properties", []):
        found.setdefault(item["name"], []).append(item["value"])
    return found


def test_pinned_runtime_is_named_by_release_asset_and_sha256(tmp_path: Path) -> None:
    document = write(tmp_path / "stage", parts(tmp_path / "runtime"))
    assert document["bomFormat"] == "CycloneDX"
    assert document["specVersion"] == "1.6"
    assert document["metadata"]["timestamp"].startswith("2023-11-14T22:13:20")
    runtime = components(document)["cpython"]
    assert runtime["version"] == "3.12.14"
    assert runtime["licenses"] == [{"expression": "PSF-2.0"}]
    found = properties(runtime)
    assert found["pynox:runtime:release"] == ["20260814"]
    assert found["pynox:runtime:asset"] == [ASSET]
    assert found["pynox:runtime:sha256"] == [PBS_SHA]
    assert runtime["hashes"] == [{"alg": "SHA-256", "content": PBS_SHA}]
    distribution = [r for r in runtime["externalReferences"] if r["type"] == "distribution"]
    assert distribution[0]["url"] == URL
    assert "licenses/CPython-LICENSE.txt" in found["pynox:license-file"]


def test_local_runtime_is_marked_local(tmp_path: Path) -> None:
    document = write(tmp_path / "stage", parts(tmp_path / "runtime", pinned=False))
    runtime = components(document)["cpython"]
    found = properties(runtime)
    for key in ("release", "asset", "sha256"):
        assert found[f"pynox:runtime:{key}"] == ["local"]
    assert "hashes" not in runtime


def test_pynox_and_its_python_dependencies_with_licence_files(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    document = write(stage, parts(tmp_path / "runtime"))
    found = components(document)
    assert found["pypi:pynox"]["purl"] == "pkg:pypi/pynox@0.1.0"
    assert found["pypi:pynox"]["licenses"] == [{"expression": "Apache-2.0"}]
    assert found["pypi:cffi"]["purl"] == "pkg:pypi/cffi@2.0.0"
    assert found["pypi:cffi"]["licenses"] == [{"expression": "MIT"}]
    assert found["pypi:tomli"]["licenses"] == [{"license": {"name": "MIT License"}}]
    assert properties(found["pypi:cffi"])["pynox:license-file"] == [
        "licenses/cffi-AUTHORS",
        "licenses/cffi-LICENSE",
    ]
    named = [p for c in found.values() for p in properties(c).get("pynox:license-file", [])]
    assert named, "every component names its licence files"
    for path in named:
        assert (stage / path).is_file(), path
    assert (stage / "licenses" / "tomli-LICENSE").read_bytes() == b"MIT tomli"
    edges = {d["ref"]: set(d.get("dependsOn", [])) for d in document["dependencies"]}
    assert edges["bundle"] == {"cpython", "pypi:pynox"}
    assert edges["pypi:pynox"] == {"pypi:cffi", "pypi:tomli"}


def vendor_ssl(runtime: Path, license: str = "vendored-licenses/libssl3.copyright") -> None:
    lib = runtime / "lib"
    (lib / "vendored-licenses").mkdir(parents=True)
    (lib / "vendored-licenses" / "libssl3.copyright").write_bytes(SSL_COPYRIGHT)
    origin = "/usr/lib/x86_64-linux-gnu/libssl.so.3 (Debian package libssl3)"
    vendored.write(lib, [vendored.Library("libssl.so.3", "libssl3", "3.0.13-1", origin, license)])


def test_vendored_libraries_with_version_origin_and_licence(tmp_path: Path) -> None:
    made = parts(tmp_path / "runtime", pinned=False)
    vendor_ssl(made.runtime.root)
    stage = tmp_path / "stage"
    document = write(stage, made)
    library = components(document)["vendored:libssl.so.3"]
    assert (library["name"], library["version"]) == ("libssl3", "3.0.13-1")
    found = properties(library)
    assert found["pynox:vendored:file"] == ["python/lib/libssl.so.3"]
    assert found["pynox:vendored:origin"][0].startswith("/usr/lib/x86_64-linux-gnu/libssl.so.3")
    assert found["pynox:license-file"] == ["licenses/vendored/libssl3.copyright"]
    assert (stage / "licenses/vendored/libssl3.copyright").read_bytes() == SSL_COPYRIGHT
    edges = {d["ref"]: set(d.get("dependsOn", [])) for d in document["dependencies"]}
    assert edges["cpython"] == {"vendored:libssl.so.3"}


@pytest.mark.parametrize("license", ["../../etc/passwd", "/etc/passwd"])
def test_vendored_record_cannot_point_outside_the_runtime(tmp_path: Path, license: str) -> None:
    made = parts(tmp_path / "runtime")
    vendor_ssl(made.runtime.root, license)
    with pytest.raises(BundlerError, match="outside the runtime's lib/"):
        write(tmp_path / "stage", made)


def test_vendored_licence_missing_from_the_runtime_is_refused(tmp_path: Path) -> None:
    made = parts(tmp_path / "runtime")
    vendor_ssl(made.runtime.root, "vendored-licenses/gone.copyright")
    with pytest.raises(BundlerError, match="which the runtime lacks"):
        write(tmp_path / "stage", made)


def test_sbom_is_byte_reproducible(tmp_path: Path) -> None:
    made = parts(tmp_path / "runtime")
    write(tmp_path / "one", made)
    write(tmp_path / "two", made)
    one = (tmp_path / "one" / sbom.NAME).read_bytes()
    assert one == (tmp_path / "two" / sbom.NAME).read_bytes()
    other = parts(tmp_path / "runtime2", runtime_sha256="d" * 64)
    write(tmp_path / "three", other)
    three = json.loads((tmp_path / "three" / sbom.NAME).read_text())
    assert three["serialNumber"] != json.loads(one)["serialNumber"]


def pinning(tmp_path: Path, archive: Path, sha256: str) -> Path:
    """A dist-config whose one pin, for this machine's target, has the given sha256."""
    from bundler.host import host_target

    config = tmp_path / "dist-config"
    shutil.copytree(PROJECT / "dist-config", config)
    (config / "runtimes.toml").write_text(
        '[release]\ntag = "20260814"\nurl = "https://example.invalid/{tag}/{name}"\n'
        'flavor = "install_only_stripped"\nsums = "SHA256SUMS"\nsha256_source = "a test"\n\n'
        f'[[assets]]\ntarget = "{host_target()}"\npython = "3.12.14"\nname = "{archive.name}"\n'
        f'url = "{URL}"\nsha256 = "{sha256}"\n',
        encoding="utf-8",
    )
    return config


@pytest.mark.parametrize("same", [True, False])
def test_local_archive_with_the_pinned_sha256_is_that_asset(tmp_path: Path, same: bool) -> None:
    from bundler.host import host_target

    archive = tmp_path / ASSET
    archive.write_bytes(b"an archive")
    digest = hashlib.sha256(b"an archive" if same else b"other bytes").hexdigest()
    config = pinning(tmp_path, archive, digest)
    target = load_matrix(config).target(host_target())
    source = fetch.resolve(target, "3.12", runtime=str(archive), config_dir=config)
    assert source.sha256 == hashlib.sha256(b"an archive").hexdigest()
    assert (source.release, source.url) == (("20260814", URL) if same else (None, None))


def loaded_libc() -> Path:
    for line in Path("/proc/self/maps").read_text().splitlines():
        if line.rstrip().endswith("/libc.so.6"):
            return Path(line.split()[-1])
    pytest.skip("this process maps no libc.so.6 (not glibc)")


def test_a_host_library_is_recorded_with_its_debian_package_and_copyright(tmp_path: Path) -> None:
    if shutil.which("dpkg-query") is None:
        pytest.skip("no dpkg on this machine: a library is recorded by its path only")
    libc = loaded_libc()
    package = vendored.debian_package(libc)
    if not package:
        pytest.skip(f"{libc} was not installed by a Debian package")
    entry = vendored.from_host(libc, "libc.so.6", tmp_path)
    assert entry.name == package
    assert entry.version
    assert entry.origin == f"{libc} (Debian package {package})"
    copyright = Path("/usr/share/doc") / package / "copyright"
    assert (tmp_path / entry.license).read_bytes() == copyright.read_bytes()
    vendored.write(tmp_path, [entry])
    assert vendored.read(tmp_path) == [entry]


def test_a_library_no_package_manager_knows_is_recorded_by_its_path(tmp_path: Path) -> None:
    entry = vendored.from_host(tmp_path / "libmade.so.1", "libmade.so.1", tmp_path)
    assert entry == vendored.Library(
        "libmade.so.1", "libmade.so.1", "", str(tmp_path / "libmade.so.1"), ""
    )
