"""Refreshing dist-config/runtimes.toml from a release's SHA256SUMS asset.

The pins are only ever written from a checksum list: the release's own
SHA256SUMS, downloaded or given as a file. When neither is at hand the pins
stay as they are and the command says so; a checksum is never made up.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
from pathlib import Path

from bundler import config, log
from bundler.download import open_url
from bundler.errors import BundlerError
from bundler.mirror import mirror_base
from bundler.paths import dist_config_dir

VERSION = r"(?P<version>3\.\d+\.\d+)"


def asset_name(version: str, tag: str, triple: str, flavor: str) -> str:
    return f"cpython-{version}+{tag}-{triple}-{flavor}.tar.gz"


def asset_url(template: str, tag: str, name: str) -> str:
    """The download URL, with the `+` of the name quoted as %2B."""
    return template.format(tag=tag, name=urllib.parse.quote(name))


def parse_sums(text: str) -> dict[str, str]:
    """`{hex}  {filename}` lines (sha256sum's format) as {filename: hex}."""
    sums: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.strip().split()
        if len(parts) == 2 and re.fullmatch(r"[0-9a-fA-F]{64}", parts[0]):
            sums[parts[1].lstrip("*")] = parts[0].lower()
    return sums


def pick_versions(
    sums: dict[str, str], tag: str, matrix: config.Matrix, flavor: str
) -> dict[str, str]:
    """For each CPython minor of the matrix, the newest final version the release has."""
    found: dict[str, tuple[int, ...]] = {}
    triple = matrix.targets[0].pbs_triple
    pattern = re.compile(
        rf"cpython-{VERSION}\+{re.escape(tag)}-{re.escape(triple)}-{re.escape(flavor)}\.tar\.gz"
    )
    for name in sums:
        match = pattern.fullmatch(name)
        if not match:
            continue
        parts = tuple(int(p) for p in match["version"].split("."))
        minor = f"{parts[0]}.{parts[1]}"
        if minor in matrix.pythons and parts > found.get(minor, ()):
            found[minor] = parts
    return {minor: ".".join(map(str, parts)) for minor, parts in found.items()}


def render(
    release: config.Release,
    matrix: config.Matrix,
    versions: dict[str, str],
    sums: dict[str, str],
    sums_origin: str,
) -> str:
    """The whole runtimes.toml, in a fixed order so that a refresh diff shows only changes."""
    lines = [
        "# Runtime pins: python-build-standalone (PBS) release assets, one per target and",
        "# CPython minor. Written by `python -m bundler refresh-pins` (`nox -s refresh_pins`)",
        "# from the release's SHA256SUMS asset; never edit a sha256 by hand.",
        "#",
        '# sha256 = "" means the checksum could not be obtained where the pin was written:',
        "# the bundler refuses to use such a download unless it is given a checksum",
        "# (--sha256 or PYNOX_RUNTIME_SHA256) or a local runtime (PYNOX_RUNTIME).",
        "",
        "[release]",
        f'tag = "{release.tag}"',
        f'url = "{release.url_template}"',
        f'flavor = "{release.flavor}"',
        f'sums = "{release.sums_asset}"',
        f'sha256_source = "{sums_origin}"',
        "",
    ]
    for target in matrix.targets:
        for minor in matrix.pythons:
            version = versions.get(minor)
            if version is None:
                continue
            name = asset_name(version, release.tag, target.pbs_triple, release.flavor)
            lines += [
                "[[assets]]",
                f'target = "{target.name}"',
                f'python = "{version}"',
                f'name = "{name}"',
                f'url = "{asset_url(release.url_template, release.tag, name)}"',
                f'sha256 = "{sums.get(name, "")}"',
                "",
            ]
    return "\n".join(lines)


def _sums_text(release: config.Release, tag: str, sums_file: Path | None) -> tuple[str, str]:
    if sums_file is not None:
        try:
            return sums_file.read_text(
                encoding="utf-8"
            ), f"{release.sums_asset} of {tag}, from a file"
        except OSError as exc:
            raise BundlerError(f"cannot read {sums_file}: {exc.strerror}") from None
    base = mirror_base()
    if base is not None:
        url = f"{base.rstrip('/')}/{tag}/{release.sums_asset}"
    else:
        url = asset_url(release.url_template, tag, release.sums_asset)
    with open_url(url, timeout=30) as response:
        return response.read().decode("utf-8"), f"{release.sums_asset} of release {tag}"


def refresh(tag: str | None = None, sums_file: Path | None = None) -> int:
    """Rewrites runtimes.toml from the release's checksums; 0 also when it changed nothing."""
    directory = dist_config_dir()
    release = config.load_release(directory)
    matrix = config.load_matrix(directory)
    tag = tag or release.tag
    try:
        text, origin = _sums_text(release, tag, sums_file)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        log.warning(
            f"refresh-pins cannot reach the {release.sums_asset} of release {tag} ({reason}); "
            "the pins are unchanged (pass --sums FILE to refresh from a copy)"
        )
        return 0
    sums = parse_sums(text)
    versions = pick_versions(sums, tag, matrix, release.flavor)
    missing = [
        f"{t.name} {m}"
        for t in matrix.targets
        for m in matrix.pythons
        if m not in versions
        or asset_name(versions[m], tag, t.pbs_triple, release.flavor) not in sums
    ]
    if missing:
        raise BundlerError(
            f"release {tag} has no {release.flavor} asset for {', '.join(missing)}; "
            "the pins are unchanged: pick a release that has them all"
        )
    updated = config.Release(
        tag=tag,
        url_template=release.url_template,
        flavor=release.flavor,
        sums_asset=release.sums_asset,
        assets=(),
    )
    path = directory / config.RUNTIMES_FILE
    path.write_text(render(updated, matrix, versions, sums, origin), encoding="utf-8")
    log.step(f"refresh-pins: {path} now pins release {tag}")
    return 0
