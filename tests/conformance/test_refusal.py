"""Where the machine cannot sandbox (qemu-user), every sandboxed run is refused: exit 125.

Never a silent unsandboxed run: nothing of the program may run, and the one line on
stderr says why. Skipped where the sandbox works (the other modules check that).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .pool_pipe import PoolPipe
from .support import Install, write

MARK = "ran-unconfined"
REFUSAL = "pynox: cannot apply the sandbox: "


@pytest.fixture
def refusing(install: Install) -> Install:
    if install.expect_sandbox:
        pytest.skip("this machine can sandbox; refusals are checked where it cannot")
    return install


def command_lines(tmp_path: Path) -> dict[str, tuple[list[str], Path]]:
    script = write(tmp_path / "s" / "job.py", f"print({MARK!r})\n")
    write(tmp_path / "m" / "tool.py", f"print({MARK!r})\n")
    project = tmp_path / "p"
    write(project / "pynox.toml", '[permissions]\nallow_read = ["."]\n[profiles.x]\n')
    return {
        "script": ([str(script)], tmp_path),
        "code": (["-c", f"print({MARK!r})"], tmp_path),
        "module": (["-m", "tool"], tmp_path / "m"),
        "grants": ([f"--allow-read={tmp_path}", "--allow-network", "-c", "print(1)"], tmp_path),
        "limits": (["--timeout=5s", "--memory=256m", "-c", f"print({MARK!r})"], tmp_path),
        "toml": (["-c", f"print({MARK!r})"], project),
        "profile": (["--profile=x", "-c", f"print({MARK!r})"], project),
    }


@pytest.mark.parametrize(
    "name", ["script", "code", "module", "grants", "limits", "toml", "profile"]
)
def test_sandboxed_run_is_refused(refusing: Install, tmp_path: Path, name: str) -> None:
    args, cwd = command_lines(tmp_path)[name]
    done = refusing.run_pynox(*args, cwd=cwd)
    assert done.returncode == 125, (done.stdout, done.stderr)
    assert MARK not in done.stdout and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(REFUSAL), done.stderr


def test_json_run_is_refused(refusing: Install, tmp_path: Path) -> None:
    done = refusing.run_pynox("--json", "-c", f"print({MARK!r})", cwd=tmp_path)
    assert done.returncode == 125, (done.stdout, done.stderr)
    assert MARK not in done.stdout
    result = json.loads(done.stdout)
    assert result["exit"] == 125 and result["stdout"] == ""
    assert result["stderr"].startswith(REFUSAL)


def test_pool_request_is_refused(refusing: Install) -> None:
    with PoolPipe(refusing.pynox) as pool:
        try:
            first = pool.read()
        except EOFError:
            assert pool.process.wait(timeout=60) == 125
            return
        if first.get("event") == "ready":
            pool.send({"id": "r", "code": f"print({MARK!r})"})
            first = pool.read()
        assert first["exit"] == 125, first
        assert first["stdout"] == "" and str(first["stderr"]).startswith(REFUSAL)


def test_no_sandbox_still_runs(refusing: Install, tmp_path: Path) -> None:
    done = refusing.run_pynox("--no-sandbox", "-c", "print('unconfined, as asked')")
    assert (done.returncode, done.stdout) == (0, "unconfined, as asked\n")
