"""SBOM.cdx.json: what a bundle is made of, as a CycloneDX 1.6 JSON document.

Components: the CPython build (its python-build-standalone release, asset and
sha256, or "local" for a runtime given through PYNOX_RUNTIME), every library
vendored into the runtime (lib/vendored.json: version and origin), Pynox, and the
Python packages beside it in site-packages (cffi's backend, tomli on 3.10). Each
names its licence files under licenses/ in the property "pynox:license-file".

The document is byte-reproducible: its timestamp is the build's SOURCE_DATE_EPOCH
and its serial number is derived from what the bundle is made of.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from cyclonedx.model import (
    ExternalReference,
    ExternalReferenceType,
    HashAlgorithm,
    HashType,
    Property,
    XsUri,
)
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.license import DisjunctiveLicense, LicenseExpression
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

from bundler import config, vendored
from bundler.paths import PROJECT

if TYPE_CHECKING:
    from bundler.assemble import Parts

NAME = "SBOM.cdx.json"
LOCAL = "local"
PBS = "https://github.com/astral-sh/python-build-standalone"
CPYTHON_LICENSE = "PSF-2.0"


def _properties(pairs: dict[str, str], license_files: Iterable[str]) -> list[Property]:
    found = [Property(name=f"pynox:{k}", value=v) for k, v in pairs.items()]
    return found + [Property(name="pynox:license-file", value=p) for p in sorted(license_files)]


def _license(value: str, spdx: bool) -> list[LicenseExpression | DisjunctiveLicense]:
    if not value:
        return []
    return [LicenseExpression(value) if spdx else DisjunctiveLicense(name=value)]


def pynox_license() -> str:
    """The SPDX expression pyproject.toml gives (license = {text = ...} or a string)."""
    project = config.read_toml(PROJECT / "pyproject.toml").get("project", {})
    value = project.get("license", "")
    return str(value.get("text", "") if isinstance(value, dict) else value)


def cpython(parts: Parts, license_files: list[str]) -> Component:
    runtime = parts.runtime
    release = parts.runtime_release
    if release:
        description = (
            f"CPython {runtime.version} built by python-build-standalone, release {release}"
        )
        pairs = {
            "runtime:release": release,
            "runtime:asset": parts.runtime_archive or "",
            "runtime:sha256": parts.runtime_sha256 or "",
        }
    else:
        description = f"CPython {runtime.version} from a local runtime (PYNOX_RUNTIME)"
        pairs = {"runtime:release": LOCAL, "runtime:asset": LOCAL, "runtime:sha256": LOCAL}
    hashes = []
    references = []
    if release and parts.runtime_sha256:
        hashes = [HashType(alg=HashAlgorithm.SHA_256, content=parts.runtime_sha256)]
    if release and parts.runtime_url:
        references.append(
            ExternalReference(
                type=ExternalReferenceType.DISTRIBUTION,
                url=XsUri(parts.runtime_url),
                hashes=hashes,
            )
        )
        references.append(ExternalReference(type=ExternalReferenceType.VCS, url=XsUri(PBS)))
    return Component(
        type=ComponentType.APPLICATION,
        name="cpython",
        version=runtime.version,
        bom_ref="cpython",
        description=description,
        licenses=_license(CPYTHON_LICENSE, spdx=True),
        hashes=hashes,
        external_references=references,
        properties=_properties(pairs, license_files),
    )


def vendored_libraries(parts: Parts, licenses: dict[str, list[str]]) -> list[Component]:
    found = []
    for library in vendored.read(parts.runtime.root / "lib"):
        files = licenses.get(f"vendored:{library.file}", [])
        found.append(
            Component(
                type=ComponentType.LIBRARY,
                name=library.name,
                version=library.version or None,
                bom_ref=f"vendored:{library.file}",
                description=f"{library.file} in python/lib/, vendored from the build host",
                licenses=[DisjunctiveLicense(name=f"see {p}") for p in files],
                properties=_properties(
                    {
                        "vendored:file": f"python/lib/{library.file}",
                        "vendored:origin": library.origin,
                    },
                    files,
                ),
            )
        )
    return found


def python_packages(parts: Parts, licenses: dict[str, list[str]]) -> list[Component]:
    found = []
    for wheel in [parts.cffi, *parts.extra]:
        project = wheel.project
        what = "its compiled backend _cffi_backend" if project == "cffi" else "its package"
        found.append(
            Component(
                type=ComponentType.LIBRARY,
                name=project,
                version=wheel.version,
                bom_ref=f"pypi:{project}",
                purl=PackageURL(type="pypi", name=project, version=wheel.version),
                description=f"{what}, from the wheel {wheel.wheel}",
                licenses=_license(wheel.license, spdx=" " not in wheel.license.strip()),
                hashes=[HashType(alg=HashAlgorithm.SHA_256, content=wheel.sha256)]
                if wheel.sha256
                else [],
                properties=_properties({"wheel": wheel.wheel}, licenses.get(project, [])),
            )
        )
    return found


def serial_number(parts: Parts, epoch: int) -> uuid.UUID:
    """The same for the same inputs, different when any of them changes."""
    wheels = ",".join(f"{w.wheel}:{w.sha256}" for w in [parts.cffi, *parts.extra])
    facts = [
        parts.pynox_version,
        parts.target.name,
        parts.runtime.version,
        parts.runtime_archive or LOCAL,
        parts.runtime_sha256 or LOCAL,
        wheels,
        str(epoch),
    ]
    return uuid.uuid5(uuid.NAMESPACE_URL, "pynox-bundle:" + "|".join(facts))


def build(parts: Parts, licenses: dict[str, list[str]], epoch: int) -> Bom:
    bom = Bom(serial_number=serial_number(parts, epoch))
    bom.metadata.timestamp = datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc)
    bundle = Component(
        type=ComponentType.APPLICATION,
        name="pynox-bundle",
        version=parts.pynox_version,
        bom_ref="bundle",
        description=f"Pynox {parts.pynox_version} with CPython {parts.runtime.version} "
        f"for {parts.target.name}",
        properties=[Property(name="pynox:target", value=parts.target.name)],
    )
    bom.metadata.component = bundle
    runtime = cpython(parts, licenses.get("cpython", []))
    libraries = vendored_libraries(parts, licenses)
    packages = python_packages(parts, licenses)
    pynox = Component(
        type=ComponentType.LIBRARY,
        name="pynox",
        version=parts.pynox_version,
        bom_ref="pypi:pynox",
        purl=PackageURL(type="pypi", name="pynox", version=parts.pynox_version),
        licenses=_license(pynox_license(), spdx=True),
        properties=_properties({}, licenses.get("pynox", [])),
    )
    for component in [runtime, *libraries, pynox, *packages]:
        bom.components.add(component)
    bom.register_dependency(bundle, [runtime, pynox])
    bom.register_dependency(runtime, libraries)
    bom.register_dependency(pynox, packages)
    return bom


def write(stage: Path, parts: Parts, licenses: dict[str, list[str]], epoch: int) -> Path:
    path = stage / NAME
    text = JsonV1Dot6(build(parts, licenses, epoch)).output_as_string(indent=2)
    path.write_text(text + "\n", encoding="utf-8")
    return path
