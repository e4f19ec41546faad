"""readable_json.dumps_readable writes what json.dumps writes, without importing json."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pynox import readable_json

pytestmark = pytest.mark.unit

PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


@given(PLAIN)
def test_it_writes_what_json_dumps_writes(value: object) -> None:
    assert readable_json.dumps_readable(value) == json.dumps(value)


@given(st.dictionaries(st.none() | st.booleans() | st.integers() | st.floats(), st.none()))
def test_keys_are_written_as_json_dumps_writes_them(value: dict[object, None]) -> None:
    assert readable_json.dumps_readable(value) == json.dumps(value)


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_strings_are_written_as_json_dumps_writes_them(text: str) -> None:
    assert readable_json.dumps_readable([text, {text: text}]) == json.dumps([text, {text: text}])


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_refused(number: float) -> None:
    with pytest.raises(readable_json.NotFinite):
        readable_json.dumps_readable({"x": [number]})


def test_writing_imports_neither_json_nor_re() -> None:
    code = (
        "import sys; from pynox import readable_json\n"
        "readable_json.dumps_readable({'a': [1, 2.5, 'é', None, True]})\n"
        "print(sorted(m for m in ('json', 're') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    assert done.stdout == "[]\n", done.stderr
