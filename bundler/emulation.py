"""Running a target's launcher on this machine: natively, or under qemu-user.

The launcher answers --version before it starts Python, so a folder with the
launcher and a stand-in `python3` file next to it is enough to see that a
cross-built binary loads and runs. Binaries for another CPU need qemu-user
(Debian's qemu-user-static); dynamically linked aarch64 glibc ones also need an
aarch64 glibc to load (Debian's libc6-arm64-cross puts one in /usr/aarch64-linux-gnu).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from bundler import commands, elf
from bundler.config import Target
from bundler.host import host_arch, host_libc


def runner(binary: Path, target: Target) -> tuple[list[str] | None, str]:
    """The command prefix that runs the binary here, or None and why it cannot run."""
    info = elf.read(binary)
    if info is None:
        return None, "not an ELF file"
    needs_loader = info.interpreter is not None
    if target.arch == host_arch():
        if not needs_loader or info.libc == host_libc() or Path(info.interpreter or "").exists():
            return [], "natively"
        return None, f"this machine has no {info.interpreter}"
    qemu = shutil.which(f"qemu-{target.arch}-static") or shutil.which(f"qemu-{target.arch}")
    if qemu is None:
        return None, f"no qemu-{target.arch}-static (apt-get install qemu-user-static)"
    if not needs_loader:
        return [qemu], f"under {Path(qemu).name}"
    sysroot = f"/usr/{target.arch}-linux-gnu"  # where Debian's libc6-*-cross installs
    loader = Path(sysroot) / "lib" / Path(info.interpreter or "").name
    if target.libc == "gnu" and loader.exists():
        return [qemu, "-L", sysroot], f"under {Path(qemu).name} -L {sysroot}"
    hint = " (for glibc: apt-get install libc6-arm64-cross)" if target.libc == "gnu" else ""
    return None, f"no {target.arch} {target.libc} C library to load it here{hint}"


def run_launcher(launcher: Path, target: Target) -> str:
    """One line: what `pynox --version` printed, or why it could not run here."""
    prefix, how = runner(launcher, target)
    if prefix is None:
        return f"launcher not run: {how}"
    with tempfile.TemporaryDirectory(prefix="pynox-run-") as scratch:
        copy = Path(scratch) / "pynox"
        shutil.copyfile(launcher, copy)
        copy.chmod(0o755)
        (Path(scratch) / "python3").write_text("")  # the launcher only checks it is there
        done = commands.run(
            [*prefix, str(copy), "--version"], capture=True, check=False, timeout=60
        )
    if done.returncode != 0:
        return f"launcher failed {how}: {(done.stderr or done.stdout).strip()}"
    return f"launcher runs {how}: {done.stdout.strip()}"
