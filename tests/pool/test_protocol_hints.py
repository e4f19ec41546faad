"""A client of the protocol (not the Python API) is told what to send: each hint names
grants and limits as the request's own JSON fields, which such a client adds to its
request as they are, and which then works. The Python API asks for its own spelling."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from support.pool_client import PoolClient, clean_env
from support.pool_requests import assert_refused, new_id

# What a hint says to add: JSON members, after "with", up to the end or a "; ".
_FIELDS = re.compile(r" with (\"[a-z_]+\": .+?)(?:; |$)")


def _fields(hint: str) -> dict[str, object]:
    found = _FIELDS.search(hint)
    assert found, f"the hint names no request field: {hint}"
    fields = json.loads("{" + found.group(1) + "}")
    assert isinstance(fields, dict)
    return fields


CASES = {
    "read": ("print(len(open('/etc/hostname').read()) > 0)", {}),
    "network": ("import socket\nsocket.socket().close()\nprint(True)", {}),
    "memory": ("print(len(bytearray(100 << 20)) > 0)", {"memory": "64m"}),
    "timeout": ("import time\ntime.sleep(1.5)\nprint(True)", {"timeout": "1s"}),
    "environment": ("import os\nprint(os.environ['PYNOX_TEST_TOKEN'] == 'x')", {}),
}


@pytest.fixture(scope="module")
def pool() -> Iterator[PoolClient]:
    """A pool started where PYNOX_TEST_TOKEN is set, as a client's variable would be."""
    with PoolClient(env=clean_env({"PYNOX_TEST_TOKEN": "x"})) as client:
        yield client
        assert client.close() == 0


@pytest.mark.parametrize("case", CASES)
def test_a_hint_names_fields_that_sent_as_they_are_make_the_run_work(
    pool: PoolClient, case: str
) -> None:
    code, fields = CASES[case]
    failed = pool.run({"id": new_id(case), "code": code, **fields})
    assert failed["exit"] != 0 and failed["error"]["hint"], failed
    hint = failed["error"]["hint"]
    assert failed["stderr"].endswith(f"pynox: {hint}\n") or case == "timeout", failed["stderr"]
    added = _fields(hint)
    followed = pool.run({"id": new_id(case), "code": code, **fields, **added})
    assert (followed["exit"], followed["stdout"]) == (0, "True\n"), (hint, followed)


def test_the_python_spelling_is_asked_for_and_nothing_else(pool: PoolClient) -> None:
    code = "open('/etc/hostname').read()"
    python = pool.run({"id": new_id(), "code": code, "hints": "python"})
    assert python["error"]["hint"].endswith("grant it with allow_read=['/etc/hostname']")
    request_id = new_id()
    refused = pool.run({"id": request_id, "code": code, "hints": "toml"})
    assert_refused(refused, request_id, "hints", '"json"', '"python"')


def test_the_python_api_gets_its_own_spelling() -> None:
    import pynox

    result = pynox.run("open('/etc/hostname').read()")
    assert result.error is not None
    assert result.error["hint"].endswith("grant it with allow_read=['/etc/hostname']")
