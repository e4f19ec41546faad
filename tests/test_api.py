"""The Python API: pynox.run, pynox.tool, Pool, Session and Result.

Three layers: the pure parts (Result.text, argument checks, the tool's docstring) need no
pool; a fake `pynox pool` written here drives the client through the failures a real pool
should never show (garbage, silence, death); everything else runs on the installed pool.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

import pynox
import pynox.api.shared
from pynox.api.options import Spec, function_signature
from pynox.api.pool import Pool
from pynox.api.result import Result
from pynox.api.tool import tool_docstring
from pynox.errors import PoolError
from pynox.policy.config import Grants

# --- helpers ------------------------------------------------------------------------------


def result(**fields: Any) -> Result:
    data = {"exit": 0, "stdout": "", "stderr": "", "error": None, "duration_ms": 1}
    data.update(fields)
    return Result.from_json(data)


def error(
    kind: str,
    message: str,
    file: str | None = "agent.py",
    line: int | None = 1,
    hint: str | None = None,
) -> dict[str, Any]:
    return {
        "type": kind,
        "message": message,
        "file": file,
        "line": line,
        "path": None,
        "hint": hint,
    }


def descendants(pid: int) -> set[int]:
    """pid and every live process below it, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        found.add(current)
        todo.extend(children.get(current, []))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(condition: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


# --- Result and its text ------------------------------------------------------------------


def test_ok_result_text_is_the_output() -> None:
    r = result(stdout="45\n")
    assert r.ok and not r.truncated
    assert r.text == "45"
    assert str(r) == r.text


def test_no_output_says_so() -> None:
    assert result().text == "(no output)"
    assert result(stdout="\n\n").text == "(no output)"


def test_error_text_is_type_message_location_and_hint() -> None:
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "agent.py", line 1, in <module>\n'
        "PermissionError: [Errno 13] Permission denied: '/etc/passwd'\n"
        "pynox: reading /etc/passwd is not allowed; grant it with allow_read=['/etc/passwd']\n"
    )
    hint = "reading /etc/passwd is not allowed; grant it with allow_read=['/etc/passwd']"
    r = result(
        exit=1,
        stdout="before\n",
        stderr=stderr,
        error=error("PermissionError", "[Errno 13] Permission denied: '/etc/passwd'", hint=hint),
    )
    assert not r.ok
    assert r.text == (
        "before\n"
        "PermissionError: [Errno 13] Permission denied: '/etc/passwd'\n"
        "at agent.py:1\n"
        f"pynox: {hint}"
    )


def test_stderr_the_program_wrote_stays_and_the_traceback_goes() -> None:
    stderr = (
        "warning: careful\n"
        "Traceback (most recent call last):\n"
        '  File "agent.py", line 4, in f\n'
        "KeyError: 'a'\n"
        "\n"
        "The above exception was the direct cause of the following exception:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "agent.py", line 6, in <module>\n'
        "ValueError: bad\n"
    )
    r = result(exit=1, stderr=stderr, error=error("ValueError", "bad", line=6))
    assert r.text == "warning: careful\nValueError: bad\nat agent.py:6"


def test_syntax_error_report_is_not_repeated() -> None:
    stderr = (
        "  File \"agent.py\", line 1\n    x = (\n        ^\nSyntaxError: '(' was never closed\n"
    )
    r = result(
        exit=1, stderr=stderr, error=error("SyntaxError", "'(' was never closed (agent.py, line 1)")
    )
    assert r.text == "SyntaxError: '(' was never closed (agent.py, line 1)\nat agent.py:1"


def test_stderr_without_error_is_kept_and_exit_status_shown() -> None:
    r = result(exit=3, stdout="out\n", stderr="bye\n")
    assert r.text == "out\nbye\n[exit status 3]"
    assert not r.ok


def test_timeout_text_has_no_location_and_no_repeated_hint() -> None:
    message = "the program ran past its 1s time limit and was stopped; raise it with timeout='2s'"
    r = result(
        exit=124,
        stdout="partial\n",
        error=error("Timeout", message, file=None, line=None, hint=message),
    )
    assert r.text == f"partial\nTimeout: {message}"


def test_truncation_is_noted() -> None:
    r = result(stdout="x" * 100, stdout_truncated=True)
    assert r.truncated
    assert r.text.endswith("[stdout truncated: only its first 100 bytes were kept; print less]")


def test_session_restart_and_end_are_noted() -> None:
    restarted = result(
        stdout="1\n", session={"id": "s", "step": 3, "restarted": True, "ended": None}
    )
    assert restarted.text.startswith("[a new session started")
    ended = result(
        exit=124,
        session={"id": "s", "step": 2, "restarted": False, "ended": "timeout"},
        error=error("Timeout", "too slow", file=None, line=None),
    )
    assert "[the session ended (timeout)" in ended.text


def test_result_fields_from_json() -> None:
    data = {
        "id": "1",
        "exit": 0,
        "stdout": "a",
        "stderr": "b",
        "stdout_truncated": False,
        "stderr_truncated": True,
        "error": None,
        "duration_ms": 7,
        "policy": {"network": "deny"},
    }
    r = Result.from_json(data)
    assert (r.exit, r.stdout, r.stderr, r.duration_ms) == (0, "a", "b", 7)
    assert r.truncated and r.policy == {"network": "deny"} and r.raw == data


# --- arguments ----------------------------------------------------------------------------


def test_relative_grants_resolve_against_the_callers_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = Spec(
        allow_read=["data", Path("more")], allow_write="out", package_dirs=[str(tmp_path / "site")]
    )
    request = spec.request("pass")
    assert request["allow_read"] == [str(tmp_path / "data"), str(tmp_path / "more")]
    assert request["allow_write"] == [str(tmp_path / "out")]
    assert request["package_dirs"] == [str(tmp_path / "site")]
    home = Spec(allow_read="~/x").request("pass")["allow_read"]
    assert home == [os.path.join(os.path.expanduser("~"), "x")]


def test_request_sends_only_what_was_set() -> None:
    request = Spec().request("print(1)")
    assert request == {"code": "print(1)", "name": "agent.py"}
    request = Spec(
        timeout="10s",
        memory="256m",
        allow_network=False,
        allow_env="KEY",
        args=["a"],
        profile="p",
        name="job.py",
    ).request("x", session="s1")
    assert request == {
        "code": "x",
        "name": "job.py",
        "profile": "p",
        "allow_env": ["KEY"],
        "args": ["a"],
        "allow_network": False,
        "timeout": "10s",
        "memory": "256m",
        "session": "s1",
    }


@pytest.mark.parametrize(
    ("options", "exception", "fragment"),
    [
        ({"timeout": "soon"}, ValueError, "not a duration"),
        ({"timeout": [1]}, TypeError, "duration"),
        ({"memory": "1m"}, ValueError, "below the 32m minimum"),
        ({"max_output": "1g"}, ValueError, "above"),
        ({"allow_read": 5}, TypeError, "allow_read"),
        ({"allow_read": [b"/x"]}, TypeError, "allow_read"),
        ({"allow_read": [""]}, ValueError, "not a path"),
        ({"allow_network": "yes"}, TypeError, "allow_network"),
        ({"functions": {"f": 3}}, TypeError, "not callable"),
        ({"functions": {"not a name": print}}, ValueError, "identifier"),
        ({"functions": {"HostError": print}}, ValueError, "reserved"),
        ({"name": ""}, ValueError, "file name"),
        ({"profile": 3}, TypeError, "profile"),
    ],
)
def test_bad_arguments_raise_at_once(
    options: dict[str, Any], exception: type[Exception], fragment: str
) -> None:
    with pytest.raises(exception, match=fragment):
        Spec(**options)


def test_unknown_keyword_and_bad_code_raise_type_error() -> None:
    pool = Pool(lazy=True)
    with pytest.raises(TypeError):
        pool.run("pass", allow_reed=["x"])  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        pool.run(b"print(1)")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pynox.tool(allow_reed=["x"])  # type: ignore[call-arg]
    pool.close()


def test_pool_arguments_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="workers"):
        Pool(workers=0, lazy=True)
    with pytest.raises(ValueError, match="module name"):
        Pool(preload=["not a module"], lazy=True)
    with pytest.raises(ValueError, match="--config"):
        Pool(config=tmp_path / "missing.toml", lazy=True)
    with pytest.raises(TypeError):
        Pool(pynox_command="pynox", lazy=True)  # type: ignore[arg-type]


def test_pool_command_line(tmp_path: Path) -> None:
    config = tmp_path / "pynox.toml"
    config.write_text("[pool]\nworkers = 3\n")
    pool = Pool(
        workers=4, preload=["json", "csv"], config=config, lazy=True, pynox_command=["/opt/pynox"]
    )
    assert pool.command == [
        "/opt/pynox",
        "pool",
        "--config",
        str(config),
        "--workers",
        "4",
        "--preload",
        "json",
        "--preload",
        "csv",
    ]
    assert Pool(lazy=True, pynox_command=["p"]).command[:2] == ["p", "pool"]


def test_functions_are_described_with_their_signatures() -> None:
    def search(query: str, limit: int = 5) -> list[dict[str, Any]]:
        """Search the product catalog.

        Longer text the model does not need."""
        return []

    spec = Spec(functions={"search": search}).request("pass")["functions"]
    assert spec == [
        {
            "name": "search",
            "signature": "(query: str, limit: int = 5) -> list[dict[str, typing.Any]]",
            "doc": "Search the product catalog.\n\nLonger text the model does not need.",
        }
    ]
    assert Spec(functions=[search]).functions == {"search": search}
    # Annotations written as strings are evaluated; a signature that cannot be read is "(...)".
    namespace: dict[str, Any] = {}
    exec("from __future__ import annotations\ndef f(a: int) -> str: ...", namespace)
    assert function_signature(namespace["f"]) == "(a: int) -> str"


def test_import_pynox_stays_cheap() -> None:
    code = "import pynox, sys; print(sorted(m for m in sys.modules if m.startswith('pynox')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['pynox']"
    code = "import pynox; print(pynox.Pool.__module__, pynox.run.__module__, 'tool' in dir(pynox))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["pynox.api.pool", "pynox.api.shared", "True"]


# --- the tool function and its docstring --------------------------------------------------


def test_tool_is_a_plain_typed_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    pool = Pool(lazy=True)
    run_python = pool.tool(allow_read=["data"], allow_write=["out"], timeout="10s", memory="256m")
    assert run_python.__name__ == "run_python"
    assert str(inspect.signature(run_python)) == "(code: str) -> str"
    assert run_python.__annotations__ == {"code": str, "return": str}
    doc = inspect.getdoc(run_python) or ""
    assert f"Reading files: {tmp_path / 'data'}" in doc
    assert f"Writing files: beneath {tmp_path / 'out'}" in doc
    assert "Network: none" in doc
    assert "10s of wall-clock time per call, 256 MiB of memory" in doc
    assert "fresh sandboxed process" in doc
    assert "agent.py:LINE" in doc
    assert doc.rstrip().endswith("a hint if it failed.")
    assert "\nArgs:\n    code: " in doc and "\nReturns:\n    " in doc
    pool.close()


def test_docstring_is_one_description_then_args_and_returns() -> None:
    doc = tool_docstring(Grants(timeout=30.0, max_output=65536), [], session=False)
    description, _, sections = doc.partition("\n\nArgs:\n")
    # Docstring parsers end the description at a line like "Title:" or a section word.
    for line in description.splitlines():
        assert not line.rstrip().endswith(":"), line
    for word in ("Args:", "Returns:", "Raises:"):
        assert word not in description
    assert sections.count("\n") == 3


def test_docstring_lists_host_functions_and_session_state() -> None:
    functions = [
        {
            "name": "search",
            "signature": "(query: str, limit: int = 5) -> list[dict]",
            "doc": "Search the product catalog.\n\nMore.",
        },
        {"name": "ping", "signature": "()", "doc": ""},
    ]
    grants = Grants(
        allow_network=True,
        allow_env=["API_KEY"],
        package_dirs=["/venv/site"],
        timeout=5.0,
        max_output=1 << 20,
        max_file_size=100 << 20,
    )
    doc = tool_docstring(grants, functions, session=True)
    assert "from pynox_host import search, ping" in doc
    assert "- search(query: str, limit: int = 5) -> list[dict]: Search the product catalog." in doc
    assert "- ping()\n" in doc
    assert "pynox_host.HostError" in doc
    assert "persistent sandboxed session" in doc and "still there in the next" in doc
    assert "Network: allowed" in doc and "Environment variables: API_KEY" in doc
    assert "packages in /venv/site" in doc
    assert "first 1 MiB of each stream" in doc
    assert "5s of wall-clock time per call, files of at most 100 MiB" in doc


def test_tool_docstring_shows_the_profile_and_the_limits(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    config = tmp_path / "pynox.toml"
    config.write_text(
        '[profiles.analysis]\nallow_read = ["data"]\nallow_network = true\n'
        '[pool.limits]\ntimeout = "20s"\nmemory = "1g"\n'
    )
    pool = Pool(config=config, lazy=True)
    doc = pool.tool(profile="analysis", allow_env=["HOME"]).__doc__ or ""
    assert f"Reading files: {tmp_path / 'data'}" in doc
    assert "Network: allowed" in doc and "Environment variables: HOME" in doc
    assert "20s of wall-clock time per call, 1 GiB of memory" in doc
    with pytest.raises(ValueError, match="'nope' is not in"):
        pool.tool(profile="nope")
    pool.close()


def test_a_profile_without_a_config_is_refused_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYNOX_CONFIG", raising=False)
    with pytest.raises(ValueError, match="needs a pynox.toml"):
        Pool(lazy=True).tool(profile="analysis")


# --- a fake pool: failures the real one should never show ---------------------------------

FAKE_POOL = r"""
import json, os, sys
if os.environ.get("FAKE_POOL_MODE") == "fail":
    sys.stderr.write("pynox: cannot preload nothing_here: ModuleNotFoundError\n")
    sys.exit(125)

def emit(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

emit({"event": "ready", "pynox": "0.1.0", "python": "3", "workers": 2, "pid": os.getpid(),
      "argv": sys.argv[1:]})
for line in sys.stdin:
    message = json.loads(line)
    rid = message["id"]
    if "host_result" in message or "host_error" in message:
        reply = {k: message[k] for k in ("host_result", "host_error") if k in message}
        emit({"id": rid, "exit": 0, "stdout": json.dumps(reply), "stderr": "", "error": None})
        continue
    if "close_session" in message:
        emit({"id": rid, "session": {"id": message["close_session"], "closed": True}})
        continue
    code = message["code"]
    if code == "hang":
        continue
    if code == "garbage":
        sys.stdout.write("this is not json\n")
        sys.stdout.flush()
        continue
    if code == "die":
        os._exit(3)
    if code.startswith("host:"):
        _, function, args = code.split(":", 2)
        emit({"id": rid, "event": "host_call", "call": 1, "function": function,
              "args": json.loads(args), "kwargs": {}})
        continue
    emit({"id": rid, "exit": 0, "stdout": json.dumps(message), "stderr": "", "error": None,
          "session": {"id": message["session"], "step": 1, "restarted": False, "ended": None}
          if "session" in message else None})
"""


@pytest.fixture
def fake(tmp_path: Path) -> list[str]:
    script = tmp_path / "fake_pool.py"
    script.write_text(FAKE_POOL)
    return [sys.executable, str(script)]


def test_fake_pool_echo_shows_the_request(
    fake: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Pool(pynox_command=fake, preload=["json"]) as pool:
        monkeypatch.chdir(tmp_path)
        sent = json.loads(pool.run("print(1)", allow_read=["d"], timeout=5).stdout)
        assert sent == {
            "id": sent["id"],
            "code": "print(1)",
            "name": "agent.py",
            "allow_read": [str(tmp_path / "d")],
            "timeout": 5,
        }
        assert pool.info is not None and pool.info["argv"] == ["pool", "--preload", "json"]


def test_a_pool_that_cannot_start_raises_pool_error_with_its_words(
    fake: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_POOL_MODE", "fail")
    with Pool(pynox_command=fake) as pool, pytest.raises(PoolError) as caught:
        pool.run("print(1)")
    assert "cannot preload nothing_here" in str(caught.value)
    assert "status 125" in str(caught.value)


def test_a_line_that_is_not_json_fails_every_pending_request(fake: list[str]) -> None:
    with Pool(pynox_command=fake) as pool:
        waiting = []
        thread = threading.Thread(target=lambda: waiting.append(pool.run("hang")))
        thread.start()
        assert wait_until(lambda: bool(pool._state.connection and pool._state.connection._pending))
        broken = pool.run("garbage")
        thread.join(10)
        for r in (broken, waiting[0]):
            assert r.exit == 125 and r.error is not None and r.error["type"] == "PoolError"
            assert "not a JSON object" in r.error["message"]
        assert "PoolError: " in broken.text
        # The next run starts a fresh pool.
        assert pool.run("print(2)").ok


def test_a_pool_that_dies_gives_pool_error_results_then_restarts(fake: list[str]) -> None:
    with Pool(pynox_command=fake) as pool:
        first = pool.pid
        died = pool.run("die")
        assert died.exit == 125 and died.error is not None
        assert died.error["type"] == "PoolError" and "status 3" in died.error["message"]
        assert pool.run("print(1)").ok
        assert pool.pid != first


def test_a_silent_pool_is_stopped_after_the_timeout_and_a_margin(fake: list[str]) -> None:
    pool = Pool(pynox_command=fake, lazy=True)
    pool._stall_margin = 0.5
    started = time.monotonic()
    r = pool.run("hang", timeout="500ms")
    assert time.monotonic() - started < 5
    assert r.error is not None and r.error["type"] == "PoolError"
    assert "wrote nothing" in r.error["message"]
    pool.close()


def test_close_resolves_what_is_still_pending(fake: list[str]) -> None:
    pool = Pool(pynox_command=fake)
    results: list[Result] = []
    thread = threading.Thread(target=lambda: results.append(pool.run("hang")))
    thread.start()
    assert wait_until(lambda: bool(pool._state.connection and pool._state.connection._pending))
    pool.close(timeout=0.5)
    thread.join(10)
    assert results[0].error is not None and "closed" in results[0].error["message"]
    with pytest.raises(PoolError, match="closed"):
        pool.run("print(1)")


def test_host_calls_answer_with_value_or_error(fake: list[str]) -> None:
    def search(query: str) -> list[str]:
        return [query.upper()]

    def broken(query: str) -> None:
        raise LookupError("the catalog is down")

    def odd(query: str) -> object:
        return {1, 2}

    functions = {"search": search, "broken": broken, "odd": odd}
    with Pool(pynox_command=fake) as pool:
        value = json.loads(pool.run('host:search:["lamp"]', functions=functions).stdout)
        assert value == {"host_result": {"call": 1, "value": ["LAMP"]}}
        failed = json.loads(pool.run('host:broken:["x"]', functions=functions).stdout)
        assert failed == {"host_error": {"call": 1, "message": "LookupError: the catalog is down"}}
        odd_value = json.loads(pool.run('host:odd:["x"]', functions=functions).stdout)
        assert "odd() returned a value that is not JSON" in odd_value["host_error"]["message"]
        missing = json.loads(pool.run("host:nope:[]", functions=functions).stdout)
        assert "no host function 'nope'" in missing["host_error"]["message"]


def test_async_host_functions_run_on_the_callers_loop(fake: list[str]) -> None:
    async def lookup(key: str) -> dict[str, object]:
        await asyncio.sleep(0.01)
        return {"key": key, "loop": id(asyncio.get_running_loop())}

    async def main() -> tuple[dict[str, Any], int]:
        with Pool(pynox_command=fake) as pool:
            r = await pool.arun('host:lookup:["k"]', functions={"lookup": lookup})
        return json.loads(r.stdout), id(asyncio.get_running_loop())

    reply, loop_id = asyncio.run(main())
    assert reply == {"host_result": {"call": 1, "value": {"key": "k", "loop": loop_id}}}


def test_fake_session_close_is_sent(fake: list[str]) -> None:
    with Pool(pynox_command=fake) as pool:
        session = pool.session()
        assert not session.alive and session.steps == 0
        r = session.run("x = 1")
        assert json.loads(r.stdout)["session"] == session.id
        assert session.alive and session.steps == 1
        session.close()
        assert not session.alive and session.closed
        with pytest.raises(PoolError, match="closed"):
            session.run("x")


# --- the installed pool ---------------------------------------------------------------------


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


def test_timeout_is_text(pool: Pool) -> None:
    started = time.monotonic()
    r = pool.run("print('working', flush=True)\nwhile True: pass", timeout="1s")
    assert time.monotonic() - started < 10
    assert r.exit == 124 and r.error is not None and r.error["type"] == "Timeout"
    assert r.text.startswith("working\nTimeout: the program ran past its 1s time limit")
    assert "timeout='2s'" in r.text


def test_output_is_cut_at_max_output(pool: Pool) -> None:
    r = pool.run("print('x' * 10000)", max_output=100)
    assert r.truncated and r.stdout_truncated and len(r.stdout) == 100
    assert "[stdout truncated: only its first 100 bytes were kept; print less]" in r.text


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
    tree = descendants(pid)
    assert len(tree) >= 3  # the pool, its zygote and children
    closing.close(timeout=1.0)
    running.join(15)
    assert wait_until(lambda: not any(alive(p) for p in tree)), [p for p in tree if alive(p)]
    assert not os.path.exists(f"/proc/{pid}")  # reaped, not a zombie


def test_a_forked_child_gets_its_own_default_pool() -> None:
    assert pynox.run("print(1)").text == "1"  # the parent's pool is running
    parent_pool = Pool(lazy=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        status = 1
        try:
            ok = pynox.run("print(2)").text == "2"
            with pytest.raises(PoolError, match="forked child"):
                parent_pool.run("print(3)")
            status = 0 if ok else 2
            pynox.api.shared._close()
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert pynox.run("print(4)").text == "4"
    parent_pool.close()
