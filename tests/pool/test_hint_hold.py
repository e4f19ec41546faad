"""What a streaming run's stderr holds back for its hint line, however the pool's reads
cut it: only from a `pynox: ` line on, and all of it again, rewritten, at the end."""

from __future__ import annotations

import pytest

from pynox.pool.hint_hold import MOST_HELD, HintHold

LINE, JUDGED = b"pynox: grant it with x\n", b"pynox: no request may have it\n"
STDERR = b"progress\nTraceback\nError\n" + LINE + b"cleanup\n"


@pytest.mark.parametrize("size", [1, 2, 3, 7, 8, 11, len(STDERR)])
def test_any_cut_streams_the_same_bytes_with_the_line_rewritten(size: int) -> None:
    hold = HintHold()
    streamed = b""
    for at in range(0, len(STDERR), size):
        streamed += hold.feed(STDERR[at : at + size])
    assert streamed == b"progress\nTraceback\nError\n"
    assert streamed + hold.release(LINE, JUDGED) == STDERR.replace(LINE, JUDGED)


def test_a_line_that_only_starts_like_the_prefix_is_not_held() -> None:
    hold = HintHold()
    assert hold.feed(b"out\npy") == b"out\n"
    assert hold.feed(b"thon\n") == b"python\n"
    assert hold.release(LINE, JUDGED) == b""


def test_past_its_bound_what_is_held_goes_out_as_it_is() -> None:
    hold = HintHold()
    assert hold.feed(LINE) == b""
    flood = b"x" * MOST_HELD
    assert hold.feed(flood) == LINE + flood
    assert hold.feed(LINE) == LINE
