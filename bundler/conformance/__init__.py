"""The conformance runner: an installed bundle's suite, inside a container per cell.

A cell is a target in a root file system of the matching libc and architecture
(`cells`). The bundle is built or reused (`artifacts`), the container comes from
docker or podman when one answers, else bubblewrap over a debootstrap root
(`engines`, `rootfs`), and the bundle is installed there with install.sh and
tested with tests/conformance (`cell_run`). `python -m bundler.conformance CELL`.
"""
