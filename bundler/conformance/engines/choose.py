"""Which engine runs a cell: its own kernel under QEMU for a vm cell; else docker or podman
where one answers, else bubblewrap."""

from __future__ import annotations

from bundler.conformance import rootfs, tools, vmimages
from bundler.conformance.cells import Cell
from bundler.conformance.engines import bubblewrap, oci, vm
from bundler.conformance.engines.base import Container
from bundler.conformance.errors import Missing


def container(cell: Cell, engine: str, include: tuple[str, ...]) -> tuple[Container, list[str]]:
    """A started container for the cell, and why the engines before it were passed over."""
    passed_over: list[str] = []
    if cell.engine == "vm":
        boot = vmimages.boot(cell.kernel, cell.arch)
        disk, how = vmimages.root_disk(cell.suite, cell.arch, include)
        return vm.VMContainer(cell.cpu, boot, disk, how), passed_over
    for name in ("docker", "podman"):
        if engine not in ("auto", name):
            continue
        ok, why = oci.available(name, cell.image, cell.platform)
        if ok:
            return oci.OCIContainer(name, cell.image, cell.platform), passed_over
        passed_over.append(why)
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
    root, how = rootfs.debian(cell.suite, cell.arch, include)
    box = bubblewrap.BubblewrapContainer(root)
    box.root = how
    return box, passed_over
