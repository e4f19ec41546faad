"""Sockets and the network: loopback TCP and name resolution only with --allow-network;
never a host Unix socket, by path, by abstract name or through a socketpair() end."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.commands import pynox, python
from support.hints import follow
from support.pool_client import PoolClient
from support.probes import PRELUDE, World, outcomes, run_in_pool, run_probe

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


def _tcp_server() -> tuple[socket.socket, list[bytes], threading.Thread, threading.Event]:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)
    seen: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                data = conn.recv(100)
                seen.append(data)
                conn.sendall(b"pong:" + data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, seen, thread, stop


TCP_PROBE = """
import socket
port = int(W["port"])
def talk():
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"ping")
        return s.recv(100)
attempt("tcp-loopback", talk)
attempt("udp-socket", socket.socket, socket.AF_INET, socket.SOCK_DGRAM)
attempt("inet6-socket", socket.socket, socket.AF_INET6, socket.SOCK_STREAM)
attempt("raw-inet-socket", socket.socket, socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
attempt("packet-socket", socket.socket, socket.AF_PACKET, socket.SOCK_RAW)
attempt("netlink-socket", socket.socket, socket.AF_NETLINK, socket.SOCK_RAW)
attempt("unix-socket", socket.socket, socket.AF_UNIX, socket.SOCK_STREAM)
attempt("alg-socket", socket.socket, socket.AF_ALG, socket.SOCK_SEQPACKET)
attempt("vsock-socket", socket.socket, socket.AF_VSOCK, socket.SOCK_STREAM)
"""


@pytest.mark.parametrize("mode", ["command", "pool"])
@pytest.mark.parametrize("network", [True, False], ids=["with-allow-network", "without"])
def test_loopback_tcp_needs_allow_network(world: World, network: bool, mode: str) -> None:
    server, seen, thread, stop = _tcp_server()
    with server:
        port = server.getsockname()[1]
        flags = ["--allow-network"] if network else []
        script = world.app / "probe.py"
        script.write_text(PRELUDE + TCP_PROBE)
        paths = dict(world.paths(), port=port)
        if mode == "pool":
            world.paths = lambda: paths  # type: ignore[method-assign]
            proc = run_in_pool(world, script, [], [], network=network)
        else:
            proc = pynox(*flags, str(script), json.dumps(paths), cwd=world.app)
        time.sleep(0.1)
        stop.set()
        thread.join(10)
    lines = outcomes(proc)
    assert proc.returncode == 0, proc.stderr
    never = "PermissionError EPERM"
    off = "PermissionError EACCES"
    expected = {
        "tcp-loopback": "ok b'pong:ping'" if network else off,
        "udp-socket": lines["udp-socket"] if network else off,
        "inet6-socket": lines["inet6-socket"] if network else off,
        # No CAP_NET_RAW even with the network granted.
        "raw-inet-socket": never if network else off,
        "packet-socket": never,
        "netlink-socket": never,
        "unix-socket": never,
        "alg-socket": never,
        "vsock-socket": never,
    }
    assert lines == expected
    if network:
        assert lines["udp-socket"].startswith("ok <socket.socket")
        assert seen == [b"ping"]
    else:
        assert seen == []


RESOLVE_PROBE = """
import socket
try:
    print(sorted({info[4][0] for info in socket.getaddrinfo("localhost", 80, socket.AF_INET)}))
except OSError as exc:
    print(type(exc).__name__)
"""


@pytest.mark.parametrize("network", [True, False], ids=["with-allow-network", "without"])
def test_name_resolution_comes_with_the_network(world: World, network: bool) -> None:
    """--allow-network alone resolves names (the resolver's files come with it)."""
    if not Path("/etc/hosts").exists():
        pytest.skip("this machine has no /etc/hosts")
    script = world.app / "resolve.py"
    script.write_text(RESOLVE_PROBE)
    flags = ["--allow-network"] if network else []
    proc = pynox(*flags, str(script), cwd=world.app)
    assert proc.returncode == 0, proc.stderr
    expected = subprocess.run(
        [sys.executable, "-I", str(script)], capture_output=True, text=True, check=True
    ).stdout
    output = proc.stdout.decode()
    if network:
        assert output == expected
        assert "127.0.0.1" in output
    else:
        # /etc/hosts is not readable: no address comes back.
        assert output == "gaierror\n"


@pytest.fixture
def unix_listeners(world: World) -> Iterator[tuple[Path, Path, Callable[[], list[bytes]]]]:
    """A stream listener and a datagram receiver of the host, outside every grant.

    In a directory of their own with a short path: a socket's path has at most 107
    bytes, and a test's temporary directory can be longer than that.
    """
    sockets = Path(tempfile.mkdtemp(prefix=f"pynox-{world.tag[:8]}-"))
    stream_path = sockets / "service.sock"
    dgram_path = sockets / "dgram.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(stream_path))
    listener.listen(5)
    listener.setblocking(False)
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(str(dgram_path))
    receiver.setblocking(False)

    def reached() -> list[bytes]:
        """Everything that arrived: accepted connections' data and datagrams."""
        time.sleep(0.1)
        got = []
        while True:
            try:
                conn, _ = listener.accept()
            except BlockingIOError:
                break
            with conn:
                conn.settimeout(1)
                got.append(b"connection: " + conn.recv(100))
        while True:
            try:
                got.append(receiver.recv(100))
            except BlockingIOError:
                break
        return got

    with listener, receiver:
        yield stream_path, dgram_path, reached
    shutil.rmtree(sockets)


def test_unix_sockets_cannot_be_created(world: World, unix_listeners) -> None:  # type: ignore[no-untyped-def]
    stream_path, dgram_path, reached = unix_listeners
    proc = run_probe(
        world,
        f"""
        import socket
        def connect(kind, path):
            s = socket.socket(socket.AF_UNIX, kind)
            s.connect(path)
            s.sendall(b"from the sandbox")
        attempt("connect-stream", connect, socket.SOCK_STREAM, {str(stream_path)!r})
        attempt("connect-dgram", connect, socket.SOCK_DGRAM, {str(dgram_path)!r})
        attempt("abstract-socket", socket.socket, socket.AF_UNIX, socket.SOCK_DGRAM)
        a, b = socket.socketpair()
        attempt("socketpair-works", lambda: (a.sendall(b"x"), b.recv(1))[1])
    """,
    )
    assert proc.returncode == 0, proc.stderr
    assert outcomes(proc) == {
        "connect-stream": "PermissionError EPERM",
        "connect-dgram": "PermissionError EPERM",
        "abstract-socket": "PermissionError EPERM",
        "socketpair-works": "ok b'x'",
    }
    assert reached() == []


def test_socketpair_ends_cannot_reach_host_unix_sockets(world: World, unix_listeners) -> None:  # type: ignore[no-untyped-def]
    """socketpair() stays allowed for asyncio; its ends must not become a way out.

    A datagram socket may name any destination in sendto() and may connect()
    again, so an AF_UNIX SOCK_DGRAM pair would reach every datagram socket of
    the host by path (/dev/log, the journal, sd_notify sockets...): such pairs
    are refused outright, and connected pairs cannot connect elsewhere.
    """
    stream_path, dgram_path, reached = unix_listeners
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    abstract_name = "\0pynox-escape-" + uuid.uuid4().hex
    abstract.bind(abstract_name)
    abstract.setblocking(False)
    proc = run_probe(
        world,
        f"""
        import socket
        stream, dgram = {str(stream_path)!r}, {str(dgram_path)!r}
        a, b = socket.socketpair()
        attempt("stream-pair-connect", a.connect, stream)
        e, f = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        attempt("seqpacket-pair-connect", e.connect, stream)
        attempt("dgram-pair", socket.socketpair, socket.AF_UNIX, socket.SOCK_DGRAM)
        attempt("dgram-pair-nonblocking", socket.socketpair, socket.AF_UNIX,
                socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)
        def sendto(data, address):
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            return a.sendto(data, address)
        attempt("dgram-pair-sendto", sendto, b"sendto from the sandbox", dgram)
        attempt("dgram-pair-sendto-abstract", sendto, b"to an abstract name", {abstract_name!r})
        def stream_sendto():
            return a.sendto(b"sendto on a stream pair", dgram)
        attempt("stream-pair-sendto", stream_sendto)
    """,
    )
    with abstract:
        try:
            abstract_got = [abstract.recv(100)]
        except BlockingIOError:
            abstract_got = []
    assert proc.returncode == 0, proc.stderr
    lines = outcomes(proc)
    assert set(lines) == {
        "stream-pair-connect",
        "seqpacket-pair-connect",
        "dgram-pair",
        "dgram-pair-nonblocking",
        "dgram-pair-sendto",
        "dgram-pair-sendto-abstract",
        "stream-pair-sendto",
    }
    for name in ("dgram-pair", "dgram-pair-nonblocking", "dgram-pair-sendto"):
        assert lines[name] == "PermissionError EPERM", lines
    assert abstract_got == []
    assert reached() == [], f"a host Unix socket was reached: {lines}"
    assert [k for k, v in lines.items() if v.startswith("ok")] == []


PRIVILEGED_PORT_HINT = (
    "ports below 1024 are privileged: binding one takes a capability (CAP_NET_BIND_SERVICE) "
    "that the sandbox never gives, even to root, and there is nothing to grant; bind a port "
    "of 1024 or above, or port 0 to let the system choose one"
)
BIND_PORT = {
    "socket": "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', {port}))\nprint('bound')",
    "asyncio": (
        "import asyncio\n"
        "async def main():\n"
        "    await asyncio.start_server(lambda r, w: None, '127.0.0.1', {port})\n"
        "    print('bound')\n"
        "asyncio.run(main())"
    ),
}
LOW_PORT = 81


def _ports_below_1024_privileged() -> bool:
    """Whether this host keeps ports below 1024 to CAP_NET_BIND_SERVICE, as Linux does
    unless net.ipv4.ip_unprivileged_port_start was lowered (containers often set 0)."""
    start = Path("/proc/sys/net/ipv4/ip_unprivileged_port_start")
    return not start.exists() or int(start.read_text()) > LOW_PORT


@pytest.mark.parametrize("how", sorted(BIND_PORT))
def test_a_privileged_port_gets_its_hint_and_port_zero_works(tmp_path: Path, how: str) -> None:
    """Run as root, python binds port 81; the sandbox drops root's capabilities, so the
    program is refused (as any user's would be) and the hint says which ports work."""
    if not _ports_below_1024_privileged():
        pytest.skip("ports below 1024 are not privileged on this host")
    proc = pynox("--allow-network", "-c", BIND_PORT[how].format(port=LOW_PORT), cwd=tmp_path)
    stderr = proc.stderr.decode()
    assert proc.returncode == 1, stderr
    assert "[Errno 13]" in stderr.splitlines()[-2], stderr
    assert stderr.endswith("\npynox: " + PRIVILEGED_PORT_HINT + "\n"), stderr
    followed = pynox("--allow-network", "-c", BIND_PORT[how].format(port=0), cwd=tmp_path)
    assert (followed.returncode, followed.stdout) == (0, b"bound\n"), followed.stderr


def test_a_pool_request_binding_a_privileged_port_gets_the_hint() -> None:
    if not _ports_below_1024_privileged():
        pytest.skip("ports below 1024 are not privileged on this host")
    code = BIND_PORT["socket"].format(port=LOW_PORT)
    with PoolClient(workers=1) as pool:
        result = pool.run({"id": 1, "code": code, "allow_network": True})
    assert result["exit"] == 1, result
    assert result["error"]["type"] == "PermissionError"
    assert result["error"]["hint"] == PRIVILEGED_PORT_HINT


def test_a_dual_stack_server_without_the_network_gets_the_network_hint(tmp_path: Path) -> None:
    """socket.create_server(dualstack_ipv6=True) says "not supported on this platform"
    when it cannot make an IPv6 socket: the sandbox's doing, which the hint names."""
    code = (
        "import socket\n"
        "s = socket.create_server(('::1', 0), family=socket.AF_INET6, dualstack_ipv6=True)\n"
        "print(s.family.name)"
    )
    expected = python("-c", code)
    if expected.returncode != 0:
        pytest.skip("no dual-stack IPv6 on this host")
    done, hints = follow(lambda flags: pynox(*flags, "-c", code, cwd=tmp_path), [])
    assert done.stdout == expected.stdout == b"AF_INET6\n"
    assert hints == ["pynox: the network is off; grant it with --allow-network"]
