"""seccomp.c's rule table as data: built for a policy as pynox_sandbox_apply() builds it,
read back through pynox_seccomp_rules() and never installed. Every call that must be
refused is refused outright, no call has two rules, and consecutive denials are merged
into ranges; calls whose arguments decide have a rule of their own."""

from __future__ import annotations

import errno
from dataclasses import dataclass
from itertools import pairwise

import pytest
from support.syscalls import MACHINE, NR, TABLED

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(not TABLED, reason=f"no syscall table for {MACHINE}"),
]
core = pytest.importorskip("pynox._core", reason="the sandbox core is not built here")

SECCOMP_RET_ERRNO = 0x00050000
EPERM = SECCOMP_RET_ERRNO | errno.EPERM
ENOSYS = SECCOMP_RET_ERRNO | errno.ENOSYS

# Refused outright with EPERM whatever the arguments (seccomp.c's denied_syscalls).
DENIED = [
    # running other programs, making processes
    *("execve", "execveat", "fork", "vfork"),
    # namespaces, and reaching into other processes
    *("unshare", "setns", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp"),
    *("pidfd_getfd", "pidfd_send_signal", "process_madvise"),
    # mounts and the root directory
    *("mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "open_tree_attr"),
    *("fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "statmount", "listmount"),
    # kernel attack surface, and memory RLIMIT_AS does not count
    *("bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd"),
    *("memfd_create", "memfd_secret", "vmsplice", "io_uring_setup", "io_uring_enter"),
    *("io_uring_register", "io_setup", "lookup_dcookie", "uselib", "modify_ldt"),
    # administration of the machine
    *("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module"),
    *("reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "iopl", "ioperm"),
    *("settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname"),
    *("setdomainname", "vhangup", "syslog", "fanotify_init"),
    # watching and opening by handle what Landlock would not let through
    *("inotify_init", "inotify_init1", "inotify_add_watch", "open_by_handle_at"),
    "name_to_handle_at",
    # signals by thread id alone
    "tkill",
    # System V IPC and POSIX message queues
    *("shmget", "shmat", "shmdt", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl"),
    *("semget", "semop", "semctl", "semtimedop", "mq_open", "mq_unlink", "mq_timedsend"),
    *("mq_timedreceive", "mq_notify", "mq_getsetattr"),
    # extended attributes read by path, which Landlock does not cover
    *("getxattr", "lgetxattr", "listxattr", "llistxattr", "getxattrat", "listxattrat"),
    # metadata, which Landlock does not cover
    *("chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat"),
    *("setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr"),
    *("setxattrat", "removexattrat", "file_setattr", "utime", "utimes", "futimesat"),
    "utimensat",
]
# Refused outright with ENOSYS, so that the C library falls back to a call the filter
# can read (clone3 and openat2 pass their flags in memory).
FALL_BACK = ["clone3", "openat2"]
# Allowed or refused by their arguments: each has one rule that is not a plain denial.
BY_ARGUMENTS = [
    *("clone", "socket", "socketpair", "ioctl", "fcntl", "personality"),
    *("kill", "tgkill", "prlimit64", "setpriority", "setpgid", "openat"),
]
NETWORK = {"without-network": 0, "with-network": 1}


@dataclass(frozen=True)
class Rule:
    first: int
    last: int
    denied: bool
    action: int


def rules(merged: bool, allow_network: int, part: str = "WHOLE") -> list[Rule]:
    """The rule table for a policy with or without the network (pynox_seccomp_rules), or
    one part of it (enum pynox_filter_part: WHOLE, SHARED or OWN)."""
    ffi, lib = core.ffi, core.lib
    policy = ffi.new("struct pynox_policy *")
    policy.allow_network = allow_network
    err = ffi.new("char[]", 512)
    which = getattr(lib, f"PYNOX_FILTER_{part}")
    count = lib.pynox_seccomp_rules(policy, int(merged), which, ffi.NULL, 0, err, len(err))
    assert count >= 0, ffi.string(err).decode()
    table = ffi.new("struct pynox_seccomp_rule[]", count)
    got = lib.pynox_seccomp_rules(policy, int(merged), which, table, count, err, len(err))
    assert got == count
    return [Rule(r.first, r.last, bool(r.denied), r.action) for r in table]


def numbers(names: list[str]) -> dict[int, str]:
    """The numbers of the calls this architecture has, with their names."""
    return {number: name for name in names if (number := NR[name]) is not None}


def outright(table: list[Rule]) -> dict[int, int]:
    """Every number refused outright, with its action, ranges expanded."""
    return {n: r.action for r in table if r.denied for n in range(r.first, r.last + 1)}


@pytest.mark.parametrize("network", NETWORK.values(), ids=NETWORK.keys())
def test_every_denied_call_is_refused_outright_and_nothing_else(network: int) -> None:
    expected = dict.fromkeys(numbers(DENIED), EPERM) | dict.fromkeys(numbers(FALL_BACK), ENOSYS)
    if not network:
        expected |= dict.fromkeys(numbers(["bind", "listen"]), EPERM)
    names = numbers([*DENIED, *FALL_BACK, "bind", "listen"])
    for merged in (False, True):
        got = outright(rules(merged, network))
        assert sorted(names[n] for n in expected.keys() - got.keys()) == [], "not refused"
        assert sorted(got.keys() - expected.keys()) == [], "refused, but not in the lists"
        assert got == expected  # each with its errno


@pytest.mark.parametrize("network", NETWORK.values(), ids=NETWORK.keys())
def test_no_call_has_two_rules(network: int) -> None:
    collected = rules(merged=False, allow_network=network)
    firsts = [rule.first for rule in collected]
    duplicated = sorted({n for n in firsts if firsts.count(n) > 1})
    assert duplicated == [], f"calls with two rules: {duplicated}"
    assert all(rule.first == rule.last for rule in collected)


@pytest.mark.parametrize("network", NETWORK.values(), ids=NETWORK.keys())
def test_consecutive_denials_are_merged_into_ranges(network: int) -> None:
    collected = rules(merged=False, allow_network=network)
    merged = rules(merged=True, allow_network=network)
    # Sorted, without overlap, and nothing left to merge.
    for before, after in pairwise(merged):
        assert before.last < after.first, (before, after)
        mergeable = before.denied and after.denied and before.action == after.action
        assert not (mergeable and after.first == before.last + 1), (before, after)
    assert any(rule.last > rule.first for rule in merged), "no range was merged"
    # Merging lost and added nothing.
    assert outright(merged) == outright(collected)
    assert {r.first for r in merged if not r.denied} == {r.first for r in collected if not r.denied}
    assert len(merged) < len(collected)


@pytest.mark.parametrize("network", NETWORK.values(), ids=NETWORK.keys())
def test_calls_decided_by_their_arguments_have_one_rule_each(network: int) -> None:
    conditional = {r.first for r in rules(merged=True, allow_network=network) if not r.denied}
    missing = [name for number, name in numbers(BY_ARGUMENTS).items() if number not in conditional]
    assert missing == []


def test_the_network_decides_bind_listen_and_setsockopt() -> None:
    def kinds(network: int) -> dict[str, str]:
        table = {r.first: r for r in rules(merged=False, allow_network=network)}
        names = numbers(["bind", "listen", "setsockopt"])
        return {
            name: "none" if n not in table else "denied" if table[n].denied else "checked"
            for n, name in names.items()
        }

    # Without the network only socketpair() ends exist: no names, no bigger buffers.
    assert kinds(0) == {"bind": "denied", "listen": "denied", "setsockopt": "checked"}
    # With it, bind() must pass an IPv4 or IPv6 address's length.
    assert kinds(1) == {"bind": "checked", "listen": "none", "setsockopt": "none"}


# The rules only the process they confine can be given: no new process, and a pid that
# must be its own (seccomp.c's add_own_process_rules).
OWN_PROCESS = [
    *("clone", "kill", "rt_sigqueueinfo", "tgkill", "rt_tgsigqueueinfo", "prlimit64"),
    *("sched_setscheduler", "sched_setparam", "sched_setaffinity", "sched_setattr"),
    *("migrate_pages", "move_pages", "setpriority", "ioprio_set", "setpgid"),
]


@pytest.mark.parametrize("network", NETWORK.values(), ids=NETWORK.keys())
def test_the_shared_and_own_parts_split_the_whole_filter(network: int) -> None:
    """A pool's zygote installs the shared part and its spares add their own: together
    they must hold every rule of the whole filter, each in one part only."""
    whole = rules(merged=False, allow_network=network)
    shared = rules(merged=False, allow_network=network, part="SHARED")
    own = rules(merged=False, allow_network=network, part="OWN")
    assert sorted(shared + own, key=lambda r: r.first) == sorted(whole, key=lambda r: r.first)
    assert {r.first for r in shared}.isdisjoint(r.first for r in own)
    # The zygote forks under the shared part, and names no spare's pid in it.
    assert sorted(r.first for r in own) == sorted(numbers(OWN_PROCESS))
    # Each part builds into a filter the kernel would take.
    for part in ("SHARED", "OWN"):
        assert rules(merged=True, allow_network=network, part=part)


def test_an_unknown_part_is_refused() -> None:
    ffi, lib = core.ffi, core.lib
    policy = ffi.new("struct pynox_policy *")
    err = ffi.new("char[]", 512)
    assert lib.pynox_seccomp_rules(policy, 0, 7, ffi.NULL, 0, err, len(err)) == -1
    assert ffi.string(err).decode() == "no seccomp filter has a part 7"
