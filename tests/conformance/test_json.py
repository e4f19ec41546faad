"""`pynox --json`: one object with the exit status, the output, the error and the policy."""

from __future__ import annotations

from pathlib import Path

from .support import Install, json_line, write

FIELDS = {
    "exit",
    "stdout",
    "stderr",
    "stdout_truncated",
    "stderr_truncated",
    "error",
    "duration_ms",
    "runtime",
    "policy",
}


def test_json_result_has_every_field(sandboxed: Install, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    script = write(tmp_path / "job.py", "import sys\nprint('out')\nprint('err', file=sys.stderr)\n")
    done = sandboxed.run_pynox("--json", f"--allow-read={data}", "--timeout=5s", str(script))
    assert done.returncode == 0, done.stderr
    result = json_line(done)
    assert set(result) == FIELDS
    assert (result["exit"], result["error"]) == (0, None)
    assert (result["stdout"], result["stderr"]) == ("out\n", "err\n")
    version = sandboxed.run_python("-c", "import platform; print(platform.python_version())")
    assert result["runtime"] == {
        "name": "pynox",
        "python": version.stdout.strip(),
        "output": "captured",
    }
    policy = result["policy"]
    assert isinstance(policy, dict)
    assert policy["allow_read"] == [str(data)] and policy["implicit_read"] == [str(tmp_path)]
    assert policy["network"] == "deny" and policy["subprocesses"] == "deny"
    assert policy["timeout_ms"] == 5000 and policy["backend"] == "landlock+seccomp"


def test_json_error_object_for_a_denial(sandboxed: Install, tmp_path: Path) -> None:
    script = write(tmp_path / "probe.py", "x = 1\nopen('/etc/hostname').read()\n")
    result = json_line(sandboxed.run_pynox("--json", str(script)))
    assert result["exit"] == 1
    assert result["error"] == {
        "type": "PermissionError",
        "message": "[Errno 13] Permission denied: '/etc/hostname'",
        "file": str(script),
        "line": 2,
        "path": "/etc/hostname",
        "hint": "reading /etc/hostname is not allowed; grant it with --allow-read=/etc/hostname",
    }


def test_json_exit_status_and_timeout(sandboxed: Install) -> None:
    assert json_line(sandboxed.run_pynox("--json", "-c", "raise SystemExit(7)"))["exit"] == 7
    timed_out = json_line(sandboxed.run_pynox("--json", "--timeout=300ms", "-c", "while 1: pass"))
    assert timed_out["exit"] == 124
