"""Refreshing dist-config/runtimes.toml from checksum lists, never from guesses.

The sources are the release's own SHA256SUMS (downloaded, or given as files) and,
offline, the tables of dist-config/pbs-checksums/ and pbs-installer's
versions.json (see bundler/pin_sources.py). Several may be given at once: each
pin records every source that lists its asset, and an asset two sources give
different checksums is refused. A target and CPython minor that no source lists
is named in a comment of the file and gets no pin; a checksum is never made up.
"""

from __future__ import annotations

import http.client
import re
import urllib.error
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from bundler import config, log
from bundler.download import describe, read_small, shown
from bundler.errors import BundlerError
from bundler.mirror import mirror_base
from bundler.paths import dist_config_dir
from bundler.pin_sources import Listing, parse_sums, read_sums, read_table, read_versions_json

VERSION = r"(?P<version>3\.\d+\.\d+)"


@dataclass(frozen=True)
class Sources:
    """What refresh-pins was told to read; nothing at all means: download SHA256SUMS."""

    sums: tuple[Path, ...] = ()
    tables: tuple[Path, ...] = ()
    # pbs-installer versions.json files; None stands for the installed package's.
    pbs_installer: tuple[Path | None, ...] = ()

    def offline(self) -> bool:
        return bool(self.sums or self.tables or self.pbs_installer)


@dataclass(frozen=True)
class Pin:
    sha256: str
    sources: tuple[str, ...]


def asset_name(version: str, tag: str, triple: str, flavor: str) -> str:
    return f"cpython-{version}+{tag}-{triple}-{flavor}.tar.gz"


def asset_url(template: str, tag: str, name: str) -> str:
    """The download URL, with the `+` of the name quoted as %2B."""
    return template.format(tag=tag, name=urllib.parse.quote(name))


def merge(listings: list[Listing], names: set[str]) -> dict[str, Pin]:
    """Per asset of `names`, its checksum and every source that lists it.

    Two sources that give one asset different checksums refuse the refresh.
    """
    pins: dict[str, Pin] = {}
    first: dict[str, Listing] = {}
    for listing in listings:
        for name in sorted(names & listing.sums.keys()):
            sha256 = listing.sums[name]
            if name not in pins:
                first[name] = listing
                pins[name] = Pin(sha256, (listing.provenance[name],))
                continue
            if pins[name].sha256 != sha256:
                raise BundlerError(
                    f"the sources disagree on {name}: {first[name].origin} gives sha256 "
                    f"{pins[name].sha256} but {listing.origin} gives {sha256}; the pins are "
                    "unchanged: find out which source is wrong and leave it out"
                )
            pins[name] = Pin(sha256, (*pins[name].sources, listing.provenance[name]))
    return pins


def pick_versions(
    names: set[str], tag: str, triple: str, pythons: tuple[str, ...], flavor: str
) -> dict[str, str]:
    """For each CPython minor of `pythons`, the newest final version listed for `triple`."""
    found: dict[str, tuple[int, ...]] = {}
    pattern = re.compile(
        rf"cpython-{VERSION}\+{re.escape(tag)}-{re.escape(triple)}-{re.escape(flavor)}\.tar\.gz"
    )
    for name in names:
        match = pattern.fullmatch(name)
        if not match:
            continue
        parts = tuple(int(p) for p in match["version"].split("."))
        minor = f"{parts[0]}.{parts[1]}"
        if minor in pythons and parts > found.get(minor, ()):
            found[minor] = parts
    return {minor: ".".join(map(str, parts)) for minor, parts in found.items()}


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(
    release: config.Release,
    matrix: config.Matrix,
    chosen: dict[tuple[str, str], tuple[str, str]],
    pins: dict[str, Pin],
    origins: list[str],
) -> str:
    """The whole runtimes.toml, in a fixed order so that a refresh diff shows only changes.

    chosen maps (target, minor) to the version and asset name pinned for it.
    """
    lines = [
        "# Runtime pins: python-build-standalone (PBS) release assets, one per target and",
        "# CPython minor. Written by `python -m bundler refresh-pins` (`nox -s refresh_pins`)",
        "# from checksum lists (the release's SHA256SUMS, dist-config/pbs-checksums/,",
        "# pbs-installer's versions.json); never edit a sha256 by hand.",
        "# `sources` names, per pin, every source that gave its sha256 (they all agreed).",
        "",
        "[release]",
        f"tag = {_quoted(release.tag)}",
        f"url = {_quoted(release.url_template)}",
        f"flavor = {_quoted(release.flavor)}",
        f"sums = {_quoted(release.sums_asset)}",
        f"sha256_source = {_quoted('; '.join(origins))}",
        "",
    ]
    for target in matrix.targets:
        for minor in matrix.pythons:
            if (target.name, minor) not in chosen:
                lines += [
                    f"# No pin for CPython {minor} on {target.name}: no source lists "
                    f"release {release.tag}'s {release.flavor} asset for it.",
                    "",
                ]
                continue
            version, name = chosen[target.name, minor]
            lines += [
                "[[assets]]",
                f"target = {_quoted(target.name)}",
                f"python = {_quoted(version)}",
                f"name = {_quoted(name)}",
                f"url = {_quoted(asset_url(release.url_template, release.tag, name))}",
                f"sha256 = {_quoted(pins[name].sha256)}",
                "sources = [" + ", ".join(_quoted(s) for s in pins[name].sources) + "]",
                "",
            ]
    return "\n".join(lines)


# A release's SHA256SUMS is well under a megabyte; a server that sends more is refused.
SUMS_LIMIT = 16 * 1024 * 1024


def _download_sums(release: config.Release, tag: str) -> Listing:
    base = mirror_base()
    origin = f"{release.sums_asset} of release {tag}"
    if base is not None:
        url = f"{base.rstrip('/')}/{tag}/{release.sums_asset}"
        # The pins name where their checksums came from: a mirror is not the release.
        origin += f" as the mirror {shown(base)} serves it"
    else:
        url = asset_url(release.url_template, tag, release.sums_asset)
    data = read_small(url, SUMS_LIMIT)
    if len(data) > SUMS_LIMIT:
        raise BundlerError(
            f"{shown(url)} sends more than {SUMS_LIMIT // (1024 * 1024)} MiB, more than any "
            f"{release.sums_asset}; the pins are unchanged: check the mirror, or pass --sums FILE"
        )
    listing = parse_sums(data.decode("utf-8", errors="replace"), origin)
    if base is not None:
        log.warning(
            f"the checksums come from the mirror {shown(base)}, not from the release itself; "
            f"compare them with the release's own {release.sums_asset} before you commit "
            f"dist-config/{config.RUNTIMES_FILE}"
        )
    return listing


def read_sources(sources: Sources) -> list[Listing]:
    return [
        *(read_sums(path) for path in sources.sums),
        *(read_table(path) for path in sources.tables),
        *(read_versions_json(path) for path in sources.pbs_installer),
    ]


def refresh(tag: str | None = None, sources: Sources | None = None) -> int:
    """Rewrites runtimes.toml from the sources' checksums; 0 also when it changed nothing."""
    sources = sources or Sources()
    directory = dist_config_dir()
    release = config.load_release(directory)
    matrix = config.load_matrix(directory)
    tag = tag or release.tag
    if sources.offline():
        listings = read_sources(sources)
    else:
        try:
            listings = [_download_sums(release, tag)]
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            log.warning(
                f"refresh-pins cannot reach the {release.sums_asset} of release {tag} "
                f"({describe(exc)}); the pins are unchanged (pass --sums FILE, --table FILE or "
                "--pbs-installer to refresh from checksums at hand)"
            )
            return 0
    listed = set().union(*(listing.sums.keys() for listing in listings))
    chosen: dict[tuple[str, str], tuple[str, str]] = {}
    for target in matrix.targets:
        versions = pick_versions(listed, tag, target.pbs_triple, matrix.pythons, release.flavor)
        for minor, version in versions.items():
            name = asset_name(version, tag, target.pbs_triple, release.flavor)
            chosen[target.name, minor] = (version, name)
    if not chosen:
        raise BundlerError(
            f"no source lists any {release.flavor} asset of release {tag} for the targets; "
            "the pins are unchanged: check --tag and the sources"
        )
    pins = merge(listings, {name for _, name in chosen.values()})
    for listing in listings:
        if not pins.keys() & listing.sums.keys():
            log.warning(f"{listing.origin} lists none of the assets pinned for release {tag}")
    missing = [f"{t} {m}" for t, m in matrix.cells() if (t, m) not in chosen]
    if missing:
        log.warning(
            f"no source lists release {tag}'s {release.flavor} asset for "
            f"{', '.join(missing)}; runtimes.toml says so and pins nothing for them"
        )
    updated = config.Release(
        tag=tag,
        url_template=release.url_template,
        flavor=release.flavor,
        sums_asset=release.sums_asset,
        assets=(),
    )
    path = directory / config.RUNTIMES_FILE
    origins = [listing.origin for listing in listings]
    path.write_text(render(updated, matrix, chosen, pins, origins), encoding="utf-8")
    log.step(f"refresh-pins: {path} now pins release {tag} ({len(pins)} assets)")
    return 0
