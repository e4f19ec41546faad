"""Running the installed pynox and its bundled python with a clean environment."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

TIMEOUT = 120.0  # generous: a cell may run under qemu-user


@dataclass(frozen=True)
class Install:
    pynox: str
    python: str
    expect_sandbox: bool
    expect_reason: str

    def run_pynox(self, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        """pynox ARGS; with no sandbox expected here, parity runs pass --no-sandbox."""
        return run([self.pynox, *args], **kwargs)  # type: ignore[arg-type]

    def parity(self, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        """pynox ARGS as a parity check: sandboxed where the machine can sandbox."""
        flags = [] if self.expect_sandbox else ["--no-sandbox"]
        return run([self.pynox, *flags, *args], **kwargs)  # type: ignore[arg-type]

    def run_python(self, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return run([self.python, *args], **kwargs)  # type: ignore[arg-type]


def find_install(environ: Mapping[str, str]) -> Install:
    pynox = environ["PYNOX_BIN"]
    resolved = Path(pynox).resolve()
    if not os.access(resolved, os.X_OK):
        raise RuntimeError(f"PYNOX_BIN={pynox} is not an executable file")
    python = environ.get("PYNOX_PYTHON") or str(
        resolved.parent.parent / "python" / "bin" / "python3"
    )
    if not os.access(python, os.X_OK):
        raise RuntimeError(f"no bundled python at {python}; set PYNOX_PYTHON")
    expect = environ.get("PYNOX_EXPECT_SANDBOX", "yes")
    if expect not in ("yes", "no"):
        raise RuntimeError(f"PYNOX_EXPECT_SANDBOX must be yes or no, not {expect!r}")
    return Install(pynox, python, expect == "yes", environ.get("PYNOX_EXPECT_REASON", ""))


def run(
    command: list[str],
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout: float = TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """Runs with captured text output and an environment like `env -i` plus PATH, LANG."""
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    base.update(env or {})
    return subprocess.run(
        command,
        cwd=cwd,
        env=base,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=None if input is not None else subprocess.DEVNULL,
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def json_line(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    lines = done.stdout.splitlines()
    assert len(lines) == 1, (done.stdout, done.stderr)
    value = json.loads(lines[0])
    assert isinstance(value, dict)
    return value


def hint(path: str | Path, verb: str = "reading", flag: str = "--allow-read") -> str:
    return f"pynox: {verb} {path} is not allowed; grant it with {flag}={path}\n"
