"""The last expression's value: the repr a notebook would show, for code requests and
session steps (never for scripts, nor for the command), bounded, with tracebacks and line
numbers as they were, and checked by the pool server as data from the program."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.commands import PYNOX, run
from support.pool_client import PoolClient
from support.pool_requests import FORGE, assert_ok, code, new_id, serves, step

from pynox.api.pool import Pool
from pynox.limits import MAX_VALUE


def run_code(pool: PoolClient, program: str, **fields: object) -> dict[str, object]:
    return pool.run({"id": new_id("v"), "code": program, **fields})


def assert_pool_error(result: dict[str, object], *words: str) -> None:
    error = result["error"]
    assert result["exit"] == 125 and isinstance(error, dict), result
    assert error["type"] == "PoolError", result
    for word in words:
        assert word in error["message"], (word, error)


def test_a_final_expression_gives_its_repr(pool: PoolClient) -> None:
    result = run_code(pool, "x = 41\nx + 1")
    assert_ok(result, "")
    assert result["value"] == "42"
    assert result["images"] == []
    assert run_code(pool, "'a' * 3")["value"] == "'aaa'"  # the repr, not str()


@pytest.mark.parametrize(
    "program",
    ["x = 42", "print('hi')", "None", "def f():\n    return 1", "for i in range(2):\n    i", ""],
)
def test_no_value_without_a_final_expression_or_for_none(pool: PoolClient, program: str) -> None:
    result = run_code(pool, program)
    assert result["exit"] == 0, result
    assert result["value"] is None


def test_line_numbers_and_tracebacks_are_unchanged(pool: PoolClient) -> None:
    before = run_code(pool, "x = 0\n\n1 / x\nx = 2")
    last = run_code(pool, "x = 0\n\nprint('before')\n1 / x")
    for result, line in ((before, 3), (last, 4)):
        assert result["exit"] == 1 and result["value"] is None, result
        assert result["error"]["type"] == "ZeroDivisionError"
        assert result["error"]["line"] == line
        assert f'File "agent.py", line {line}, in <module>' in result["stderr"]
        assert "1 / x" in result["stderr"]
    assert last["stdout"] == "before\n"


def test_syntax_errors_are_pythons_own(pool: PoolClient) -> None:
    result = run_code(pool, "x = (\n1 +")
    assert result["exit"] == 1 and result["error"]["type"] == "SyntaxError", result
    outside = run_code(pool, "x = 1\nreturn x")
    assert outside["error"]["type"] == "SyntaxError"
    assert "'return' outside function" in outside["error"]["message"]
    assert outside["error"]["line"] == 2


def test_future_imports_apply_to_the_final_expression(pool: PoolClient) -> None:
    program = "from __future__ import annotations\ndef f(x: nowhere): pass\nf.__annotations__"
    assert run_code(pool, program)["value"] == "{'x': 'nowhere'}"


def test_a_failing_repr_does_not_fail_the_run(pool: PoolClient) -> None:
    program = code("""
        class Odd:
            def __repr__(self):
                raise ValueError("no repr today")
        print("ran")
        Odd()
    """)
    result = run_code(pool, program)
    assert_ok_with_stderr(result, "ran\n")
    assert result["value"] is None
    assert "ValueError: no repr today" in result["stderr"]
    worse = code("""
        class Bad(Exception):
            def __str__(self):
                raise RuntimeError("no message either")
        class Odd:
            def __repr__(self):
                raise Bad()
        Odd()
    """)
    unspeakable = run_code(pool, worse)
    assert unspeakable["exit"] == 0 and unspeakable["value"] is None, unspeakable
    assert "value failed: Bad\n" in unspeakable["stderr"]
    not_text = run_code(pool, "class N:\n    __repr__ = lambda self: 3\nN()")
    assert not_text["exit"] == 0 and not_text["value"] is None
    assert "TypeError: __repr__ returned non-string" in not_text["stderr"]


def assert_ok_with_stderr(result: dict[str, object], stdout: str) -> None:
    assert result["exit"] == 0 and result["error"] is None, result
    assert result["stdout"] == stdout


def test_a_huge_repr_is_cut_to_the_bound(pool: PoolClient) -> None:
    result = run_code(pool, "'é' * 100000")
    value = result["value"]
    assert isinstance(value, str)
    assert len(value.encode()) <= MAX_VALUE
    assert value.startswith("'éééé")
    kept, _, note = value.partition("... [")
    cut = len(repr("é" * 100000).encode()) - len(kept.encode())
    assert note == f"{cut} more bytes of the value's repr were cut]"


@pytest.mark.parametrize("session", [False, True], ids=["request", "session-step"])
def test_max_output_bounds_the_value_as_it_bounds_each_stream(
    pool: PoolClient, session: bool
) -> None:
    """A client that keeps a model's output small with max_output gets no more of the
    value either: its start and the note, within max_output."""
    program = "print('o' * 5000)\n'é' * 100000"
    fields: dict[str, object] = {"max_output": 1000}
    if session:
        fields["session"] = new_id("small")
    result = run_code(pool, program, **fields)
    assert result["exit"] == 0 and result["stdout_truncated"], result
    value = result["value"]
    assert isinstance(value, str) and 900 < len(value.encode()) <= 1000
    kept, _, note = value.partition("... [")
    assert kept.startswith("'éééé")
    cut = len(repr("é" * 100000).encode()) - len(kept.encode())
    assert note == f"{cut} more bytes of the value's repr were cut]"


def test_a_max_output_too_small_for_the_note_keeps_the_values_start(pool: PoolClient) -> None:
    result = run_code(pool, "'é' * 100000", max_output=10)
    assert result["value"] == "'éééé"  # 9 bytes: a tenth would split a character
    assert run_code(pool, "41 + 1", max_output=2)["value"] == "42"


def test_a_forged_value_past_max_output_is_refused(pool: PoolClient) -> None:
    result = run_code(pool, FORGE + "forge({'type': 'value', 'repr': 'x' * 101})\n", max_output=100)
    assert_pool_error(result, "channel", "101 bytes", "bound of 100")
    serves(pool)


def test_a_repr_with_lone_surrogates_comes_back_escaped(pool: PoolClient) -> None:
    result = run_code(pool, "class S:\n    __repr__ = lambda self: 'a\\ud800b'\nS()")
    assert result["value"] == "a\\ud800b"
    json.dumps(result, ensure_ascii=False).encode()  # valid UTF-8 all the way


def test_session_steps_give_their_values(pool: PoolClient) -> None:
    name = new_id("values")
    first = step(pool, name, "x = 41")
    assert first["value"] is None
    second = step(pool, name, "x + 1")
    assert second["value"] == "42" and second["session"]["step"] == 2
    failed = step(pool, name, "x / 0")
    assert failed["value"] is None and failed["error"]["line"] == 1
    assert step(pool, name, "[x] * 2")["value"] == "[41, 41]"


def test_a_script_has_no_value_as_under_python(pool: PoolClient, tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text("41 + 1\n")
    result = pool.run({"id": new_id("script"), "script": str(script)})
    assert_ok(result, "")
    assert result["value"] is None


def test_the_command_prints_nothing_for_a_bare_expression(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text("41 + 1\n")
    plain = run([PYNOX, str(script)])
    assert (plain.returncode, plain.stdout, plain.stderr) == (0, b"", b"")
    as_json = json.loads(run([PYNOX, "--json", "-c", "41 + 1"]).stdout)
    assert as_json["stdout"] == "" and "value" not in as_json


# --- what the program forges ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "words"),
    [
        ({"type": "value", "repr": 42}, ["string"]),
        ({"type": "value", "repr": "x" * (MAX_VALUE + 1)}, [str(MAX_VALUE)]),
        ({"type": "value", "repr": "\ud800"}, ["UTF-8"]),
    ],
    ids=["not-a-string", "oversized", "lone-surrogate"],
)
def test_a_forged_value_frame_is_checked(
    pool: PoolClient, frame: dict[str, object], words: list[str]
) -> None:
    result = run_code(pool, FORGE + f"forge({frame!r})\n")
    assert_pool_error(result, "channel", *words)
    serves(pool)


def test_a_forged_value_cannot_stand_beside_the_real_one(pool: PoolClient) -> None:
    result = run_code(pool, FORGE + "forge({'type': 'value', 'repr': 'forged'})\n41 + 1")
    assert_pool_error(result, "second value")
    alone = run_code(pool, FORGE + "forge({'type': 'value', 'repr': 'mine'})\nx = 1")
    assert alone["exit"] == 0 and alone["value"] == "mine"  # what its own expression could say


def test_a_script_cannot_forge_a_value(pool: PoolClient, tmp_path: Path) -> None:
    script = tmp_path / "forger.py"
    script.write_text(FORGE + "forge({'type': 'value', 'repr': 'forged'})\n")
    result = pool.run({"id": new_id("script"), "script": str(script)})
    assert_pool_error(result, "no value")
    serves(pool)


# --- the API and the tool -------------------------------------------------------------------


@pytest.fixture(scope="module")
def api_pool() -> Iterator[Pool]:
    with Pool(workers=1) as pool:
        yield pool


def test_result_value_and_the_tool_text(api_pool: Pool) -> None:
    result = api_pool.run("x = 41\nx + 1")
    assert result.value == "42" and result.images == ()
    assert result.text == "Out: 42"
    tool = api_pool.tool()
    assert tool("print('total')\nsum(range(10))") == "total\nOut: 45"
    assert tool("x = 1") == "(no output)"
    multi = tool("'a\\nb'.splitlines() and 'line one\\nline two'")
    assert multi == "Out: 'line one\\nline two'"


def test_the_tool_text_keeps_the_value_within_max_output(api_pool: Pool) -> None:
    tool = api_pool.tool(max_output=2000)
    text = tool("'x' * 100000")
    assert text.startswith("Out: 'xxx") and "more bytes of the value's repr were cut]" in text
    assert len(text) <= 2000 + len("Out: ")


def test_a_multi_line_repr_starts_on_a_line_of_its_own(api_pool: Pool) -> None:
    program = "class Table:\n    __repr__ = lambda self: 'a b\\n1 2'\nTable()"
    assert api_pool.run(program).text == "Out:\na b\n1 2"


def test_the_session_tool_echoes_values(api_pool: Pool) -> None:
    tool = api_pool.tool(session=True)
    assert tool("41 + 1") == "Out: 42"
    assert tool("answer = 42") == "(no output)"
    assert tool("answer") == "Out: 42"
    assert "final expression" in (tool.__doc__ or "")


def test_the_tools_run_gives_the_whole_result(api_pool: Pool) -> None:
    tool = api_pool.tool()
    result = tool.run("6 * 7")  # type: ignore[attr-defined]
    assert result.value == "42" and result.ok and result.text == tool("6 * 7")


@pytest.mark.unit
def test_result_lines_become_result_fields() -> None:
    from pynox.api.result import Image, Result

    png = b"\x89PNG\r\n\x1a\n"
    line = {
        "exit": 0,
        "stdout": "",
        "value": "42",
        "images": [
            {"mime": "image/png", "width": 2, "height": 1, "data": "iVBORw0KGgo="},
            {"mime": "image/png", "width": "2", "height": 1, "data": "iVBORw0KGgo="},
            "not an image",
        ],
    }
    result = Result.from_json(line)
    assert result.value == "42"
    assert result.images == (Image("image/png", 2, 1, png),)
    assert result.text == "Out: 42\n[image 1: 2x1 PNG]"
    assert Result.from_json({"exit": 0, "value": 42, "images": {}}).value is None
