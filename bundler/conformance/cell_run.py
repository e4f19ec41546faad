"""One cell, end to end: bundle, container, install.sh inside it, the suite, the result.

What runs in the container runs in one call, cell.sh (a VM cell boots once per call);
its parts' output is read back and judged here."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from bundler import commands, log
from bundler.conformance import artifacts, binfmt, runtimes
from bundler.conformance.cells import Cell
from bundler.conformance.engines import choose
from bundler.conformance.engines.base import Container
from bundler.conformance.engines.vm import VMContainer
from bundler.conformance.errors import Missing
from bundler.conformance.runtimes import ROOTFS_PYTHON
from bundler.errors import BundlerError
from bundler.paths import PROJECT

INSIDE = PurePosixPath("/conformance")
# What runs there, in one call, and where it leaves each part's output (see the script).
SCRIPT = Path(__file__).with_name("cell.sh")
OUT = INSIDE / "out"
OLD_KERNEL = "older than the 6.2 the sandbox needs"  # install.sh's refusal of an old kernel
# Where install.sh puts the command, and the interpreter of the bundle (which runs the suite).
INSTALLED_PYNOX = "/usr/local/bin/pynox"
INSTALLED_PYTHON = "/opt/pynox/python/bin/python3"
SUITE = PROJECT / "tests" / "conformance"

# PYNOX_CONFORMANCE_VM_SELECT=sandboxed runs, in the VM cells, only the tests of the sandbox
# itself (and the refusals where the kernel cannot sandbox), without the parity and library
# checks: what CI's time allows under emulation.
VM_SELECT = "PYNOX_CONFORMANCE_VM_SELECT"
SANDBOXED_ONLY = (
    "test_denials or test_config or test_pool or test_json or test_refusal or test_doctor"
)


@dataclass
class Result:
    cell: str
    # "passed", "failed", "not run" (this machine cannot run the cell), or, for a cell
    # the run was not asked for, report.NOT_SELECTED
    status: str
    detail: str
    engine: str = ""
    root: str = ""
    bundle: str = ""
    kernel: str = ""  # the kernel the suite ran on, and its Landlock ABI
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    provenance: list[str] = field(default_factory=list)  # what a vm cell booted


def run_cell(cell: Cell, engine: str) -> Result:
    started = time.monotonic()
    result = Result(cell.name, "not run", "")
    try:
        _run(cell, engine, result)
    except Missing as missing:
        result.status, result.detail = "not run", missing.message
    except BundlerError as exc:
        result.status, result.detail = "failed", exc.message
    except OSError as exc:
        result.status, result.detail = "failed", str(exc)
    result.seconds = time.monotonic() - started
    return result


def prepare_cell(cell: Cell, engine: str) -> list[str]:
    """Makes ahead what the cell's run makes first and keeps (its root, a vm cell's disk
    and boot images, a rootfs cell's runtime and bundle), so that the run finds them made;
    what was had, one line each. Missing says why this machine cannot, as the run would."""
    include = ROOTFS_PYTHON if cell.runtime == "rootfs" else ()
    notes = choose.made_ahead(cell, engine, include)
    overridden = os.environ.get(runtimes.BUNDLE_ENV) or os.environ.get(runtimes.env_name(cell))
    if cell.runtime == "rootfs" and not overridden:
        # The host cell builds its bundle afresh every run; a given runtime's is built too.
        with tempfile.TemporaryDirectory(prefix="pynox-conformance-") as scratch:
            archive = runtimes.bundle_for(cell, Path(scratch), notes)
        notes.append(f"bundle: {archive.name}")
    return notes


def _run(cell: Cell, engine: str, result: Result) -> None:
    missing: list[str] = []
    if cell.cpu == "aarch64" and cell.engine == "container":
        try:
            result.notes.append("aarch64 runs " + binfmt.ensure_aarch64())
        except Missing as why:
            raise Missing(f"aarch64 binaries cannot run here: {why.message}") from None
    with tempfile.TemporaryDirectory(prefix="pynox-conformance-") as scratch:
        archive: Path | None = None
        try:
            archive = runtimes.bundle_for(cell, Path(scratch), result.notes)
            result.bundle = archive.name
        except Missing as why:
            missing.append(why.message)
        box: Container | None = None
        try:
            include = ROOTFS_PYTHON if cell.runtime == "rootfs" else ()
            box, passed_over = choose.container(cell, engine, include)
            result.notes += [f"passed over: {why}" for why in passed_over]
            result.engine, result.root = box.engine, box.root
            if isinstance(box, VMContainer):
                result.provenance = box.boot.provenance
        except Missing as why:
            missing.append(why.message)
        if missing or archive is None or box is None:
            if box is not None:
                box.close()
            raise Missing("; ".join(missing))
        _log(f"{cell.name}: engine {box.engine}, root file system {box.root}")
        try:
            _install_and_test(cell, box, archive, result)
        finally:
            box.close()


def _install_and_test(cell: Cell, box: Container, archive: Path, result: Result) -> None:
    _prepare(cell, box, archive, result)
    _run_script(cell, box, archive)
    _install(cell, box, result)
    result.kernel, refusals = _kernel(box)
    _suite(cell, box, result)
    if refusals:
        result.detail += f"; the sandbox refused, as expected: {'; '.join(refusals)}"


def _prepare(cell: Cell, box: Container, archive: Path, result: Result) -> None:
    """Copies the bundle, install.sh, the suite and its pytest, and cell.sh into the box,
    makes the cell's absent libraries unloadable, and writes the suite's environment."""
    minor = archive.name.rsplit("-cp", 1)[1].split(".")[0]
    minor = f"{minor[0]}.{minor[1:]}"
    box.copy_in(archive, INSIDE / "dist" / archive.name)
    box.copy_in(Path(f"{archive}.sha256"), INSIDE / "dist" / f"{archive.name}.sha256")
    box.copy_in(PROJECT / "install" / "install.sh", INSIDE / "install.sh")
    box.copy_in(SUITE, INSIDE / "suite" / "conformance")
    box.copy_in(artifacts.pytest_for(minor), INSIDE / "pytest")
    box.copy_in(SCRIPT, INSIDE / SCRIPT.name)
    hidden = box.hide(cell.absent) if cell.absent else []
    if cell.absent:
        if not hidden:
            raise BundlerError(f"the root holds none of {', '.join(cell.absent)} to make absent")
        result.notes.append(f"made unloadable in the root: {', '.join(hidden)}")
    tls = _certificate(box)
    if tls is None:
        result.notes.append("no openssl here: the loopback HTTPS check is skipped")
    env = {
        "PYNOX_BIN": INSTALLED_PYNOX,
        "PYNOX_EXPECT_SANDBOX": "yes" if cell.expect_sandbox else "no",
        "PYNOX_EXPECT_REASON": cell.expect_reason,
        "PYTHONPATH": str(INSIDE / "pytest"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYNOX_TLS_DIR": tls or "",
        "PYNOX_ABSENT_LIBS": ":".join(hidden),
    }
    with tempfile.TemporaryDirectory() as here:
        written = Path(here) / "suite.env"
        written.write_text("".join(f"{name}={shlex.quote(value)}\n" for name, value in env.items()))
        box.copy_in(written, INSIDE / "suite.env")


def _run_script(cell: Cell, box: Container, archive: Path) -> None:
    """Runs cell.sh in the box, in one call: install.sh, doctor, the suite (see there)."""
    env = {
        "CELL_ARCHIVE": str(INSIDE / "dist" / archive.name),
        # A kernel below the sandbox's floor: install.sh refuses it unless told, as it
        # should; the suite then checks that every sandboxed run is refused.
        "CELL_OLD_KERNEL": "" if cell.expect_sandbox else OLD_KERNEL,
        "CELL_PYNOX": INSTALLED_PYNOX,
        "CELL_PYTHON": INSTALLED_PYTHON,
        "CELL_SELECT": _selection(cell),
    }
    ran = box.call(["sh", str(INSIDE / SCRIPT.name)], env=env)
    if ran.returncode != 0:
        said = (ran.stderr.strip() or ran.stdout.strip() or "no output").splitlines()[-1]
        raise BundlerError(f"{SCRIPT.name} could not run its parts: {said}")


def _selection(cell: Cell) -> str:
    """The pytest -k expression the cell's suite runs with, or '' for the whole suite."""
    if cell.engine == "vm" and os.environ.get(VM_SELECT) == "sandboxed":
        return SANDBOXED_ONLY
    return ""


def _install(cell: Cell, box: Container, result: Result) -> None:
    """What install.sh said, installing the bundle as a user would: fails the cell (or
    marks it not run) if it refused."""
    installed = _part(box, "install")
    _log(f"{cell.name}: install.sh said:", installed.stdout + installed.stderr)
    retried = _part(box, "install-old-kernel")
    if retried.ran:  # cell.sh installs again only after install.sh refused an old kernel
        result.notes.append(f"install.sh refused first, as it should: {installed.stderr.strip()}")
        _log(
            f"{cell.name}: install.sh --allow-old-kernel said:",
            retried.stdout + retried.stderr,
        )
        installed = retried
    if installed.status != 0:
        refusal = installed.stderr.strip()
        if "needs glibc" in refusal and cell.runtime == "host":
            raise Missing(
                f"{refusal.removeprefix('install.sh: ')} (install.sh refused it as it should): "
                "a bundle from this machine's CPython needs this machine's glibc; the floor "
                "is checked with a python-build-standalone runtime (glibc 2.17), which is not "
                f"reachable here; give one with {runtimes.env_name(cell)}=ARCHIVE"
            )
        raise BundlerError(f"install.sh failed: {refusal or 'it did not run'}")


def _suite(cell: Cell, box: Container, result: Result) -> None:
    """What the conformance suite said against the install, and its counts."""
    suite = _part(box, "suite")
    _log(f"{cell.name}: the suite said:", suite.stdout + suite.stderr)
    if _selection(cell):
        result.notes.append(
            f"{VM_SELECT}=sandboxed: only the sandbox's tests ran (-k '{SANDBOXED_ONLY}'); "
            "the parity and library checks were left out"
        )
    with tempfile.TemporaryDirectory() as here:
        try:
            box.copy_out(OUT / "junit.xml", Path(here) / "junit.xml")
            result.counts = _counts(Path(here) / "junit.xml")
        except (OSError, BundlerError, ElementTree.ParseError):
            result.counts = {}
    passed = suite.status == 0 and result.counts.get("passed", 0) > 0
    result.status = "passed" if passed else "failed"
    summary = (suite.stdout.strip().splitlines() or ["no output"])[-1]
    result.detail = summary.strip("= ")


def _kernel(box: Container) -> tuple[str, list[str]]:
    """The kernel the installed pynox finds itself on, and why it cannot sandbox there, as
    `pynox doctor --json` said right after the install."""
    said = _part(box, "doctor").stdout
    try:
        report = json.loads(said)
        abi = report["landlock_abi"]
        landlock = f"Landlock ABI {abi}" if abi > 0 else "no Landlock"
        kernel = f"{report['kernel']} ({report['architecture']}), {landlock}"
        return kernel, [str(reason) for reason in report["sandbox_unavailable_reasons"]]
    except (ValueError, KeyError, TypeError):
        raise BundlerError(f"`pynox doctor --json` gave no report: {said[:300]!r}") from None


@dataclass(frozen=True)
class Part:
    """What a part of cell.sh did; status None: the part did not run."""

    status: int | None
    stdout: str
    stderr: str

    @property
    def ran(self) -> bool:
        return self.status is not None


def _part(box: Container, name: str) -> Part:
    """Part NAME of cell.sh, from the files it left in the box."""
    said = {
        stream: _read(box, OUT / f"{name}.{stream}") for stream in ("status", "stdout", "stderr")
    }
    status = said["status"].strip()
    return Part(int(status) if status.isdigit() else None, said["stdout"], said["stderr"])


def _read(box: Container, path: PurePosixPath) -> str:
    """A text file of the box, or '' if there is none."""
    with tempfile.TemporaryDirectory() as here:
        try:
            box.copy_out(path, Path(here) / path.name)
            return (Path(here) / path.name).read_text(errors="replace")
        except (OSError, BundlerError):
            return ""


def _certificate(box: Container) -> str | None:
    """A throwaway self-signed certificate for localhost, made here (the root may have no
    openssl) and copied in; the folder holding cert.pem and key.pem, or None."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    with tempfile.TemporaryDirectory() as here:
        commands.run(
            [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-days", "2", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
             "-keyout", f"{here}/key.pem", "-out", f"{here}/cert.pem"],
            capture=True, failure="openssl could not make a test certificate",
        )  # fmt: skip
        box.copy_in(Path(here), INSIDE / "tls")
    return str(INSIDE / "tls")


def _counts(junit: Path) -> dict[str, int]:
    root = ElementTree.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return {}
    total, failed = int(suite.get("tests", 0)), int(suite.get("failures", 0))
    errors, skipped = int(suite.get("errors", 0)), int(suite.get("skipped", 0))
    # The tests of the sandbox itself that ran and passed (conftest marks them).
    sandboxed = sum(
        1 for case in suite.iter("testcase")
        if case.find("properties/property[@name='sandboxed']") is not None
        and not any(case.find(kind) is not None for kind in ("failure", "error", "skipped"))
    )  # fmt: skip
    return {"passed": total - failed - errors - skipped, "failed": failed + errors,
            "skipped": skipped, "sandboxed": sandboxed}  # fmt: skip


def _log(step: str, transcript: str = "") -> None:
    """A step of the cell, with what a command in the container said; PYNOX_CONFORMANCE_QUIET=1
    keeps them back (the report says how the cell ended)."""
    if os.environ.get("PYNOX_CONFORMANCE_QUIET") == "1":
        return
    log.step(step)
    if transcript.strip():
        log.note(transcript)
