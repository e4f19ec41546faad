"""The conformance runner itself: its cells, its summary, and that a VM cell can fail.

The slow tests boot the arm64 kernel under QEMU: a guest that never reports must fail
the cell, and so must a bundle whose aarch64 seccomp table is deliberately wrong. They
take minutes (a cross-built bundle, two cells under TCG), more than CI's budget leaves, so
they run only when asked: `PYNOX_TEST_VM=1 pytest -m slow tests/test_conformance_runner.py`,
with what `make conformance-deps` installs and the cached arm64 root (made by a first
`make conformance CELL=aarch64-linux-gnu`).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

import pytest
from support.bundles import PROJECT
from support.bundles.artifacts import bundler, clean_env

from bundler.conformance import cell_run, cells, report, tools
from bundler.conformance.cell_run import Result
from bundler.conformance.engines.base import BASE_ENV, copy_local
from bundler.conformance.errors import Unprepared
from bundler.errors import BundlerError

ARM64_CELL = "aarch64-linux-gnu"


def write_cells(folder: Path, cell: str) -> Path:
    """A dist-config folder whose conformance.toml has CELL's table (and the real rest)."""
    shutil.copytree(PROJECT / "dist-config", folder, dirs_exist_ok=True)
    text = (folder / "conformance.toml").read_text()
    (folder / "conformance.toml").write_text(text + cell)
    return folder


def test_a_vm_cell_needs_a_kernel(tmp_path: Path) -> None:
    config = write_cells(
        tmp_path,
        '\n[cells.nokernel]\ntarget = "aarch64-linux-gnu"\ndistro = "debian"\n'
        'suite = "bookworm"\nruntime = "rootfs"\nengine = "vm"\n',
    )
    with pytest.raises(BundlerError, match="a `kernel` is given exactly when engine is vm"):
        cells.load(config)


def test_an_unknown_engine_is_refused(tmp_path: Path) -> None:
    config = write_cells(
        tmp_path,
        '\n[cells.odd]\ntarget = "x86_64-linux-gnu"\ndistro = "debian"\nsuite = "bookworm"\n'
        'image = "debian"\nruntime = "host"\nengine = "firecracker"\n',
    )
    with pytest.raises(BundlerError, match="engine 'firecracker', not one of container, vm"):
        cells.load(config)


def test_the_issue_cells_are_vm_cells() -> None:
    by_name = {cell.name: cell for cell in cells.load()}
    arm = by_name[ARM64_CELL]
    assert (arm.engine, arm.expect_sandbox) == ("vm", True) and "6.12" in arm.kernel
    for name in ("x86_64-linux-gnu-kernel-6.1", "aarch64-linux-gnu-kernel-6.1"):
        old = by_name[name]
        assert old.engine == "vm" and not old.expect_sandbox
        assert "Landlock ABI 2" in old.expect_reason
    assert by_name["x86_64-linux-gnu-minimal"].absent  # the container cells are kept


def test_the_summary_lists_every_cell_with_its_reason(tmp_path: Path) -> None:
    results = [
        Result(
            "a",
            "passed",
            "40 passed",
            engine="vm (QEMU, TCG)",
            kernel="6.12 (aarch64), Landlock ABI 6",
            counts={"passed": 40, "failed": 0, "skipped": 2, "sandboxed": 22},
        ),  # fmt: skip
        Result("b", "not run", "no musl runtime | reachable"),
        Result("c", report.NOT_SELECTED, ""),
    ]
    out = tmp_path / "conformance.md"
    report.write_summary(results, out)
    rows = out.read_text().splitlines()
    assert (
        "| a | passed | vm | 6.12 (aarch64), Landlock ABI 6 |  | 40 | 0 | 2 | 22 | 40 passed |"
        in rows
    )
    assert "| b | not run |  |  |  |  |  |  |  | no musl runtime \\| reachable |" in rows
    assert any(line.startswith("| c | not selected |") for line in rows)


def test_a_missing_tool_names_the_deps_target() -> None:
    with pytest.raises(Unprepared, match="run `make conformance-deps`"):
        tools.ensure("no-such-tool-pynox", "pynox-tools")


def test_a_changed_vm_init_is_another_boot_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The initramfs holds vm_init.sh: a boot image cached with another one is not reused."""
    from bundler.conformance import vmimages

    init = tmp_path / "vm_init.sh"
    init.write_text("#!/bin/sh\npoweroff -f\n")
    built: list[str] = []

    def build(package: str, arch: str, work: Path) -> None:
        built.append(init.read_text())
        (work / "provenance.json").write_text(json.dumps({"provenance": []}))

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(vmimages, "INIT", init)
    monkeypatch.setattr(vmimages, "pick_package", lambda pattern, arch: ("linux-image-x", "1"))
    monkeypatch.setattr(vmimages, "_build_boot", build)
    first = vmimages.boot("linux-image-*", "arm64")
    assert vmimages.boot("linux-image-*", "arm64") == first and len(built) == 1
    init.write_text("#!/bin/sh\necho changed\npoweroff -f\n")
    changed = vmimages.boot("linux-image-*", "arm64")
    assert changed.initramfs != first.initramfs
    assert built == ["#!/bin/sh\npoweroff -f\n", "#!/bin/sh\necho changed\npoweroff -f\n"]


APT_NAMES = """linux-image-6.1.0-57-cloud-arm64-unsigned
linux-image-6.1.0-57-cloud-amd64
linux-image-6.1.0-8-cloud-arm64-unsigned
linux-image-6.1.0-9-cloud-arm64-unsigned
"""
APT_POLICY = """linux-image-6.1.0-57-cloud-arm64-unsigned:arm64:
  Installed: (none)
  Candidate: 6.1.192-3
  Version table:
     6.1.192-3 500
        500 http://deb.debian.org/debian-security bookworm-security/main arm64 Packages
linux-image-6.1.0-9-cloud-arm64-unsigned:
  Installed: (none)
  Candidate: (none)
linux-image-6.1.0-8-cloud-arm64-unsigned:arm64:
  Installed: (none)
  Candidate: 6.1.25-1
"""


def test_the_newest_kernel_is_picked_with_one_apt_cache_policy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """apt-cache policy reads all of apt's lists, about a second a call: every candidate
    is asked in one."""
    from bundler.conformance import vmimages

    ran: list[list[str]] = []

    def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        ran.append(command)
        said = APT_NAMES if command[1] == "pkgnames" else APT_POLICY
        return subprocess.CompletedProcess(command, 0, said, "")

    monkeypatch.setattr(vmimages.commands, "run", run)
    picked = vmimages.pick_package("linux-image-6.1.0-*-cloud-arm64-unsigned", "arm64")
    assert picked == ("linux-image-6.1.0-57-cloud-arm64-unsigned", "6.1.192-3")
    assert [command[:2] for command in ran] == [["apt-cache", "pkgnames"], ["apt-cache", "policy"]]
    assert len(ran[1]) == 2 + 3  # the three names the glob matches, each with :arm64


# --- What runs in the box, in one call ---------------------------------------------------

# The stand-ins for install.sh, the installed pynox and the suite: install.sh refuses the
# old kernel unless told, doctor reports Landlock ABI 2.
OLD_KERNEL_INSTALL = """#!/bin/sh
case "$*" in *--allow-old-kernel*) echo "installed /opt/pynox" ;; *)
echo "install.sh: Linux 6.1.0 is older than the 6.2 the sandbox needs; pass --allow-old-kernel" >&2
exit 1 ;; esac
"""
BROKEN_INSTALL = """#!/bin/sh
echo "checking the archive"
echo "install.sh: the archive's sha256 does not match" >&2
exit 1
"""
DOCTOR = """#!/bin/sh
echo '{"kernel": "6.1.0-57-cloud-arm64", "architecture": "aarch64", "landlock_abi": 2,
 "sandbox_unavailable_reasons": ["Landlock ABI 2 is older than the ABI 3 the sandbox needs"]}'
"""
SUITE = {
    "test_refusal.py": "def test_every_run_is_refused():\n    pass\n",
    "test_parity.py": "def test_parity():\n    raise AssertionError('left out in a VM')\n",
}


class LocalBox:
    """A container whose /conformance is a folder here and whose calls run here, with
    every call kept: what the runner does in a box, without a root file system."""

    engine = "local"
    root = "this machine"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.calls: list[list[str]] = []

    def _here(self, path: PurePosixPath) -> Path:
        return self.folder / path.relative_to(cell_run.INSIDE)

    def copy_in(self, source: Path, destination: PurePosixPath) -> None:
        copy_local(source, self._here(destination))

    def copy_out(self, source: PurePosixPath, destination: Path) -> None:
        shutil.copy2(self._here(source), destination)

    def call(
        self, args: list[str], env: Mapping[str, str] | None = None, cwd: str = "/"
    ) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        inside, here = str(cell_run.INSIDE), str(self.folder)
        env = {name: value.replace(inside, here) for name, value in (env or {}).items()}
        args = [arg.replace(inside, here) for arg in args]
        return subprocess.run(args, env={**BASE_ENV, **env}, capture_output=True, text=True)

    def hide(self, patterns: tuple[str, ...]) -> list[str]:
        return []

    def close(self) -> None:
        pass


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def run_in_local_box(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, install: str
) -> tuple[Result, LocalBox]:
    """The old-kernel arm64 cell run by the runner in a LocalBox, with the stand-ins, as
    CI runs its VM cells (the sandbox's tests only)."""
    project = tmp_path / "project"
    executable(project / "install" / "install.sh", install)
    for name, text in SUITE.items():
        (project / "suite" / name).parent.mkdir(parents=True, exist_ok=True)
        (project / "suite" / name).write_text(text)
    archive = project / "dist" / "pynox-0.1.0-aarch64-linux-gnu-cp313.tar.gz"
    archive.parent.mkdir()
    archive.write_bytes(b"")
    Path(f"{archive}.sha256").write_text("")
    box = LocalBox(tmp_path / "box")
    monkeypatch.setattr(cell_run, "PROJECT", project)
    monkeypatch.setattr(cell_run, "SUITE", project / "suite")
    monkeypatch.setattr(cell_run, "INSTALLED_PYNOX", str(executable(tmp_path / "pynox", DOCTOR)))
    monkeypatch.setattr(cell_run, "INSTALLED_PYTHON", sys.executable)
    monkeypatch.setattr(cell_run.artifacts, "pytest_for", lambda minor: project / "suite")
    monkeypatch.setattr(cell_run.runtimes, "bundle_for", lambda cell, scratch, notes: archive)
    monkeypatch.setattr(cell_run.choose, "container", lambda cell, engine, include: (box, []))
    monkeypatch.setenv(cell_run.VM_SELECT, "sandboxed")
    monkeypatch.delenv("PYNOX_CONFORMANCE_QUIET", raising=False)
    return cell_run.run_cell(cells.cell("aarch64-linux-gnu-kernel-6.1"), "auto"), box


def test_a_cell_runs_in_its_box_in_one_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A VM cell boots its kernel once per call: install.sh, its second try on an old
    kernel, doctor and the suite all run in one."""
    result, box = run_in_local_box(tmp_path, monkeypatch, OLD_KERNEL_INSTALL)
    assert len(box.calls) == 1, box.calls
    assert result.status == "passed", result
    # The notes in the order the parts ran: the refusal, then the suite's selection.
    assert [note.split(":")[0] for note in result.notes[-2:]] == [
        "install.sh refused first, as it should",
        f"{cell_run.VM_SELECT}=sandboxed",
    ], result.notes
    assert "install.sh: Linux 6.1.0 is older than the 6.2 the sandbox needs" in result.notes[-2]
    assert result.kernel == "6.1.0-57-cloud-arm64 (aarch64), Landlock ABI 2"
    assert result.counts == {"passed": 1, "failed": 0, "skipped": 0, "sandboxed": 0}
    # The parity test is left out, as CI's PYNOX_CONFORMANCE_VM_SELECT=sandboxed asks.
    assert result.detail.startswith("1 passed, 1 deselected in "), result.detail
    assert result.detail.endswith(
        "; the sandbox refused, as expected: Landlock ABI 2 is older than the ABI 3 the "
        "sandbox needs"
    )


def test_a_failed_install_fails_the_cell_with_what_it_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    result, box = run_in_local_box(tmp_path, monkeypatch, BROKEN_INSTALL)
    assert (result.status, result.detail) == (
        "failed",
        "install.sh failed: install.sh: the archive's sha256 does not match",
    )
    said = capsys.readouterr().err
    assert "install.sh said:" in said and "checking the archive" in said, said
    # Neither doctor nor the suite ran after it.
    assert sorted(path.name for path in (box.folder / "out").iterdir()) == [
        "install.status", "install.stderr", "install.stdout"
    ]  # fmt: skip


# --- Booting the arm64 kernel -------------------------------------------------------------


@pytest.fixture
def user_cache(monkeypatch: pytest.MonkeyPatch) -> str:
    """The user's own cache (the session's HOME is a fresh one): the roots, images and
    runtimes a first `make conformance` left there."""
    cache = str(Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache")
    monkeypatch.setenv("XDG_CACHE_HOME", cache)
    return cache


def arm64_cell_ready() -> None:
    if os.environ.get("PYNOX_TEST_VM") != "1":
        pytest.skip("boots QEMU for minutes: set PYNOX_TEST_VM=1 to run it")
    if shutil.which("qemu-system-aarch64") is None or shutil.which("debugfs") is None:
        pytest.skip("QEMU and e2fsprogs are not installed: run `make conformance-deps`")
    from bundler.conformance import rootfs

    root = rootfs.rootfs_cache() / "debian-bookworm-arm64"
    if not (root / rootfs.MARKER).is_file():
        pytest.skip(f"no cached arm64 root at {root}: run `make conformance CELL={ARM64_CELL}`")


def run_cell(
    tmp_path: Path, cache: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], dict]:
    results = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bundler.conformance", ARM64_CELL, "--json", str(results),
         "--summary", str(tmp_path / "conformance.md")],
        cwd=PROJECT, env=clean_env(XDG_CACHE_HOME=cache, **env), capture_output=True,
        text=True, timeout=3600,
    )  # fmt: skip
    return done, json.loads(results.read_text())[0]


@pytest.mark.slow
def test_a_guest_that_never_reports_fails_the_cell(tmp_path: Path, user_cache: str) -> None:
    arm64_cell_ready()
    done, result = run_cell(tmp_path, user_cache, PYNOX_CONFORMANCE_VM_NO_REPORT="1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert result["status"] == "failed"
    assert result["detail"].startswith("the guest never reported"), result["detail"]
    assert f"| {ARM64_CELL} | failed | " in (tmp_path / "conformance.md").read_text()


@pytest.mark.slow
def test_a_wrong_aarch64_syscall_number_fails_the_arm64_cell(
    tmp_path: Path, user_cache: str
) -> None:
    """socket's number swapped on aarch64 alone: the sandbox's tests on the arm64 kernel
    catch it (the network is no longer off)."""
    arm64_cell_ready()
    pytest.importorskip("ziglang", reason="the aarch64 bundle is cross-built with zig")
    from bundler.conformance import runtimes

    notes: list[str] = []
    runtime = runtimes.rootfs_runtime(cells.cell(ARM64_CELL), notes)
    minor = bundler(
        ["default-python", "--runtime", str(runtime)], clean_env(XDG_CACHE_HOME=user_cache)
    ).stdout.strip()
    built = bundler(
        ["bundle", "--target", "aarch64-linux-gnu", "--python", minor, "--runtime",
         str(runtime), "--out", str(tmp_path / "dist"), "--compiler", "zig"],
        clean_env(PYNOX_TEST_C_DEFINE="PYNOX_TEST_WRONG_AARCH64_SOCKET",
                  XDG_CACHE_HOME=user_cache), timeout=1800,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (archive,) = (tmp_path / "dist").glob("pynox-*-aarch64-linux-gnu-cp*.tar.gz")
    done, result = run_cell(
        tmp_path,
        user_cache,
        PYNOX_CONFORMANCE_BUNDLE=str(archive),
        PYNOX_CONFORMANCE_VM_SELECT="sandboxed",
    )
    assert done.returncode == 1 and result["status"] == "failed", result
    assert "Landlock ABI 6" in result["kernel"]
    said = done.stdout + done.stderr
    assert "FAILED conformance/test_denials.py::test_network_is_off_until_allowed" in said


def test_release_unregisters_only_what_the_run_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bundler.conformance import binfmt

    ours, theirs = tmp_path / "qemu-aarch64", tmp_path / "qemu-arm"
    for entry in (ours, theirs):
        entry.write_text("enabled\n")
    monkeypatch.setattr(binfmt, "_registered", [ours])
    monkeypatch.setattr(binfmt, "_mounted", [])
    assert binfmt.release() == ["unregistered qemu-aarch64"]
    # binfmt_misc removes an entry when "-1" is written to it.
    assert (ours.read_text(), theirs.read_text()) == ("-1\n", "enabled\n")
    assert binfmt.release() == []


# --- Making ahead what the cells cache (--prepare) ---------------------------------------


@pytest.fixture
def making(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """What the cells' roots, images and bundles were asked for, in order; nothing is made
    and no container or cell can start."""
    from bundler.conformance import __main__ as runner
    from bundler.conformance import vmimages
    from bundler.conformance.engines import choose

    asked: list[tuple[str, ...]] = []

    def boot(kernel: str, arch: str) -> vmimages.Boot:
        asked.append(("boot", kernel, arch))
        return vmimages.Boot(Path("vmlinuz"), Path("initramfs"), [f"kernel {kernel}"])

    def disk(suite: str, arch: str, include: tuple[str, ...]) -> tuple[Path, str]:
        asked.append(("disk", suite, arch, *include))
        return Path("root.ext4"), f"disk of {suite} {arch}"

    def root(suite: str, arch: str, include: tuple[str, ...]) -> tuple[Path, str]:
        asked.append(("root", suite, arch, *include))
        return Path("root"), f"root of {suite} {arch}"

    def bundle(cell: cells.Cell, scratch: Path, notes: list[str]) -> Path:
        asked.append(("bundle", cell.name))
        return Path(f"{cell.target}.tar.gz")

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("--prepare started a cell or a container")

    monkeypatch.setattr(vmimages, "boot", boot)
    monkeypatch.setattr(vmimages, "root_disk", disk)
    monkeypatch.setattr(choose.rootfs, "debian", root)
    monkeypatch.setattr(choose, "_oci_engine", lambda cell, engine, passed_over: "")
    monkeypatch.setattr(choose.bubblewrap, "available", lambda: (True, "bubblewrap runs"))
    monkeypatch.setattr(choose.tools, "ensure", lambda tool, package: f"/usr/bin/{tool}")
    monkeypatch.setattr(cell_run.runtimes, "bundle_for", bundle)
    monkeypatch.setattr(runner, "run_cell", started)
    monkeypatch.setattr(choose.vm, "VMContainer", started)
    monkeypatch.setattr(choose.bubblewrap, "BubblewrapContainer", started)
    monkeypatch.delenv(cell_run.runtimes.BUNDLE_ENV, raising=False)
    return asked


def test_prepare_makes_what_each_cell_s_run_caches_and_runs_nothing(
    making: list[tuple[str, ...]], capsys: pytest.CaptureFixture[str]
) -> None:
    """CI makes the roots, the VMs' disk and boot images and the arm64 bundle while the
    tests run (`--prepare`): each as the cell's own run asks for it, so that the run then
    finds it made; no cell runs."""
    from bundler.conformance import __main__ as runner
    from bundler.conformance.runtimes import ROOTFS_PYTHON

    arm64 = cells.cell(ARM64_CELL)
    assert runner.run(["--prepare", "x86_64-linux-gnu", ARM64_CELL]) == 0
    assert making == [
        ("root", "bookworm", "amd64"),  # the host cell's bubblewrap root; it packs its own CPython
        ("boot", arm64.kernel, "arm64"),
        ("disk", "bookworm", "arm64", *ROOTFS_PYTHON),
        ("bundle", ARM64_CELL),
    ]
    printed = capsys.readouterr().out
    assert "x86_64-linux-gnu:\n  root: root of bookworm amd64\n" in printed
    assert f"  bundle: {arm64.target}.tar.gz\n" in printed
    assert "conformance report" not in printed


def test_prepare_fails_only_where_making_failed(
    making: list[tuple[str, ...]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A cell this machine cannot run is said so, as its run would say it (exit 0: the
    run lists it as not run); one whose root could not be made fails --prepare."""
    from bundler.conformance import __main__ as runner
    from bundler.conformance.engines import choose

    monkeypatch.setattr(choose.bubblewrap, "available", lambda: (False, "no user namespaces"))
    assert runner.run(["--prepare", "x86_64-linux-gnu"]) == 0
    assert "x86_64-linux-gnu:\n  cannot run here: no user namespaces\n" in capsys.readouterr().out

    def broken(suite: str, arch: str, include: tuple[str, ...]) -> tuple[Path, str]:
        raise BundlerError("debootstrap bookworm arm64 failed: no space left")

    monkeypatch.setattr(cell_run.choose.vmimages, "root_disk", broken)
    assert runner.run(["--prepare", ARM64_CELL]) == 1
    assert "  failed: debootstrap bookworm arm64 failed: no space left\n" in capsys.readouterr().out
