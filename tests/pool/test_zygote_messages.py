"""The records between the pool server and its zygote: whole, and never taken cut short."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from pynox.pool import channel, zygote


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    yield left, right
    left.close()
    right.close()


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_word_and_its_descriptor_arrive_whole(pair: tuple[socket.socket, ...]) -> None:
    left, right = pair
    read_end, write_end = os.pipe()
    try:
        socket.send_fds(left, [zygote.WORD.pack(zygote.SPAWNED, 7, 1234)], [write_end])
        word, fds = zygote.read_word(right)
        assert word == (zygote.SPAWNED, 7, 1234)
        assert len(fds) == 1
        os.write(fds[0], b"x")  # the same pipe, passed along
        assert os.read(read_end, 1) == b"x"
        os.close(fds[0])
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_closed_socket_reads_as_the_zygote_gone(pair: tuple[socket.socket, ...]) -> None:
    left, right = pair
    left.close()
    assert zygote.read_word(right) == (None, [])


@pytest.mark.parametrize("extra", [1, 4096], ids=["a byte", "a page"])
def test_a_longer_record_is_refused_not_cut(pair: tuple[socket.socket, ...], extra: int) -> None:
    left, right = pair
    # A valid word up to the buffer's end: cut there, it would still unpack.
    data = zygote.WORD.pack(zygote.EXITED, 1, 0) + b"\0" * extra
    read_end, write_end = os.pipe()
    try:
        before = _open_fds()
        socket.send_fds(left, [data], [write_end])
        with pytest.raises(channel.ChannelError, match="not one it sends"):
            zygote.read_word(right)
        assert _open_fds() == before  # the descriptor that came with it is closed
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_shorter_record_is_refused(pair: tuple[socket.socket, ...]) -> None:
    left, right = pair
    left.send(zygote.WORD.pack(zygote.EXITED, 1, 0)[:-1])
    with pytest.raises(channel.ChannelError, match="not one it sends"):
        zygote.read_word(right)


def test_more_descriptors_than_a_word_has_are_refused(pair: tuple[socket.socket, ...]) -> None:
    left, right = pair
    pipes = [os.pipe() for _ in range(2)]
    try:
        before = _open_fds()
        word = zygote.WORD.pack(zygote.SPAWNED, 1, 1234)
        socket.send_fds(left, [word], [write_end for _, write_end in pipes])
        with pytest.raises(channel.ChannelError, match="not one it sends"):
            zygote.read_word(right)
        assert _open_fds() == before
    finally:
        for read_end, write_end in pipes:
            os.close(read_end)
            os.close(write_end)


def test_a_zygote_killed_before_reading_an_order_reads_as_gone() -> None:
    """Killed with an order of the server's unread, the zygote's end resets the socket:
    that is the zygote gone, as an end of file is, not an error of the pool's own."""
    server, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    server.send(b"an order never read")
    zygote_end.close()
    assert zygote.read_word(server) == (None, [])
    server.close()


def test_a_spare_closed_before_its_ready_frame_was_read_leaves_quietly() -> None:
    """The server closing a spare whose ready frame it never read resets the spare's
    connection: the spare then read no order, rather than raise into the server's code."""
    spare, server = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        channel.send(spare.fileno(), {"type": "ready"})
        server.close()  # unread: the spare's next read is refused with ECONNRESET
        assert zygote.next_order(spare.fileno()) is None
    finally:
        spare.close()
