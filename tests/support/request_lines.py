"""Request lines for `pynox pool`, for the parser's tests (tests/pool/): hypothesis
strategies for JSON and request-shaped objects, the pool server's checks in its order
(`validate`), and wrong values for every field with a check that the message names it.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import strategies as st

from pynox.limits import DEFAULT_TIMEOUT
from pynox.policy.config import Config, Grants
from pynox.policy.resolve import build_policy
from pynox.pool.request import (
    CONTROL_FIELDS,
    REQUEST_FIELDS,
    cap,
    check_fields,
    host_functions,
    parse_line,
    request_grants,
)


def validate(line: bytes) -> str:
    """The pool server's checks for one line, in its order (server.PoolServer._handle_line,
    _request, _policy), without running anything. Returns "control" or "request", or raises;
    anything but a PynoxError escaping here would escape the pool server's loop too."""
    message = parse_line(line)
    if any(key in message for key in CONTROL_FIELDS):
        return "control"
    check_fields(message)
    host_functions(message)
    grants = request_grants(message)
    profile = message.get("profile")
    if isinstance(profile, str):
        grants = Config("").profile(profile).merged(grants)
    grants = cap(grants, Grants(), frozenset(), message["id"])
    if grants.timeout is None:
        grants.timeout = DEFAULT_TIMEOUT
    script = message.get("script")
    implicit = [os.path.dirname(os.path.realpath(script))] if isinstance(script, str) else []
    build_policy(grants, implicit, {}, "/")
    return "request"


# JSON as RFC 8259 has it: no NaN or Infinity (the pool refuses those, see test_pool_hostile.py).
JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=25,
)
FIELD_NAMES = st.sampled_from(sorted(REQUEST_FIELDS))
IDS = st.one_of(st.integers(), st.text(max_size=20))


@st.composite
def request_shaped(draw: st.DrawFn) -> dict[str, Any]:
    """An object with an id and known fields holding anything, sometimes with unknown keys."""
    message: dict[str, Any] = {"id": draw(IDS)}
    for name in draw(st.lists(FIELD_NAMES, max_size=6, unique=True)):
        if name != "id":
            message[name] = draw(JSON_VALUES)
    extra = st.text(max_size=12).filter(lambda key: key != "id")
    message.update(draw(st.dictionaries(extra, JSON_VALUES, max_size=2)))
    return message


# Every field, with values of the wrong type or out of range. The message must name the field.
WRONG: dict[str, list[object]] = {
    "id": [None, True, 1.5, [], {"a": 1}],
    "code": [1, None, [], {}, True],
    "script": [1, None, [], {}, False],
    "cwd": [1, None, [], {}, True, "relative"],
    "args": ["a", [1], {}, [None], 1, [["x"]]],
    "name": [1, [], {}, None],
    "profile": [1, [], True, "no-such-profile"],
    "allow_read": ["/tmp", [1], ["relative"], {}, [None], 7],
    "allow_write": ["/tmp", [1], ["relative"], {}],
    "package_dirs": ["/tmp", [1], ["./x"], {}],
    "allow_env": ["HOME", [1], {}, [None], ["LD_PRELOAD"]],
    "allow_network": ["yes", 1, 0, [], {}],
    "timeout": ["abc", -1, 0, [], {}, True, "1x", 1e10, "-5s"],
    "memory": ["1q", -1, 1.5, [], True, "1m", 2**70],
    "max_output": ["x", -1, (16 << 20) + 1, True, [], "17m"],
    "max_file_size": ["x", 0, -5, True, [], 1.5],
    "session": [1, [], {}, True],
    "functions": ["f", [1], [{"name": 1}], [{"name": "_private"}], [{"name": "a b"}], {}, [{}]],
}


def wrong_type_cases() -> list[tuple[str, object, bytes]]:
    cases = []
    for field, values in WRONG.items():
        for value in values:
            message: dict[str, object] = {"id": "w", "code": "pass"}
            if field == "code":
                message = {"id": "w"}
            if field == "script":
                message = {"id": "w"}
            message[field] = value
            cases.append((field, value, json.dumps(message).encode()))
    return cases


def named(field: str, message: str) -> bool:
    if field == "functions":
        return "function" in message
    if field == "allow_env" and "LD_PRELOAD" in message:
        return True  # a loader variable: the message names the variable and allow_env
    return field in message
