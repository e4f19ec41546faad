"""docs/pool-protocol.md, executed: its JSON examples run against a live `pynox pool`.

Data-driven: every ```json block and every inline JSON object of the page is read here, the
requests among them (objects with "code" or "close_session") are sent as written, and what
comes back is compared with the examples of responses and events on the same page. Changing
an example in the page changes what this test expects.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.pool_client import PoolClient

from pynox.limits import STREAM_BACKLOG
from pynox.pool.request import REQUEST_FIELDS

DOC = Path(__file__).resolve().parent.parent / "docs" / "pool-protocol.md"
TEXT = DOC.read_text()

Message = dict[str, Any]


def json_blocks() -> list[str]:
    return re.findall(r"```json\n(.*?)```", TEXT, flags=re.S)


def examples() -> list[Message]:
    """Every JSON object the page shows: whole blocks, lines of blocks, inline code."""
    found: list[Message] = []
    for block in json_blocks():
        try:
            found.append(json.loads(block))
            continue
        except ValueError:
            pass
        for line in block.splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                pass
        try:
            found.append(json.loads("{" + block.strip() + "}"))  # a fragment: "key": value
        except ValueError:
            pass
    for span in re.findall(r"`(\{[^`]*\})`", TEXT):
        try:
            found.append(json.loads(span))
        except ValueError:
            pass
    return found


EXAMPLES = examples()


def of(predicate: Any) -> list[Message]:
    return [example for example in EXAMPLES if predicate(example)]


def one(predicate: Any, what: str) -> Message:
    found = of(predicate)
    assert len(found) == 1, f"the page should show one {what}, it shows {len(found)}: {found}"
    return found[0]


REQUESTS = of(lambda m: "id" in m and ("code" in m or "close_session" in m))
RESULT = one(lambda m: "exit" in m and "policy" in m, "result")
READY = one(lambda m: m.get("event") == "ready", "ready event")
HOST_CALLS = of(lambda m: m.get("event") == "host_call")
HOST_ANSWERS = of(lambda m: "host_result" in m or "host_error" in m)
CLOSED = one(
    lambda m: isinstance(m.get("session"), dict) and "closed" in m["session"],
    "answer to close_session",
)
CONTROL_ERROR = one(lambda m: m.get("event") == "control_error", "control_error event")
FILES_FIELDS = one(lambda m: set(m) == {"files", "files_left_out"}, "files fields of a result")
OUTPUT_EVENTS = of(lambda m: m.get("event") == "output")
STREAMING = one(lambda m: m.get("stream") is True and "code" in m, "streaming request")
CANCEL = one(lambda m: m.get("control") == "cancel", "cancel line")
CANCELLED = one(
    lambda m: isinstance(m.get("error"), dict) and m["error"]["type"] == "Cancelled",
    "cancelled result",
)
SESSION_FIELD = one(
    lambda m: set(m) == {"session"} and "step" in m["session"], "session field of a step's result"
)


@pytest.fixture(scope="module")
def pool() -> Iterator[PoolClient]:
    with PoolClient() as client:  # the defaults the page describes
        yield client
        assert client.close() == 0


@pytest.mark.unit
def test_the_page_has_the_examples_this_test_reads() -> None:
    print(f"{len(EXAMPLES)} JSON examples, {len(REQUESTS)} requests: {REQUESTS}")
    assert [r for r in REQUESTS if "code" in r and "functions" not in r]
    assert [r for r in REQUESTS if "functions" in r]
    assert [r for r in REQUESTS if "close_session" in r]
    assert HOST_CALLS and HOST_ANSWERS


def test_ready_event(pool: PoolClient) -> None:
    assert set(pool.ready) == set(READY)
    assert pool.ready["event"] == READY["event"]
    assert pool.ready["workers"] == READY["workers"]  # the documented default
    assert pool.ready["pid"] == pool.pid
    assert re.fullmatch(r"\d+\.\d+\.\d+", pool.ready["python"])
    assert pool.ready["python"] == ".".join(map(str, sys.version_info[:3]))


@pytest.mark.unit
def test_documented_fields_are_the_fields() -> None:
    table = re.findall(r"^\| (`.*?`) \|", TEXT, flags=re.M)
    names = {name for cell in table for name in re.findall(r"`(\w+)`", cell)}
    assert names == set(REQUEST_FIELDS)


def test_an_undocumented_field_is_refused(pool: PoolClient) -> None:
    request = {"id": "undocumented", "code": "pass", "allow_everything": True}
    result = pool.run(request)
    assert result["exit"] == 125
    assert result["error"]["type"] == "RequestError"
    assert "allow_everything" in result["error"]["message"]


def plain_requests() -> list[Message]:
    return [
        r
        for r in REQUESTS
        if "code" in r
        and "functions" not in r
        and "session" not in r
        and "files" not in r
        and r["id"] != CANCEL["id"]
    ]


@pytest.mark.parametrize("request_", plain_requests(), ids=lambda r: str(r["id"]))
def test_plain_request_matches_the_documented_result(pool: PoolClient, request_: Message) -> None:
    result = pool.run(dict(request_))
    print(json.dumps(result))
    # Every result has the documented fields; the documented result is the one for this
    # request when the ids match (the page's first example prints 45).
    assert set(result) == set(RESULT), "top-level fields differ from the page's result"
    assert set(result["runtime"]) == set(RESULT["runtime"])
    if RESULT["id"] == request_["id"]:
        for key in (
            "id",
            "exit",
            "stdout",
            "stderr",
            "stdout_truncated",
            "stderr_truncated",
            "error",
        ):
            assert result[key] == RESULT[key], key
        assert result["runtime"]["name"] == RESULT["runtime"]["name"]
        assert result["runtime"]["output"] == RESULT["runtime"]["output"]


def test_result_policy_is_the_documented_policy(pool: PoolClient) -> None:
    """The page's result shows the policy of a request with no grants: the defaults."""
    request = one(lambda m: m.get("id") == RESULT["id"] and "code" in m, "request of the result")
    result = pool.run(dict(request))
    assert set(result["policy"]) == set(RESULT["policy"]), "policy fields differ from the page"
    # Every run's scratch directory has a name of its own; the page shows one like it.
    shown, actual = dict(RESULT["policy"]), dict(result["policy"])
    for policy in (shown, actual):
        assert os.path.basename(policy.pop("scratch")).startswith("pynox-run-")
    assert actual == shown


def test_error_object_has_the_documented_fields(pool: PoolClient) -> None:
    match = re.search(r"`error` is `null` or `\{(.*?)\}`", TEXT)
    assert match, "the page no longer describes the error object this way"
    documented = re.findall(r'"(\w+)"', match.group(1))
    result = pool.run({"id": "failing", "code": "1 / 0"})
    assert list(result["error"]) == documented


def function_requests() -> list[Message]:
    return [r for r in REQUESTS if "functions" in r]


@pytest.mark.parametrize("request_", function_requests(), ids=lambda r: str(r["id"]))
@pytest.mark.parametrize("answer_kind", ["host_result", "host_error"])
def test_host_function_example(pool: PoolClient, request_: Message, answer_kind: str) -> None:
    documented_calls = [c for c in HOST_CALLS if c["id"] == request_["id"]]
    answers = [a for a in HOST_ANSWERS if a["id"] == request_["id"] and answer_kind in a]
    assert documented_calls and answers, "the page shows no call or answer for this request"
    pool.send(dict(request_))
    call = pool.event(lambda m: m.get("event") == "host_call" and m["id"] == request_["id"])
    assert call == documented_calls[0]
    answer = answers[0]
    pool.send_raw(json.dumps(answer).encode() + b"\n")  # the documented line, as written
    result = pool.result(request_["id"])
    pool.host_calls.remove(call)
    if answer_kind == "host_result":
        assert result["exit"] == 0, result
        # The value becomes the call's return value; the example prints it.
        assert result["stdout"] == repr(answer["host_result"]["value"]) + "\n"
    else:
        assert result["exit"] == 1, result
        assert result["error"]["type"].rsplit(".", 1)[-1] == "HostError"
        assert result["error"]["message"] == answer["host_error"]["message"]


def test_files_example(pool: PoolClient) -> None:
    request = one(lambda m: "files" in m and "code" in m, "request with files")
    result = pool.run(dict(request))
    assert result["exit"] == 0, result
    assert set(result) == set(RESULT) | set(FILES_FIELDS)
    assert {key: result[key] for key in FILES_FIELDS} == FILES_FIELDS


def test_session_example_and_close_session(pool: PoolClient) -> None:
    documented = SESSION_FIELD["session"]
    name = documented["id"]
    close = one(lambda m: "close_session" in m and "id" in m, "close_session request")
    assert close["close_session"] == name == CLOSED["session"]["id"]
    results = []
    for step in range(1, documented["step"] + 1):
        results.append(pool.run({"id": f"step{step}", "session": name, "code": f"n = {step}"}))
    assert results[-1]["session"] == documented
    assert results[-1]["id"] == f"step{documented['step']}"
    pool.send(close)
    pool.wait_for(lambda: close["id"] in pool.results)
    assert pool.results.pop(close["id"]) == [CLOSED]


def test_control_error_example(pool: PoolClient) -> None:
    missing = re.search(r"no session '(.+?)' to close", CONTROL_ERROR["message"])
    assert missing, CONTROL_ERROR
    pool.send({"id": CONTROL_ERROR["id"], "close_session": missing.group(1)})
    event = pool.event(lambda m: m.get("event") == "control_error")
    assert event == CONTROL_ERROR
    assert CONTROL_ERROR["id"] not in pool.results


def test_exit_statuses_the_page_names(pool: PoolClient) -> None:
    statuses = {int(n) for n in re.findall(r"(\d+) means it ran past its timeout", TEXT)}
    assert statuses == {124}
    timed_out = pool.run({"id": "slow", "code": "while True:\n    pass", "timeout": "500ms"})
    assert timed_out["exit"] == 124
    assert re.search(r"125 that the request was refused", TEXT)
    assert pool.run({"id": "refused", "code": "", "script": "/x"})["exit"] == 125
    assert re.search(r"128\+N that signal N killed it", TEXT)
    killed = pool.run({"id": "killed", "code": "import os, signal\nos.kill(os.getpid(), 9)"})
    assert killed["exit"] == 128 + 9


def test_streaming_example(pool: PoolClient) -> None:
    documented = [e for e in OUTPUT_EVENTS if e["id"] == STREAMING["id"]]
    assert documented, "the page shows no output event of its streaming request"
    start = len(pool.lines)  # the plain-request test may have sent it before
    result = pool.run(dict(STREAMING))
    lines = pool.lines[start:]
    events = [e for e in lines if e.get("event") == "output" and e["id"] == STREAMING["id"]]
    assert events == documented
    assert lines.index(events[-1]) < lines.index(result), "the events come first"
    assert result["stdout"] == "".join(e["data"] for e in events)
    section = TEXT.split("## Streaming", 1)[1].split("\n## ", 1)[0]
    assert f"pass {STREAM_BACKLOG >> 20} MiB" in section


def test_cancel_example(pool: PoolClient) -> None:
    request = one(lambda m: "code" in m and m["id"] == CANCEL["id"], "request the page cancels")
    pool.send(dict(request))
    pool.send_raw(json.dumps(CANCEL).encode() + b"\n")  # the documented line, as written
    result = pool.result(CANCEL["id"])
    assert result["exit"] == CANCELLED["exit"]
    assert result["error"] == CANCELLED["error"]
    flat = " ".join(TEXT.split())
    missing = re.search(r"\(\"(there is no running or queued request '(.+?)' to cancel)\"\)", flat)
    assert missing, "the page no longer quotes the answer to cancelling a finished request"
    pool.send_raw(json.dumps(CANCEL).encode() + b"\n")
    event = pool.event(lambda m: m.get("event") == "control_error" and m["id"] == CANCEL["id"])
    assert event["message"] == missing.group(1)
    pool.events.remove(event)


SHOWN = one(lambda m: set(m) == {"value", "images"}, "value and images of a result")
IMAGE = one(lambda m: m.get("mime") == "image/png", "image of a result")


def test_value_example(pool: PoolClient) -> None:
    """The page's request that ends with an expression gives the value it shows."""
    request = one(lambda m: m.get("id") == "area" and "code" in m, "request with a value")
    result = pool.run(dict(request))
    assert result["exit"] == 0, result
    assert {key: result[key] for key in SHOWN} == SHOWN


@pytest.mark.unit
def test_image_example_has_the_fields_the_pool_writes() -> None:
    """The page's image, as the pool server writes one for a PNG of that size."""
    import base64
    import struct
    import zlib

    from pynox.limits import DEFAULT_MAX_OUTPUT
    from pynox.pool.display_check import Shown

    header = b"IHDR" + struct.pack(">IIBBBBB", IMAGE["width"], IMAGE["height"], 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + header
    png += struct.pack(">I", zlib.crc32(header))
    shown = Shown(echo=True, max_output=DEFAULT_MAX_OUTPUT)
    shown.take_image({"type": "image", "data": base64.b64encode(png).decode()})
    (image,) = shown.images
    assert list(image) == list(IMAGE)
    assert (image["mime"], image["width"], image["height"]) == (
        IMAGE["mime"],
        IMAGE["width"],
        IMAGE["height"],
    )
    assert str(image["data"]).startswith(IMAGE["data"].rstrip("."))  # the PNG signature


@pytest.mark.unit
def test_the_page_gives_the_bounds_of_values_and_images() -> None:
    from pynox.limits import MAX_IMAGE_BYTES, MAX_IMAGE_SIDE, MAX_IMAGES, MAX_VALUE

    assert f"more than {MAX_VALUE}\nbytes of UTF-8 (`pynox.limits.MAX_VALUE`)" in TEXT
    assert f"At most {MAX_IMAGES} images come back per request" in TEXT
    assert f"at most {MAX_IMAGE_BYTES >> 20} MiB of\nPNG together" in TEXT
    assert f"at most {MAX_IMAGE_SIDE} pixels a side (`MAX_IMAGE_SIDE`)" in TEXT
