"""The API on the installed pool: runs, denials and timeouts as text, host functions,
sessions, threads and asyncio, the module-level pool, and no process left behind."""

from __future__ import annotations

import asyncio
import contextvars
import os
import signal
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest
from support.pool_client import descendants
from support.waiting import wait_until

import pynox
import pynox.api.shared
from pynox.api.connection import PoolError
from pynox.api.pool import Pool
from pynox.api.result import Result
from pynox.api.stream import Output
from pynox.limits import MAX_LINE


def process_tree(pid: int) -> set[int]:
    """pid and every live process below it."""
    return {pid} | descendants(pid, zombies=False)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def pool() -> Any:
    pool = Pool(workers=2)
    try:
        pool.run("pass")
    except PoolError as exc:
        if "not part of this build" in str(exc):
            pytest.skip("this build has no `pynox pool` yet")
        raise
    yield pool
    pool.close()


def test_run_ok(pool: Pool) -> None:
    r = pool.run("print(sum(range(10)))")
    assert r.ok and r.exit == 0 and r.error is None
    assert r.stdout == "45\n" and r.text == "45"
    assert r.policy is not None and r.policy["network"] == "deny"
    assert isinstance(r.duration_ms, int)


def test_args_reach_sys_argv_as_given(pool: Pool) -> None:
    r = pool.run("import sys\nprint(sys.argv)", args=["", "two words"])
    assert r.stdout == "['agent.py', '', 'two words']\n", r.text


def test_a_denial_is_text_not_an_exception(pool: Pool) -> None:
    r = pool.run("print('looking')\nopen('/etc/passwd').read()")
    assert not r.ok and r.exit == 1
    assert r.error is not None and r.error["type"] == "PermissionError"
    assert r.text.splitlines() == [
        "looking",
        "PermissionError: [Errno 13] Permission denied: '/etc/passwd'",
        "at agent.py:2",
        "pynox: reading /etc/passwd is not allowed; grant it with allow_read=['/etc/passwd']",
    ]


def test_errors_use_the_requests_name(pool: Pool) -> None:
    r = pool.run("x = 1\n1 / 0", name="step3.py")
    assert r.text.endswith("ZeroDivisionError: division by zero\nat step3.py:2")


def test_a_sessions_steps_are_named_apart(pool: Pool) -> None:
    """A session sent every step as agent.py: a traceback through a function an earlier
    step defined showed the latest step's line of that number."""
    with pool.session() as session:
        assert session.run("def f():\n    return 1 / 0").ok
        r = session.run("x = 1\ny = 2\nf()")
    assert '  File "<step-1>", line 2, in f\n    return 1 / 0\n' in r.stderr, r.stderr
    assert r.text.endswith("ZeroDivisionError: division by zero\nat <step-1>:2")


def test_timeout_is_text(pool: Pool) -> None:
    started = time.monotonic()
    r = pool.run("print('working', flush=True)\nwhile True: pass", timeout="1s")
    assert time.monotonic() - started < 10
    assert r.exit == 124 and r.error is not None and r.error["type"] == "Timeout"
    assert r.text.startswith("working\nTimeout: the program ran past its 1s time limit")
    assert "timeout='2s'" in r.text


def test_output_is_cut_at_max_output(pool: Pool) -> None:
    r = pool.run("print('x' * 10000)\nprint('the end')", max_output=100)
    assert r.truncated and r.stdout_truncated and len(r.stdout) <= 100
    assert r.stdout.startswith("x") and r.stdout.endswith("\nthe end\n")
    assert "bytes left out ...]\n" in r.stdout
    assert "[stdout truncated: its middle was left out, its start and end kept; print less]" in (
        r.text
    )


@pytest.mark.parametrize(
    ("max_output", "kept", "note"),
    [
        (20, "x" * 20, "only its start was kept"),
        (32, "[... 10009 bytes left out ...]\n", "all of it was left out"),
        (34, "x\n[... 10007 bytes left out ...]\n\n", "only its start was kept"),
    ],
)
def test_output_cut_below_room_for_both_ends_is_noted_as_kept(
    pool: Pool, max_output: int, kept: str, note: str
) -> None:
    """A limit too small for the start, the line that says what was left out and the end
    keeps less: the note says what was kept, and printing less keeps it all."""
    r = pool.run("print('x' * 10000)\nprint('the end')", max_output=max_output)
    assert r.stdout == kept
    assert r.text.endswith(f"[stdout truncated: {note}; print less]")
    less = pool.run("print('the end')", max_output=max_output)
    assert (less.stdout, less.truncated) == ("the end\n", False)


def test_the_text_of_long_output_ends_with_the_error_and_hint(pool: Pool) -> None:
    code = "print('o' * 1_000_000)\nopen('/etc/hostname')"
    r = pool.run(code, max_output=4096)
    lines = r.text.splitlines()
    assert lines[-4:] == [
        "[stdout truncated: its middle was left out, its start and end kept; print less]",
        "PermissionError: [Errno 13] Permission denied: '/etc/hostname'",
        "at agent.py:2",
        "pynox: reading /etc/hostname is not allowed; grant it with allow_read=['/etc/hostname']",
    ]


def test_relative_grants_resolve_against_the_cwd_of_the_call(
    pool: Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "orders.csv").write_text("id,total\n1,9.5\n")
    (tmp_path / "out").mkdir()
    monkeypatch.chdir(tmp_path)  # the pool started elsewhere
    code = (
        f"rows = open({str(tmp_path / 'data' / 'orders.csv')!r}).read().splitlines()\n"
        f"open({str(tmp_path / 'out' / 'n.txt')!r}, 'w').write(str(len(rows)))\n"
        "print(len(rows))"
    )
    r = pool.run(code, allow_read=["data"], allow_write=["out"])
    assert r.text == "2", r.text
    assert (tmp_path / "out" / "n.txt").read_text() == "2"
    assert r.policy is not None and r.policy["allow_read"] == [str(tmp_path / "data")]


def test_code_runs_where_the_call_is_made_as_its_relative_grants_do(
    pool: Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As `pynox app.py` runs where it is called: relative paths of the code and of the
    grants name the same files, and a hint the same file the code opened."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "orders.csv").write_text("id,total\n1,9.5\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "secret.txt").write_text("x")
    monkeypatch.chdir(tmp_path)  # the pool started elsewhere
    code = (
        "rows = open('data/orders.csv').read().splitlines()\n"
        "open('out/n.txt', 'w').write(str(len(rows)))\n"
        "print(len(rows))"
    )
    r = pool.run(code, allow_read=["data"], allow_write=["out"])
    assert r.text == "2", r.text
    assert (tmp_path / "out" / "n.txt").read_text() == "2"
    denied = pool.run("open('secret.txt').read()")
    hint = f"pynox: reading {tmp_path}/secret.txt is not allowed"
    assert hint in denied.text, denied.text
    assert pool.run("open('secret.txt').read()", allow_read=["secret.txt"]).value == "'x'"
    # A session runs where it was made, its grants resolved there, wherever its steps
    # are called from, and so does its process started again after sys.exit().
    session = pool.session(allow_read=["data"])
    monkeypatch.chdir("/")
    step = "len(open('data/orders.csv').read().splitlines())"
    assert session.run(step).value == "2"
    assert session.run("import sys; sys.exit(3)").exit == 3
    again = session.run(step)
    assert again.value == "2" and again.session is not None and again.session["restarted"]
    session.close()


def test_a_session_that_cannot_start_again_says_why_in_its_error(
    pool: Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session whose process cannot start (its directory removed since its first step)
    gives a Result whose error says what failed and what to do, as every other failure's
    does, not an error of None with the reason on stderr alone; and what it says works."""
    where = tmp_path / "work"
    where.mkdir()
    monkeypatch.chdir(where)
    session = pool.session()
    monkeypatch.chdir(tmp_path)
    assert session.run("import sys; sys.exit()").exit == 0
    where.rmdir()
    r = session.run("print('on')")
    assert r.exit == 125 and not r.ok
    assert r.error is not None and r.error["type"] == "SandboxError", r
    assert r.error["message"] == (
        f"cannot run the session's program in {where}, the directory its first step gave "
        "it (No such file or directory); close the session and start a new one from a "
        "directory that exists"
    )
    session.close()
    with pool.session() as fresh:  # started from tmp_path, which exists
        assert fresh.run("print('on')").text == "on"


def test_host_functions(pool: Pool) -> None:
    calls = []

    def search(query: str, limit: int = 5) -> list[dict[str, str]]:
        """Search the product catalog."""
        calls.append((query, limit))
        return [{"name": f"{query} {i}"} for i in range(limit)]

    def down(query: str) -> None:
        raise ConnectionError("the catalog is down")

    def slow() -> int:
        time.sleep(5)
        return 1

    functions = {"search": search, "down": down, "slow": slow}
    r = pool.run(
        "from pynox_host import search\nprint(search('lamp', limit=2))", functions=functions
    )
    assert r.text == "[{'name': 'lamp 0'}, {'name': 'lamp 1'}]", r.text
    assert calls == [("lamp", 2)]
    r = pool.run("from pynox_host import down, HostError\ndown('x')", functions=functions)
    assert r.error is not None and r.error["type"].endswith("HostError")
    assert "ConnectionError: the catalog is down" in r.text and "at agent.py:2" in r.text
    started = time.monotonic()
    r = pool.run("from pynox_host import slow\nslow()", functions=functions, timeout="1s")
    assert r.exit == 124 and time.monotonic() - started < 4


_USER: contextvars.ContextVar[str] = contextvars.ContextVar("user", default="nobody")


def test_host_functions_see_the_context_of_the_call_that_ran_the_code(pool: Pool) -> None:
    """A request-scoped value (the user, a tracing span) kept in a ContextVar reaches the
    host functions of the run, sync or async, as it would reach a task."""

    def whoami() -> str:
        return _USER.get()

    async def awhoami() -> str:
        return _USER.get()

    functions = {"whoami": whoami, "awhoami": awhoami}
    code = "from pynox_host import whoami, awhoami\nprint(whoami(), awhoami())"

    def in_context(user: str) -> str:
        _USER.set(user)
        return pool.run(code, functions=functions).text

    assert contextvars.copy_context().run(in_context, "alice") == "alice alice"

    async def main() -> str:
        _USER.set("bob")
        return (await pool.arun(code, functions=functions)).text

    assert asyncio.run(main()) == "bob bob"
    assert _USER.get() == "nobody"


def test_a_host_result_the_pool_would_refuse_raises_hosterror_at_once(pool: Pool) -> None:
    """A value the pool reads as no JSON (an integer beyond a double, keys that meet once
    written) is refused as NaN is: a HostError the program catches, not a wait for its
    timeout."""
    functions = {
        "huge": lambda: 2**1100,
        "keys": lambda: {1: 2, "1": 3},
        "nan": lambda: [float("nan")],
    }
    program = (
        "from pynox_host import huge, keys, nan, HostError\n"
        "for call in (huge, keys, nan):\n"
        "    try:\n"
        "        call()\n"
        "    except HostError as exc:\n"
        "        print(call.__name__, 'refused:', exc)\n"
    )
    started = time.monotonic()
    r = pool.run(program, functions=functions, timeout="10s")
    assert r.ok, r.text
    lines = r.stdout.splitlines()
    assert lines[0].startswith("huge refused: huge() returned a value that is not JSON"), lines
    assert "beyond the range of a double" in lines[0], lines
    assert lines[1].startswith("keys refused: keys() returned a value that is not JSON"), lines
    assert "'1' appears twice" in lines[1], lines
    # In the words of the JSON check, not under the name of its exception class.
    assert lines[2].startswith("nan refused: nan() returned a value that is not JSON (NaN"), lines
    assert time.monotonic() - started < 5


class _Row(dict[str, int]):
    """A mapping whose own code fails as the value is written as JSON."""

    def items(self) -> NoReturn:  # type: ignore[override]
        raise RuntimeError("the connection was closed")


def test_a_host_value_that_fails_to_encode_raises_hosterror_at_once(pool: Pool) -> None:
    """The value's own methods run while it is written as JSON: whatever they raise ends
    the call with a HostError, not a wait for the timeout (and no traceback of pynox's)."""
    started = time.monotonic()
    r = pool.run(
        "from pynox_host import row, HostError\n"
        "try:\n"
        "    row()\n"
        "except HostError as exc:\n"
        "    print(exc)\n",
        functions={"row": lambda: _Row(a=1)},
        timeout="10s",
    )
    assert r.ok, r.text
    assert r.stdout == (
        "row() returned a value that is not JSON (RuntimeError: the connection was closed)\n"
    )
    assert time.monotonic() - started < 5


class _CursorRow(dict[str, int]):
    """A mapping that can be read once, as a row of a database cursor."""

    read = False

    def items(self) -> Any:  # type: ignore[override]
        if self.read:
            raise RuntimeError("the cursor has moved on")
        self.read = True
        return super().items()


def test_a_host_value_is_read_once(pool: Pool) -> None:
    """The value the program gets is the JSON that was checked, not the value written a
    second time: one that reads differently then (a cursor's row, a dict another thread
    changes) would leave the call unanswered until the timeout."""
    started = time.monotonic()
    r = pool.run(
        "from pynox_host import row\nprint(row())",
        functions={"row": lambda: _CursorRow(a=1)},
        timeout="10s",
    )
    assert r.ok and r.stdout == "{'a': 1}\n", r.text
    assert time.monotonic() - started < 5


def test_a_huge_host_error_reaches_the_program_cut(pool: Pool) -> None:
    """An exception that carries a whole response body is longer than a protocol line:
    the program gets its message cut, at once, not a Timeout (whose hint, to raise the
    limit, would not help)."""

    def fetch(url: str) -> str:
        raise RuntimeError("the service answered: " + "<html>" * (3 << 20))

    program = (
        "from pynox_host import fetch, HostError\n"
        "try:\n"
        "    fetch('https://example.com')\n"
        "except HostError as exc:\n"
        "    print(len(str(exc)) < 70_000, str(exc)[:35], str(exc)[-16:])\n"
    )
    started = time.monotonic()
    r = pool.run(program, functions={"fetch": fetch}, timeout="10s")
    assert r.ok, r.text
    assert r.stdout == "True RuntimeError: the service answered: more characters)\n", r.stdout
    assert time.monotonic() - started < 5


def test_a_host_function_that_runs_its_own_session_is_refused_at_once(pool: Pool) -> None:
    """The step that called the function waits for it, and steps run one at a time: a step
    asked for from there would wait for the timeout. It is refused at once, saying why,
    and the session goes on."""
    sessions: list[pynox.Session] = []

    def ask_again(code: str) -> str:
        return sessions[0].run(code).text

    with pool.session(functions={"ask_again": ask_again}, timeout="10s") as session:
        sessions.append(session)
        started = time.monotonic()
        r = session.run("from pynox_host import ask_again\nx = 1\nprint(ask_again('x'))")
        assert r.ok and time.monotonic() - started < 5, r.text
        assert "cannot run a step of the session whose step called it" in r.stdout, r.stdout
        assert session.alive and session.run("x").text == "Out: 1"


def test_a_host_function_may_close_its_own_session(pool: Pool) -> None:
    """close() from the session's own step returns at once; the session ends after it."""
    sessions: list[pynox.Session] = []

    def done() -> str:
        sessions[0].close()
        return "closing"

    session = pool.session(functions={"done": done}, timeout="10s")
    sessions.append(session)
    started = time.monotonic()
    r = session.run("from pynox_host import done\nprint(done())")
    assert r.ok and r.stdout == "closing\n" and time.monotonic() - started < 5, r.text
    assert session.closed and not session.alive


def test_a_host_function_may_close_a_session_whose_step_waits_for_it_through_a_run(
    pool: Pool,
) -> None:
    """The step waits for a function that waits for a run whose function closes the
    session: close() returns at once there too, not after a wait of its own."""
    sessions: list[pynox.Session] = []

    def done() -> str:
        sessions[0].close()
        return "closing"

    def via_run() -> str:
        return pool.run("from pynox_host import done\nprint(done())", functions={"done": done}).text

    session = pool.session(functions={"via_run": via_run}, timeout="20s")
    sessions.append(session)
    started = time.monotonic()
    r = session.run("from pynox_host import via_run\nprint(via_run())")
    assert r.ok and r.stdout == "closing\n" and time.monotonic() - started < 5, r.text
    assert session.closed and not session.alive


def test_a_host_function_cannot_wait_for_the_only_worker() -> None:
    """In a pool of one worker, the request that called the function holds it: a run asked
    for from the function is refused at once, with what to do, not left to time out."""

    def inner() -> str:
        return pynox_pool.run("print('inner')").text

    with Pool(workers=1) as pynox_pool:
        started = time.monotonic()
        r = pynox_pool.run(
            "from pynox_host import inner\nprint(inner())",
            functions={"inner": inner},
            timeout="10s",
        )
        assert r.ok and time.monotonic() - started < 5, r.text
        assert "make the pool with workers=2 or more" in r.stdout, r.stdout
        with pynox_pool.session() as session:  # sessions are not the workers' to run
            r = pynox_pool.run(
                "from pynox_host import step\nprint(step())",
                functions={"step": lambda: session.run("print('in a session')").text},
            )
            assert r.stdout == "in a session\n", r.text


def test_nested_runs_that_would_hold_every_worker_are_refused_at_once(pool: Pool) -> None:
    """A run whose host function runs code whose host function runs code: the two waiting
    runs hold both workers, so a third would wait for the timeout. It is refused at once."""

    def deeper(depth: int) -> str:
        code = f"from pynox_host import deeper\nprint(deeper({depth + 1}))"
        if depth == 2:
            code = "print('innermost')"
        return pool.run(code, functions={"deeper": deeper}, timeout="10s").text

    started = time.monotonic()
    r = pool.run(
        "from pynox_host import deeper\nprint(deeper(1))",
        functions={"deeper": deeper},
        timeout="10s",
    )
    assert r.ok and time.monotonic() - started < 5, r.text
    assert "while all 2 of its workers run requests that wait" in r.stdout, r.stdout

    # So is a step of a session whose step waits for it through another run.
    sessions: list[pynox.Session] = []

    def via_run() -> str:
        step = {"step": lambda: sessions[0].run("print('again')").text}
        return pool.run("from pynox_host import step\nprint(step())", functions=step).text

    with pool.session(functions={"via_run": via_run}, timeout="10s") as session:
        sessions.append(session)
        started = time.monotonic()
        r = session.run("from pynox_host import via_run\nprint(via_run())")
        assert r.ok and time.monotonic() - started < 5, r.text
        assert "a step of a session whose step waits, through other" in r.stdout, r.stdout


def test_sessions_keep_state_and_restart_after_a_timeout(pool: Pool) -> None:
    with pool.session(timeout="1s") as session:
        assert not session.alive and session.steps == 0
        assert session.run("x = 41").ok
        assert session.alive
        assert session.run("print(x + 1)").text == "42"
        error = session.run("1 / 0")
        assert not error.ok and session.alive  # a Python error keeps the session
        assert session.run("print(x)").text == "41"
        timed_out = session.run("while True: pass")
        assert timed_out.exit == 124 and not session.alive
        assert timed_out.session is not None and timed_out.session["ended"] == "timeout"
        fresh = session.run("print('x' in globals())")
        assert session.alive and fresh.session is not None and fresh.session["restarted"]
        assert fresh.stdout == "False\n"
        assert session.steps == 6
    assert not session.alive


def test_a_timed_out_step_s_hint_is_followed_by_the_step_s_own_timeout(pool: Pool) -> None:
    """The hint after a session step's timeout names timeout=, the one limit a step may
    change (as the pool protocol lets it): the next step, run with it, has the time."""
    slow = "import time\ntime.sleep(1.5)\nprint('done')"
    with pool.session(timeout="1s") as session:
        timed_out = session.run(slow)
        assert timed_out.exit == 124 and timed_out.error is not None
        assert timed_out.error["hint"] == "make it faster or raise the limit with timeout='2s'"
        followed = session.run(slow, timeout="2s")
        assert followed.ok and followed.stdout == "done\n", followed.text
        assert followed.policy is not None and followed.policy["timeout_ms"] == 2000
        # The step's own limit is that step's: the next one has the session's again.
        assert session.run(slow).exit == 124


def test_a_session_tool_s_hint_names_the_grant_not_a_session_the_model_cannot_start(
    pool: Pool,
) -> None:
    """A Session's hint says to start a new session with the grant, which its application
    can do; the model behind a session tool cannot, and reads the grant alone, as from a
    one-shot tool (its docstring says to ask the user for it)."""
    grant = "reading /etc/hostname is not allowed; grant it with allow_read=['/etc/hostname']"
    code = "open('/etc/hostname').read()"
    with pool.session() as session:
        denied = session.run(code)
        assert denied.error is not None and denied.error["hint"].startswith(grant + "; ")
        assert "session.close()" in denied.error["hint"]  # the application's to follow
    notebook = pool.tool(session=True)
    text = notebook(code)
    assert text.endswith(f"\npynox: {grant}") and "session.close()" not in text, text
    result = notebook.run(code)
    assert result.error is not None and result.error["hint"] == grant
    assert result.stderr.endswith(f"\npynox: {grant}\n"), result.stderr
    assert Result.from_json(result.raw) == result


def test_a_step_s_own_timeout_is_not_the_session_s_even_when_it_starts_it(pool: Pool) -> None:
    """The step that starts a session's process gives that process its policy: its own
    timeout must not become that of the steps after it, which have the session's."""
    with pool.session() as session:
        first = session.run("x = 1", timeout="2s")
        assert first.policy is not None and first.policy["timeout_ms"] == 2000
        later = session.run("print(x)")
        assert later.text == "1" and later.policy is not None
        assert later.policy["timeout_ms"] == 30000  # the default, as pool.session() has it


def test_a_session_the_pool_closed_when_idle_says_it_restarted(tmp_path: Path) -> None:
    """The pool closes a session idle for session_idle; the next step starts a new one. The
    Session said restarted=False and its text said nothing: the model read a NameError for
    a variable it had defined, with no word that the session's state was gone."""
    config = tmp_path / "pynox.toml"
    config.write_text('[pool]\nsession_idle = "1s"\n')
    with Pool(workers=1, config=config) as idle, idle.session() as session:
        assert session.run("x = 1").ok and session.run("y = 2").ok
        time.sleep(2.5)
        after = session.run("print('x' in globals())")
        assert after.stdout == "False\n" and after.session is not None, after.text
        assert after.session["restarted"] is True, after.session
        assert after.text.startswith("[a new session started: the previous one had ended")
        again = session.run("print('again')")
        assert again.session is not None and not again.session["restarted"], again.session


def test_ctrl_c_during_a_step_ends_the_session_and_says_so(pool: Pool) -> None:
    """The pool cancels the step, which ends its session: `alive` must say so, as it does
    for a cancelled asyncio step."""
    main = threading.main_thread().ident
    assert main is not None

    with pool.session() as session:
        assert session.run("x = 1").ok and session.alive
        # A real SIGINT, as Ctrl-C sends: it wakes the wait for the result.
        timer = threading.Timer(1.0, signal.pthread_kill, (main, signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                session.run("import time\ntime.sleep(30)")
        finally:
            timer.cancel()
        assert not session.alive
        after = session.run("print('x' in globals())")
        assert after.stdout == "False\n" and after.session is not None
        assert after.session["restarted"] and session.alive


def test_ctrl_c_while_a_long_request_is_sent_leaves_the_pool_serving() -> None:
    """The line was half written when Ctrl-C came: the pool read it and the next request as
    one bad line, the next request was never answered, and the watchdog stopped the pool."""
    main = threading.main_thread().ident
    assert main is not None
    with Pool(workers=1) as busy:
        assert busy.run("pass").ok
        pid = busy.pid
        assert pid is not None
        # Far more than a pipe holds: with the pool stopped, the write waits part way.
        long_code = f"x = '{'a' * 1_000_000}'\nimport time\ntime.sleep(60)"

        def interrupt_then_resume() -> None:
            time.sleep(0.5)
            signal.pthread_kill(main, signal.SIGINT)
            time.sleep(0.2)
            os.kill(pid, signal.SIGCONT)

        os.kill(pid, signal.SIGSTOP)
        resumer = threading.Thread(target=interrupt_then_resume)
        resumer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                busy.run(long_code)
        finally:
            resumer.join()
            os.kill(pid, signal.SIGCONT)
        # Answered at once: the interrupted request was cancelled, not left holding the
        # one worker for its minute.
        after: list[Result] = []
        waiting = threading.Thread(target=lambda: after.append(busy.run("print('after')")))
        waiting.start()
        waiting.join(15)
        assert after and after[0].text == "after", after


def test_ctrl_c_while_waiting_to_send_leaves_nothing_pending() -> None:
    """Interrupted before its line went out, the request stayed pending: once the pool had
    been quiet for that request's timeout, the watchdog stopped it as stuck."""
    main = threading.main_thread().ident
    assert main is not None
    with Pool(workers=2, lazy=True) as busy:
        busy._stall_margin = 1.0
        assert busy.run("pass").ok
        pid = busy.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        # Another thread's long line fills the pipe, and this one waits for its turn.
        sender = threading.Thread(target=lambda: busy.run(f"x = '{'a' * 1_000_000}'"))
        sender.start()
        timer = threading.Timer(0.5, signal.pthread_kill, (main, signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                busy.run("print('never sent')", timeout=1)
        finally:
            timer.cancel()
            os.kill(pid, signal.SIGCONT)
        sender.join(15)
        time.sleep(3)  # the interrupted request's timeout and margin, with the pool quiet
        assert busy.run("print('after')").text == "after"
        assert busy.pid == pid


def test_closing_a_session_the_pool_no_longer_knows_returns_at_once() -> None:
    """After the pool process restarted, the new one has never heard of the session: its
    close is refused at once, and that refusal ends the wait (it used to wait 30 s, then
    stop the whole pool as stalled)."""
    with Pool(workers=1) as restarting:
        session = restarting.session()
        assert session.run("x = 1").ok
        first = restarting.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        assert wait_until(lambda: restarting.run("pass").ok)
        started = time.monotonic()
        session.close()
        assert time.monotonic() - started < 5
        assert session.closed and not session.alive


def test_closing_a_session_during_its_first_step_frees_its_place(tmp_path: Path) -> None:
    """The running step finishes, then the session is gone from the pool: its place among
    max_sessions is free for the next one."""
    config = tmp_path / "pynox.toml"
    config.write_text("[pool]\nmax_sessions = 1\n")
    with Pool(config=config, workers=1) as one_session:
        first = one_session.session()
        steps: list[Result] = []
        running = threading.Thread(
            target=lambda: steps.append(first.run("import time\ntime.sleep(0.5)\nprint(1)"))
        )
        running.start()
        assert wait_until(lambda: first.pool.info is not None)
        time.sleep(0.2)  # the step is running
        first.close()
        running.join(15)
        assert steps[0].text == "1"
        with one_session.session() as second:
            assert second.run("print(2)").text == "2"


def test_a_session_closed_by_its_own_host_function_frees_its_place(tmp_path: Path) -> None:
    """close() from a host function of the session's own step cannot wait for the step:
    once that step's run returns, a new session still fits under max_sessions."""
    config = tmp_path / "pynox.toml"
    config.write_text("[pool]\nmax_sessions = 1\n")
    made: list[pynox.Session] = []
    with Pool(config=config, workers=1) as one_session:
        for attempt in range(5):
            made.append(one_session.session(functions={"finish": lambda: made[-1].close()}))
            done = made[-1].run("from pynox_host import finish\nfinish()\nprint('done')")
            assert done.text == "done"
            with one_session.session() as second:
                assert second.run(f"print({attempt})").text == str(attempt)


def test_close_waits_for_a_step_as_long_as_its_timeout_lets_it_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close() lets the running step finish, then returns with the session's place among
    max_sessions free, however long the step's timeout lets it run: it gave up after a fixed
    twice the stall margin (30 s), with the step still holding the place."""
    monkeypatch.setattr("pynox.api.pool.STALL_MARGIN", 1.0)  # a give-up of 2 s
    config = tmp_path / "pynox.toml"
    config.write_text("[pool]\nmax_sessions = 1\n")
    with Pool(config=config, workers=1) as one_session:
        first = one_session.session(timeout=20)
        steps: list[Result] = []
        running = threading.Thread(
            target=lambda: steps.append(first.run("import time\ntime.sleep(4)\nprint(1)"))
        )
        running.start()
        assert wait_until(lambda: first.pool.info is not None)
        time.sleep(0.5)  # the step is running
        first.close()
        with one_session.session() as second:
            assert second.run("print(2)").text == "2"
        running.join(15)
        assert steps[0].text == "1"


def test_a_refused_step_leaves_what_the_session_knows(pool: Pool) -> None:
    """A step refused before it reaches the session (code longer than the pool reads)
    neither ends the session nor hides that the pool restarted before it: the model is
    told its variables are gone, rather than meeting a bare NameError."""
    too_long = "#" + "x" * MAX_LINE
    with pool.session() as session:
        assert session.run("x = 1").ok
        refused = session.run(too_long)
        assert refused.error is not None and refused.error["type"] == "RequestError"
        assert session.alive and session.run("print(x)").text == "1"
    with Pool(workers=1) as restarting, restarting.session() as session:
        assert session.run("x = 1").ok
        pid = restarting.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: restarting.pid != pid)  # the next call starts a new one
        assert session.run(too_long).error is not None
        after = session.run("print('x' in globals())")
        assert after.session is not None and after.session["restarted"], after.text
        assert after.text.startswith("[a new session started")


def test_session_tool_keeps_state(pool: Pool) -> None:
    notebook = pool.tool(session=True)
    assert "persistent" in (notebook.__doc__ or "")
    assert notebook("import math\nr = math.sqrt(16)") == "(no output)"
    assert notebook("print(r)") == "4.0"


def test_many_threads_at_once(pool: Pool) -> None:
    failures: list[str] = []

    def worker(i: int) -> None:
        for j in range(5):
            r = pool.run(f"print({i} * 100 + {j})")
            if r.text != str(i * 100 + j):
                failures.append(f"{i},{j}: {r.text}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []


def test_asyncio_gather(pool: Pool) -> None:
    async def main() -> list[Result]:
        return await asyncio.gather(*(pool.arun(f"print({i} ** 2)") for i in range(10)))

    results = asyncio.run(main())
    assert [r.text for r in results] == [str(i**2) for i in range(10)]


def test_async_with_closes_without_blocking_the_event_loop() -> None:
    """Closing waits for a run still going; the loop keeps running other tasks meanwhile."""
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.05)

    async def main() -> tuple[Result, Result, float, float]:
        async with Pool(workers=2) as pool:
            async with pool.session() as session:
                step = await session.arun("x = 41\nprint(x + 1)")
            sleeping = asyncio.ensure_future(pool.arun("import time; time.sleep(1)"))
            await asyncio.sleep(0.3)  # the run has started
            ticker = asyncio.ensure_future(tick())
            closing = time.monotonic()
        closed = time.monotonic()
        ticker.cancel()
        assert pool.closed and session.closed
        return step, await sleeping, closing, closed

    step, slept, closing, closed = asyncio.run(main())
    assert step.text == "42"
    assert slept.ok  # closing let the run finish
    assert closed - closing >= 0.5
    assert len([t for t in ticks if closing <= t <= closed]) >= 5


def test_module_level_run_and_tool() -> None:
    r = pynox.run("print('module')")
    assert r.ok and r.text == "module"
    assert pynox.tool()("print(6 * 7)") == "42"

    async def main() -> Result:
        return await pynox.arun("print('async')")

    assert asyncio.run(main()).text == "async"


def test_profiles_and_limits_from_the_config(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.txt").write_text("from the profile")
    config = tmp_path / "pynox.toml"
    config.write_text(
        f'[profiles.reader]\nallow_read = ["data"]\n'
        f'[pool.limits]\nallow_read = ["{tmp_path}"]\ntimeout = "5s"\n'
    )
    with Pool(config=config, workers=1) as configured:
        path = str(tmp_path / "data" / "x.txt")
        r = configured.run(f"print(open({path!r}).read())", profile="reader")
        assert r.text == "from the profile", r.text
        refused = configured.run("print(1)", allow_read=["/etc"])
        assert refused.exit == 125 and refused.error is not None
        assert refused.error["type"] == "RequestError"
        assert "allow_read exceeds [pool.limits]" in refused.text
        assert configured.run("print(1)", timeout="1m").exit == 125


def test_a_profile_without_a_config_says_how_to_give_one_in_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal names the API's ways to a pynox.toml (config=, PYNOX_CONFIG), not the
    command's --config, which no API user starts the pool with; following it works."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYNOX_CONFIG", raising=False)
    with Pool(workers=1) as bare:
        refused = bare.run("print(1)", profile="analysis")
        assert refused.error is not None and refused.error["type"] == "RequestError"
        assert "pass config= to Pool, set PYNOX_CONFIG" in refused.text, refused.text
        assert "--config" not in refused.text
    (tmp_path / "tools.toml").write_text("[profiles.analysis]\ntimeout = '5s'\n")
    with Pool(workers=1, config=tmp_path / "tools.toml") as configured:
        assert configured.run("print(1)", profile="analysis").text == "1"


def test_preload_and_a_module_that_cannot_be_preloaded() -> None:
    with Pool(preload=["json"], workers=1) as preloaded:
        assert preloaded.run("import sys; print('json' in sys.modules)").text == "True"
    with (
        Pool(preload=["no_such_module_here"], workers=1) as broken,
        pytest.raises(PoolError, match="no_such_module_here"),
    ):
        broken.run("print(1)")


def test_killing_the_pool_gives_pool_error_results_not_hangs() -> None:
    with Pool(workers=2) as doomed:
        assert doomed.run("pass").ok
        results: list[Result] = []
        threads = [
            threading.Thread(
                target=lambda: results.append(doomed.run("import time; time.sleep(20)"))
            )
            for _ in range(3)
        ]
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        pid = doomed.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        for thread in threads:
            thread.join(15)
        assert len(results) == 3
        for r in results:
            assert r.exit == 125 and r.error is not None and r.error["type"] == "PoolError"
            assert "PoolError: the pool exited while requests were running" in r.text
        assert doomed.run("print('again')").text == "again"  # a new pool process


def test_close_leaves_no_process_behind() -> None:
    closing = Pool(workers=2)
    session = closing.session()
    assert session.run("x = 1").ok
    running = threading.Thread(target=lambda: closing.run("import time; time.sleep(30)"))
    running.start()
    time.sleep(0.5)
    pid = closing.pid
    assert pid is not None
    tree = process_tree(pid)
    assert len(tree) >= 3  # the pool, its zygote and children
    closing.close(timeout=1.0)
    running.join(15)
    assert wait_until(lambda: not any(alive(p) for p in tree)), [p for p in tree if alive(p)]
    assert not os.path.exists(f"/proc/{pid}")  # reaped, not a zombie


def _in_a_forked_child(checks: Callable[[], bool]) -> int:
    """The exit status of a forked child that runs `checks`: 0 if they hold, 2 if not, 1
    if they raised. The child closes its own shared pool, as an application's exit would."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        status = 1
        try:
            status = 0 if checks() else 2
            pynox.api.shared._close()
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_forked_child_does_not_hold_the_parents_pool_open() -> None:
    """A worker forked from the application (a web server's, a task queue's) had the pool's
    standard input open: close() waited its whole grace and killed the pool, and a pool
    whose application died lived on as long as the worker did."""
    pool = Pool()
    assert pool.run("pass").ok
    pid = pool.pid
    release_read, release_write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
        child = os.fork()
    if child == 0:  # pragma: no cover - the child only waits to be released
        os.close(release_write)
        os.read(release_read, 1)
        os._exit(0)
    os.close(release_read)
    try:
        started = time.monotonic()
        pool.close(timeout=10)  # the pool reads the end of its input and exits by itself
        assert time.monotonic() - started < 5
        assert pid is not None and not alive(pid)
    finally:
        os.close(release_write)
        os.waitpid(child, 0)


def test_a_forked_child_gets_its_own_default_pool() -> None:
    assert pynox.run("print(1)").text == "1"  # the parent's pool is running
    parent_pool = Pool(lazy=True)

    def checks() -> bool:
        with pytest.raises(PoolError, match="forked child"):
            parent_pool.run("print(3)")
        return pynox.run("print(2)").text == "2"

    assert _in_a_forked_child(checks) == 0
    assert pynox.run("print(4)").text == "4"
    parent_pool.close()


def test_a_tool_made_before_a_fork_works_in_the_child() -> None:
    """A web server or task queue imports the application, which makes its tools, then
    forks its workers: each worker's calls run on its own shared pool."""
    run_python = pynox.tool()
    notebook = pynox.tool(session=True)
    assert notebook("x = 1") == "(no output)"  # a session of the parent's pool

    def checks() -> bool:
        ran = run_python("print(2)") == "2"
        fresh = notebook("y = 2\nprint('x' in globals())").startswith("False")
        return ran and fresh and notebook("print(y)") == "2"

    assert _in_a_forked_child(checks) == 0
    assert notebook("print(x)") == "1"  # the parent's session goes on


def test_a_session_past_max_sessions_is_told_how_the_api_closes_one(tmp_path: Path) -> None:
    config = tmp_path / "pynox.toml"
    config.write_text("[pool]\nmax_sessions = 1\n")
    with Pool(config=config, workers=1) as one_session:
        first = one_session.session()
        assert first.run("x = 1").ok
        with one_session.session() as second:
            refused = second.run("print(2)")
            assert refused.error is not None and "session.close()" in refused.error["message"]
            first.close()  # as the message says
            assert second.run("print(2)").text == "2"


_CALL_LATER = (
    "import threading, time\n"
    "from pynox_host import HostError, {name}\n"
    "outcome = []\n"
    "def call():\n"
    "    time.sleep({delay})\n"
    "    try:\n"
    "        outcome.append({name}('from a thread'))\n"
    "    except HostError as exc:\n"
    "        outcome.append(str(exc))\n"
    "threading.Thread(target=call, daemon=True).start()\n"
    "time.sleep({step})\n"
)
_AWAIT_OUTCOME = "import time\nwhile not outcome:\n    time.sleep(0.01)\nprint(outcome[0])"


def test_a_host_call_made_between_steps_goes_out_with_the_next_step(pool: Pool) -> None:
    """A thread a step left running calls the host while no step runs: the call waits for
    the next step and is answered then, and the session keeps its variables."""
    calls: list[str] = []

    def note(text: str) -> str:
        calls.append(text)
        return "noted"

    with pool.session(functions=[note]) as session:
        assert session.run(_CALL_LATER.format(name="note", delay=0.3, step=0)).ok
        time.sleep(1.0)  # the thread calls now, between the steps
        after = session.run(_AWAIT_OUTCOME)
        assert after.session is not None and not after.session["restarted"], after.text
        assert after.stdout == "noted\n", after.text
    assert calls == ["from a thread"]


def test_a_host_call_the_step_outlives_fails_in_the_program(pool: Pool) -> None:
    """A call still waiting for the host when its step ends fails with a HostError, rather
    than leaving the thread waiting for an answer no step will take."""

    def slow(text: str) -> str:
        time.sleep(1.5)
        return text

    with pool.session(functions=[slow]) as session:
        first = session.run(_CALL_LATER.format(name="slow", delay=0, step=0.5))
        assert first.ok, first.text
        after = session.run(_AWAIT_OUTCOME)
        assert after.stdout == "the step ended before the host answered\n", after.text
        assert session.run("print('still here')").text == "still here"


def _dropped_while_writing(
    connection: Any, last_reference: list[Any], lock: str = "_write_lock"
) -> bool:
    """Drops the last reference to an object in a thread that holds one of the connection's
    locks (the write lock, as a write does; `_lock`, as its reader does), so that the
    collector's cleanup runs there, now; whether that thread went on promptly rather than
    waiting for the lock it holds itself, or for the pool."""
    held = getattr(connection, lock)

    def drop() -> None:
        with held:
            last_reference.clear()

    dropping = threading.Thread(target=drop, daemon=True)
    dropping.start()
    dropping.join(0.9)  # the pool's own close grace is 1 s: a cleanup waiting for it fails
    if dropping.is_alive():  # let it go, so that the pool can close: any thread may release it
        dropping.join(10)
        if dropping.is_alive():
            held.release()
        return False
    return True


def test_a_session_collected_while_its_thread_writes_to_the_pool_is_closed(
    tmp_path: Path,
) -> None:
    """The collector runs a dropped session's finalizer in whatever thread allocates, in
    the middle of a write to the pool, say: the finalizer waited for the write's own lock,
    and that thread, then every thread using the pool, hung."""
    config = tmp_path / "pynox.toml"
    config.write_text("[pool]\nmax_sessions = 1\n")
    with Pool(config=config, workers=1) as one_session:
        dropped = [one_session.session()]
        assert dropped[0].run("x = 1").ok
        connection = one_session._state.connection
        assert connection is not None

        assert _dropped_while_writing(connection, dropped), "the finalizer waited for its lock"
        # Its place is free once the pool has ended the first session's process.
        with one_session.session() as second:
            assert wait_until(lambda: second.run("print(2)").text == "2")


_WAIT_FOR_HOST = "from pynox_host import lookup\nprint(lookup('x'))"


def test_an_async_host_function_is_cancelled_when_its_run_ends(pool: Pool) -> None:
    """Nothing can take its value any more: it ran on (an API call, a query) as long as it
    took, forever for one that waits for what never comes, holding a task and a thread."""
    started: list[str] = []
    cancelled: list[str] = []

    async def lookup(query: str) -> str:
        started.append(query)
        try:
            await asyncio.Event().wait()  # nothing sets it
        except asyncio.CancelledError:
            cancelled.append(query)
            raise
        return query

    async def cancel_the_run() -> list[str]:
        run = asyncio.ensure_future(pool.arun(_WAIT_FOR_HOST, functions={"lookup": lookup}))
        for _ in range(600):  # cancelled once the function runs, however loaded the machine
            if started or run.done():
                break
            await asyncio.sleep(0.05)
        assert started == ["x"], run
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        for _ in range(100):  # while this loop runs: its end would cancel the task anyway
            if cancelled:
                break
            await asyncio.sleep(0.05)
        return list(cancelled)

    assert asyncio.run(cancel_the_run()) == ["x"]
    # Run without a loop of the caller's (pool.run): the function's own loop ends with it.
    timed_out = pool.run(_WAIT_FOR_HOST, functions={"lookup": lookup}, timeout=3)
    assert timed_out.error is not None and timed_out.error["type"] == "Timeout"
    assert started == ["x", "x"], "the function had not started within the run's timeout"
    assert wait_until(lambda: cancelled == ["x", "x"]), cancelled


def test_a_forked_child_is_told_at_once_while_the_parent_starts_its_pool() -> None:
    """The fork came while another thread of the parent held the pool's or the session's
    lock (starting the pool, say): the child waited for it forever instead of being told
    to make a pool of its own."""
    parent_pool = Pool(lazy=True)
    session = parent_pool.session()

    def checks() -> bool:
        signal.alarm(10)  # a child that waits for a lock ends here, and says so
        for run in (parent_pool.run, session.run):
            with pytest.raises(PoolError, match="forked child"):
                run("pass")
        session.close()  # the parent's: nothing to do here, and no wait
        return True

    with parent_pool._state.lock, session._lock:  # as another thread holds them
        status = _in_a_forked_child(checks)
    assert status == 0, status
    session.close()
    parent_pool.close()


def test_a_stream_collected_while_its_thread_writes_to_the_pool_is_cancelled() -> None:
    """A stream left unfinished is closed when collected, which cancels its run: in the
    middle of a write to the pool, that waited for the write's own lock, for ever."""
    with Pool(workers=1) as one_worker:
        left = [one_worker.stream("print('started', flush=True)\nimport time\ntime.sleep(60)")]
        assert next(left[0]) == Output("stdout", "started\n")
        connection = one_worker._state.connection
        assert connection is not None

        assert _dropped_while_writing(connection, left), "the stream's close waited for its lock"
        # The one worker is free again: the stream's run was cancelled.
        after: list[Result] = []
        waiting = threading.Thread(target=lambda: after.append(one_worker.run("print(1)")))
        waiting.start()
        waiting.join(15)
        assert after and after[0].text == "1", after


def test_a_pool_collected_while_its_thread_writes_to_it_is_stopped() -> None:
    """A Pool dropped without close() is closed by the collector, in whatever thread
    allocates: a host function's thread answering a run nobody waits for any more, in the
    middle of its write, say. close waited for the write's own lock, for ever, and the
    pool process lived on."""
    dropped = [Pool(workers=1)]
    assert dropped[0].run("pass").ok
    pid = dropped[0].pid
    connection = dropped[0]._state.connection
    assert pid is not None and connection is not None

    assert _dropped_while_writing(connection, dropped), "the finalizer waited for its lock"
    assert wait_until(lambda: not alive(pid))


def test_a_pool_collected_in_its_reader_thread_is_stopped() -> None:
    """The collector may run a dropped Pool's finalizer in the connection's own reader
    thread, in the middle of taking a result (holding the connection's lock). close waited
    there for the pool process to end, which no one read any more, then for that lock."""
    dropped = [Pool(workers=1)]
    assert dropped[0].run("pass").ok
    pid = dropped[0].pid
    connection = dropped[0]._state.connection
    assert pid is not None and connection is not None

    assert _dropped_while_writing(connection, dropped, "_lock"), "the finalizer waited"
    assert wait_until(lambda: not alive(pid))
