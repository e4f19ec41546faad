"""`pynox doctor`: can this machine sandbox, and if not, exactly why.

It probes Landlock, seccomp, no_new_privs, pidfd_open and the capabilities a run
would drop, without changing its own process, so a hardened container is diagnosed
before a run fails.
"""

from __future__ import annotations

import errno
import json
import os
import sys

from pynox import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LANDLOCK_ABI_FLOOR = 3


def _landlock_reason(abi: int) -> str | None:
    if abi >= LANDLOCK_ABI_FLOOR:
        return None
    if abi > 0:
        return (
            f"Landlock ABI {abi} is older than the ABI {LANDLOCK_ABI_FLOOR} the sandbox needs; "
            "run on Linux 6.2 or newer"
        )
    err = -abi
    if err == 38:  # ENOSYS: no Landlock, or a container's seccomp profile says so
        return (
            "the kernel (or the emulator running this program) does not implement Landlock, "
            "or a container refuses its system calls; run on Linux 6.2 or newer, natively or "
            f"in a container that {_ALLOW_LANDLOCK}"
        )
    if err == 95:  # EOPNOTSUPP
        return "Landlock is built into the kernel but disabled at boot; add landlock to lsm="
    # EPERM and the like: an outer policy (a container's seccomp profile) refused the call.
    return (
        f"Landlock is unavailable ({os.strerror(err)}), as when a container's seccomp profile "
        f"refuses Landlock's system calls; run in a container that {_ALLOW_LANDLOCK}"
    )


_ALLOW_LANDLOCK = "allows landlock_create_ruleset, landlock_add_rule and landlock_restrict_self"


def _availability_reason(name: str, value: int, need: str) -> str | None:
    if value > 0:
        return None
    return f"{name} is unavailable ({os.strerror(-value)}); {need}"


def _capabilities_reason(droppable: int) -> str | None:
    """Every sandboxed run drops every capability this process holds, which takes
    CAP_SETPCAP: one started with some capabilities but not that one is refused."""
    if droppable > 0:
        return None
    if droppable != -errno.EPERM:
        return f"this process's capabilities cannot be read ({os.strerror(-droppable)})"
    return (
        "this process holds capabilities but not CAP_SETPCAP, which runs need to drop them "
        "all; start pynox with no capabilities (no ambient or file capabilities), or with "
        "CAP_SETPCAP too"
    )


def _scratch_reason(base: str) -> str | None:
    """Every sandboxed run makes a scratch directory there first: try it, as a run would."""
    from pynox.engine import scratch
    from pynox.errors import PolicyError

    try:
        scratch.refuse_if_shared(base)
    except PolicyError as exc:
        return exc.message
    path = scratch.new_name(base)
    try:
        os.mkdir(path, 0o700)
    except OSError as exc:
        return (
            f"runs cannot make their scratch directory in {base} ({exc.strerror}); set TMPDIR "
            "to a directory this user may write to"
        )
    os.rmdir(path)
    return None


def diagnose() -> dict[str, Any]:
    import platform
    import sysconfig

    from pynox.engine import scratch
    from pynox.engine.sandbox import probe

    found = probe()
    scratch_base = scratch.default_base()
    reasons = [
        reason
        for reason in (
            _landlock_reason(found["landlock_abi"]),
            _availability_reason(
                "seccomp filtering",
                found["seccomp_filter"],
                "the kernel needs CONFIG_SECCOMP_FILTER and no policy that forbids it",
            ),
            _availability_reason(
                "no_new_privs", found["no_new_privs"], "the kernel is too old (Linux 3.5+)"
            ),
            _availability_reason("pidfd_open", found["pidfd"], "timeouts need Linux 5.3 or newer"),
            _capabilities_reason(found["capabilities"]),
            _scratch_reason(scratch_base),
        )
        if reason is not None
    ]
    libc_name, libc_version = platform.libc_ver()
    return {
        "pynox": __version__,
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "architecture": platform.machine(),
        "platform_tag": sysconfig.get_platform().replace("-", "_").replace(".", "_"),
        "libc": f"{libc_name} {libc_version}".strip() or "musl",
        "kernel": platform.release(),
        "landlock_abi": found["landlock_abi"] if found["landlock_abi"] > 0 else None,
        "seccomp": found["seccomp_filter"] > 0,
        "no_new_privs": found["no_new_privs"] > 0,
        "pidfd": found["pidfd"] > 0,
        "scratch_directories": scratch_base,
        "sandbox_supported": not reasons,
        "sandbox_unavailable_reasons": reasons,
    }


def _describe(value: object) -> str:
    if value is True:
        return "available"
    if value is False:
        return "unavailable"
    if value is None:
        return "none"
    return str(value)


USAGE = """\
usage: pynox doctor [--json]

Tells whether this machine can sandbox, and if not, why: exit status 0 when it
can, 1 when it cannot. --json prints the same report as one JSON object.
"""


def doctor_command(argv: list[str]) -> int:
    if argv in (["--help"], ["-h"]):  # as `pynox mcp --help` answers
        sys.stdout.write(USAGE)
        return 0
    if argv not in ([], ["--json"]):
        from pynox.flag_refusal import flag_refused

        given = next(arg for arg in argv if arg != "--json") if argv[0] == "--json" else argv[0]
        raise flag_refused("pynox doctor", given.partition("=")[0], ["--json"])
    report = diagnose()
    status = 0 if report["sandbox_supported"] else 1
    if sys.stdout is None:  # started with standard output closed: the status still answers
        return status
    if argv == ["--json"]:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        for key, value in report.items():
            if key == "sandbox_unavailable_reasons":
                for reason in value:
                    sys.stdout.write(f"  reason: {reason}\n")
                continue
            if key == "sandbox_supported":
                value = "yes" if value else "no (pynox --no-sandbox still runs programs)"
            sys.stdout.write(f"{key}: {_describe(value)}\n")
    return status
