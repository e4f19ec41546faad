"""Long output keeps its head and its tail: the end of a run (its traceback and the
`pynox:` hint) survives `max_output`, with one line saying how much was left out."""

from __future__ import annotations

import json
import re

import pytest
from support.commands import pynox
from support.pool_client import PoolClient

from pynox.engine.supervisor import Capture
from pynox.policy.grants import SESSION_NOTE

MARKER = re.compile(rb"\[\.\.\. (\d+) bytes left out \.\.\.\]\n")

# Prints a megabyte on each stream, then fails with a denial that gets a hint.
LOUD_FAILURE = (
    "import sys\n"
    "print('o' * 1_000_000)\n"
    "sys.stderr.write('e' * 1_000_000 + '\\n')\n"
    "open('/etc/hostname')\n"
)


def kept(limit: int, *chunks: bytes) -> Capture:
    capture = Capture(limit)
    for chunk in chunks:
        capture.add(chunk)
    return capture


def split(data: bytes) -> tuple[bytes, int, bytes]:
    """(head, bytes left out, tail) of kept output."""
    match = MARKER.search(data)
    assert match, data
    return data[: match.start()], int(match.group(1)), data[match.end() :]


@pytest.mark.unit
def test_output_within_the_limit_is_kept_whole() -> None:
    capture = kept(100, b"a" * 60, b"b" * 40)
    assert capture.kept() == b"a" * 60 + b"b" * 40 and not capture.truncated


@pytest.mark.unit
def test_longer_output_keeps_head_and_tail_of_whole_lines_within_the_limit() -> None:
    stream = b"".join(b"line %d\n" % i for i in range(10_000))
    capture = kept(1000, *(stream[i : i + 777] for i in range(0, len(stream), 777)))
    data = capture.kept()
    assert capture.truncated and len(data) <= 1000
    head, left_out, tail = split(data)
    assert stream.startswith(head) and stream.endswith(tail)
    assert head.endswith(b"\n") and tail.startswith(b"line ") and tail.endswith(b"line 9999\n")
    assert len(head) + left_out + len(tail) == len(stream)
    # Half of the room each, less what whole lines cost.
    assert 350 < len(head) <= 500 and 350 < len(tail) <= 500


@pytest.mark.unit
def test_cuts_fall_between_utf8_characters() -> None:
    stream = "é€😀".encode() * 1000  # 2-, 3- and 4-byte characters, no newline
    data = kept(301, stream).kept()
    head, left_out, tail = split(data)
    assert len(data) <= 301
    (head[:-1] + tail).decode()  # the head ends with the added newline
    assert len(head) - 1 + left_out + len(tail) == len(stream)


@pytest.mark.unit
def test_invalid_utf8_is_cut_anywhere_without_error() -> None:
    stream = b"\xff\xfe\x80" * 10_000
    data = kept(200, stream).kept()
    head, left_out, tail = split(data)
    assert len(data) <= 200 and stream.endswith(tail)
    assert len(head) - 1 + left_out + len(tail) == len(stream)


@pytest.mark.unit
def test_the_tail_stays_bounded_while_a_program_writes_gigabytes() -> None:
    capture = Capture(65536)
    chunk = b"x" * 65535 + b"\n"
    for _ in range(16384):  # a gigabyte
        capture.add(chunk)
        assert len(capture.data) + len(capture.tail) <= 3 * 65536 + len(chunk)
    capture.add(b"the end\n")
    data = capture.kept()
    assert len(data) <= 65536 and data.endswith(b"x\nthe end\n")
    head, left_out, tail = split(data)
    assert head == b"x" * (len(head) - 1) + b"\n"  # no line ends near: a newline is added
    assert left_out == (1 << 30) + 8 - (len(head) - 1) - len(tail)


@pytest.mark.unit
def test_a_limit_too_small_for_both_ends_keeps_the_head() -> None:
    assert kept(10, b"0123456789abcdef").kept() == b"0123456789"


EUROS = "".join("€" * 7 + "\n" for _ in range(1000)).encode()  # 3-byte characters


@pytest.mark.unit
@pytest.mark.parametrize("limit", [1, 2, 4, 5, 20, 29, 30, 31])
def test_a_limit_too_small_for_the_line_keeps_the_head_in_whole_characters(limit: int) -> None:
    """Too small to say what was left out: the head alone, never a character cut."""
    data = kept(limit, EUROS).kept()
    assert len(data) <= limit and EUROS.startswith(data)
    assert len(data) > limit - 3  # short of the limit by less than one character
    data.decode()


@pytest.mark.unit
@pytest.mark.parametrize("limit", [32, 33, 34, 35, 36, 40, 45])
def test_a_limit_with_room_for_the_line_says_what_was_left_out(limit: int) -> None:
    """With room for the line (31 bytes for a count of five digits), the line is there,
    the tail after it, and the whole stays within the limit in whole characters."""
    data = kept(limit, EUROS).kept()
    assert len(data) <= limit
    head, left_out, tail = split(data)
    # A head kept ends its line; with no room for one (a character's bytes at most), the
    # line comes first, with no newline the program never wrote before it.
    assert head.endswith(b"\n") or head == b""
    assert not data.startswith(b"\n")
    assert EUROS.startswith(head[:-1]) and EUROS.endswith(tail)
    (head + tail).decode()
    added = 0 if EUROS.startswith(head) else 1  # the newline put after a head cut mid-line
    assert len(head) - added + left_out + len(tail) == len(EUROS)


@pytest.mark.unit
def test_an_emptied_capture_starts_a_new_step_and_leaves_the_last_as_it_was() -> None:
    capture = kept(10, b"x" * 100)
    last = capture.kept()
    emptied = capture.emptied()
    emptied.add(b"ok")
    assert emptied.kept() == b"ok" and not emptied.truncated and emptied.limit == 10
    assert capture.kept() == last and capture.truncated


@pytest.mark.unit
@pytest.mark.parametrize("limit", [4096, 200], ids=["whole", "cut"])
def test_a_line_replaced_keeps_what_followed_it(limit: int) -> None:
    """The hint line the pool judges anew may be followed by output the program wrote
    after it (an atexit handler's): that stays, after the new line."""
    old, new = b"pynox: grant it\n", b"pynox: no request may have it\n"
    capture = kept(limit, b"x" * 1000 + b"\n", b"Error: e\n" + old, b"cleanup\n")
    before = capture.seen
    assert capture.replace_line(old, new)
    assert capture.seen == before + len(new) - len(old)
    assert capture.kept().endswith(b"Error: e\n" + new + b"cleanup\n")
    assert len(capture.kept()) <= limit and capture.truncated == (limit == 200)
    # A line of the same text that is only the end of another line is not the hint.
    assert not kept(limit, b"x" + old).replace_line(old, new)


def assert_ends_with_traceback_and_hint(stderr: str, flag: str) -> None:
    lines = stderr.rstrip("\n").splitlines()
    assert lines[-1] == f"pynox: reading /etc/hostname is not allowed; grant it with {flag}"
    assert lines[-2] == "PermissionError: [Errno 13] Permission denied: '/etc/hostname'"
    assert "Traceback (most recent call last):" in lines


def test_json_keeps_the_traceback_and_hint_after_a_megabyte() -> None:
    result = json.loads(pynox("--json", "-c", LOUD_FAILURE).stdout)
    assert result["stdout_truncated"] is True and result["stderr_truncated"] is True
    for stream, letter in (("stdout", b"o"), ("stderr", b"e")):
        data = result[stream].encode()
        assert len(data) <= 65536
        head, left_out, _ = split(data)
        assert head.startswith(letter * 1000) and left_out > 900_000
    assert result["stdout"].endswith("o" * 1000 + "\n")
    assert_ends_with_traceback_and_hint(result["stderr"], "--allow-read=/etc/hostname")
    assert result["error"]["type"] == "PermissionError"


def test_pool_keeps_the_traceback_and_hint_after_a_megabyte() -> None:
    with PoolClient() as pool:
        for request in (
            {"id": "once", "code": LOUD_FAILURE},
            {"id": "step", "code": LOUD_FAILURE, "session": "s"},
            {"id": "small", "code": LOUD_FAILURE, "max_output": 1024},
        ):
            result = pool.run(request)
            assert result["stderr_truncated"] is True, request
            assert len(result["stderr"].encode()) <= request.get("max_output", 65536)
            assert split(result["stderr"].encode())[1] > 900_000
            grant = '"allow_read": ["/etc/hostname"]'
            if "session" in request:  # cut again to the limit after the pool lengthened it
                grant += SESSION_NOTE
            assert_ends_with_traceback_and_hint(result["stderr"], grant)
        # The next step of the session starts with empty streams.
        after = pool.run({"id": "next", "code": "print('fine')", "session": "s"})
        assert after["stdout"] == "fine\n" and after["stdout_truncated"] is False
        assert pool.close() == 0
