"""Runtime pins: refresh-pins's offline sources, their agreement, and what the pins guard.

The sources are read as shipped: the checksum tables of dist-config/pbs-checksums/,
a SHA256SUMS written from one of them, and the versions.json of the installed
pbs-installer package. The release server is unreachable from tests, so the
pinned release's archive is stood in for by a PBS-layout archive made here
(pack-runtime), served under the pinned name by the loopback mirror: its sha256
cannot be the pinned one, and the bundler must refuse it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.bundles import PROJECT
from support.bundles.artifacts import (
    SHARES_BUNDLES,
    Runtime,
    bundler,
    clean_env,
    host_target,
    minor,
    runtime,
)
from support.bundles.http_mirror import Mirror

from bundler.config import load_matrix, load_release

pytestmark = SHARES_BUNDLES  # the bundles' tests run on one worker

CHECKSUMS = PROJECT / "dist-config" / "pbs-checksums"
TABLE = CHECKSUMS / "pbs-20260814.tsv"
TABLE_NAME = "dist-config/pbs-checksums/pbs-20260814.tsv"
TAG = "20260814"
VERSIONS = {"3.10": "3.10.21", "3.11": "3.11.16", "3.12": "3.12.14", "3.13": "3.13.15"}
VERSIONS["3.14"] = "3.14.7"


def rows(table: Path) -> dict[str, tuple[str, str]]:
    """{name: (sha256, source)} of a checksum table, read here without the bundler."""
    lines = table.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "name\tsha256\tsource"
    return {n: (s, src) for n, s, src in (line.split("\t") for line in lines[1:])}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A copy of dist-config/ for refresh-pins to rewrite."""
    copy = tmp_path / "dist-config"
    shutil.copytree(PROJECT / "dist-config", copy)
    return copy


def refresh(config: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return bundler(
        ["refresh-pins", *map(str, args)], clean_env(PYNOX_DIST_CONFIG=str(config)), timeout=120
    )


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.startswith("bundler: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def sums_file(path: Path, sums: dict[str, str]) -> Path:
    """A SHA256SUMS in the release's own format, `{hex}  {filename}` lines."""
    path.write_text("".join(f"{sha}  {name}\n" for name, sha in sums.items()), encoding="utf-8")
    return path


def table_sums(table: Path) -> dict[str, str]:
    return {name: sha for name, (sha, _) in rows(table).items()}


# --- The shipped pins ------------------------------------------------------------------


def test_shipped_pins_are_what_refresh_pins_writes_from_the_table(config: Path) -> None:
    """Rewriting the pins from the shipped table changes no byte: no sha256 was hand-edited."""
    done = refresh(config, "--tag", TAG, "--table", TABLE)
    assert done.returncode == 0, done.stderr
    shipped = (PROJECT / "dist-config" / "runtimes.toml").read_text(encoding="utf-8")
    assert (config / "runtimes.toml").read_text(encoding="utf-8") == shipped


def test_shipped_pins_name_release_20260814_with_every_checksum_and_its_source() -> None:
    release = load_release(PROJECT / "dist-config")
    matrix = load_matrix(PROJECT / "dist-config")
    table = rows(TABLE)
    assert release.tag == TAG
    assert {(a.target, a.minor) for a in release.assets} == set(matrix.cells())
    assert len(release.assets) == 20
    for asset in release.assets:
        triple = matrix.target(asset.target).pbs_triple
        assert asset.python == VERSIONS[asset.minor]
        assert asset.name == f"cpython-{asset.python}+{TAG}-{triple}-install_only_stripped.tar.gz"
        assert asset.url.endswith(f"/{TAG}/{asset.name.replace('+', '%2B')}")
        sha256, source = table[asset.name]
        assert asset.sha256 == sha256
        assert asset.sources == (f"{source} (via {TABLE_NAME})",)
        assert source.startswith("astral-sh/uv@26a9dd4b")


# --- Each reader on real data ----------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "tag", "versions"),
    [
        ("pbs-20260814.tsv", "20260814", ["3.10.21", "3.11.16", "3.12.14", "3.13.15", "3.14.7"]),
        ("pbs-20251014.tsv", "20251014", ["3.10.19", "3.11.14", "3.12.12", "3.13.9", "3.14.0"]),
    ],
)
def test_table_reader(config: Path, table: str, tag: str, versions: list[str]) -> None:
    done = refresh(config, "--tag", tag, "--table", CHECKSUMS / table)
    assert done.returncode == 0, done.stderr
    pinned = load_release(config)
    assert sorted({a.python for a in pinned.assets}) == sorted(versions)
    expected = rows(CHECKSUMS / table)
    assert {a.name: a.sha256 for a in pinned.assets} == {n: s for n, (s, _) in expected.items()}
    for asset in pinned.assets:
        assert asset.sources == (
            f"{expected[asset.name][1]} (via dist-config/pbs-checksums/{table})",
        )


def test_sums_reader_agrees_with_the_table(config: Path, tmp_path: Path) -> None:
    """A SHA256SUMS written from the table: both sources agree and both are recorded."""
    sums = table_sums(TABLE)
    # A release's SHA256SUMS lists every asset; the other flavours are not pinned.
    other = f"cpython-3.12.14+{TAG}-x86_64-unknown-linux-gnu-pgo+lto-full.tar.zst"
    sums[other] = hashlib.sha256(b"other").hexdigest()
    path = sums_file(tmp_path / "SHA256SUMS", sums)
    done = refresh(config, "--tag", TAG, "--sums", path, "--table", TABLE)
    assert done.returncode == 0, done.stderr
    pinned = load_release(config)
    assert len(pinned.assets) == 20
    for asset in pinned.assets:
        assert asset.sha256 == sums[asset.name]
        assert asset.sources[0] == "SHA256SUMS file SHA256SUMS"
        assert asset.sources[1].endswith(f"(via {TABLE_NAME})")
    alone = refresh(config, "--tag", TAG, "--sums", path)
    assert alone.returncode == 0, alone.stderr
    assert {a.name: a.sha256 for a in load_release(config).assets} == table_sums(TABLE)


def installed_versions_json() -> tuple[Path, list[dict[str, object]]]:
    spec = importlib.util.find_spec("pbs_installer")
    assert spec is not None and spec.submodule_search_locations, "pbs-installer (test extra)"
    path = Path(list(spec.submodule_search_locations)[0]) / "versions.json"
    return path, json.loads(path.read_text(encoding="utf-8"))


def test_pbs_installer_reader_on_the_installed_package(config: Path) -> None:
    """The newest release pbs-installer lists the most of: glibc pins only, musl said missing."""
    path, data = installed_versions_json()
    version = importlib.metadata.version("pbs-installer")
    matrix = load_matrix(config)
    pattern = re.compile(r"cpython-(3\.\d+)\.\d+\+(\d+)-(.+)-install_only_stripped\.tar\.gz")
    files = {f["filename"]: f["sha256"] for e in data for f in e["files"]}  # type: ignore[attr-defined]
    per_tag: dict[str, int] = {}
    triples = {t.pbs_triple for t in matrix.targets}
    for name, sha256 in files.items():
        match = pattern.fullmatch(name)
        if match and sha256 and match[1] in matrix.pythons and match[3] in triples:
            per_tag[match[2]] = per_tag.get(match[2], 0) + 1
    tag = max(per_tag, key=lambda t: (per_tag[t], t))
    done = refresh(config, "--tag", tag, "--pbs-installer")
    assert done.returncode == 0, done.stderr
    pinned = load_release(config)
    assert len(pinned.assets) == per_tag[tag]
    for asset in pinned.assets:
        assert asset.sha256 == files[asset.name]
        assert asset.sources == (f"pbs-installer {version} (pbs_installer/versions.json)",)
        assert asset.target.endswith("-gnu"), "pbs-installer has no musl builds"
    text = (config / "runtimes.toml").read_text(encoding="utf-8")
    for target in ("x86_64-linux-musl", "aarch64-linux-musl"):
        assert f"# No pin for CPython 3.14 on {target}: no source lists release {tag}'s" in text
    assert "pins nothing for them" in done.stderr
    assert path.is_file()


def test_pbs_installer_lists_none_of_the_pinned_release(config: Path) -> None:
    """Its versions.json keeps only the newest build of each version: 20260814 is not there."""
    done = refresh(config, "--tag", TAG, "--table", TABLE, "--pbs-installer")
    assert done.returncode == 0, done.stderr
    assert f"lists none of the assets pinned for release {TAG}" in done.stderr
    assert {a.name: a.sha256 for a in load_release(config).assets} == table_sums(TABLE)


def crafted_versions_json(path: Path, files: dict[str, str | None]) -> Path:
    """A file laid out as pbs-installer's: a list of versions, each with its files."""
    entry = {
        "python_version": {"implementation": "cpython", "major": 3, "minor": 12, "micro": 14},
        "files": [
            {
                "arch": "x86_64",
                "platform": "linux",
                "install_only": True,
                "filename": name,
                "url": "https://example.invalid/" + name.replace("+", "%2B"),
                "sha256": sha256,
            }
            for name, sha256 in files.items()
        ],
    }
    path.write_text(json.dumps([entry]), encoding="utf-8")
    return path


def test_pbs_installer_reader_on_a_crafted_file(config: Path, tmp_path: Path) -> None:
    sums = table_sums(TABLE)
    gnu = [n for n in sums if "-unknown-linux-gnu-" in n]
    files: dict[str, str | None] = {name: sums[name] for name in gnu}
    unknown = f"cpython-3.12.14+{TAG}-x86_64-unknown-linux-gnu-pgo+lto-full.tar.zst"
    files[unknown] = None  # pbs-installer lists some files without a checksum
    path = crafted_versions_json(tmp_path / "versions.json", files)
    done = refresh(config, "--tag", TAG, "--table", TABLE, "--pbs-installer", path)
    assert done.returncode == 0, done.stderr
    for asset in load_release(config).assets:
        assert asset.sha256 == sums[asset.name]
        expected = 2 if asset.name in gnu else 1
        assert len(asset.sources) == expected, asset
    assert any(
        "pbs-installer versions.json file versions.json" in a.sources
        for a in load_release(config).assets
    )
    (tmp_path / "broken.json").write_text('{"files": []}', encoding="utf-8")
    broken = refresh(config, "--tag", TAG, "--pbs-installer", tmp_path / "broken.json")
    assert broken.returncode == 1
    assert "is not laid out as pbs-installer's versions.json" in one_line(broken.stderr)


# --- Refusals --------------------------------------------------------------------------


def test_sources_that_disagree_are_refused(config: Path, tmp_path: Path) -> None:
    before = (config / "runtimes.toml").read_bytes()
    sums = table_sums(TABLE)
    name = f"cpython-3.13.15+{TAG}-aarch64-unknown-linux-musl-install_only_stripped.tar.gz"
    good, bad = sums[name], hashlib.sha256(b"not the release's").hexdigest()
    sums[name] = bad
    path = sums_file(tmp_path / "SHA256SUMS", sums)
    done = refresh(config, "--tag", TAG, "--table", TABLE, "--sums", path)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert f"the sources disagree on {name}: SHA256SUMS file SHA256SUMS gives sha256 {bad}" in line
    assert f"but {TABLE_NAME} gives {good}" in line
    assert (config / "runtimes.toml").read_bytes() == before

    gnu = f"cpython-3.10.21+{TAG}-x86_64-unknown-linux-gnu-install_only_stripped.tar.gz"
    crafted = crafted_versions_json(tmp_path / "versions.json", {gnu: bad})
    done = refresh(config, "--tag", TAG, "--table", TABLE, "--pbs-installer", crafted)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert f"{TABLE_NAME} gives sha256 {sums[gnu]}" in line
    assert f"pbs-installer versions.json file versions.json gives {bad}" in line
    assert (config / "runtimes.toml").read_bytes() == before


def test_a_source_without_a_checksum_is_refused(config: Path, tmp_path: Path) -> None:
    before = (config / "runtimes.toml").read_bytes()
    lines = TABLE.read_text(encoding="utf-8").splitlines()
    name, _, source = lines[3].split("\t")
    lines[3] = f"{name}\t\t{source}"
    table = tmp_path / "pbs-20260814.tsv"
    table.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = refresh(config, "--tag", TAG, "--table", table)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert f"pbs-20260814.tsv line 4 gives {name} no sha256" in line
    assert "a pin is never written without a checksum" in line
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(f"{name}\n", encoding="utf-8")
    done = refresh(config, "--tag", TAG, "--sums", sums)
    assert done.returncode == 1
    assert "SHA256SUMS line 1 is not `SHA256  FILENAME`" in one_line(done.stderr)
    assert (config / "runtimes.toml").read_bytes() == before


def test_a_pin_without_a_checksum_is_not_downloaded(config: Path, tmp_path: Path) -> None:
    """`bundle` refuses a pin with an empty sha256 before it asks the mirror for anything."""
    target, _ = host_target()
    text = (config / "runtimes.toml").read_text(encoding="utf-8")
    pinned = load_release(config).asset(target, minor())
    (config / "runtimes.toml").write_text(
        text.replace(f'sha256 = "{pinned.sha256}"', 'sha256 = ""'), encoding="utf-8"
    )
    (tmp_path / "mirror" / TAG).mkdir(parents=True)
    with Mirror(tmp_path / "mirror") as mirror:
        done = bundle(config, tmp_path, mirror.url)
        assert mirror.state.requests == []
    assert done.returncode == 1
    assert f"no sha256 is pinned for {pinned.name}" in one_line(done.stderr)


# --- The loopback mirror: a PBS-layout archive under the pinned name ------------------


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Runtime:
    return runtime(tmp_path_factory)


def bundle(config: Path, work: Path, mirror: str) -> subprocess.CompletedProcess[str]:
    target, _ = host_target()
    env = clean_env(
        PYNOX_DIST_CONFIG=str(config),
        PYNOX_PBS_MIRROR=mirror,
        XDG_CACHE_HOME=str(work / "cache"),
    )
    where = ["--target", target, "--python", minor(), "--out", str(work / "out")]
    return bundler(["bundle", *where, "--compiler", "native"], env)


def serve_as_pinned(packed: Runtime, config: Path, work: Path) -> tuple[Path, str]:
    """The packed runtime at TAG/NAME of a mirror folder, NAME being the pinned asset's."""
    target, _ = host_target()
    name = load_release(config).asset(target, minor()).name
    folder = work / "mirror"
    (folder / TAG).mkdir(parents=True)
    shutil.copyfile(packed.archive, folder / TAG / name)
    return folder, name


def test_mirror_archive_that_is_not_the_pinned_one_is_refused(
    packed: Runtime, config: Path, tmp_path: Path
) -> None:
    folder, name = serve_as_pinned(packed, config, tmp_path)
    pinned = load_release(config).asset(host_target()[0], minor()).sha256
    with Mirror(folder) as mirror:
        done = bundle(config, tmp_path, mirror.url)
        assert [r.path for r in mirror.state.requests] == [f"/{TAG}/{name}"]
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert f"the download of {name} from {mirror.url}/{TAG}/" in line
    assert f"has sha256 {packed.sha256}, not the pinned {pinned}; refusing it" in line
    kept = tmp_path / "cache" / "pynox" / "runtimes"
    assert not kept.exists() or os.listdir(kept) == [], "nothing unverified is kept"
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


@pytest.mark.slow
def test_mirror_archive_matching_its_pin_is_bundled(
    packed: Runtime, config: Path, tmp_path: Path
) -> None:
    """The same path, with the pin refresh-pins makes from the local archive's SHA256SUMS."""
    folder, name = serve_as_pinned(packed, config, tmp_path)
    sums = sums_file(tmp_path / "SHA256SUMS", {name: packed.sha256})
    made = refresh(config, "--tag", TAG, "--sums", sums)
    assert made.returncode == 0, made.stderr
    assert load_release(config).asset(host_target()[0], minor()).sha256 == packed.sha256
    with Mirror(folder) as mirror:
        done = bundle(config, tmp_path, mirror.url)
        assert [r.path for r in mirror.state.requests] == [f"/{TAG}/{name}"]
    assert done.returncode == 0, done.stderr
    archive = Path(done.stdout.strip().splitlines()[-1])
    assert archive.is_file() and archive.parent == tmp_path / "out"
    assert f"from {mirror.url}/{TAG}/" in done.stderr
    assert sys.version.split()[0] in done.stderr
