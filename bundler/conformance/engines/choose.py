"""Which engine runs a cell: its own kernel under QEMU for a vm cell; else docker or podman
where one answers, else bubblewrap."""

from __future__ import annotations

from pathlib import Path

from bundler.conformance import rootfs, tools, vmimages
from bundler.conformance.cells import Cell
from bundler.conformance.engines import bubblewrap, oci, vm
from bundler.conformance.engines.base import Container
from bundler.conformance.errors import Missing


def container(cell: Cell, engine: str, include: tuple[str, ...]) -> tuple[Container, list[str]]:
    """A started container for the cell, and why the engines before it were passed over."""
    passed_over: list[str] = []
    if cell.engine == "vm":
        boot, disk, how = _vm_images(cell, include)
        return vm.VMContainer(cell.cpu, boot, disk, how), passed_over
    name = _oci_engine(cell, engine, passed_over)
    if name:
        return oci.OCIContainer(name, cell.image, cell.platform), passed_over
    root, how = _bubblewrap_root(cell, engine, include, passed_over)
    box = bubblewrap.BubblewrapContainer(root)
    box.root = how
    return box, passed_over


def made_ahead(cell: Cell, engine: str, include: tuple[str, ...]) -> list[str]:
    """Makes what container() starts the cell from and caches (the root, and a vm cell's
    disk and boot images), without starting anything; what was had, one line each. A
    cell docker or podman would run needs nothing made here."""
    if cell.engine == "vm":
        boot, _, how = _vm_images(cell, include)
        return [f"boot image: {', '.join(boot.provenance)}", f"root disk: {how}"]
    passed_over: list[str] = []
    name = _oci_engine(cell, engine, passed_over)
    if name:
        return [f"{name} runs it: nothing to make"]
    _, how = _bubblewrap_root(cell, engine, include, passed_over)
    return [f"root: {how}"]


def _vm_images(cell: Cell, include: tuple[str, ...]) -> tuple[vmimages.Boot, Path, str]:
    """A vm cell's boot image, its root disk and how that was had (each made if missing)."""
    boot = vmimages.boot(cell.kernel, cell.arch)
    disk, how = vmimages.root_disk(cell.suite, cell.arch, include)
    return boot, disk, how


def _oci_engine(cell: Cell, engine: str, passed_over: list[str]) -> str:
    """docker or podman, the first asked for that runs the cell's image; '' if none."""
    for name in ("docker", "podman"):
        if engine not in ("auto", name):
            continue
        ok, why = oci.available(name, cell.image, cell.platform)
        if ok:
            return name
        passed_over.append(why)
    return ""


def _bubblewrap_root(
    cell: Cell, engine: str, include: tuple[str, ...], passed_over: list[str]
) -> tuple[Path, str]:
    """The Debian root bubblewrap starts the cell in (made if missing), and how it was had."""
    if engine not in ("auto", "bubblewrap"):
        raise Missing(f"the {engine} engine cannot run here: {'; '.join(passed_over)}")
    tools.ensure("bwrap", "bubblewrap")
    ok, why = bubblewrap.available()
    if not ok:
        raise Missing("; ".join([*passed_over, why]))
    if cell.distro != "debian":
        raise Missing(
            f"no {cell.distro} {cell.suite} root file system for bubblewrap "
            f"(debootstrap makes Debian only, and no engine could pull {cell.image})"
        )
    return rootfs.debian(cell.suite, cell.arch, include)
