"""One uncaught denial per run, of every kind (files, processes, sockets, and a denial
behind another exception): python's traceback, then exactly one `pynox:` hint line."""

from __future__ import annotations

import json
import os
import pty
import sys

import pytest
from support.probes import World, hints, listings, run_probe, snapshot

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


ASYNCIO_SERVER = (
    "import asyncio\n"
    "async def serve():\n"
    "    server = await asyncio.start_server(lambda r, w: None, '127.0.0.1', 0)\n"
    "    print(len(server.sockets))\n"
    "asyncio.run(serve())"
)
# Before 3.13, start_server makes a server without sockets where it could make none, and
# raises nothing: the program goes on, under pynox as under python, with nothing to hint at.
ASYNCIO_RAISES_WITHOUT_SOCKETS = sys.version_info >= (3, 13)

# pty.openpty()'s error once os.openpty() failed: the old BSD devices it falls back on,
# where its Python has that fallback, say "out of pty devices"; else os.openpty()'s.
PTY_ERROR = "OSError" if hasattr(pty, "_open_terminal") else "PermissionError"

# One uncaught attempt per run: python's traceback, then pynox's hint line.
HINTED = [
    (
        "read-etc-passwd",
        "open('/etc/passwd').read()",
        "PermissionError",
        "reading /etc/passwd is not allowed; grant it with --allow-read=/etc/passwd",
    ),
    (
        "read-home-secret",
        "open(W['secret']).read()",
        "PermissionError",
        "reading {secret} is not allowed; grant it with --allow-read={secret}",
    ),
    (
        "create-outside",
        "open(W['outside'] + '/new.txt', 'w')",
        "PermissionError",
        "changing the entries of {outside} is not allowed; grant it with --allow-write={outside}",
    ),
    (
        "unlink-outside",
        "os.unlink(W['victim'])",
        "PermissionError",
        "changing the entries of {outside} is not allowed; grant it with --allow-write={outside}",
    ),
    (
        "append-outside",
        "open(W['victim'], 'a')",
        "PermissionError",
        "writing {victim} is not allowed; grant it with --allow-write={victim}",
    ),
    (
        "truncate-outside",
        "os.truncate(W['victim'], 0)",
        "PermissionError",
        "writing {victim} is not allowed; grant it with --allow-write={victim}",
    ),
    (
        "write-into-read-only-dir",
        "open(W['ro'] + '/new.txt', 'w')",
        "PermissionError",
        "changing the entries of {ro} is not allowed; grant it with --allow-write={ro}",
    ),
    (
        "read-from-write-only-dir",
        "open(W['wo_file']).read()",
        "PermissionError",
        # Written files are read back from their write tree: that is what to grant.
        "reading {wo} is not allowed; grant it with --allow-read={wo}",
    ),
    (
        "chmod-script",
        "os.chmod(__file__, 0o777)",
        "PermissionError",
        "METADATA",
    ),
    # Before Python 3.13, os.utime's error names no file: the same refusal and hint.
    ("utime-read-grant", "os.utime(W['ro_file'], (0, 0))", "PermissionError", "METADATA"),
    # A descriptor in place of the path: the same refusal, with no path to name.
    (
        "chmod-descriptor",
        "os.chmod(os.open(__file__, os.O_RDONLY), 0o777)",
        "PermissionError",
        "METADATA",
    ),
    (
        "futimens-write-grant",
        "os.utime(os.open(W['wo_file'], os.O_WRONLY), (0, 0))",
        "PermissionError",
        "METADATA",
    ),
    (
        "shutil-copy2",
        "import shutil; shutil.copy2(W['ro_file'], W['rw'] + '/copy.txt')",
        "PermissionError",
        "METADATA",
    ),
    # Extended attributes are read through a file the program opened, never by path.
    ("getxattr-by-path", "os.getxattr(W['ro_file'], 'user.pynox')", "PermissionError", "XATTR"),
    ("listxattr-by-path", "os.listxattr(W['secret'])", "PermissionError", "XATTR"),
    ("os-fork", "os.fork()", "PermissionError", "PROCESS"),
    ("os-system", "os.system('true')", "PermissionError", "PROCESS"),
    ("subprocess-run", "import subprocess; subprocess.run(['true'])", "PermissionError", "PROCESS"),
    ("posix-spawn", "os.posix_spawn('/bin/true', ['true'], {})", "PermissionError", "PROCESS"),
    ("os-execv", "os.execv('/bin/true', ['true'])", "PermissionError", "PROCESS"),
    ("os-forkpty", "os.forkpty()", "PermissionError", "PROCESS"),
    # Refused by seccomp whatever the grants, with no audit event: told by the call.
    ("setpgid-other-group", "os.setpgid(0, 1)", "PermissionError", "JOB"),
    (
        "setpgid-renamed",
        "from os import setpgid as join\njoin(\n    0,\n    os.getppid(),\n)",
        "PermissionError",
        "JOB",
    ),
    (
        "fcntl-o-async",
        "import fcntl; r, w = os.pipe()\n"
        "fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)",
        "PermissionError",
        "IO_SIGNALS",
    ),
    (
        "fcntl-f-setown",
        "import fcntl; fcntl.fcntl(os.pipe()[0], fcntl.F_SETOWN, os.getpid())",
        "PermissionError",
        "IO_SIGNALS",
    ),
    (
        "ioctl-fiosetown",
        "import fcntl, struct; fcntl.ioctl(os.pipe()[0], 0x8901, struct.pack('i', os.getpid()))",
        "PermissionError",
        "IO_SIGNALS",
    ),
    # Memory no limit counts, a lease, another process, a namespace: refused whatever the
    # grants, by a call with no audit event, an fcntl command, or another process's id.
    ("memfd-create", "os.memfd_create('buffer')", "PermissionError", "MEMFD"),
    (
        "fcntl-f-setpipe-sz",
        "import fcntl; fcntl.fcntl(os.pipe()[1], fcntl.F_SETPIPE_SZ, 1 << 20)",
        "PermissionError",
        "PIPE_SIZE",
    ),
    (
        "fcntl-f-setlease",
        "import fcntl; fcntl.fcntl(os.open(W['ro_file'], os.O_RDONLY), fcntl.F_SETLEASE, "
        "fcntl.F_RDLCK)",
        "PermissionError",
        "LEASE",
    ),
    ("kill-init", "os.kill(1, 0)", "PermissionError", "OTHER_PROCESS"),
    (
        "kill-parent",
        "import signal; os.kill(os.getppid(), signal.SIGTERM)",
        "PermissionError",
        "OTHER_PROCESS",
    ),
    ("killpg-parent", "os.killpg(os.getpgid(os.getppid()), 0)", "PermissionError", "OTHER_PROCESS"),
    (
        "prlimit-parent",
        "import resource; resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE)",
        "PermissionError",
        "OTHER_PROCESS",
    ),
    (
        "pidfd-send-signal",
        "import signal; signal.pidfd_send_signal(os.pidfd_open(os.getpid()), 0)",
        "PermissionError",
        "OTHER_PROCESS",
    ),
    # The path of a refused chroot is not what to grant.
    ("chroot", "os.chroot('/')", "PermissionError", "NAMESPACES"),
    # No capabilities, even for root: only the program's own ids are left to set.
    ("setuid", "os.setuid(os.getuid() + 1)", "PermissionError", "USER_IDS"),
    ("setgid", "os.setgid(os.getgid() + 1)", "PermissionError", "USER_IDS"),
    ("setgroups", "os.setgroups([os.getgid() + 1])", "PermissionError", "USER_IDS"),
    (
        "clock-settime",
        "import time; time.clock_settime(time.CLOCK_REALTIME, time.time())",
        "PermissionError",
        "CLOCK",
    ),
    ("sethostname", "import socket; socket.sethostname('sandbox')", "PermissionError", "HOST"),
    # /dev/ptmx: refused by path, by os.openpty, and by pty.openpty's fallback (no errno).
    ("os-openpty", "os.openpty()", "PermissionError", "PSEUDO_TERMINAL"),
    ("pty-openpty", "import pty; pty.openpty()", PTY_ERROR, "PSEUDO_TERMINAL"),
    ("open-ptmx", "open('/dev/ptmx', 'r+b')", "PermissionError", "PSEUDO_TERMINAL"),
    # A terminal for a child process: the process is what never runs.
    ("pty-spawn", "import pty; pty.spawn(['true'])", PTY_ERROR, "PROCESS"),
    (
        "socketpair-sndbuf",
        "import socket; a, b = socket.socketpair()\n"
        "a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)",
        "PermissionError",
        "SOCKET_BUFFERS",
    ),
    (
        "socket-inet",
        "import socket; socket.socket()",
        "PermissionError",
        "the network is off; grant it with --allow-network",
    ),
    (
        "socket-unix",
        "import socket; socket.socket(socket.AF_UNIX)",
        "PermissionError",
        "Unix sockets of the host are never allowed in the sandbox",
    ),
    (
        "socket-netlink",
        "import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)",
        "PermissionError",
        "only IPv4 and IPv6 sockets can be allowed in the sandbox",
    ),
    # A raw socket needs a privilege the sandbox never has: the network would not help.
    (
        "socket-raw",
        "import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)",
        "PermissionError",
        "RAW_SOCKET",
    ),
    # Without the network no name resolves, not even localhost.
    (
        "resolve-without-network",
        "import socket; socket.getaddrinfo('localhost', 80)",
        "socket.gaierror",
        "the network is off; grant it with --allow-network",
    ),
    # The denial behind another exception: urllib's, SQLite's, the program's own.
    (
        "urllib-without-network",
        "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9/')",
        "urllib.error.URLError",
        "the network is off; grant it with --allow-network",
    ),
    (
        "sqlite-outside",
        "import sqlite3; sqlite3.connect(W['secret']).execute('select 1')",
        "sqlite3.OperationalError",
        "reading {secret} is not allowed; grant it with --allow-read={secret}",
    ),
    (
        "sqlite-create-outside",
        "import sqlite3; sqlite3.connect(W['outside'] + '/new.db').execute('select 1')",
        "sqlite3.OperationalError",
        "the program reads back what it writes in {outside}; grant both with "
        "--allow-read={outside} --allow-write={outside}",
    ),
    (
        "denial-as-cause",
        "try:\n    open(W['secret']).read()\n"
        "except PermissionError as exc:\n    raise RuntimeError('no settings') from exc",
        "RuntimeError",
        "reading {secret} is not allowed; grant it with --allow-read={secret}",
    ),
]
if hasattr(os, "unshare"):  # Python 3.12 and later
    HINTED.append(("unshare", "os.unshare(os.CLONE_NEWUSER)", "PermissionError", "NAMESPACES"))
if ASYNCIO_RAISES_WITHOUT_SOCKETS:
    # asyncio passes over the sockets it could not make: an OSError with no errno.
    HINTED.append(
        (
            "asyncio-server-without-network",
            ASYNCIO_SERVER,
            "OSError",
            "the network is off; grant it with --allow-network",
        )
    )
METADATA_HINT = (
    "changing file modes, owners, times or extended attributes is never allowed in the "
    "sandbox; write the file's contents instead (shutil.copyfile rather than shutil.copy, "
    "given the new file's path: copyfile takes no folder)"
)
XATTR_HINT = (
    "reading extended attributes by path is never allowed in the sandbox; read them from a "
    "file the program opened (os.getxattr(fd, name), os.listxattr(fd))"
)
JOB_CONTROL_HINT = (
    "changing process groups (os.setpgid, os.setpgrp, os.tcsetpgrp) is not available in the "
    "sandbox, where no other process runs to need job control; there is nothing to grant, "
    "leave it out"
)
IO_SIGNALS_HINT = (
    "signal-driven I/O (O_ASYNC, fcntl's F_SETOWN and F_SETSIG) is never allowed in the "
    "sandbox: its signals could reach processes outside it, there is nothing to grant; wait "
    "for the descriptor with selectors, asyncio or a thread instead"
)
OTHER_PROCESS_HINT = (
    "signals and resource limits reach only the program's own process in the sandbox "
    "(os.kill(os.getpid(), sig), resource.prlimit(0, ...)): no other process can be signalled "
    "or changed, and there is nothing to grant"
)
MEMFD_HINT = (
    "os.memfd_create is never allowed in the sandbox: the memory it holds would escape the "
    "sandbox's limits, and there is nothing to grant; keep the data in memory (io.BytesIO) "
    "or, where a file descriptor is needed, in a file in the run's scratch directory "
    "(tempfile.TemporaryFile())"
)
PIPE_SIZE_HINT = (
    "resizing a pipe (fcntl's F_SETPIPE_SZ) is never allowed in the sandbox: its buffer would "
    "escape the sandbox's limits, and there is nothing to grant; pipes keep their default "
    "size, so read from the other end while writing (in a thread), or pass the data through a "
    "file in the run's scratch directory"
)
LEASE_HINT = (
    "file leases (fcntl's F_SETLEASE) are never allowed in the sandbox: they would make "
    "programs outside it wait to open the file, and there is nothing to grant; lock the file "
    "with fcntl.flock or fcntl.lockf instead"
)
NAMESPACES_HINT = (
    "changing namespaces or the root directory (os.unshare, os.setns, os.chroot) is never "
    "allowed in the sandbox; there is nothing to grant, leave it out"
)
SOCKET_BUFFERS_HINT = (
    "socket buffer sizes (SO_SNDBUF, SO_RCVBUF) cannot be changed in the sandbox without the "
    "network: the memory they hold would escape the sandbox's limits; leave them at their "
    "defaults"
)
RAW_SOCKET_HINT = (
    "raw sockets (SOCK_RAW) are never allowed in the sandbox, which runs without the "
    "privilege they take; there is nothing to grant: use TCP or UDP sockets (SOCK_STREAM, "
    "SOCK_DGRAM) instead"
)
USER_IDS_HINT = (
    "changing the program's user or groups (os.setuid, os.setgid, os.setgroups and the like) "
    "is never allowed in the sandbox, which runs without the privileges it takes; there is "
    "nothing to grant: leave it out, the program already runs as the user who started pynox"
)
CLOCK_HINT = (
    "setting the system clock (time.clock_settime, settimeofday) is never allowed in the "
    "sandbox, and there is nothing to grant; keep the time the program needs in a variable "
    "instead (an offset added to time.time(), or a datetime)"
)
HOST_NAME_HINT = (
    "changing the machine's host name (socket.sethostname) is never allowed in the sandbox, "
    "and there is nothing to grant; leave it out, or keep the name the program needs in a "
    "variable"
)
PSEUDO_TERMINAL_HINT = (
    "pseudo-terminals (os.openpty, pty.openpty) are never available in the sandbox, and there "
    "is nothing to grant; where the program needs a pair of connected descriptors, use "
    "os.pipe() or socket.socketpair() instead"
)
PROCESS_HINT = (
    "processes (subprocess, os.system, os.fork, multiprocessing, ProcessPoolExecutor) never "
    "run in the sandbox, threads do: use concurrent.futures.ThreadPoolExecutor or threading, "
    "or do the work in this program"
)


@pytest.mark.parametrize(
    ("code", "exc", "hint"), [h[1:] for h in HINTED], ids=[h[0] for h in HINTED]
)
def test_uncaught_denial_prints_the_hint(world: World, code: str, exc: str, hint: str) -> None:
    before = {p: snapshot(p) for p in (world.victim, world.secret, world.ro_file)}
    listing = listings(world)
    proc = run_probe(world, code + "\nprint('not reached')\n", *world.grants())
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 1, err
    assert proc.stdout == b""
    assert err.startswith("Traceback (most recent call last):\n"), err
    last_python_line = [ln for ln in err.splitlines() if not ln.startswith("pynox:")][-1]
    assert last_python_line.startswith(exc + ":"), err
    named = {
        "PROCESS": PROCESS_HINT,
        "METADATA": METADATA_HINT,
        "XATTR": XATTR_HINT,
        "JOB": JOB_CONTROL_HINT,
        "IO_SIGNALS": IO_SIGNALS_HINT,
        "OTHER_PROCESS": OTHER_PROCESS_HINT,
        "MEMFD": MEMFD_HINT,
        "PIPE_SIZE": PIPE_SIZE_HINT,
        "LEASE": LEASE_HINT,
        "NAMESPACES": NAMESPACES_HINT,
        "SOCKET_BUFFERS": SOCKET_BUFFERS_HINT,
        "RAW_SOCKET": RAW_SOCKET_HINT,
        "USER_IDS": USER_IDS_HINT,
        "CLOCK": CLOCK_HINT,
        "HOST": HOST_NAME_HINT,
        "PSEUDO_TERMINAL": PSEUDO_TERMINAL_HINT,
    }
    expected = named[hint] if hint in named else hint.format(**world.paths())
    assert hints(proc) == ["pynox: " + expected]
    assert err.endswith("pynox: " + expected + "\n")
    assert {p: snapshot(p) for p in before} == before
    listing["app"] = sorted(set(listing["app"]) | {"probe.py"})
    assert listings(world) == listing


# Hints that name no grant but another way to do the same: the refused code, then what the
# hint says to write instead, and what that prints under the same grants.
FOLLOWED = [
    (
        "copy2-then-copyfile",
        "shutil.copy2(W['ro_file'], W['rw'] + '/copy.txt')",
        "shutil.copyfile(W['ro_file'], W['rw'] + '/copy.txt')\n"
        "print(open(W['rw'] + '/copy.txt').read(), end='')",
        "read-only contents\n",
    ),
    (
        "getxattr-by-descriptor",
        "os.getxattr(W['ro_file'], 'user.pynox')",
        "print(os.getxattr(os.open(W['ro_file'], os.O_RDONLY), 'user.pynox'))",
        "b'kept'\n",
    ),
    (
        "o-async-then-selectors",
        "import fcntl; r, w = os.pipe()\n"
        "fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)",
        "import selectors; r, w = os.pipe(); os.write(w, b'x')\n"
        "s = selectors.DefaultSelector(); s.register(r, selectors.EVENT_READ)\n"
        "print([key.fd == r for key, _ in s.select(1)])",
        "[True]\n",
    ),
    (
        "memfd-then-temporary-file",
        "os.memfd_create('buffer')",
        "import tempfile; f = tempfile.TemporaryFile(); os.write(f.fileno(), b'kept')\n"
        "print(os.pread(f.fileno(), 4, 0))",
        "b'kept'\n",
    ),
    (
        "memfd-then-bytesio",
        "os.memfd_create('buffer')",
        "import io; buffer = io.BytesIO(); buffer.write(b'kept'); print(buffer.getvalue())",
        "b'kept'\n",
    ),
    (
        "pipe-size-then-reading-in-a-thread",
        "import fcntl; r, w = os.pipe(); fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)",
        "import threading; r, w = os.pipe(); chunks = []\n"
        "def drain():\n"
        "    while chunk := os.read(r, 1 << 16):\n"
        "        chunks.append(chunk)\n"
        "reader = threading.Thread(target=drain); reader.start()\n"
        "os.write(w, bytes(1 << 20)); os.close(w); reader.join()\n"
        "print(sum(map(len, chunks)))",
        "1048576\n",
    ),
    (
        "lease-then-flock",
        "import fcntl; fd = os.open(W['ro_file'], os.O_RDONLY)\n"
        "fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)",
        "import fcntl; fd = os.open(W['ro_file'], os.O_RDONLY)\n"
        "fcntl.flock(fd, fcntl.LOCK_SH); print('locked')",
        "locked\n",
    ),
    (
        "clock-then-offset",
        "import time; time.clock_settime(time.CLOCK_REALTIME, time.time() + 3600)",
        "import time; now = time.time() + 3600; print(now > time.time())",
        "True\n",
    ),
    (
        "openpty-then-pipe",
        "import pty; reader, writer = pty.openpty()",
        "reader, writer = os.pipe(); os.write(writer, b'line\\n'); print(os.read(reader, 5))",
        "b'line\\n'\n",
    ),
    (
        "kill-other-then-own",
        "import signal; os.kill(os.getppid(), signal.SIGUSR1)",
        "import signal; signal.signal(signal.SIGUSR1, lambda *_: print('signalled'))\n"
        "os.kill(os.getpid(), signal.SIGUSR1)",
        "signalled\n",
    ),
    (
        "prlimit-other-then-own",
        "import resource; resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE)",
        "import resource; print(resource.prlimit(0, resource.RLIMIT_NOFILE) == "
        "resource.getrlimit(resource.RLIMIT_NOFILE))",
        "True\n",
    ),
]


@pytest.mark.parametrize(
    ("refused", "instead", "printed"), [f[1:] for f in FOLLOWED], ids=[f[0] for f in FOLLOWED]
)
def test_doing_what_the_hint_says_works(
    world: World, refused: str, instead: str, printed: str
) -> None:
    try:
        os.setxattr(world.ro_file, "user.pynox", b"kept")
    except OSError as exc:
        if "getxattr" in refused:
            pytest.skip(f"the tests' file system keeps no user extended attributes: {exc}")
    proc = run_probe(world, "import shutil\n" + refused, *world.grants())
    assert proc.returncode == 1 and len(hints(proc)) == 1, proc.stderr
    proc = run_probe(world, "import shutil\n" + instead, *world.grants())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == printed


def test_granting_the_network_lets_a_name_resolve(world: World) -> None:
    """The hint of a name lookup without the network, followed: --allow-network."""
    code = "import socket\nprint(socket.getaddrinfo('localhost', 80)[0][4][1])\n"
    refused = run_probe(world, code, *world.grants())
    assert hints(refused) == ["pynox: the network is off; grant it with --allow-network"]
    granted = run_probe(world, code, *world.grants(), "--allow-network")
    assert granted.returncode == 0, granted.stderr
    assert granted.stdout == b"80\n" and hints(granted) == []


@pytest.mark.parametrize(
    "name",
    [
        "memfd-create",
        "fcntl-f-setpipe-sz",
        "fcntl-f-setlease",
        "kill-parent",
        "chroot",
        "setuid",
        "clock-settime",
        "pty-openpty",
    ],
)
def test_a_json_result_has_the_hint_the_line_gives(world: World, name: str) -> None:
    code = next(h[1] for h in HINTED if h[0] == name)
    line = hints(run_probe(world, code, *world.grants()))
    result = json.loads(run_probe(world, code, "--json", *world.grants()).stdout)
    assert len(line) == 1 and line[0] == "pynox: " + result["error"]["hint"]


def test_granting_the_network_lets_asyncio_serve(world: World) -> None:
    refused = run_probe(world, ASYNCIO_SERVER, *world.grants())
    if ASYNCIO_RAISES_WITHOUT_SOCKETS:
        assert hints(refused) == ["pynox: the network is off; grant it with --allow-network"]
    else:
        assert refused.stdout.startswith(b"0\n") and hints(refused) == [], refused
    granted = run_probe(world, ASYNCIO_SERVER, *world.grants(), "--allow-network")
    assert granted.returncode == 0, granted.stderr
    assert granted.stdout == b"1\n" and hints(granted) == []


# asyncio.TaskGroup (3.11 on) raises what its tasks raised as one exception group.
TASK_GROUP_READ = (
    "import asyncio\n"
    "async def read():\n"
    "    return open(W['secret']).read()\n"
    "async def main():\n"
    "    async with asyncio.TaskGroup() as group:\n"
    "        group.create_task(asyncio.sleep(0))\n"
    "        task = group.create_task(read())\n"
    "    print(len(task.result()))\n"
    "asyncio.run(main())"
)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.TaskGroup is new in 3.11")
def test_a_denial_in_an_exception_group_gets_its_hint(world: World) -> None:
    """A denial in an exception group (a task group's) got no hint, as if nothing had been
    refused: the group's hint is that of the first error in it that has one."""
    refused = run_probe(world, TASK_GROUP_READ, *world.grants())
    err = refused.stderr.decode(errors="replace")
    assert refused.returncode == 1, err
    assert "| ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)\n" in err
    hint = "reading {secret} is not allowed; grant it with --allow-read={secret}"
    expected = hint.format(**world.paths())
    assert hints(refused) == ["pynox: " + expected]
    assert err.endswith("    +------------------------------------\npynox: " + expected + "\n")
    result = json.loads(run_probe(world, TASK_GROUP_READ, "--json", *world.grants()).stdout)
    error = result["error"]
    assert (error["type"], error["path"], error["hint"]) == (
        "ExceptionGroup",
        str(world.secret),
        expected,
    )
    granted = run_probe(world, TASK_GROUP_READ, *world.grants(), f"--allow-read={world.secret}")
    assert granted.returncode == 0, granted.stderr
    assert granted.stdout == f"{len(world.secret.read_text())}\n".encode()


# Before 3.11, anyio and trio raise the groups of the exceptiongroup backport (which pytest
# needs there too, so the tests' environment has it). Raised outside the handler, as a task
# group raises its tasks' errors: not while handling the denial, which has a hint of its own.
BACKPORT_GROUP_READ = (
    "from exceptiongroup import ExceptionGroup\n"
    "errors = []\n"
    "try:\n"
    "    print(len(open(W['secret']).read()))\n"
    "except OSError as exc:\n"
    "    errors.append(exc)\n"
    "if errors:\n"
    "    raise ExceptionGroup('reads failed', errors)\n"
)


@pytest.mark.skipif(
    sys.version_info >= (3, 11), reason="from 3.11 on, the backport's groups are the builtin ones"
)
def test_a_denial_in_a_backport_exception_group_gets_its_hint(world: World) -> None:
    """As in a builtin group: the exceptiongroup backport's groups got no hint on 3.10."""
    exceptiongroup = pytest.importorskip("exceptiongroup")
    packages = f"--package-dir={os.path.dirname(os.path.dirname(exceptiongroup.__file__))}"
    refused = run_probe(world, BACKPORT_GROUP_READ, *world.grants(), packages)
    err = refused.stderr.decode(errors="replace")
    assert refused.returncode == 1, err
    assert "ExceptionGroup: reads failed (1 sub-exception)" in err
    expected = "reading {secret} is not allowed; grant it with --allow-read={secret}"
    expected = expected.format(**world.paths())
    assert hints(refused) == ["pynox: " + expected]
    result = json.loads(
        run_probe(world, BACKPORT_GROUP_READ, "--json", *world.grants(), packages).stdout
    )
    assert result["error"]["hint"] == expected
    granted = run_probe(
        world, BACKPORT_GROUP_READ, *world.grants(), packages, f"--allow-read={world.secret}"
    )
    assert granted.returncode == 0, granted.stderr
    assert granted.stdout == f"{len(world.secret.read_text())}\n".encode()


SOCKET_PAIR_HINT = (
    "only socket pairs of Unix stream sockets (SOCK_STREAM, SOCK_SEQPACKET) are allowed in "
    "the sandbox: a datagram one could send to the host's Unix sockets, and there is nothing "
    "to grant; use socket.socketpair() with its defaults"
)


def test_a_datagram_socket_pair_gets_its_hint_and_the_default_pair_works(world: World) -> None:
    refused = run_probe(
        world, "import socket\nsocket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
    )
    assert hints(refused) == ["pynox: " + SOCKET_PAIR_HINT]
    code = "import socket\na, b = socket.socketpair()\na.send(b'x')\nprint(b.recv(1))\n"
    followed = run_probe(world, code)
    assert followed.returncode == 0 and followed.stdout == b"b'x'\n", followed.stderr


def test_a_socket_pairs_refused_listen_is_not_called_a_host_socket(world: World) -> None:
    """The pair was made: what was refused next is no Unix socket of the host."""
    proc = run_probe(world, "import socket\na, b = socket.socketpair()\na.listen()\n")
    assert proc.returncode == 1 and b"PermissionError" in proc.stderr
    assert hints(proc) == []


def test_a_raw_socket_gets_its_hint_with_the_network_granted_too(world: World) -> None:
    code = (
        "import socket; socket.socket(socket.AF_INET6, socket.SOCK_RAW | socket.SOCK_CLOEXEC, 58)"
    )
    proc = run_probe(world, code, *world.grants(), "--allow-network")
    assert proc.returncode == 1
    assert hints(proc) == ["pynox: " + RAW_SOCKET_HINT]
