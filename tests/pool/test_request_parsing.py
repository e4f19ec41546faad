"""The parser of request lines, called directly (hypothesis): whatever a line holds, it
raises only request errors, and each refusal names what to fix. No pool runs here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples
from support.request_lines import JSON_VALUES, named, request_shaped, validate, wrong_type_cases

from pynox.errors import PynoxError
from pynox.pool.request import (
    CONTROL_FIELDS,
    REQUEST_FIELDS,
    RequestError,
    host_functions,
    parse_line,
    request_grants,
)

pytestmark = pytest.mark.unit


ASSERTIVE = settings(max_examples=examples(400), deadline=None, database=None)


def assert_only_request_errors(line: bytes) -> None:
    try:
        validate(line)
    except RequestError as exc:
        assert exc.message, "a RequestError must say what to fix"
    except PynoxError:
        pass  # a PolicyError or ConfigError: the pool server answers those as RequestError too
    # Anything else propagates and fails the test: it would take the pool down.


@ASSERTIVE
@given(st.binary(max_size=300))
def test_parser_random_bytes_raise_only_request_errors(line: bytes) -> None:
    assert_only_request_errors(line)


@ASSERTIVE
@given(JSON_VALUES)
def test_parser_random_json_values(value: object) -> None:
    line = json.dumps(value).encode()
    if not isinstance(value, dict):
        with pytest.raises(RequestError, match="not a JSON object"):
            parse_line(line)
    else:
        assert_only_request_errors(line)


@ASSERTIVE
@given(request_shaped())
def test_parser_objects_with_random_fields(message: dict[str, Any]) -> None:
    line = json.dumps(message).encode()
    try:
        kind = validate(line)
    except PynoxError as exc:
        if isinstance(exc, RequestError) and exc.request_id is not None:
            assert exc.request_id == message["id"]
        unknown = sorted(set(message) - REQUEST_FIELDS)
        if unknown and not any(key in message for key in CONTROL_FIELDS):
            assert isinstance(exc, RequestError)
            assert f"unknown field {unknown[0]!r}" in exc.message
        return
    if kind == "request":
        assert set(message) <= REQUEST_FIELDS
        assert ("code" in message) != ("script" in message)


@ASSERTIVE
@given(st.text(max_size=60), st.binary(min_size=1, max_size=8))
def test_parser_nul_bytes_and_invalid_utf8(text: str, junk: bytes) -> None:
    for line in (
        b'{"id": 1, "code": "' + junk + b'"}',  # raw bytes inside a string
        b'{"id": 1, "code": "print(1)"}' + junk,
        json.dumps({"id": text, "code": "\x00" + text}).encode(),  # escaped NUL: valid
        b'{"id": "\x00", "code": ""}',
        b"\xff\xfe" + json.dumps({"id": 1}).encode(),
    ):
        assert_only_request_errors(line)


@pytest.mark.parametrize("field", ["allow_read", "allow_write", "package_dirs"])
@given(st.text(max_size=20))
@settings(max_examples=examples(100), deadline=None, database=None)
def test_parser_paths_with_nul_bytes(field: str, tail: str) -> None:
    """A NUL in a granted path cannot be a path: it must be refused, not crash the checks."""
    line = json.dumps({"id": 1, "code": "", field: ["/tmp/a\x00" + tail]}).encode()
    assert_only_request_errors(line)


def test_parser_script_with_nul_byte() -> None:
    assert_only_request_errors(json.dumps({"id": 1, "script": "/tmp/a\x00.py"}).encode())


@pytest.mark.parametrize("depth", [1_000, 100_000])
@pytest.mark.parametrize("shape", ["array", "object", "in_field"])
def test_parser_deeply_nested(shape: str, depth: int) -> None:
    if shape == "array":
        line = b"[" * depth + b"]" * depth
    elif shape == "object":
        line = b'{"a":' * depth + b"1" + b"}" * depth
    else:
        line = b'{"id": 1, "code": "", "args": ' + b"[" * depth + b"]" * depth + b"}"
    with pytest.raises(RequestError):
        validate(line)


@given(st.integers(min_value=100_000, max_value=3_000_000), st.sampled_from(["id", "x", "code"]))
@settings(max_examples=examples(10), deadline=None, database=None)
def test_parser_huge_strings(size: int, key: str) -> None:
    big = "é" * size
    message = {"id": big if key == "id" else 1, "code": 5 if key != "code" else big, key: big}
    assert_only_request_errors(json.dumps(message).encode())


def test_unknown_field_is_named() -> None:
    with pytest.raises(RequestError, match="unknown field 'allow_reed'") as caught:
        validate(b'{"id": "u", "code": "", "allow_reed": ["/tmp"]}')
    assert caught.value.request_id == "u"


@pytest.mark.parametrize("field", ["allow_read", "allow_write", "package_dirs"])
def test_relative_path_is_refused(field: str) -> None:
    with pytest.raises(RequestError, match="not absolute") as caught:
        validate(json.dumps({"id": 3, "code": "", field: ["data"]}).encode())
    assert field in caught.value.message and "'data'" in caught.value.message
    assert caught.value.request_id == 3


def test_relative_script_is_refused() -> None:
    """docs: "Paths must be absolute: the pool cannot know the client's working directory"."""
    with pytest.raises(RequestError, match="absolute"):
        validate(b'{"id": 1, "script": "tool.py"}')


@pytest.mark.parametrize("fields", [{}, {"code": "", "script": "/tmp/x.py"}])
def test_exactly_one_of_code_and_script(fields: dict[str, str]) -> None:
    with pytest.raises(RequestError, match='exactly one of "code" and "script"'):
        validate(json.dumps({"id": 1, **fields}).encode())


@pytest.mark.parametrize(
    ("field", "value", "line"),
    wrong_type_cases(),
    ids=[f"{f}={v!r}"[:40] for f, v, _ in wrong_type_cases()],
)
def test_wrong_types_for_every_field(field: str, value: object, line: bytes) -> None:
    with pytest.raises(PynoxError) as caught:
        validate(line)
    assert named(field, caught.value.message), caught.value.message
    if isinstance(caught.value, RequestError) and field != "id":
        assert caught.value.request_id == "w"


@pytest.mark.parametrize("field", ["code", "name", "session", "profile"])
def test_a_lone_surrogate_in_text_is_refused(field: str) -> None:
    """JSON spells one as \\ud800; python runs no code holding one (its -c says it cannot
    decode the command) and no session name can hold one."""
    fields = {"code": "print(1)", field: "x\ud800"}
    with pytest.raises(RequestError) as caught:
        validate(json.dumps({"id": "s", **fields}).encode())
    assert caught.value.message == (
        f"{field} is not valid Unicode text: it holds a lone surrogate (such as \\ud800); "
        "send text that UTF-8 can encode"
    )
    assert caught.value.request_id == "s"


NO_BYTES = (
    "holds a lone surrogate that stands for no byte, which no path or command-line argument "
    "can; send each byte that is not UTF-8 as the surrogate os.fsdecode gives for it "
    "(\\udc80 to \\udcff)"
)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"script": "/tmp/x\ud800.py"}, f"script path '/tmp/x\\ud800.py' {NO_BYTES}"),
        ({"allow_read": ["/tmp/\ud800"]}, f"allow_read path '/tmp/\\ud800' {NO_BYTES}"),
        ({"args": ["\ud800"]}, f"args lists '\\ud800', which {NO_BYTES}"),
        (
            {"args": ["a\x00b"]},
            "args lists 'a\\x00b', which holds a NUL character; no command-line argument can",
        ),
    ],
    ids=["script", "allow_read", "args-surrogate", "args-nul"],
)
def test_text_that_no_bytes_give_is_refused_where_python_takes_bytes(
    fields: dict[str, object], message: str
) -> None:
    """A path or an argument reaches python as bytes, which os.fsdecode makes text of: a
    surrogate from \\udc80 to \\udcff stands for a byte that is not UTF-8, any other
    stands for none, and no command line passes a NUL. The API refuses the same."""
    request = {"id": "s", "code": "print(1)", **fields}
    if "script" in fields:
        del request["code"]
    with pytest.raises(RequestError) as caught:
        validate(json.dumps(request).encode())
    assert caught.value.message == message
    assert caught.value.request_id == "s"


@pytest.mark.parametrize(
    ("line", "request_id", "message"),
    [
        (
            b'{"id":"t","code":"1","timeout":"1s","timeout":"10s"}',
            "t",
            "the line gives 'timeout' twice in one object; give each key once",
        ),
        # Which id is meant cannot be known: the refusal names the last, as json reads it.
        (b'{"id":"a","id":"b","code":"1"}', "b", "the line gives 'id' twice in one object"),
        (b'{"id":"f","code":"1","files":{"a":"YQ==","a":"Yg=="}}', "f", "files names 'a'"),
    ],
)
def test_a_key_given_twice_is_refused(line: bytes, request_id: str, message: str) -> None:
    """Parsers differ on which of two values they keep: a check a client or a gateway made
    on the line might not be what the pool would run."""
    with pytest.raises(RequestError) as caught:
        validate(line)
    assert caught.value.message.startswith(message)
    assert caught.value.request_id == request_id


@pytest.mark.parametrize("digits", [309, 400, 5000])
@pytest.mark.parametrize("field", ["id", "timeout"])
def test_an_integer_beyond_a_double_is_refused(field: str, digits: int) -> None:
    """As docs/pool-protocol.md says; and past int()'s own digit limit, without a word of
    sys.set_int_max_str_digits."""
    number = "9" * digits
    line = f'{{"id":"big","code":"1","{field}":{number}}}' if field != "id" else None
    line = line or f'{{"id":{number},"code":"1"}}'
    with pytest.raises(RequestError) as caught:
        validate(line.encode())
    assert caught.value.message == (
        f"the line is not JSON: the number {number[:40]}... is beyond the range of a double; "
        "send finite numbers only"
    )
    assert caught.value.request_id == (None if field == "id" else "big")


def test_an_integer_within_a_double_is_taken() -> None:
    within = "1" + "0" * 307  # 1e307
    message = parse_line(f'{{"id":"w","code":"1","args":[],"x":{within}}}'.encode())
    assert message["x"] == 10**307


@pytest.mark.parametrize(
    ("functions", "message"),
    [
        ([{"name": "f"}, {"name": "f"}], "functions names 'f' twice; give each once"),
        ([{"name": "import"}], "'import' cannot be a host function's name: code imports"),
        ([{"name": "_search"}], "'_search' cannot be a host function's name: pynox_host keeps"),
        ([{"name": "HostError"}], "'HostError' is pynox_host's own name"),
        ([{"name": "f", "extra": 1}], "function 'f' has 'extra'; a function takes only name"),
        ([{"name": "f", "signature": "("}], "the signature of function 'f' is not a Python"),
        ([{"name": "f", "signature": "x"}], "the signature of function 'f' is not a Python"),
    ],
)
def test_host_functions_are_checked(functions: list[dict[str, object]], message: str) -> None:
    with pytest.raises(RequestError) as caught:
        host_functions({"id": "h", "functions": functions})
    assert caught.value.message.startswith(message), caught.value.message


def test_host_function_signatures_as_clients_write_them() -> None:
    signatures = ["(query, limit=5)", "(x: int) -> list[str]", "(...)", "()", "(*a, **k)"]
    functions = [{"name": f"f{i}", "signature": text} for i, text in enumerate(signatures)]
    taken = host_functions({"id": "h", "functions": functions})
    assert [spec["signature"] for spec in taken] == signatures
    assert host_functions({"id": "h", "functions": [{"name": "g"}]})[0]["signature"] == "(...)"


@pytest.mark.parametrize("name", ["A=B", "\ud800", "API-KEY"])
def test_allow_env_takes_variable_names_only(name: str) -> None:
    with pytest.raises(RequestError) as caught:
        request_grants({"id": "e", "code": "1", "allow_env": [name]})
    assert caught.value.message == (
        f"allow_env lists {name!r}, which is not an environment variable name; use letters, "
        "digits and _, not starting with a digit"
    )
