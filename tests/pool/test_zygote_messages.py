"""The messages between the pool server and its zygote: small, and never taken cut short."""

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


def test_a_message_and_its_descriptors_arrive_whole(pair: tuple[socket.socket, ...]) -> None:
    left, right = pair
    read_end, write_end = os.pipe()
    try:
        zygote.send(left, {"spawned": 7, "pid": 1234}, [write_end])
        message, fds = zygote.receive(right)
        assert message == {"spawned": 7, "pid": 1234}
        assert len(fds) == 1
        os.write(fds[0], b"x")  # the same pipe, passed along
        assert os.read(read_end, 1) == b"x"
        os.close(fds[0])
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_message_over_the_buffer_is_refused_not_cut(pair: tuple[socket.socket, ...]) -> None:
    left, right = pair
    # Valid JSON up to the buffer's end: cut there, it would still decode.
    data = b'{"exited": 1, "status": 0}' + b" " * zygote.MAX_MESSAGE
    read_end, write_end = os.pipe()
    try:
        before = _open_fds()
        socket.send_fds(left, [data], [write_end])
        with pytest.raises(channel.ChannelError, match="cut short"):
            zygote.receive(right)
        assert _open_fds() == before  # the descriptor that came with it is closed
    finally:
        os.close(read_end)
        os.close(write_end)


def test_more_descriptors_than_a_child_has_are_refused(pair: tuple[socket.socket, ...]) -> None:
    left, right = pair
    pipes = [os.pipe() for _ in range(len(zygote.CHILD_FDS) + 1)]
    try:
        before = _open_fds()
        zygote.send(left, {"token": 1}, [write_end for _, write_end in pipes])
        with pytest.raises(channel.ChannelError, match="cut short"):
            zygote.receive(right)
        assert _open_fds() == before
    finally:
        for read_end, write_end in pipes:
            os.close(read_end)
            os.close(write_end)
