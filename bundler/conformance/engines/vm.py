"""A real kernel under full-system emulation: each call is one boot of QEMU (TCG), tens
of seconds under emulation, which is why the runner makes one call per cell (cell.sh).

The cell's kernel boots with a small initramfs (vm_init.sh) that mounts the root disk
(a per-container copy of the cached ext4 image, so what install.sh writes persists from
one call to the next) and a payload disk at /conformance. The payload disk is made
afresh for each call from what copy_in staged, plus call.sh (the command, its
environment and folder); the guest writes its exit status to the payload's /result and
the command's output to /stdout and /stderr, which are read back with debugfs. QEMU
exits 0 whatever the guest did: a call without /result is a guest that never reported,
and fails.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from bundler import commands
from bundler.commands import CommandFailed, Result
from bundler.conformance import tools, vmimages
from bundler.conformance.engines.base import BASE_ENV, copy_local, delete_libraries
from bundler.errors import BundlerError

MOUNT = PurePosixPath("/conformance")  # where the payload disk is in the guest
CALL_TIMEOUT = 3600.0
# Kept from the payload between calls: the guest's reports are per call.
REPORT_FILES = ("result", "stdout", "stderr", "call.sh")
# The environment variable that makes the guest power off without reporting (a test hook).
NO_REPORT = "PYNOX_CONFORMANCE_VM_NO_REPORT"


@dataclass(frozen=True)
class Machine:
    """How QEMU emulates one CPU architecture."""

    qemu: str
    package: str  # the Debian package that has it
    args: tuple[str, ...]
    console: str


MACHINES = {
    # pauth-impdef: QEMU's own pointer authentication, three times faster to boot than
    # the architected algorithm -cpu max uses by default.
    "aarch64": Machine(
        "qemu-system-aarch64",
        "qemu-system-arm",
        ("-M", "virt", "-cpu", "max,pauth-impdef=on"),
        "ttyAMA0",
    ),
    "x86_64": Machine(
        "qemu-system-x86_64", "qemu-system-x86", ("-M", "q35", "-cpu", "max"), "ttyS0"
    ),
}


class GuestSilent(BundlerError):
    """The guest powered off (or was stopped) without writing its report."""


class VMContainer:
    def __init__(self, cpu: str, boot: vmimages.Boot, root_disk: Path, root: str) -> None:
        if cpu not in MACHINES:
            raise BundlerError(f"no QEMU machine for {cpu}")
        self.machine = MACHINES[cpu]
        self.qemu = tools.ensure(self.machine.qemu, self.machine.package)
        self.debugfs = tools.ensure("debugfs", "e2fsprogs")
        self.mkfs = tools.ensure("mkfs.ext4", "e2fsprogs")
        self.boot = boot
        version = commands.run([self.qemu, "--version"], capture=True, check=False)
        self.engine = f"vm ({(version.stdout.splitlines() or [self.machine.qemu])[0]}, TCG)"
        self.root = root
        self.scratch = Path(tempfile.mkdtemp(prefix="pynox-vm-"))
        self.staged = self.scratch / "payload"
        self.staged.mkdir()
        self.disk = self.scratch / "root.ext4"
        # A copy the calls write to; sparse, so it costs what the root holds.
        commands.run(["cp", "--sparse=always", root_disk, self.disk])
        self.payload = self.scratch / "payload.ext4"
        self.console = self.scratch / "console.log"

    def _staged(self, path: PurePosixPath) -> Path:
        if path != MOUNT and MOUNT not in path.parents:
            raise ValueError(f"{path} is not under {MOUNT}, the folder the payload disk is")
        return self.staged / path.relative_to(MOUNT)

    def copy_in(self, source: Path, destination: PurePosixPath) -> None:
        copy_local(source, self._staged(destination))

    def copy_out(self, source: PurePosixPath, destination: Path) -> None:
        """A file the last call left in the payload (under /conformance)."""
        relative = "/" + source.relative_to(MOUNT).as_posix()
        destination.write_bytes(self._cat(relative))

    def call(
        self, args: list[str], env: Mapping[str, str] | None = None, cwd: str = "/"
    ) -> Result[str]:
        lines = ["#!/bin/sh", f"cd {shlex.quote(cwd)} || exit 125"]
        lines += [f"export {name}={shlex.quote(value)}" for name, value in
                  {**BASE_ENV, "TMPDIR": "/tmp", **(env or {})}.items()]  # fmt: skip
        lines.append(f"exec {shlex.join(args)} < /dev/null")
        for name in REPORT_FILES:
            (self.staged / name).unlink(missing_ok=True)
        (self.staged / "call.sh").write_text("\n".join(lines) + "\n")
        self._make_payload()
        self._run_qemu()
        report = self._report()
        return Result(args, report["exit"], self._read("/stdout"), self._read("/stderr"))

    def _make_payload(self) -> None:
        used = sum(f.stat().st_size for f in self.staged.rglob("*") if f.is_file()) >> 20
        self.payload.unlink(missing_ok=True)
        commands.run([self.mkfs, "-q", "-F", "-L", "pynox-payload", "-d", self.staged,
                      self.payload, f"{used * 2 + 256}M"], capture=True)  # fmt: skip

    def _run_qemu(self) -> None:
        append = f"console={self.machine.console} panic=-1 quiet rdinit=/init"
        if os.environ.get(NO_REPORT) == "1":
            append += " pynox.noreport"
        command: list[str | Path] = [
            self.qemu, *self.machine.args, "-m", "2048", "-smp", str(min(2, os.cpu_count() or 1)),
            "-nodefaults", "-display", "none", "-no-reboot",
            "-serial", f"file:{self.console}",
            "-kernel", self.boot.kernel, "-initrd", self.boot.initramfs, "-append", append,
            "-drive", f"file={self.disk},format=raw,if=virtio,cache=unsafe",
            "-drive", f"file={self.payload},format=raw,if=virtio,cache=unsafe",
        ]  # fmt: skip
        try:
            commands.run(command, capture=True, timeout=CALL_TIMEOUT)
        except CommandFailed as failed:
            raise BundlerError(f"QEMU failed: {failed.message}; {self._console_tail()}") from None

    def _report(self) -> dict[str, int]:
        try:
            text = self._read("/result")
        except BundlerError:
            raise GuestSilent(
                f"the guest never reported (no /result on the payload disk); {self._console_tail()}"
            ) from None
        fields = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
        if not fields.get("exit", "").isdigit():
            raise GuestSilent(f"the guest's report is not one: {text[:200]!r}")
        return {"exit": int(fields["exit"])}

    def _cat(self, path: str) -> bytes:
        """A file of the payload disk, read without mounting it."""
        done = subprocess.run([self.debugfs, "-R", f"cat {path}", str(self.payload)],
                              capture_output=True, check=False, timeout=600)  # fmt: skip
        # debugfs exits 0 even for a missing file; it says so on stderr.
        if done.returncode != 0 or b"not found" in done.stderr:
            raise BundlerError(f"{path} is not on the payload disk")
        return done.stdout

    def _read(self, path: str) -> str:
        return self._cat(path).decode(errors="replace")

    def _console_tail(self) -> str:
        try:
            lines = self.console.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no console output"
        return "the console's last lines: " + " | ".join(lines[-6:])

    def hide(self, patterns: tuple[str, ...]) -> list[str]:
        # The root disk is this container's own copy: its libraries are deleted.
        return delete_libraries(self, patterns)

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)
