"""Fetching runtimes: pins, the loopback mirror, resume, checksums, the cache, offline.

Most tests use a small archive of random bytes: what is checked here is the
path a download takes (verified before it is kept, resumed after a cut
connection, re-verified in the cache), not what is inside.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import itertools
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.bundles import PROJECT
from support.bundles.artifacts import clean_env, host_target
from support.bundles.http_mirror import Mirror

TAG = "t1"


def _asset_name() -> str:
    _, triple = host_target()
    return f"cpython-3.99.0+{TAG}-{triple}-install_only_stripped.tar.gz"


@pytest.fixture
def release(tmp_path: Path) -> dict[str, object]:
    """A mirror folder with one asset, and a dist-config that pins it."""
    data = os.urandom(3 * 1024 * 1024 + 12345)
    name = _asset_name()
    (tmp_path / "mirror" / TAG).mkdir(parents=True)
    (tmp_path / "mirror" / TAG / name).write_bytes(data)
    config = tmp_path / "dist-config"
    config.mkdir()
    (config / "targets.toml").write_text(
        (PROJECT / "dist-config" / "targets.toml")
        .read_text()
        .replace('pythons = ["3.10", "3.11", "3.12", "3.13", "3.14"]', 'pythons = ["3.99"]')
    )
    sha256 = hashlib.sha256(data).hexdigest()
    return {
        "name": name,
        "data": data,
        "sha256": sha256,
        "mirror": tmp_path / "mirror",
        "config": config,
        "cache": tmp_path / "cache",
    }


def _pin(release: dict[str, object], sha256: str) -> None:
    target, _ = host_target()
    name = release["name"]
    Path(release["config"], "runtimes.toml").write_text(  # type: ignore[arg-type]
        f'[release]\ntag = "{TAG}"\n'
        'url = "http://127.0.0.1:9/releases/download/{tag}/{name}"\n'
        'flavor = "install_only_stripped"\nsums = "SHA256SUMS"\nsha256_source = "a test"\n\n'
        f'[[assets]]\ntarget = "{target}"\npython = "3.99.0"\nname = "{name}"\n'
        f'url = "http://127.0.0.1:9/releases/download/{TAG}/{name}"\nsha256 = "{sha256}"\n'
    )


def fetch(release: dict[str, object], **env: str) -> subprocess.CompletedProcess[str]:
    target, _ = host_target()
    return subprocess.run(
        [sys.executable, "-m", "bundler", "fetch", "--target", target, "--python", "3.99"],
        cwd=PROJECT,
        env=clean_env(
            XDG_CACHE_HOME=str(release["cache"]), PYNOX_DIST_CONFIG=str(release["config"]), **env
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.startswith("bundler: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def cached(release: dict[str, object]) -> Path:
    return Path(release["cache"], "pynox", "runtimes", release["name"])  # type: ignore[arg-type]


def test_mirror_download_is_verified_and_cached(release: dict[str, object]) -> None:
    _pin(release, str(release["sha256"]))
    with Mirror(release["mirror"]) as mirror:  # type: ignore[arg-type]
        done = fetch(release, PYNOX_PBS_MIRROR=mirror.url)
        assert done.returncode == 0, done.stderr
        assert Path(done.stdout.strip()) == cached(release)
        assert cached(release).read_bytes() == release["data"]
        assert [r.path for r in mirror.state.requests] == [f"/{TAG}/{release['name']}"]
        again = fetch(release, PYNOX_PBS_MIRROR=mirror.url)
        assert again.returncode == 0, again.stderr
        assert len(mirror.state.requests) == 1, "the cached archive is reused"


def test_cached_archive_is_verified_again(release: dict[str, object]) -> None:
    _pin(release, str(release["sha256"]))
    with Mirror(release["mirror"]) as mirror:  # type: ignore[arg-type]
        assert fetch(release, PYNOX_PBS_MIRROR=mirror.url).returncode == 0
        cached(release).write_bytes(b"tampered")
        done = fetch(release, PYNOX_PBS_MIRROR=mirror.url)
        assert done.returncode == 0, done.stderr
        assert "does not match its sha256; downloading it again" in done.stderr
        assert len(mirror.state.requests) == 2
    assert cached(release).read_bytes() == release["data"]


def test_checksum_mismatch_is_refused(release: dict[str, object]) -> None:
    _pin(release, "0" * 64)
    with Mirror(release["mirror"]) as mirror:  # type: ignore[arg-type]
        done = fetch(release, PYNOX_PBS_MIRROR=mirror.url)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert line.endswith(
        f"has sha256 {release['sha256']}, not the pinned {'0' * 64}; refusing it: put the file"
        " the release published on the mirror, or check the pin in dist-config/runtimes.toml"
        " (`nox -s refresh_pins` rewrites it from published checksums)"
    )
    assert not cached(release).exists()
    assert not list(cached(release).parent.glob("*.part")), "nothing unverified is kept"


def test_an_empty_file_on_the_mirror_is_called_empty(release: dict[str, object]) -> None:
    _pin(release, str(release["sha256"]))
    Path(release["mirror"], TAG, release["name"]).write_bytes(b"")  # type: ignore[arg-type]
    done = fetch(release, PYNOX_PBS_MIRROR=str(release["mirror"]))
    assert done.returncode == 1
    assert one_line(done.stderr).endswith(
        " is empty; refusing it: put the file the release published on the mirror, or check"
        " the pin in dist-config/runtimes.toml (`nox -s refresh_pins` rewrites it from"
        " published checksums)"
    )
    assert not list(cached(release).parent.iterdir()), "nothing unverified is kept"


def test_interrupted_download_resumes_with_a_range_request(release: dict[str, object]) -> None:
    _pin(release, str(release["sha256"]))
    path = f"/{TAG}/{release['name']}"
    with Mirror(release["mirror"]) as mirror:  # type: ignore[arg-type]
        mirror.state.drop_once.add(path)
        done = fetch(release, PYNOX_PBS_MIRROR=mirror.url)
        requests = list(mirror.state.requests)
    assert done.returncode == 0, done.stderr
    assert cached(release).read_bytes() == release["data"]
    assert len(requests) == 2
    assert requests[0].range is None
    half = len(release["data"]) // 2  # type: ignore[arg-type]
    assert requests[1].range == f"bytes={half}-"
    assert "resuming at" in done.stderr


def test_a_damaged_partial_download_is_fetched_again_whole(release: dict[str, object]) -> None:
    """A .part an earlier run left with wrong bytes is not blamed on the mirror or the pin."""
    _pin(release, str(release["sha256"]))
    part = cached(release).with_name(f"{release['name']}.part")
    part.parent.mkdir(parents=True)
    half = len(release["data"]) // 2  # type: ignore[arg-type]
    part.write_bytes(b"\0" * half)
    with Mirror(release["mirror"]) as mirror:  # type: ignore[arg-type]
        done = fetch(release, PYNOX_PBS_MIRROR=mirror.url)
        ranges = [r.range for r in mirror.state.requests]
    assert done.returncode == 0, done.stderr
    assert cached(release).read_bytes() == release["data"]
    assert ranges == [f"bytes={half}-", None], "resumed, then fetched from the start"
    assert (
        f"bundler: warning: {release['name']}, resumed from an earlier partial download, does"
        " not match its sha256; downloading it again from the start"
    ) in done.stderr


def test_folder_and_file_url_mirrors(release: dict[str, object]) -> None:
    _pin(release, str(release["sha256"]))
    folder = str(release["mirror"])
    assert fetch(release, PYNOX_PBS_MIRROR=folder).returncode == 0
    cached(release).unlink()
    done = fetch(release, PYNOX_PBS_MIRROR=Path(folder).as_uri())
    assert done.returncode == 0, done.stderr
    assert cached(release).read_bytes() == release["data"]


def test_offline_failure_is_one_sentence(release: dict[str, object]) -> None:
    _pin(release, str(release["sha256"]))
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = fetch(release, PYNOX_PBS_MIRROR=f"http://127.0.0.1:{port}")
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert f"cannot download {release['name']} from http://127.0.0.1:{port}/{TAG}/" in line
    assert "PYNOX_PBS_MIRROR" in line and "PYNOX_RUNTIME" in line
    assert f"{TAG}/{release['name']}" in line


def test_missing_file_on_the_mirror(release: dict[str, object]) -> None:
    _pin(release, str(release["sha256"]))
    Path(release["mirror"], TAG, release["name"]).unlink()  # type: ignore[arg-type]
    with Mirror(release["mirror"]) as mirror:  # type: ignore[arg-type]
        done = fetch(release, PYNOX_PBS_MIRROR=mirror.url)
    assert done.returncode == 1
    assert "(HTTP 404" in one_line(done.stderr)


@pytest.mark.parametrize("where", ["folder-for-file", "file-for-folder", "unreadable"])
def test_a_folder_mirror_that_cannot_be_read_fails_at_once(
    release: dict[str, object], where: str
) -> None:
    """The same local error on every attempt: no retries (with their backoff), one line."""
    _pin(release, str(release["sha256"]))
    mirror = Path(release["mirror"])  # type: ignore[arg-type]
    asset = mirror / TAG / str(release["name"])
    if where == "folder-for-file":
        asset.unlink()
        asset.mkdir()
        reason = "Is a directory"
    elif where == "file-for-folder":
        asset.unlink()
        asset.parent.rmdir()
        asset.parent.write_text("")
        reason = "Not a directory"
    else:
        if os.geteuid() == 0:
            pytest.skip("root reads any file")
        asset.chmod(0)
        reason = "Permission denied"
    done = fetch(release, PYNOX_PBS_MIRROR=str(mirror))
    assert done.returncode == 1
    assert one_line(done.stderr) == (
        f"bundler: cannot download {release['name']} from {asset.as_uri()} ({reason}); without"
        f" access to it, put the file at {TAG}/{release['name']} in a folder and set"
        " PYNOX_PBS_MIRROR to that folder, or set PYNOX_RUNTIME to a local runtime archive or"
        " folder"
    )


@pytest.mark.parametrize(
    ("mirror", "reason"),
    [
        ("http://op:secret@[::1/pbs", "Invalid IPv6 URL"),
        ("http://127.0.0.1:80800/pbs", "Port out of range 0-65535"),
        ("https:///pbs", "it names no host"),
    ],
    ids=["bracket", "port", "host"],
)
def test_a_mirror_url_that_does_not_parse_is_one_line(
    release: dict[str, object], mirror: str, reason: str
) -> None:
    """Refused before any attempt (it would fail every one the same way), and without
    echoing a URL whose password cannot be told apart."""
    _pin(release, str(release["sha256"]))
    done = fetch(release, PYNOX_PBS_MIRROR=mirror)
    assert done.returncode == 1
    assert one_line(done.stderr) == (
        f"bundler: PYNOX_PBS_MIRROR is not a valid URL ({reason}); give it as"
        " http(s)://HOST[:PORT]/PATH, a file:// URL or a folder laid out as TAG/NAME"
    )
    assert "secret" not in done.stderr


def test_unpinned_download_is_refused_unless_a_checksum_is_given(
    release: dict[str, object],
) -> None:
    _pin(release, "")
    with Mirror(release["mirror"]) as mirror:  # type: ignore[arg-type]
        done = fetch(release, PYNOX_PBS_MIRROR=mirror.url)
        assert done.returncode == 1
        line = one_line(done.stderr)
        assert "no sha256 is pinned" in line and "--sha256" in line and "PYNOX_RUNTIME" in line
        assert mirror.state.requests == [], "nothing is downloaded unchecked"
        given = fetch(
            release, PYNOX_PBS_MIRROR=mirror.url, PYNOX_RUNTIME_SHA256=str(release["sha256"])
        )
    assert given.returncode == 0, given.stderr


def test_a_given_checksum_never_overrides_a_pin(release: dict[str, object]) -> None:
    _pin(release, str(release["sha256"]))
    with Mirror(release["mirror"]) as mirror:  # type: ignore[arg-type]
        done = fetch(release, PYNOX_PBS_MIRROR=mirror.url, PYNOX_RUNTIME_SHA256="1" * 64)
        assert done.returncode == 1
        line = one_line(done.stderr)
        assert "is not the one pinned" in line and str(release["sha256"]) in line
        assert mirror.state.requests == [], "nothing is downloaded"
        same = fetch(
            release, PYNOX_PBS_MIRROR=mirror.url, PYNOX_RUNTIME_SHA256=str(release["sha256"])
        )
    assert same.returncode == 0, same.stderr


def test_a_checksum_that_is_no_sha256_names_where_it_came_from(
    release: dict[str, object],
) -> None:
    """PYNOX_RUNTIME_SHA256 may be set far from the command that fails."""
    _pin(release, str(release["sha256"]))
    done = fetch(release, PYNOX_RUNTIME_SHA256="sha256:12ab")
    assert done.returncode == 1
    assert one_line(done.stderr) == (
        "bundler: PYNOX_RUNTIME_SHA256 is 'sha256:12ab', which is not a sha256; give the 64"
        " hex digits of one"
    )


def test_a_mirror_flag_with_a_local_runtime_is_refused(release: dict[str, object]) -> None:
    """The mirror asked for would go unused: the local runtime wins. (Both in the
    environment, a mirror set for every build, stays allowed.)"""
    _pin(release, str(release["sha256"]))
    archive = Path(release["mirror"], TAG, release["name"])  # type: ignore[arg-type]
    target, _ = host_target()
    done = subprocess.run(
        [sys.executable, "-m", "bundler", "fetch", "--target", target, "--python", "3.99"]
        + ["--mirror", "http://127.0.0.1:9"],
        cwd=PROJECT,
        env=clean_env(
            XDG_CACHE_HOME=str(release["cache"]),
            PYNOX_DIST_CONFIG=str(release["config"]),
            PYNOX_RUNTIME=str(archive),
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert one_line(done.stderr) == (
        f"bundler: --mirror was given, but PYNOX_RUNTIME (or --runtime) names the local runtime"
        f" {archive}, which is used instead of any download; drop --mirror, or unset"
        " PYNOX_RUNTIME to download from the mirror"
    )
    both = fetch(release, PYNOX_RUNTIME=str(archive), PYNOX_PBS_MIRROR="http://127.0.0.1:9")
    assert both.returncode == 0, both.stderr


def test_local_runtime_is_used_as_given(release: dict[str, object], tmp_path: Path) -> None:
    _pin(release, "")
    archive = Path(release["mirror"], TAG, release["name"])  # type: ignore[arg-type]
    done = fetch(release, PYNOX_RUNTIME=str(archive))
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == archive
    wrong = fetch(release, PYNOX_RUNTIME=str(archive), PYNOX_RUNTIME_SHA256="1" * 64)
    assert wrong.returncode == 1
    assert "refusing it" in one_line(wrong.stderr)
    missing = fetch(release, PYNOX_RUNTIME=str(tmp_path / "nothing.tar.gz"))
    assert "which does not exist" in one_line(missing.stderr)


def test_refresh_pins_from_a_sums_file(tmp_path: Path) -> None:
    config = tmp_path / "dist-config"
    import shutil

    shutil.copytree(PROJECT / "dist-config", config)
    before = (config / "runtimes.toml").read_text()
    lines = []
    versions = {
        "3.10": "3.10.40",
        "3.11": "3.11.30",
        "3.12": "3.12.20",
        "3.13": "3.13.10",
        "3.14": "3.14.5",
    }
    from bundler.config import load_matrix

    for target in load_matrix(config).targets:
        for version in versions.values():
            name = f"cpython-{version}+29990101-{target.pbs_triple}-install_only_stripped.tar.gz"
            lines.append(f"{hashlib.sha256(name.encode()).hexdigest()}  {name}")
    # An older patch release in the same list: the newest one is pinned.
    older = "cpython-3.12.19+29990101-x86_64-unknown-linux-gnu-install_only_stripped.tar.gz"
    lines.append(f"{'a' * 64}  {older}")
    sums = tmp_path / "SHA256SUMS"
    sums.write_text("\n".join(lines) + "\n")
    env = clean_env(PYNOX_DIST_CONFIG=str(config))
    command = [sys.executable, "-m", "bundler", "refresh-pins"]
    done = subprocess.run(
        [*command, "--tag", "29990101", "--sums", str(sums)],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    from bundler.config import load_release

    pinned = load_release(config)
    assert pinned.tag == "29990101"
    asset = pinned.asset("aarch64-linux-musl", "3.12")
    assert asset.python == "3.12.20"
    assert asset.sha256 == hashlib.sha256(asset.name.encode()).hexdigest()
    assert asset.url.endswith(
        "/29990101/cpython-3.12.20%2B29990101-aarch64-unknown-linux-musl"
        "-install_only_stripped.tar.gz"
    )
    # Unreachable upstream: it says so and changes nothing.
    (config / "runtimes.toml").write_text(before)
    offline = subprocess.run(
        command,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        env={**env, "PYNOX_PBS_MIRROR": "http://127.0.0.1:9"},
    )
    assert offline.returncode == 0
    assert "the pins are unchanged" in offline.stderr
    assert (config / "runtimes.toml").read_text() == before


def _sums_for_every_target(config: Path, tag: str) -> str:
    from bundler.config import load_matrix

    names = [
        f"cpython-3.12.20+{tag}-{target.pbs_triple}-install_only_stripped.tar.gz"
        for target in load_matrix(config).targets
    ]
    return "".join(f"{hashlib.sha256(n.encode()).hexdigest()}  {n}\n" for n in names)


def _mirror_of_every_target(tmp_path: Path) -> tuple[Path, list[str]]:
    """A copy of dist-config, a mirror folder whose release 29990101 lists every target,
    and the refresh-pins command that reads it."""
    import shutil

    config = tmp_path / "dist-config"
    shutil.copytree(PROJECT / "dist-config", config)
    (tmp_path / "mirror" / "29990101").mkdir(parents=True)
    sums = tmp_path / "mirror" / "29990101" / "SHA256SUMS"
    sums.write_text(_sums_for_every_target(config, "29990101"))
    return config, [sys.executable, "-m", "bundler", "refresh-pins", "--tag", "29990101"]


def test_refresh_pins_from_a_mirror_names_the_mirror(tmp_path: Path) -> None:
    """Checksums a mirror served are not recorded as the release's own."""
    config, command = _mirror_of_every_target(tmp_path)
    with Mirror(tmp_path / "mirror") as mirror:
        env = clean_env(PYNOX_DIST_CONFIG=str(config), PYNOX_PBS_MIRROR=mirror.url)
        done = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert (
            f"bundler: warning: the checksums come from the mirror {mirror.url}, not from the"
            " release itself; compare them with the release's own SHA256SUMS before you commit"
            " dist-config/runtimes.toml"
        ) in done.stderr.splitlines()
        origin = f"SHA256SUMS of release 29990101 as the mirror {mirror.url} serves it"
        from bundler.config import load_release

        assert load_release(config).asset("x86_64-linux-gnu", "3.12").sha256
        assert f'sources = ["{origin}"]' in (config / "runtimes.toml").read_text()

        # A SHA256SUMS of more than 16 MiB is refused, whatever its lines.
        before = (config / "runtimes.toml").read_text()
        sums = tmp_path / "mirror" / "29990101" / "SHA256SUMS"
        sums.write_text(sums.read_text() * (17 * 1024 * 1024 // len(sums.read_text()) + 1))
        done = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert one_line(done.stderr) == (
        f"bundler: {mirror.url}/29990101/SHA256SUMS sends more than 16 MiB, more than any"
        " SHA256SUMS; the pins are unchanged: check the mirror, or pass --sums FILE"
    )
    assert (config / "runtimes.toml").read_text() == before


def test_local_runtime_folder(release: dict[str, object], tmp_path: Path) -> None:
    """An extracted runtime (a uv-installed Python is one) is used in place."""
    _pin(release, "")
    root = tmp_path / "cpython-3.99" / "python"
    (root / "bin").mkdir(parents=True)
    (root / "lib" / "python3.99").mkdir(parents=True)
    (root / "lib" / "python3.99" / "os.py").write_text("")
    done = fetch(release, PYNOX_RUNTIME=str(root.parent))
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == root.parent
    minor = subprocess.run(
        [sys.executable, "-m", "bundler", "default-python", "--runtime", str(root.parent)],
        cwd=PROJECT,
        capture_output=True,
        text=True,
    )
    assert minor.stdout == "3.99\n", minor.stderr


def test_a_checksum_given_with_a_runtime_folder_is_refused(
    release: dict[str, object], tmp_path: Path
) -> None:
    """A folder has no sha256 to compare: the check asked for cannot be skipped silently."""
    _pin(release, "")
    folder = tmp_path / "cpython-3.99"
    (folder / "python" / "bin").mkdir(parents=True)
    done = fetch(release, PYNOX_RUNTIME=str(folder), PYNOX_RUNTIME_SHA256="1" * 64)
    assert done.returncode == 1
    assert one_line(done.stderr) == (
        f"bundler: PYNOX_RUNTIME names the folder {folder}, and a folder cannot be checked"
        " against the sha256 given (--sha256 or PYNOX_RUNTIME_SHA256); point PYNOX_RUNTIME at"
        " the runtime's archive (.tar.gz) to check it, or drop --sha256 and PYNOX_RUNTIME_SHA256"
    )
    assert done.stdout == ""


@pytest.mark.parametrize("content", [b"", b"not an archive at all\n"], ids=["empty", "text"])
def test_a_runtime_that_is_no_archive_is_one_line(tmp_path: Path, content: bytes) -> None:
    """tarfile lists every compression it tried, a line each; the bundler says one line."""
    from bundler.errors import BundlerError
    from bundler.unpack import unpack

    archive = tmp_path / "runtime.tar.gz"
    archive.write_bytes(content)
    with pytest.raises(BundlerError) as caught:
        unpack(archive, tmp_path / "out")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"cannot unpack {archive}: ")
    assert message.endswith("; give a python-build-standalone .tar.gz whole")


def test_a_damaged_runtime_archive_is_not_unpacked_in_part(tmp_path: Path) -> None:
    """Bytes flipped inside a member's header: tarfile takes it for the archive's end,
    and only gzip's CRC, at the stream's end, tells."""
    import gzip
    import io
    import tarfile

    from bundler.errors import BundlerError
    from bundler.unpack import unpack

    plain = io.BytesIO()
    with tarfile.open(fileobj=plain, mode="w") as tar:
        for name in ("python/a.txt", "python/b.txt", "python/lib/last.txt"):
            info = tarfile.TarInfo(name)
            info.size = 4096
            tar.addfile(info, io.BytesIO(os.urandom(4096)))
    # Stored, not deflated: the tar headers appear as they are in the .tar.gz.
    data = bytearray(gzip.compress(plain.getvalue(), compresslevel=0))
    at = data.index(b"python/lib/last.txt")
    data[at : at + 6] = b"PYTHON"
    archive = tmp_path / "runtime.tar.gz"
    archive.write_bytes(bytes(data))
    with pytest.raises(BundlerError) as caught:
        unpack(archive, tmp_path / "out")
    message = str(caught.value)
    assert message.startswith(f"cannot unpack {archive}: CRC check failed"), message
    assert message.endswith("; give a python-build-standalone .tar.gz whole")


def test_default_python_of_a_cut_short_runtime_is_one_line(tmp_path: Path) -> None:
    """`make bundle PYNOX_RUNTIME=...` asks this first, before anything checks the archive."""
    import gzip
    import io
    import tarfile

    plain = io.BytesIO()
    with tarfile.open(fileobj=plain, mode="w") as tar:
        info = tarfile.TarInfo("python/lib/python3.99/os.py")
        info.size = 65536
        tar.addfile(info, io.BytesIO(os.urandom(65536)))
    archive = tmp_path / "cpython.tar.gz"
    archive.write_bytes(gzip.compress(plain.getvalue())[:30000])
    done = _default_python(archive)
    assert done.returncode == 1
    assert one_line(done.stderr) == (
        f"bundler: cannot read {archive}: Compressed file ended before the end-of-stream"
        " marker was reached; give a python-build-standalone .tar.gz whole"
    )


def _hostile_archive(path: Path, entries: list[tuple[str, str, str]]) -> Path:
    """A .tar.gz of (name, kind, link target or content) entries, kind dir, file, link or
    hard (a hard link)."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, kind, value in entries:
            info = tarfile.TarInfo(name)
            data = value.encode() if kind == "file" else b""
            info.type = {
                "dir": tarfile.DIRTYPE,
                "file": tarfile.REGTYPE,
                "link": tarfile.SYMTYPE,
                "hard": tarfile.LNKTYPE,
            }[kind]
            info.mode = 0o755 if kind == "dir" else 0o644
            if kind in ("link", "hard"):
                info.linkname = value
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize(
    ("entries", "refused"),
    [
        # Each link alone stays inside; the third, reached through the other two, does not.
        (
            [
                ("python", "dir", ""),
                ("python/x", "dir", ""),
                ("python/x/y", "link", ".."),
                ("python/x/y/z", "link", ".."),
                ("python/x/y/z/w", "link", ".."),
                ("python/x/y/z/w/ESCAPED", "file", "written outside\n"),
            ],
            "python/x/y/z",
        ),
        # python/up leads to the archive's root, so up/.. leads above it.
        (
            [("python", "dir", ""), ("python/up", "link", ".."), ("python/t", "link", "up/..")],
            "python/t",
        ),
        # A file of a link's name is written wherever the link leads.
        (
            [("python", "dir", ""), ("python/s", "link", "."), ("python/s", "file", "x")],
            "python/s",
        ),
        # A hard link to a link is a copy of it: "../../.." counts from the archive's root.
        (
            [
                ("python", "dir", ""),
                ("python/a", "dir", ""),
                ("python/a/b", "dir", ""),
                ("python/a/b/s", "link", "../../.."),
                ("h", "hard", "python/a/../a/b/s"),
                ("h/ESCAPED", "file", "written outside\n"),
            ],
            "h",
        ),
    ],
    ids=["chain", "link-through-link", "file-over-link", "hard-link-to-a-link"],
)
def test_a_runtime_archive_cannot_reach_outside_through_its_links(
    tmp_path: Path, entries: list[tuple[str, str, str]], refused: str
) -> None:
    from bundler.errors import BundlerError
    from bundler.unpack import unpack

    archive = _hostile_archive(tmp_path / "runtime.tar.gz", entries)
    destination = tmp_path / "a" / "b" / "out"
    with pytest.raises(BundlerError) as caught:
        unpack(archive, destination)
    assert str(caught.value) == (
        f"{archive} holds {refused!r}, which leads outside the folder it unpacks into;"
        " refusing it: give a runtime archive as python-build-standalone released it"
    )
    assert list(destination.iterdir()) == [], "nothing is unpacked"
    assert not list(tmp_path.rglob("ESCAPED"))


def test_an_archive_swapped_after_its_check_is_not_unpacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is unpacked is what was verified, even if the cached file is replaced between."""
    from bundler import config, fetch, pipeline
    from bundler.digest import sha256_file
    from bundler.errors import BundlerError

    checked = _hostile_archive(tmp_path / "runtime.tar.gz", [("python", "dir", "")])
    expected = sha256_file(checked)
    swapped = _hostile_archive(tmp_path / "other.tar.gz", [("python", "dir", ""), ("x", "dir", "")])

    def resolve_then_swap(*args: object, **kwargs: object) -> fetch.RuntimeSource:
        source = fetch.RuntimeSource("archive", checked, checked.name, expected, "cache")
        swapped.replace(checked)  # another process replaces the cache entry
        return source

    monkeypatch.setattr(fetch, "resolve", resolve_then_swap)
    target = config.load_matrix().target(host_target()[0])
    request = pipeline.Request(None, None, None, None, None)
    with pytest.raises(BundlerError) as caught:
        pipeline.runtime_for(request, target, tmp_path / "work")
    assert str(caught.value) == (
        f"{checked} changed after it was checked: its sha256 is now {sha256_file(checked)}, not"
        f" {expected}; refusing it: make sure nothing else writes to it, and run again"
    )
    assert not (tmp_path / "work" / "runtime" / "x").exists()


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "endless-body"])
def test_a_server_that_sends_too_much_is_cut_off(tmp_path: Path, declared: bool) -> None:
    """A hostile or broken mirror does not fill the disk: past the limit it is refused."""
    import http.server
    import threading

    from bundler.download import DownloadFailed, download

    class Endless(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            return

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            if declared:
                self.send_header("Content-Length", str(10**12))
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b"\0" * 65536)
            except OSError:
                return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    part = tmp_path / "runtime.tar.gz.part"
    url = f"http://127.0.0.1:{server.server_address[1]}/runtime.tar.gz"
    try:
        with pytest.raises(DownloadFailed) as caught:
            download(url, part, "runtime.tar.gz", limit=1024 * 1024)
    finally:
        server.shutdown()
        server.server_close()
    assert caught.value.reason == "the server sends more than 1 MiB, more than any runtime archive"
    assert not part.exists(), "nothing is kept to resume from"


@contextlib.contextmanager
def _serving(answer: Callable[[http.server.BaseHTTPRequestHandler, int], None]) -> Iterator[str]:
    """A loopback HTTP server whose every GET is answer(handler, request number); its URL."""
    count = itertools.count()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            return

        def do_GET(self) -> None:  # noqa: N802
            with contextlib.suppress(OSError):
                answer(self, next(count))

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()  # waits for the answers still being written (not daemons)


@pytest.fixture
def short_stall(monkeypatch: pytest.MonkeyPatch, release: dict[str, object]) -> None:
    """A stall is less than 1 KiB in half a second, not 64 KiB in a minute."""
    from bundler import stall

    monkeypatch.setattr(stall, "WINDOW", 0.5)
    monkeypatch.setattr(stall, "LEAST", 1024)
    monkeypatch.setenv("XDG_CACHE_HOME", str(release["cache"]))


def _fetch_in_process(release: dict[str, object], mirror: str) -> Path:
    from bundler import config
    from bundler.fetch import cached_or_downloaded

    asset = config.Asset(host_target()[0], "3.99.0", str(release["name"]), "", "")
    return cached_or_downloaded(asset, TAG, str(release["sha256"]), mirror).path


@pytest.mark.parametrize("phase", ["headers", "body"])
def test_a_server_that_drips_is_cut_off(
    release: dict[str, object], short_stall: None, phase: str
) -> None:
    """A byte at a time, each within the socket's timeout, never ends by itself: a
    download that all but stops is cut, once (no retries), and says what to do."""
    from bundler.errors import BundlerError
    from bundler.mirror import mirror_url

    def drip(handler: http.server.BaseHTTPRequestHandler, number: int) -> None:
        if number:  # without the cut, a retry: told apart by its answer
            handler.send_error(404)
            return
        if phase == "headers":
            data = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
        else:
            handler.send_response(200)
            handler.send_header("Content-Length", str(10**6))
            handler.end_headers()
            data = b"x" * 60
        for byte in data:  # 20 bytes a second, for 3 s at most
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.05)

    with _serving(drip) as base, pytest.raises(BundlerError) as caught:
        _fetch_in_process(release, base)
    url = mirror_url(base, TAG, str(release["name"]))
    assert str(caught.value) == (
        f"cannot download {release['name']} from {url} (less than 1 KiB arrived in 0.5 s;"
        f" running again resumes where it stopped); without access to it, put the file at"
        f" {TAG}/{release['name']} in a folder and set PYNOX_PBS_MIRROR to that folder, or set"
        " PYNOX_RUNTIME to a local runtime archive or folder"
    )


def test_refresh_pins_from_a_mirror_that_drips_is_cut_off(
    release: dict[str, object],
    short_stall: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bundler.pins import refresh

    def drip(handler: http.server.BaseHTTPRequestHandler, number: int) -> None:
        handler.send_response(200)
        handler.end_headers()
        for _ in range(60):  # 20 bytes a second, for 3 s at most
            handler.wfile.write(b"x")
            handler.wfile.flush()
            time.sleep(0.05)

    _pin(release, str(release["sha256"]))
    before = Path(release["config"], "runtimes.toml").read_text()  # type: ignore[arg-type]
    monkeypatch.setenv("PYNOX_DIST_CONFIG", str(release["config"]))
    with _serving(drip) as base:
        monkeypatch.setenv("PYNOX_PBS_MIRROR", base)
        assert refresh() == 0
    assert capsys.readouterr().err == (
        f"bundler: warning: refresh-pins cannot reach the SHA256SUMS of release {TAG} (less than"
        " 1 KiB arrived in 0.5 s); the pins are unchanged (pass --sums FILE, --table FILE or"
        " --pbs-installer to refresh from checksums at hand)\n"
    )
    assert Path(release["config"], "runtimes.toml").read_text() == before  # type: ignore[arg-type]


def test_a_slow_download_that_keeps_moving_is_not_cut(
    release: dict[str, object], short_stall: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4 KiB every 50 ms, far above the (lowered) floor, over two windows."""
    from bundler import stall

    monkeypatch.setattr(stall, "WINDOW", 1.0)  # room for a busy machine's pauses
    data = os.urandom(160 * 1024)
    release["sha256"] = hashlib.sha256(data).hexdigest()

    def slow(handler: http.server.BaseHTTPRequestHandler, number: int) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        for start in range(0, len(data), 4096):
            handler.wfile.write(data[start : start + 4096])
            handler.wfile.flush()
            time.sleep(0.05)

    with _serving(slow) as base:
        kept = _fetch_in_process(release, base)
    assert kept.read_bytes() == data


@pytest.fixture
def not_http() -> object:
    """A loopback server that answers every connection with a line that is not HTTP, with
    a terminal escape sequence in it."""
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def answer() -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            with client:
                client.recv(4096)
                client.sendall(b"SSH-2.0-OpenSSH \x1b[2J\r\n\r\n")

    threading.Thread(target=answer, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()


def test_a_mirror_that_does_not_speak_http_is_one_clean_line(
    release: dict[str, object], not_http: str, tmp_path: Path
) -> None:
    from bundler.download import DownloadFailed, download

    _pin(release, str(release["sha256"]))
    with pytest.raises(DownloadFailed) as caught:
        download(f"{not_http}/{TAG}/{release['name']}", tmp_path / "x.part", "x", attempts=1)
    assert caught.value.reason == "its answer is not HTTP: SSH-2.0-OpenSSH ?[2J (after 1 attempts)"
    refresh = subprocess.run(
        [sys.executable, "-m", "bundler", "refresh-pins"],
        cwd=PROJECT,
        env=clean_env(PYNOX_DIST_CONFIG=str(release["config"]), PYNOX_PBS_MIRROR=not_http),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refresh.returncode == 0, refresh.stderr
    assert refresh.stderr == (
        "bundler: warning: refresh-pins cannot reach the SHA256SUMS of release t1 (its answer is"
        " not HTTP: SSH-2.0-OpenSSH ?[2J); the pins are unchanged (pass --sums FILE, --table"
        " FILE or --pbs-installer to refresh from checksums at hand)\n"
    )


def test_a_cache_folder_that_cannot_be_made_is_one_line(
    release: dict[str, object], tmp_path: Path
) -> None:
    _pin(release, str(release["sha256"]))
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    release["cache"] = blocked  # XDG_CACHE_HOME is a file: no folder can be made in it
    done = fetch(release, PYNOX_PBS_MIRROR=str(release["mirror"]))
    assert done.returncode == 1
    assert one_line(done.stderr) == (
        f"bundler: cannot make the cache folder {blocked}/pynox/runtimes (Not a directory);"
        " set XDG_CACHE_HOME to a folder you may write to"
    )


def _default_python(runtime: Path) -> subprocess.CompletedProcess[str]:
    """`python -m bundler default-python`, which `make bundle PYNOX_RUNTIME=...` asks first."""
    return subprocess.run(
        [sys.executable, "-m", "bundler", "default-python"],
        cwd=PROJECT,
        env=clean_env(PYNOX_RUNTIME=str(runtime)),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_default_python_of_a_runtime_that_does_not_exist_says_so(tmp_path: Path) -> None:
    """`make bundle PYNOX_RUNTIME=...` asks this first: a typo is named as missing."""
    missing = tmp_path / "cpython-typo.tar.gz"
    done = _default_python(missing)
    assert done.returncode == 1
    assert one_line(done.stderr) == (
        f"bundler: PYNOX_RUNTIME names {missing}, which does not exist; point it at a runtime"
        " archive (.tar.gz) or an extracted runtime folder"
    )


def test_a_full_cache_disk_is_named_and_not_retried(release: dict[str, object]) -> None:
    """A disk that refuses the bytes is not the mirror's fault: no retry, no hint to
    change mirrors, and no partial file left on the full disk."""
    _pin(release, str(release["sha256"]))
    part = cached(release).with_name(f"{release['name']}.part")
    part.parent.mkdir(parents=True)
    part.symlink_to("/dev/full")  # every write there fails with ENOSPC
    with Mirror(release["mirror"]) as mirror:  # type: ignore[arg-type]
        done = fetch(release, PYNOX_PBS_MIRROR=mirror.url)
        requests = len(mirror.state.requests)
    assert done.returncode == 1
    assert one_line(done.stderr) == (
        f"bundler: cannot write {part} (No space left on device); make room there, or set"
        " XDG_CACHE_HOME to a folder you may write to"
    )
    assert requests == 1, "a full disk is not retried"
    assert not part.exists() and not part.is_symlink()


def test_a_cache_that_cannot_be_changed_is_one_line(
    release: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale cached runtime on a read-only disk: one sentence, not a traceback."""
    import errno

    from bundler import config
    from bundler.errors import BundlerError
    from bundler.fetch import cached_or_downloaded

    kept = cached(release)
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"stale")

    def read_only(self: Path, missing_ok: bool = False) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setenv("XDG_CACHE_HOME", str(release["cache"]))
    monkeypatch.setattr(Path, "unlink", read_only)
    asset = config.Asset(host_target()[0], "3.99.0", str(release["name"]), "", "")
    with pytest.raises(BundlerError) as caught:
        cached_or_downloaded(asset, TAG, str(release["sha256"]), Path(release["mirror"]).as_uri())  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"cannot use {kept} (Read-only file system); set XDG_CACHE_HOME to a folder you may"
        " write to"
    )


def test_a_proxy_that_does_not_answer_is_named(release: dict[str, object]) -> None:
    """The mirror answers; the proxy the environment sends every request through does not.
    The message names the proxy (never its password), not only the mirror."""
    _pin(release, str(release["sha256"]))
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proxy = {"HTTP_PROXY": f"http://user:secret@127.0.0.1:{port}", "NO_PROXY": ""}
    with Mirror(release["mirror"]) as mirror:  # type: ignore[arg-type]
        done = fetch(release, PYNOX_PBS_MIRROR=mirror.url, **proxy)
        assert mirror.state.requests == []
        direct = fetch(release, PYNOX_PBS_MIRROR=mirror.url, **{**proxy, "NO_PROXY": "127.0.0.1"})
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert f" through the proxy http://127.0.0.1:{port} (HTTP_PROXY) (" in line
    assert "secret" not in done.stderr
    assert direct.returncode == 0, direct.stderr


def test_a_mirror_whose_certificate_is_not_trusted_says_how_to_trust_it(
    release: dict[str, object], tmp_path: Path
) -> None:
    """A mirror inside a network, with a certificate of its own authority: no retry, and
    the hint, once followed, works."""
    import shutil
    import ssl

    if not shutil.which("openssl"):
        pytest.skip("no openssl to make a certificate with")
    _pin(release, str(release["sha256"]))
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
        + ["-nodes", "-days", "2"]
        + ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    mirror = Mirror(release["mirror"])  # type: ignore[arg-type]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    mirror.server.socket = context.wrap_socket(mirror.server.socket, server_side=True)
    with mirror:
        url = mirror.url.replace("http://", "https://")
        done = fetch(release, PYNOX_PBS_MIRROR=url)
        trusted = fetch(release, PYNOX_PBS_MIRROR=url, SSL_CERT_FILE=str(cert))
    assert done.returncode == 1
    assert (
        " (its certificate is not trusted: self-signed certificate; set SSL_CERT_FILE to the"
        " certificate (PEM) of the authority that signed it); "
    ) in one_line(done.stderr)
    assert "attempts" not in done.stderr, "a certificate is not retried"
    assert trusted.returncode == 0, trusted.stderr
    assert cached(release).read_bytes() == release["data"]


def test_a_mirror_url_with_a_password_logs_in_and_never_shows_it(
    release: dict[str, object],
) -> None:
    """https://user:password@mirror/: basic authentication, and no password in messages
    (which end up in build logs)."""
    import base64

    _pin(release, str(release["sha256"]))
    mirror = Mirror(release["mirror"])  # type: ignore[arg-type]
    logins: list[str | None] = []
    handler = mirror.server.RequestHandlerClass

    class Recording(handler):  # type: ignore[valid-type,misc]
        def do_GET(self) -> None:  # noqa: N802
            logins.append(self.headers.get("Authorization"))
            super().do_GET()

    mirror.server.RequestHandlerClass = Recording
    with mirror:
        url = mirror.url.replace("http://", "http://op:s%40cr3t@")
        done = fetch(release, PYNOX_PBS_MIRROR=url)
        assert done.returncode == 0, done.stderr
        cached(release).unlink()
        Path(release["mirror"], TAG, release["name"]).unlink()  # type: ignore[arg-type]
        # NO_PROXY names the mirror's host, whatever login its URL carries.
        direct = {"HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"}
        missing = fetch(release, PYNOX_PBS_MIRROR=url, **direct)
    assert logins[0] == "Basic " + base64.b64encode(b"op:s@cr3t").decode()
    line = one_line(missing.stderr)
    assert f" from {mirror.url.replace('http://', 'http://op@')}/{TAG}/" in line
    assert "(HTTP 404" in line and "proxy" not in line
    assert "cr3t" not in missing.stderr + done.stderr + done.stdout


def test_refresh_pins_never_records_a_mirror_password(tmp_path: Path) -> None:
    """runtimes.toml names where its checksums came from, and is committed."""
    config, command = _mirror_of_every_target(tmp_path)
    with Mirror(tmp_path / "mirror") as mirror:
        url = mirror.url.replace("http://", "http://op:cr3t@")
        env = clean_env(PYNOX_DIST_CONFIG=str(config), PYNOX_PBS_MIRROR=url)
        done = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    pins = (config / "runtimes.toml").read_text()
    assert f"as the mirror {mirror.url.replace('http://', 'http://op@')} serves it" in pins
    assert "cr3t" not in pins + done.stderr


def test_a_redirect_loop_is_one_short_reason(tmp_path: Path) -> None:
    """Not urllib's two sentences about the last 30x error message."""
    import http.server
    import threading

    from bundler.download import DownloadFailed, download

    class Loop(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            return

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(302)
            self.send_header("Location", self.path)
            self.end_headers()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Loop)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/runtime.tar.gz"
    try:
        with pytest.raises(DownloadFailed) as caught:
            download(url, tmp_path / "runtime.tar.gz.part", "runtime.tar.gz")
    finally:
        server.shutdown()
        server.server_close()
    assert caught.value.reason == "HTTP 302, a redirect that loops or leads nowhere"
