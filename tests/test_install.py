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
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support.bundles import PROJECT
from support.bundles.artifacts import Bundles, bundles

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
    done = install("--archive", built.from_archive, "--prefix", prefix, "--bin-dir", links)
    assert done.returncode == 0, done.stderr
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
    again = install("--archive", built.from_archive, "--prefix", prefix, "--bin-dir", links)
    assert again.returncode == 0, again.stderr
    assert "upgraded pynox 0.1.0" in again.stdout
    assert not marker.exists(), "the new tree replaced the old one"
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
    archive = folder / "pynox-9.9.9-test-cp399.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data, mode in (
            (
                "pynox-9.9.9-test-cp399/MANIFEST.json",
                json.dumps(manifest, indent=2).encode(),
                0o644,
            ),
            ("pynox-9.9.9-test-cp399/bin/pynox", launcher.encode(), 0o755),
        ):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    Path(f"{archive}.sha256").write_text(f"{digest}  {archive.name}\n")
    return archive


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


def test_refuses_to_replace_a_foreign_command(tmp_path: Path) -> None:
    archive = fake_bundle(tmp_path)
    links = tmp_path / "bin"
    links.mkdir()
    (links / "pynox").write_text("someone else's\n")
    line = failure_line(
        install("--archive", archive, "--prefix", tmp_path / "p", "--bin-dir", links)
    )
    assert "is not a link to a pynox install; remove it or pass --no-link" in line


def test_install_script_is_shellcheck_clean() -> None:
    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    done = subprocess.run(["shellcheck", str(INSTALL)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


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
