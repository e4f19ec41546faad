"""What crosses a process boundary is read strictly: bad input is one ValueError (or
ChannelError), never another exception, a hang, or data the reader did not ask for."""

import json
import math
import sys
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples

from pynox import strict_json
from pynox.pool import channel

finite_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)
# Pieces of JSON and of what is not: shuffled together they make mostly malformed text.
tokens = st.sampled_from(
    [
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        '"a"',
        '"\\ud800"',
        '"\\u12"',
        "1",
        "-0",
        "1e400",
        "NaN",
        "Infinity",
        "-Infinity",
        "true",
        "nul",
        " ",
        "\n",
        "9" * 400,
        "0.5",
        "01",
        '"\x00"',
    ]
)
malformed = st.lists(tokens, max_size=30).map("".join).map(str.encode) | st.binary(max_size=64)


@pytest.mark.unit
@settings(max_examples=examples(300), deadline=None)
@given(finite_json)
def test_what_dumps_writes_loads_reads_back(value: object) -> None:
    text = strict_json.dumps(value)
    assert strict_json.loads(text.encode()) == value
    assert json.loads(text) == value


@pytest.mark.unit
@settings(max_examples=examples(300), deadline=None)
@given(finite_json, st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010)))
def test_dumps_read_reads_back_as_dumps_does(value: object, surrogates: str) -> None:
    """Fewer bytes (a character is itself, not an escape), the same value once read, and
    valid UTF-8 even for a lone surrogate."""
    value = [value, surrogates, {surrogates: "\ufffd\u2028\n\x7f\U0001f600"}]
    written = strict_json.dumps_read(value)
    assert json.loads(written.decode("utf-8")) == json.loads(strict_json.dumps(value))
    assert len(strict_json.dumps_read(["\ufffd" * 100])) == 2 + 2 + 3 * 100


@pytest.mark.unit
@settings(max_examples=examples(600), deadline=None)
@given(malformed, st.sampled_from([None, 1, 3]), st.booleans())
def test_any_bytes_are_a_value_or_a_value_error(data: bytes, max_depth, unique_keys) -> None:  # type: ignore[no-untyped-def]
    try:
        value = strict_json.loads(data, max_depth, unique_keys)
    except ValueError:
        return
    # What is read is what RFC 8259 allows: no NaN or infinity anywhere.
    assert "NaN" not in json.dumps(value) and "Infinity" not in json.dumps(value)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "error"),
    [
        (b"[NaN]", strict_json.NotFinite),
        (b'{"a": -Infinity}', strict_json.NotFinite),
        (b"1e400", strict_json.NotFinite),
        (b"1" * 5000, strict_json.NotFinite),  # not a sys.int_max_str_digits message
        (b"[" * 100_000 + b"]" * 100_000, strict_json.TooDeep),
        (b'"\xff"', ValueError),
    ],
)
def test_bad_input_is_refused_with_its_error(text: bytes, error: type) -> None:
    with pytest.raises(error):
        strict_json.loads(text)


@pytest.mark.unit
def test_repeated_keys_and_depth_are_refused_when_asked() -> None:
    assert strict_json.loads(b'{"a": 1, "a": 2}') == {"a": 2}
    with pytest.raises(strict_json.RepeatedKey, match="'a' appears twice"):
        strict_json.loads(b'{"a": 1, "a": 2}', unique_keys=True)
    assert strict_json.loads(b"[[1]]", max_depth=2) == [[1]]
    with pytest.raises(strict_json.TooDeep, match="deeper than 2 levels"):
        strict_json.loads(b"[[[1]]]", max_depth=2)
    with pytest.raises(strict_json.NotFinite):
        strict_json.dumps({"a": math.inf})
    with pytest.raises(strict_json.NotFinite, match="send it as a string"):
        strict_json.dumps([10**400])


frames = st.lists(st.dictionaries(st.text(max_size=5), finite_json, max_size=3), max_size=4)


@pytest.mark.unit
@settings(max_examples=examples(200), deadline=None)
@given(frames, st.lists(st.integers(1, 50), max_size=20))
def test_frames_come_out_whole_however_the_stream_is_cut(messages, cuts) -> None:  # type: ignore[no-untyped-def]
    stream = b"".join(channel.encode(message) for message in messages)
    reader = channel.FrameReader()
    got = []
    start = 0
    for cut in [*cuts, len(stream)]:
        got += [frame for frame, _ in reader.feed(stream[start : start + cut])]
        start += cut
    got += [frame for frame, _ in reader.feed(stream[start:])]
    assert got == messages


@pytest.mark.unit
@settings(max_examples=examples(300), deadline=None)
@given(malformed)
def test_a_bad_frame_is_a_channel_error(body: bytes) -> None:
    reader = channel.FrameReader(limit=1 << 10, max_depth=3)
    try:
        frames = reader.feed(len(body).to_bytes(4, "big") + body)
    except channel.ChannelError:
        return
    assert len(frames) == 1 and isinstance(frames[0][0], dict)


@pytest.mark.unit
def test_a_frame_over_the_limit_is_refused_before_it_is_read() -> None:
    reader = channel.FrameReader(limit=1 << 10)
    with pytest.raises(channel.ChannelError, match="over the 1024 limit"):
        reader.feed((0xFFFFFFFF).to_bytes(4, "big"))
    assert channel.FrameReader().feed(b"\x00\x00\x10") == []  # a header not yet whole


def _items(value: object) -> int:
    """Array elements, object members, arrays and objects in value, as the bound counts."""
    if isinstance(value, list):
        return 1 + len(value) + sum(_items(item) for item in value)
    if isinstance(value, dict):
        return 1 + len(value) + sum(_items(item) for item in value.values())
    return 0


@pytest.mark.unit
@settings(max_examples=examples(200), deadline=None)
@given(finite_json, st.integers(0, 12))
def test_the_item_count_refuses_only_what_holds_more(value: object, limit: int) -> None:
    """Refused: more than limit items. Let through: few enough that decoding stays cheap."""
    # Strings full of what the count looks for: they must not count.
    value = [value, 'a, "[b]", {c}\\', {"\\\\,[": '\\"{,'}]
    body = strict_json.dumps(value).encode()
    items = _items(value)
    for piece in (1 << 16, 1, 7):  # the text is read a piece at a time: cut anywhere
        with mock.patch.object(channel, "_PIECE", piece):
            if channel.more_items_than(body, limit):
                assert items > limit
            else:
                assert items <= 2 * limit


_FULL = channel.CHILD_FRAME - 100  # bytes of arguments that fill a call's frame


def _call(args: str) -> bytes:
    body = f'{{"type":"call","call":1,"function":"f","args":{args},"kwargs":{{}}}}'.encode()
    return len(body).to_bytes(4, "big") + body


@pytest.mark.unit
@pytest.mark.parametrize(
    "args",
    [
        "[" + "[]," * (_FULL // 3) + "[]]",  # 2.8 million lists: ~1 s to decode
        "[" + "1," * (_FULL // 2) + "1]",
        "[" + '"",' * (_FULL // 3) + '""]',
        "[" + '"a,b,c,d,e,f,g,h,i",' * 300_000 + '""]',  # commas in strings, too many strings
    ],
    ids=["lists", "integers", "strings", "strings-with-commas"],
)
def test_a_frame_of_too_many_items_is_refused_before_it_is_decoded(args: str) -> None:
    reader = channel.FrameReader()
    with pytest.raises(channel.ChannelError, match=f"more than {channel.CHILD_ITEMS} items"):
        reader.feed(_call(args))


@pytest.mark.unit
def test_large_frames_of_few_items_are_read() -> None:
    csv = "".join(f"{n},{n * 2},{n % 7}\\n" for n in range(600_000))[: (8 << 20) - 200]
    numbers = list(range(channel.CHILD_ITEMS - 10))
    for args in (f'["{csv}"]', json.dumps(numbers), json.dumps(["x" * 64] * 100_000)):
        [(frame, _)] = channel.FrameReader().feed(_call(args))
        assert frame["args"] == json.loads(args)


def test_a_value_json_cannot_write_is_named_once() -> None:
    """json's own message came after ours, saying the same thing twice."""
    with pytest.raises(strict_json.NotFinite) as refused:
        strict_json.dumps({"a": [math.nan]})
    message = str(refused.value)
    assert message.startswith("NaN and Infinity are not JSON values (RFC 8259)")
    assert "compliant" not in message
    if sys.version_info >= (3, 13):  # json names the value from 3.13 on
        assert message.endswith(", and this holds nan")
