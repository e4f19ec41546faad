"""Finding a runtime for a target: a local one, the cache, a mirror, or upstream.

In order: PYNOX_RUNTIME (a local archive or extracted folder, used as given);
else the pinned asset from the cache, re-verified; else downloaded from
PYNOX_PBS_MIRROR or the release URL and verified against its pinned sha256
before it is kept. A download whose checksum is unknown is refused unless the
caller supplies one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from bundler import config, log
from bundler.digest import normalize, sha256_file
from bundler.download import CannotWrite, DownloadFailed, download, shown, through_proxy
from bundler.errors import BundlerError
from bundler.mirror import ENV as MIRROR_ENV
from bundler.mirror import mirror_base, mirror_url
from bundler.paths import cache_failure, made_cache, runtimes_cache

RUNTIME_ENV = "PYNOX_RUNTIME"
SHA256_ENV = "PYNOX_RUNTIME_SHA256"


@dataclass(frozen=True)
class RuntimeSource:
    """A runtime ready to unpack (kind "archive") or to copy (kind "directory")."""

    kind: str
    path: Path
    name: str
    sha256: str | None
    origin: str
    release: str | None = None  # the pinned release's tag; None for a local runtime
    url: str | None = None  # the pinned asset's upstream address


def runtime_path(value: str) -> Path:
    """The local runtime PYNOX_RUNTIME (or --runtime) names, refused if it does not exist."""
    path = Path(value).expanduser()
    if not path.is_dir() and not path.is_file():
        raise BundlerError(
            f"{RUNTIME_ENV} names {value}, which does not exist; point it at a runtime "
            "archive (.tar.gz) or an extracted runtime folder"
        )
    return path


def local_runtime(value: str, sha256: str | None) -> RuntimeSource:
    path = runtime_path(value)
    if path.is_dir():
        if sha256:
            # A folder has no single sha256: using it would skip the check that was asked for.
            raise BundlerError(
                f"{RUNTIME_ENV} names the folder {value}, and a folder cannot be checked "
                f"against the sha256 given (--sha256 or {SHA256_ENV}); point {RUNTIME_ENV} at "
                f"the runtime's archive (.tar.gz) to check it, or drop --sha256 and {SHA256_ENV}"
            )
        return RuntimeSource("directory", path.resolve(), path.name, None, str(path))
    actual = sha256_file(path)
    if sha256 and actual != sha256:
        raise BundlerError(
            f"{path} has sha256 {actual}, not the {sha256} it was given with; "
            "refusing it: check the file or the checksum"
        )
    return RuntimeSource("archive", path.resolve(), path.name, actual, str(path))


def cached_or_downloaded(
    asset: config.Asset, tag: str, expected: str, mirror: str | None
) -> RuntimeSource:
    try:
        return _cached_or_downloaded(asset, tag, expected, mirror)
    except CannotWrite as exc:
        with contextlib.suppress(OSError):
            exc.part.unlink(missing_ok=True)  # what a full disk cut short is not worth keeping
        raise cache_failure("write", exc.part, exc.error) from None
    except OSError as exc:  # reading, removing or renaming a file of the cache
        where = Path(exc.filename) if exc.filename else runtimes_cache()
        raise cache_failure("use", where, exc) from None


def _cached_or_downloaded(
    asset: config.Asset, tag: str, expected: str, mirror: str | None
) -> RuntimeSource:
    cache = runtimes_cache()
    kept = cache / asset.name
    if kept.is_file():
        if sha256_file(kept) == expected:
            return RuntimeSource(
                "archive", kept, asset.name, expected, f"cache {kept}", tag, asset.url
            )
        log.warning(f"the cached {kept} does not match its sha256; downloading it again")
        kept.unlink()
    url = mirror_url(mirror, tag, asset.name) if mirror else asset.url
    part = made_cache(cache) / (asset.name + ".part")
    resumed = part.is_file() and part.stat().st_size > 0
    _download(url, part, asset.name, tag)
    actual = sha256_file(part)
    if actual != expected and resumed:
        # The bytes an earlier run left may be what is wrong (another mirror, a damaged
        # disk): the whole file, fetched again, decides.
        log.warning(
            f"{asset.name}, resumed from an earlier partial download, does not match its "
            "sha256; downloading it again from the start"
        )
        part.unlink()
        _download(url, part, asset.name, tag)
        actual = sha256_file(part)
    if actual != expected:
        empty = part.stat().st_size == 0
        part.unlink()
        got = "is empty" if empty else f"has sha256 {actual}, not the pinned {expected}"
        fix = "put the file the release published on the mirror, or check" if mirror else "check"
        raise BundlerError(
            f"the download of {asset.name} from {shown(url)} {got}; refusing it: {fix} the pin in "
            f"dist-config/{config.RUNTIMES_FILE} (`nox -s refresh_pins` rewrites it from "
            "published checksums)"
        )
    part.replace(kept)
    return RuntimeSource("archive", kept, asset.name, expected, shown(url), tag, asset.url)


def _download(url: str, part: Path, name: str, tag: str) -> None:
    try:
        download(url, part, name)
    except DownloadFailed as exc:
        raise BundlerError(
            f"cannot download {name} from {shown(url)}{through_proxy(url)} ({exc.reason}); "
            "without access to it, "
            f"put the file at {tag}/{name} in a folder and set {MIRROR_ENV} to that "
            f"folder, or set {RUNTIME_ENV} to a local runtime archive or folder"
        ) from None


def as_pinned(
    source: RuntimeSource, target: config.Target, minor: str, config_dir: Path | None
) -> RuntimeSource:
    """A local archive that is the pinned asset (same sha256) is named as that asset."""
    try:
        release = config.load_release(config_dir)
        asset = release.asset(target.name, minor)
    except BundlerError:
        return source
    if not source.sha256 or source.sha256 != asset.sha256:
        return source
    return dataclasses.replace(source, release=release.tag, url=asset.url)


def resolve(
    target: config.Target,
    minor: str,
    runtime: str | None = None,
    mirror: str | None = None,
    sha256: str | None = None,
    config_dir: Path | None = None,
) -> RuntimeSource:
    """The runtime to build a bundle of `minor` for `target` from."""
    given = sha256 or os.environ.get(SHA256_ENV) or None
    given = normalize(given, "--sha256" if sha256 else SHA256_ENV) if given else None
    local = runtime or os.environ.get(RUNTIME_ENV)
    if local and mirror:
        # A mirror only serves downloads; a local runtime is used as it is, so the mirror
        # asked for on the command line would go unused without a word.
        raise BundlerError(
            f"--mirror was given, but {RUNTIME_ENV} (or --runtime) names the local runtime "
            f"{local}, which is used instead of any download; drop --mirror, or unset "
            f"{RUNTIME_ENV} to download from the mirror"
        )
    if local:
        return as_pinned(local_runtime(local, given), target, minor, config_dir)
    release = config.load_release(config_dir)
    asset = release.asset(target.name, minor)
    if given and asset.sha256 and given != asset.sha256:
        # A checksum given by hand only fills a missing pin: it never overrides one.
        raise BundlerError(
            f"the sha256 given for {asset.name} ({given}) is not the one pinned in "
            f"dist-config/{config.RUNTIMES_FILE} ({asset.sha256}); drop --sha256 and "
            f"{SHA256_ENV}, or re-pin with `nox -s refresh_pins`"
        )
    expected = given or asset.sha256
    if not expected:
        raise BundlerError(
            f"no sha256 is pinned for {asset.name} in dist-config/{config.RUNTIMES_FILE}, so it "
            f"is not downloaded unchecked; pass --sha256 (or set {SHA256_ENV}) with the checksum "
            f"you trust, run `nox -s refresh_pins`, or set {RUNTIME_ENV} to a local runtime"
        )
    return cached_or_downloaded(asset, release.tag, expected, mirror_base(mirror))
