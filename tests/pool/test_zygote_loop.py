"""The zygote's loop (runtime/zygote.c), run on its own in a process of its own: what it
forks for an order, what it says of each child, and when it ends."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from pynox.pool import zygote

FDS_PER_SPARE = 2
# In each spare: says on its first descriptor whether it was wanted now, what signals
# it blocks and the kinds of anonymous descriptors it has (a signalfd, a pidfd...),
# then ends with the status it was told.
ZYGOTE = textwrap.dedent(
    """
    import os, signal, sys
    from pynox._native import serve_spares

    def interrupted(signum, frame):
        raise InterruptedError("told to stop")

    signal.signal(signal.SIGUSR1, interrupted)
    try:
        fds, wanted_now = serve_spares(int(sys.argv[1]), int(sys.argv[2]))
    except InterruptedError:
        os._exit(3)
    blocked = [l for l in open("/proc/self/status") if l.startswith("SigBlk:")][0].split()[1]
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:
            pass  # the listing's own descriptor, closed by now
    kinds = sorted({link.split(":", 1)[1] for link in links if link.startswith("anon_inode:")})
    os.write(fds[0], f"{wanted_now} {blocked} {kinds}".encode())
    status = int(os.read(fds[1], 10) or b"0")
    os._exit(status)
    """
)


class Zygote:
    def __init__(self) -> None:
        self.server, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, str(theirs.fileno()), str(FDS_PER_SPARE)],
            pass_fds=[theirs.fileno()],
            cwd="/",  # the installed pynox, not a source tree beside the tests
        )
        theirs.close()

    def order(self, token: int, wanted_now: bool) -> tuple[int, int]:
        """Orders a spare; returns our ends of its descriptors (its report, its orders)."""
        report_r, report_w = os.pipe()
        orders_r, orders_w = os.pipe()
        zygote.order_spare(self.server, token, wanted_now, [report_w, orders_r])
        os.close(report_w)
        os.close(orders_r)
        return report_r, orders_w

    def word(self) -> tuple[tuple[int, int, int] | None, list[int]]:
        ready, _, _ = select.select([self.server], [], [], 30)
        assert ready, "the zygote said nothing in 30 s"
        return zygote.read_word(self.server)

    def ended(self, timeout: float = 30) -> int:
        return self.process.wait(timeout=timeout)


@pytest.fixture
def forking() -> Iterator[Zygote]:
    loop = Zygote()
    yield loop
    loop.server.close()
    if loop.process.poll() is None:
        loop.process.kill()
    loop.process.wait()


def _read_all(fd: int) -> str:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode()


def test_a_spare_gets_its_order_and_its_end_is_told(forking: Zygote) -> None:
    report, orders = forking.order(41, wanted_now=True)
    word, fds = forking.word()
    assert word is not None and word[:2] == (zygote.SPAWNED, 41)
    pid = word[2]
    assert len(fds) == 1  # its pidfd: the spare's, not another process's
    assert os.readlink(f"/proc/self/fd/{fds[0]}") == "anon_inode:[pidfd]"
    with open(f"/proc/self/fdinfo/{fds[0]}") as info:
        assert f"Pid:\t{pid}\n" in info.read()
    os.close(fds[0])
    os.write(orders, b"7")
    os.close(orders)
    wanted_now, blocked, anonymous = _read_all(report).split(" ", 2)
    assert wanted_now == "True"
    # Neither the zygote's blocked SIGCHLD nor its signalfd reach the spare.
    assert int(blocked, 16) == 0
    word, fds = forking.word()
    assert word is not None and word[:2] == (zygote.EXITED, pid)
    assert os.waitstatus_to_exitcode(word[2]) == 7
    assert fds == []
    assert anonymous == "[]"  # no signalfd, no pidfd: nothing of the zygote's own


def test_each_order_its_own_spare(forking: Zygote) -> None:
    spares = {token: forking.order(token, wanted_now=False) for token in (1, 2, 3)}
    pids = {}
    for _ in spares:
        word, fds = forking.word()
        assert word is not None and word[0] == zygote.SPAWNED
        pids[word[1]] = word[2]
        os.close(fds[0])
    assert sorted(pids) == [1, 2, 3]
    assert len(set(pids.values())) == 3
    for token, (report, orders) in spares.items():
        os.write(orders, str(token).encode())
        os.close(orders)
        assert _read_all(report).startswith("False ")
    statuses = {}
    for _ in spares:
        word, _ = forking.word()
        assert word is not None and word[0] == zygote.EXITED
        statuses[word[1]] = os.waitstatus_to_exitcode(word[2])
    assert statuses == {pid: token for token, pid in pids.items()}


def test_the_zygote_ends_with_its_server(forking: Zygote) -> None:
    forking.server.close()
    assert forking.ended() == 0


@pytest.mark.parametrize(
    ("record", "fds"),
    [
        (zygote.ORDER.pack(1, False), FDS_PER_SPARE - 1),
        (zygote.ORDER.pack(1, False), FDS_PER_SPARE + 1),
        (zygote.ORDER.pack(1, False)[:-1], FDS_PER_SPARE),
        (zygote.ORDER.pack(1, False) + b"\0", FDS_PER_SPARE),
    ],
    ids=["fewer descriptors", "more descriptors", "a shorter record", "a longer record"],
)
def test_an_order_not_as_the_server_sends_ends_the_zygote(
    forking: Zygote, record: bytes, fds: int
) -> None:
    pipes = [os.pipe() for _ in range(fds)]
    socket.send_fds(forking.server, [record], [write_end for _, write_end in pipes])
    for _, write_end in pipes:
        os.close(write_end)
    assert forking.ended() == 0
    assert forking.server.recv(64) == b""  # no spare forked for it
    for read_end, _ in pipes:
        assert os.read(read_end, 1) == b""  # and no copy of its descriptors left open
        os.close(read_end)


@pytest.mark.parametrize("when", ["while it waits", "while it forks"])
def test_a_signal_with_a_python_handler_reaches_the_zygote(forking: Zygote, when: str) -> None:
    """Its handler runs, whenever the signal comes: one that came between the loop's look
    at Python's signals and its wait must not wait for the next order."""
    spares = [forking.order(1, wanted_now=False)]
    try:
        word, fds = forking.word()  # the loop runs: the handler is in place
        assert word is not None
        os.close(fds[0])
        if when == "while it forks":
            spares.append(forking.order(2, wanted_now=False))
        forking.process.send_signal(signal.SIGUSR1)
        assert forking.ended(timeout=10) == 3  # the handler's exception, out of the loop
    finally:
        for report, orders in spares:
            os.close(orders)
            os.close(report)
