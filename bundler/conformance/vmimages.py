"""What the VM engine boots, built from Debian packages and cached under the user's cache.

A kernel comes from a `linux-image-*` package (`apt-get download`, so any architecture
dpkg knows), the initramfs from that package's virtio and ext4 modules (decompressed
from .ko.xz, with the modules they depend on) and busybox-static of the same
architecture, and the root disk from a debootstrap root with `mkfs.ext4 -d`. Each is
built into a temporary name and renamed when complete; its package versions and sha256
are kept beside it for the cell's report.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import io
import json
import lzma
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bundler import commands, log
from bundler.commands import CommandFailed
from bundler.conformance import rootfs, tools
from bundler.conformance.errors import Unprepared
from bundler.errors import BundlerError
from bundler.paths import cache_dir

# The drivers between the kernel and an ext4 root on a virtio disk; a kernel that builds
# one in has no module for it, which is fine.
WANTED_MODULES = ("virtio_pci", "virtio_blk", "ext4")
ROOT_SPARE_MB = 1024  # room in the root disk for the install (/opt/pynox) and pip caches
INIT = Path(__file__).with_name("vm_init.sh")


@dataclass(frozen=True)
class Boot:
    """A kernel and its initramfs, ready for -kernel and -initrd."""

    kernel: Path
    initramfs: Path
    provenance: list[str]  # "package version (sha256 ...)" lines for the report


def vm_cache() -> Path:
    return cache_dir() / "vm"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pick_package(pattern: str, arch: str) -> tuple[str, str]:
    """The newest package matching PATTERN (an fnmatch glob) that apt can fetch for ARCH,
    and its version."""
    prefix = pattern.split("*", 1)[0]
    names = commands.run(["apt-cache", "pkgnames", prefix], capture=True, check=False).stdout
    found = candidates([name for name in names.split() if fnmatch.fnmatchcase(name, pattern)], arch)
    if not found:
        raise Unprepared(
            f"apt knows no {pattern} for {arch}: run `make conformance-deps` (which adds the "
            "architecture to dpkg and the suites that carry these kernels to apt)"
        )
    return max(found.items(), key=lambda item: _version_key(item[0]))


def candidates(names: list[str], arch: str) -> dict[str, str]:
    """The version `apt-get download NAME:ARCH` would fetch, for each of NAMES apt can fetch;
    asked in one `apt-cache policy`, since each reads all of apt's lists (about a second)."""
    if not names:
        return {}
    asked = [f"{name}:{arch}" for name in names]
    done = commands.run(["apt-cache", "policy", *asked], capture=True, check=False)
    found: dict[str, str] = {}
    package = ""
    for line in done.stdout.splitlines():
        if line and not line[0].isspace():
            # "NAME:ARCH:", or "NAME:" for this machine's own architecture
            package = line.rstrip(":").split(":")[0]
            continue
        match = re.fullmatch(r"\s+Candidate: (\S+)", line)
        if match and match.group(1) != "(none)" and package in names:
            found[package] = match.group(1)
    return found


def _version_key(name: str) -> list[int]:
    return [int(part) for part in re.findall(r"\d+", name)]


def download(package: str, arch: str, into: Path) -> tuple[Path, str]:
    """The .deb of PACKAGE:ARCH fetched into INTO, and its version."""
    version = candidates([package], arch).get(package, "")
    if not version:
        raise Unprepared(f"apt cannot fetch {package}:{arch}; run `make conformance-deps`")
    into.mkdir(parents=True, exist_ok=True)
    os.chmod(into, 0o755)
    try:
        commands.run(["apt-get", "download", "-q", f"{package}:{arch}={version}"], cwd=into,
                     capture=True, timeout=1800)  # fmt: skip
    except CommandFailed as failed:
        raise BundlerError(
            f"apt-get download {package}:{arch} failed: {failed.last_line}"
        ) from None
    debs = sorted(into.glob(f"{package}_*_{arch}.deb"))
    if not debs:
        raise BundlerError(f"apt-get download {package}:{arch} wrote no .deb into {into}")
    return debs[-1], version


def boot(kernel_pattern: str, arch: str) -> Boot:
    """The cached kernel and initramfs for the newest package matching KERNEL_PATTERN."""
    package, version = pick_package(kernel_pattern, arch)
    # The initramfs holds vm_init.sh: a changed one is another boot image.
    name = f"{package}_{version}_{arch}_init-{sha256(INIT)[:12]}"
    final = vm_cache() / name.replace("~", "-").replace(":", "-")
    info = final / "provenance.json"
    if not info.is_file():
        tools.ensure("dpkg-deb", "dpkg")
        final.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=final.name + ".partial.", dir=final.parent))
        try:
            _build_boot(package, arch, work)
            if final.exists():
                shutil.rmtree(final)
            work.rename(final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    recorded = json.loads(info.read_text())
    return Boot(final / "vmlinuz", final / "initramfs.cpio.gz", recorded["provenance"])


def _build_boot(package: str, arch: str, work: Path) -> None:
    log.step(f"building a boot image from {package}:{arch} (cached in {vm_cache()})")
    debs = work / "debs"
    kernel_deb, kernel_version = download(package, arch, debs)
    busybox_deb, busybox_version = download("busybox-static", arch, debs)
    tree = work / "tree"
    for deb in (kernel_deb, busybox_deb):
        commands.run(["dpkg-deb", "-x", deb, tree], capture=True)
    images = sorted((tree / "boot").glob("vmlinu*"))
    if not images:
        raise BundlerError(f"{kernel_deb.name} holds no kernel image under /boot")
    shutil.copy2(images[-1], work / "vmlinuz")
    modules = _modules(tree)
    _write_initramfs(work / "initramfs.cpio.gz", tree / "bin" / "busybox", modules)
    provenance = [
        f"kernel {package}:{arch} {kernel_version} (.deb sha256 {sha256(kernel_deb)}, "
        f"image sha256 {sha256(work / 'vmlinuz')})",
        f"initramfs busybox-static:{arch} {busybox_version} (.deb sha256 {sha256(busybox_deb)}) "
        f"and modules {', '.join(name for name, _ in modules) or 'none'} "
        f"(sha256 {sha256(work / 'initramfs.cpio.gz')})",
    ]
    (work / "provenance.json").write_text(json.dumps({"provenance": provenance}, indent=1))
    shutil.rmtree(debs)
    shutil.rmtree(tree)


def _modules(tree: Path) -> list[tuple[str, bytes]]:
    """The wanted modules and those they depend on, decompressed, in load order."""
    files: dict[str, Path] = {}
    for path in (tree / "lib" / "modules").rglob("*.ko*"):
        files[path.name.split(".ko")[0].replace("-", "_")] = path
    ordered: list[tuple[str, bytes]] = []
    seen: set[str] = set()

    def add(name: str) -> None:
        if name in seen or name not in files:
            return  # built in, or already taken
        seen.add(name)
        data = _read_module(files[name])
        match = re.search(rb"(?:^|\x00)depends=([^\x00]*)\x00", data)
        for dependency in match.group(1).decode().split(",") if match else []:
            if dependency:
                add(dependency.replace("-", "_"))
        ordered.append((name, data))

    for name in WANTED_MODULES:
        add(name)
    return ordered


def _read_module(path: Path) -> bytes:
    raw = path.read_bytes()
    if path.name.endswith(".xz"):
        return lzma.decompress(raw)
    if path.name.endswith(".zst"):
        done = subprocess.run(["zstd", "-dc"], input=raw, capture_output=True, check=True)
        return done.stdout
    if path.name.endswith(".gz"):
        return gzip.decompress(raw)
    return raw


def _write_initramfs(out: Path, busybox: Path, modules: list[tuple[str, bytes]]) -> None:
    """A newc cpio: busybox, /init, the modules and their load order."""
    if not busybox.is_file():
        raise BundlerError("busybox-static holds no /bin/busybox")
    entries: list[tuple[str, int, bytes]] = [
        ("bin", 0o40755, b""),
        ("dev", 0o40755, b""),
        ("proc", 0o40755, b""),
        ("sys", 0o40755, b""),
        ("newroot", 0o40755, b""),
        ("modules", 0o40755, b""),
        ("bin/busybox", 0o100755, busybox.read_bytes()),
        ("bin/sh", 0o120777, b"busybox"),
        ("init", 0o100755, INIT.read_bytes()),
        ("modules/order", 0o100644, "".join(f"{n}\n" for n, _ in modules).encode()),
    ]
    entries += [(f"modules/{name}.ko", 0o100644, data) for name, data in modules]
    buffer = io.BytesIO()
    for number, (name, mode, data) in enumerate([*entries, ("TRAILER!!!", 0, b"")], 1):
        encoded = name.encode() + b"\x00"
        fields = (number, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0)
        buffer.write(b"070701" + b"".join(b"%08X" % value for value in fields) + encoded)
        buffer.write(b"\x00" * (-(110 + len(encoded)) % 4) + data + b"\x00" * (-len(data) % 4))
    with gzip.GzipFile(out, "wb", mtime=0) as file:
        file.write(buffer.getvalue())


def root_disk(suite: str, arch: str, include: tuple[str, ...]) -> tuple[Path, str]:
    """The cached ext4 image of the debootstrap root, and how it was had (for the report)."""
    root, how = rootfs.debian(suite, arch, include)
    final = vm_cache() / f"root-{root.name}.ext4"
    stamp = (root / rootfs.MARKER).read_text().strip()
    info = Path(f"{final}.json")
    if not (final.is_file() and info.is_file() and json.loads(info.read_text())["spec"] == stamp):
        tools.ensure("mkfs.ext4", "e2fsprogs")
        (root / "conformance").mkdir(exist_ok=True)  # where the payload disk is mounted
        final.parent.mkdir(parents=True, exist_ok=True)
        partial = final.with_name(final.name + f".partial.{os.getpid()}")
        used = int(commands.run(["du", "-sm", root], capture=True).stdout.split()[0])
        log.step(f"making the root disk {final} from {root}")
        commands.run(["mkfs.ext4", "-q", "-F", "-L", "pynox-root", "-d", root, partial,
                      f"{used * 5 // 4 + ROOT_SPARE_MB}M"], capture=True)  # fmt: skip
        info.write_text(json.dumps({"spec": stamp, "sha256": sha256(partial)}))
        partial.rename(final)
    digest = json.loads(info.read_text())["sha256"]
    return final, f"{how}; disk image {final.name} (sha256 {digest})"
