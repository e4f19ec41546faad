"""Sessions: state kept across steps run in order, ends and restarts, closing (even mid
step), max_sessions, the idle timeout, and permissions fixed at the first step, as the
hints of its steps say."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support.pool_client import PoolClient, alive, wait_gone
from support.pool_requests import (
    assert_ok,
    assert_refused,
    close_session,
    new_id,
    serves,
    step,
    write_config,
)
from support.waiting import wait_until


def test_session_keeps_state_and_survives_errors(pool: PoolClient) -> None:
    name = new_id("notebook")
    first = step(pool, name, "x = 41")
    assert first["exit"] == 0
    assert first["session"] == {"id": name, "step": 1, "restarted": False, "ended": None}
    failed = step(pool, name, "1 / 0")
    assert failed["exit"] == 1 and failed["error"]["type"] == "ZeroDivisionError"
    assert failed["session"]["ended"] is None
    later = step(pool, name, "print(x + 1)")
    assert_ok(later, "42\n")
    assert later["session"] == {"id": name, "step": 3, "restarted": False, "ended": None}
    close_session(pool, name)


def test_session_steps_run_in_order(pool: PoolClient) -> None:
    name = new_id("ordered")
    ids = [new_id("o") for _ in range(5)]
    for i, request_id in enumerate(ids):
        pool.send(
            {
                "id": request_id,
                "session": name,
                "code": f"import time\ntime.sleep(0.05)\nlog = globals().get('log', [])"
                f"\nlog.append({i})\nprint(log)",
            }
        )
    for i, request_id in enumerate(ids):
        result = pool.result(request_id)
        assert_ok(result, f"{list(range(i + 1))}\n")
        assert result["session"]["step"] == i + 1
    close_session(pool, name)


@pytest.mark.parametrize(
    ("program", "ended", "exit_code", "kind"),
    [
        ("while True:\n    pass", "timeout", 124, "Timeout"),
        ("import sys\nsys.exit(3)", "exit", 3, None),
        # A SystemExit from sys.excepthook ends python, as the program's own would.
        ("import sys\nsys.excepthook = lambda *a: sys.exit(5)\n1 / 0", "exit", 5, None),
        ("import ctypes\nctypes.string_at(0)", "crash", 139, "Signal"),
    ],
)
def test_session_ends_and_restarts(
    pool: PoolClient, program: str, ended: str, exit_code: int, kind: str | None
) -> None:
    name = new_id(f"ending-{ended}")
    first = step(pool, name, "import os\nx = 1\nprint(os.getpid())", timeout="2s")
    pid = int(first["stdout"])
    started = time.monotonic()
    end = step(pool, name, program)
    print(f"session {ended}: {end['exit']} {end['error']} after {time.monotonic() - started:.2f}s")
    assert end["exit"] == exit_code
    assert (end["error"] or {}).get("type") == kind
    assert end["session"] == {"id": name, "step": 2, "restarted": False, "ended": ended}
    assert not wait_gone([pid], 5), "the ended session's process is still there"
    fresh = step(pool, name, "print('x' in globals())")
    assert_ok(fresh, "False\n")
    assert fresh["session"] == {"id": name, "step": 3, "restarted": True, "ended": None}
    again = step(pool, name, "print('again')")
    assert again["session"]["restarted"] is False
    close_session(pool, name)


def test_close_session(pool: PoolClient) -> None:
    name = new_id("closing")
    pid = int(step(pool, name, "import os\nprint(os.getpid())")["stdout"])
    assert alive(pid)
    close_session(pool, name)
    assert not wait_gone([pid], 5)
    control_id = new_id("close")
    pool.send({"id": control_id, "close_session": name})
    event = pool.event(lambda m: m.get("id") == control_id)
    assert event["event"] == "control_error" and name in event["message"]
    # The name is free again: a new session, not a restarted one.
    fresh = step(pool, name, "print('pid' in globals())")
    assert_ok(fresh, "False\n")
    assert fresh["session"]["step"] == 1
    close_session(pool, name)


def test_close_session_while_a_step_runs(pool: PoolClient) -> None:
    name = new_id("busy")
    pid = int(step(pool, name, "import os\nprint(os.getpid())")["stdout"])
    running, queued = new_id("running"), new_id("queued")
    pool.send(
        {"id": running, "session": name, "code": "import time\ntime.sleep(1)\nprint('slept')"}
    )
    pool.send({"id": queued, "session": name, "code": "print('never')"})
    time.sleep(0.3)
    close_session(pool, name)
    refused = pool.result(queued)
    assert_refused(refused, queued)
    assert refused["error"]["message"] == (
        f"session {name!r} was closed before this step ran; send the step again to run it in "
        "a new session"
    )
    # A step's result, as a cancelled queued step's is: it never ran (no step number), and
    # its session ended, so the next step starts a new one.
    assert refused["session"] == {"id": name, "step": None, "restarted": False, "ended": "closed"}
    assert (refused["value"], refused["images"]) == (None, [])
    result = pool.result(running, 30)
    print(
        "the step that ran while its session closed:",
        {k: result[k] for k in ("exit", "stdout", "error", "session")},
        result["stderr"][-300:],
    )
    assert not wait_gone([pid], 5)
    # Whatever the pool makes of it, the program's result carries none of pynox's insides.
    assert "pynox/" not in result["stderr"] and "BrokenPipeError" not in result["stderr"]
    assert result["exit"] == 0 or result["error"] is not None, "a failure needs a reason"
    serves(pool)


def test_max_sessions(tmp_path: Path) -> None:
    config = write_config(tmp_path, "[pool]\nmax_sessions = 1\n")
    with PoolClient(config=config) as client:
        assert step(client, "one", "a = 1")["exit"] == 0
        refused = step(client, "two", "b = 1")
        assert refused["exit"] == 125
        assert refused["error"]["type"] == "RequestError"
        assert refused["error"]["message"] == (
            "the pool has 1 sessions, its max_sessions; close one first (session.close() in "
            "Python, close_session in the protocol)"
        )
        assert step(client, "one", "print(a)")["stdout"] == "1\n"
        assert_ok(client.run({"id": "oneshot", "code": "print(1)"}), "1\n")  # not a session
        close_session(client, "one")
        assert step(client, "two", "print('two')")["stdout"] == "two\n"
        assert client.close() == 0


def test_a_closed_session_whose_step_still_runs_counts_against_max_sessions(
    tmp_path: Path,
) -> None:
    """close_session lets a running step finish: its process runs on, and a client that
    closed sessions mid-step and opened new ones ran any number of processes at once, past
    max_sessions. It counts until it has ended, and the refusal says what to wait for."""
    config = write_config(tmp_path, "[pool]\nmax_sessions = 1\n")
    with PoolClient(config=config) as client:
        client.send({"id": "slow", "session": "one", "code": "import time\ntime.sleep(2)"})
        client.send({"id": "close", "close_session": "one"})
        refused = step(client, "two", "b = 1")
        assert (refused["exit"], refused["error"]["type"]) == (125, "RequestError"), refused
        assert refused["error"]["message"] == (
            "the pool has 0 sessions and 1 processes of closed sessions, not yet ended, its "
            "max_sessions; close one first (session.close() in Python, close_session in the "
            "protocol), or wait for the steps of closed sessions to end"
        )
        assert client.result("slow", 30)["exit"] == 0
        client.wait_for(lambda: "close" in client.results)
        assert step(client, "two", "print('two')")["stdout"] == "two\n"
        assert client.close() == 0


def test_a_step_result_after_its_session_closed_means_its_place_is_free(
    tmp_path: Path,
) -> None:
    """A session closed during its step (from a host function of that step, which cannot
    wait for the close): once the client has the step's result, a new session fits under
    max_sessions. The result waits for the process to exit, as close_session's answer does;
    before, it came first and the new session was refused while that process finalized."""
    config = write_config(tmp_path, "[pool]\nmax_sessions = 1\n")
    with PoolClient(config=config) as client:
        for attempt in range(5):
            running = new_id("closing")
            client.send({"id": running, "session": "one", "code": "import time\ntime.sleep(0.2)"})
            client.send({"id": new_id("close"), "close_session": "one"})
            assert_ok(client.result(running, 30), "")
            assert_ok(step(client, "two", f"print({attempt})"), f"{attempt}\n")
            close_session(client, "two")
        assert client.close() == 0


def test_idle_session_is_closed(tmp_path: Path) -> None:
    config = write_config(tmp_path, '[pool]\nsession_idle = "1s"\n')
    with PoolClient(config=config) as client:
        first = step(client, "idle", "import os\nx = 1\nprint(os.getpid())")
        pid = int(first["stdout"])
        kept = step(client, "idle", "print(x)")  # within the idle time: the same session
        assert_ok(kept, "1\n")
        time.sleep(2)
        assert not wait_gone([pid], 3), "the idle session's process is still there"
        after = step(client, "idle", "print('x' in globals())")
        print("step after the idle close:", after["session"])
        # docs: an idle session "is closed"; its state is gone and the name starts afresh.
        assert_ok(after, "False\n")
        assert after["session"]["ended"] is None
        assert client.close() == 0


def test_an_ended_session_is_closed_when_idle_too(tmp_path: Path) -> None:
    """A session whose program ended (sys.exit) and that nobody steps again is idle as
    any other: past session_idle it is closed, its place among max_sessions given back and
    its scratch directory removed."""
    config = write_config(tmp_path, '[pool]\nmax_sessions = 1\nsession_idle = "1s"\n')
    with PoolClient(config=config) as client:
        program = (
            "import os, sys\nopen(os.environ['HOME'] + '/left.txt', 'w').write('x')\n"
            "print(os.environ['HOME'])\nsys.exit(3)"
        )
        ended = step(client, "ends", program)
        assert ended["exit"] == 3 and ended["session"]["ended"] == "exit", ended
        scratch = Path(ended["stdout"].strip())
        assert (scratch / "left.txt").exists()
        gone = wait_until(lambda: not scratch.exists(), 5)
        assert gone, "the ended session's scratch directory is still there"
        other = step(client, "other", "print('another session')")
        assert_ok(other, "another session\n")
        assert other["session"] == {"id": "other", "step": 1, "restarted": False, "ended": None}
        close_session(client, "other")
        again = step(client, "ends", "print('x' in globals())")
        assert again["session"]["step"] == 1 and not again["session"]["restarted"], again
        assert client.close() == 0


def test_a_later_step_cannot_change_its_sessions_permissions(
    pool: PoolClient, tmp_path: Path
) -> None:
    """A later step's grants were ignored: one that followed a hint (allow_read=[...]) ran
    without the grant, failed the same way, and got the same hint again. The session's
    process is confined for good: a step asking for other grants is refused, saying how to
    get them; one repeating the session's own, as pynox.Session sends them, runs."""
    (tmp_path / "f.txt").write_text("secret")
    granted = tmp_path / "granted"
    granted.mkdir()
    name = new_id("perm")
    assert step(pool, name, "x = 1", allow_read=[str(granted)], memory="256m")["exit"] == 0
    denied = step(pool, name, f"print(open({str(tmp_path / 'f.txt')!r}).read())")
    assert denied["exit"] == 1 and denied["error"]["type"] == "PermissionError"
    asked = step(
        pool, name, f"print(open({str(tmp_path / 'f.txt')!r}).read())", allow_read=[str(tmp_path)]
    )
    assert_refused(asked, asked["id"])
    assert asked["error"]["message"] == (
        f"session {name!r} keeps the allow_read its first step gave it, as its process is "
        "confined for good; close the session and start a new one with the allow_read this "
        "step asks for"
    )
    for fields in ({"memory": "512m"}, {"allow_network": True}, {"profile": "none"}):
        assert step(pool, name, "print(x)", **fields)["exit"] == 125, fields
    same = step(pool, name, "print(x)", allow_read=[str(granted)], memory="256m")
    assert_ok(same, "1\n")
    assert same["session"]["step"] == 3  # the refused steps never ran
    close_session(pool, name)


SESSION_NOTE = (
    "; a session keeps the grants and limits it started with: close it (session.close() in "
    "Python, close_session in the protocol) and start a new one with that change"
)


def test_a_session_steps_hint_says_to_start_a_new_session(pool: PoolClient) -> None:
    """A later step cannot take a grant its session lacks: a hint that only named the grant
    would be followed in vain. Following the whole hint works."""
    name = new_id("offline")
    assert step(pool, name, "import socket")["exit"] == 0
    code = "a, b = socket.socketpair(); s = socket.socket(); print('made')"
    hint = 'the network is off; grant it with "allow_network": true' + SESSION_NOTE
    refused = step(pool, name, code)
    assert refused["exit"] == 1, refused
    assert refused["error"]["hint"] == hint
    assert refused["stderr"].endswith(f"\npynox: {hint}\n"), refused["stderr"]
    asked = step(pool, name, code, allow_network=True)
    assert asked["exit"] == 125 and "start a new one" in asked["error"]["message"], asked
    close_session(pool, name)
    followed = step(pool, name, "import socket\n" + code, allow_network=True)
    assert_ok(followed, "made\n")
    assert followed["session"]["step"] == 1
    close_session(pool, name)


@pytest.mark.parametrize("first", [True, False], ids=["first-step", "later-step"])
def test_a_session_step_with_args_is_refused_rather_than_run_without_them(
    pool: PoolClient, first: bool
) -> None:
    """A session's process starts once: a step's args never reached its sys.argv, and the
    step ran as if none were sent."""
    name = new_id("argv")
    if not first:
        assert step(pool, name, "x = 1")["exit"] == 0
    refused = pool.run({"id": new_id("args"), "session": name, "code": "pass", "args": ["a"]})
    assert refused["error"]["type"] == "RequestError"
    assert refused["error"]["message"] == (
        "a session step takes no args: sys.argv stays as the session's process started; "
        "set the values in the step's code instead"
    )
    assert_ok(step(pool, name, "import sys; print(sys.argv)"), "['agent.py']\n")
    close_session(pool, name)


def test_a_later_step_runs_under_its_own_timeout(pool: PoolClient) -> None:
    """A later step's timeout was ignored for the first step's: a step that asked for more
    time was stopped with a hint to ask for what it had asked for, and lost the session."""
    name = new_id("step-timeout")
    assert step(pool, name, "x = 1", timeout="1s")["exit"] == 0
    longer = step(pool, name, "import time\ntime.sleep(1.5)\nprint(x)", timeout="10s")
    assert_ok(longer, "1\n")
    assert longer["policy"]["timeout_ms"] == 10000
    shorter = step(pool, name, "import time\ntime.sleep(5)", timeout="0.5s")
    assert shorter["exit"] == 124 and shorter["session"]["ended"] == "timeout", shorter
    assert shorter["error"]["hint"] == 'make it faster or raise the limit with "timeout": "1s"'
    refused = step(pool, name, "print('never')", timeout="soon")
    assert_refused(refused, refused["id"], "timeout")
    close_session(pool, name)


def test_a_later_steps_timeout_is_held_to_the_limits(tmp_path: Path) -> None:
    config = write_config(tmp_path, '[pool.limits]\ntimeout = "2s"\n')
    with PoolClient(config=config) as client:
        assert step(client, "capped", "x = 1")["exit"] == 0
        refused = step(client, "capped", "print(x)", timeout="5s")
        assert_refused(refused, refused["id"], "timeout exceeds [pool.limits]")
        assert_ok(step(client, "capped", "print(x)", timeout="2s"), "1\n")
        assert client.close() == 0


def test_a_later_steps_profile_gives_its_timeout(tmp_path: Path) -> None:
    """A step that named a profile whose only setting is a timeout was taken (its grants are
    the session's) and run under the session's timeout: the profile's was dropped, without a
    word. It is the step's own timeout, as for a first step; an explicit one still wins."""
    config = write_config(tmp_path, '[profiles.fast]\ntimeout = "1s"\n')
    with PoolClient(config=config) as client:
        assert step(client, "s", "x = 1")["policy"]["timeout_ms"] == 30000
        fast = step(client, "s", "import time\ntime.sleep(3)", profile="fast")
        assert fast["exit"] == 124 and fast["policy"]["timeout_ms"] == 1000, fast
        assert step(client, "s", "x = 1")["policy"]["timeout_ms"] == 30000
        own = step(client, "s", "x", profile="fast", timeout="5s")
        assert own["policy"]["timeout_ms"] == 5000
        assert client.close() == 0


def test_a_step_ended_by_keyboard_interrupt_has_pythons_exit_status(pool: PoolClient) -> None:
    """python dies by SIGINT after an uncaught KeyboardInterrupt (status 130, as a one-shot
    request reports it); a step said 1. The session, like a notebook's kernel, goes on."""
    name = new_id("interrupted")
    assert step(pool, name, "x = 1")["exit"] == 0
    interrupted = step(pool, name, "raise KeyboardInterrupt")
    assert interrupted["exit"] == 130, interrupted
    assert interrupted["error"]["type"] == "KeyboardInterrupt"
    assert interrupted["stderr"].endswith("    raise KeyboardInterrupt\nKeyboardInterrupt\n")
    assert interrupted["session"]["ended"] is None
    assert_ok(step(pool, name, "print(x)"), "1\n")
    close_session(pool, name)


def test_a_pool_without_sessions_says_so(tmp_path: Path) -> None:
    """max_sessions = 0 (one-shot runs only) refused every session with "the pool has 0
    sessions, its max_sessions; close one first": there was none to close."""
    config = write_config(tmp_path, "[pool]\nmax_sessions = 0\n")
    with PoolClient(config=config) as client:
        refused = step(client, "none", "x = 1")
        assert_refused(refused, refused["id"])
        assert refused["error"]["message"] == (
            "this pool keeps no sessions ([pool] max_sessions = 0); run the code without a "
            'session (pool.run() in Python, a request without "session" in the protocol), or '
            "allow sessions with a higher max_sessions"
        )
        assert_ok(client.run({"id": "oneshot", "code": "print(1)"}), "1\n")
        assert client.close() == 0


def test_a_later_step_cannot_declare_host_functions_of_its_own(pool: PoolClient) -> None:
    """pynox_host is made when the session's process starts: a later step's functions were
    ignored, and its code failed to import one it had declared, with no word of why."""
    name = new_id("functions")
    first = pool.run(
        {"id": new_id("s"), "session": name, "code": "x = 1", "functions": [{"name": "f"}]}
    )
    assert first["exit"] == 0, first
    again = {"id": new_id("s"), "session": name, "code": "from pynox_host import f"}
    assert_ok(pool.run({**again, "functions": [{"name": "f"}]}), "")
    other = {"id": new_id("s"), "session": name, "code": "from pynox_host import g\nprint(g())"}
    refused = pool.run({**other, "functions": [{"name": "f"}, {"name": "g"}]})
    assert_refused(refused, other["id"])
    assert refused["error"]["message"] == (
        f"session {name!r} has the host functions its first step declared (f), as pynox_host "
        "is made when its process starts; close the session and start a new one that "
        "declares g"
    )
    close_session(pool, name)


@pytest.mark.parametrize("session", [False, True], ids=["one-shot", "session-step"])
def test_a_long_program_of_wide_characters_runs(fresh: PoolClient, session: bool) -> None:
    """The pool sent a program to its child with each character past ASCII escaped: a
    request line of 12 MiB of such code (within the 16 MiB a line may hold) made a frame
    over the channel's 32 MiB. A one-shot request was refused for it; a session step
    killed the pool, with every request and session it held."""
    code = "# " + "\u0100" * (6 << 20) + "\nprint('ran')"
    request: dict[str, object] = {"id": new_id("wide"), "code": code}
    if session:
        request["session"] = new_id("wide-session")
    fresh.send_raw(json.dumps(request, ensure_ascii=False).encode() + b"\n")
    assert_ok(fresh.result(request["id"]), "ran\n")
    if session:
        close_session(fresh, str(request["session"]))
