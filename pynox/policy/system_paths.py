"""What the interpreter itself must read inside the sandbox, and nothing more.

The standard library with its extension modules, the shared libraries they
load, the pynox package, and a few read-only system facts Python consults
(time zone, CPU count, the entropy devices). The standard library is granted as
one tree: one Landlock rule instead of one per entry, which keeps a run's
start-up short. Where an interpreter keeps its own site-packages inside that
tree (python-build-standalone, pyenv), those files are readable too; sys.path
does not list them, and a bundle ships only pynox there.
"""

import os
import sys

from pynox import PACKAGE_DIR

# Read-only files and trees Python and libc consult at run time.
SYSTEM_FACTS = (
    "/etc/ld.so.cache",  # the dynamic loader's index, for extension modules' libraries
    "/etc/localtime",  # time.localtime() and friends
    "/usr/share/zoneinfo",  # zoneinfo
    "/usr/lib/locale",  # locale.setlocale(), with LANG passed through
    "/sys/devices/system/cpu",  # os.cpu_count()
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
)

# What the resolver reads to turn a host name into addresses: readable only
# to a program granted the network, which is the one that can use them.
RESOLVER_FILES = (
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
)

# Devices every program may write to as well as read.
DEVICES_READ_WRITE = ("/dev/null",)


def stdlib_dir() -> str:
    return os.path.dirname(os.__file__)


def library_dirs() -> list[str]:
    """The directories the dynamic loader takes shared libraries from."""
    multiarch = getattr(sys.implementation, "_multiarch", "")
    dirs = existing([f"/lib/{multiarch}", f"/usr/lib/{multiarch}"] if multiarch else [])
    if not dirs:
        # musl and other single-directory layouts keep libraries directly in /lib.
        dirs = existing(["/lib", "/usr/lib"])
    return dirs + existing(["/lib64", "/usr/lib64"])


def pynox_package_dir() -> str:
    return PACKAGE_DIR


def existing(paths: list[str] | tuple[str, ...]) -> list[str]:
    """Those that exist, without duplicates.

    Symbolic links need no resolving: the sandbox core opens each path and
    grants the file or directory it leads to.
    """
    seen: dict[str, None] = {}
    for path in paths:
        try:
            os.stat(path)
        except OSError:
            continue
        seen.setdefault(path, None)
    return list(seen)


def network_reads() -> list[str]:
    """The resolver's files that exist here, resolved (/etc/resolv.conf is often a link)."""
    return [os.path.realpath(path) for path in existing(RESOLVER_FILES)]


def interpreter_reads() -> list[str]:
    """Everything the interpreter reads, as existing real paths."""
    return existing([stdlib_dir(), *library_dirs(), pynox_package_dir(), *SYSTEM_FACTS])
