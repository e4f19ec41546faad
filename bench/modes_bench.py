"""The command-line modes: the tiny script under every way `pynox` runs it, each beside the
same `python -I` invocation, interleaved in one run.

A mode is how a user or an agent framework calls pynox: a plain run, a wall-clock limit,
JSON for automation, a memory limit (alone and with JSON), a limit that comes from a
pynox.toml, `-c`, `-m`, and the unsandboxed `--no-sandbox`. Each is paired with python
invoked the same way, so every ratio is the cost of the sandbox alone.

Two more rows are shown but judged against no target. The tiny script with `import os` on
top: pynox's start imports no `os` (pynox.lean_os), where python's `site` does: a program
that imports it pays that itself under pynox, and this row shows what is left then. And a
run granted an output folder to write: pynox first checks that the grant reaches nothing
a later run trusts (pynox.policy.trusted), which a run without a write grant skips.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from timing import Summary, interleave, paired_ratio, summarize, time_command

# Read, never written: the tiny workload's own text.
TINY = Path(__file__).resolve().parent / "workloads" / "tiny.py"
# The folder the "write" mode is granted, beside tiny.py (empty: tiny.py writes nothing).
OUTPUT = "out"


@dataclass(frozen=True)
class Mode:
    key: str
    label: str
    """How the mode is invoked, as the report shows it."""
    pynox: list[str]
    python: list[str]
    directory: str = "plain"
    """Where it runs: "plain", "configured" (a pynox.toml with a timeout), or "imports_os"
    (tiny.py with `import os` on top)."""
    judged: bool = True
    """Whether a target applies (see bench/targets.py)."""


@dataclass(frozen=True)
class ModeResult:
    mode: Mode
    pynox: Summary
    python: Summary
    paired: float
    """The median of the per-round ratios of pynox's run to python's."""


def modes() -> list[Mode]:
    code = TINY.read_text()
    return [
        Mode("plain", "`pynox tiny.py`", ["tiny.py"], ["-I", "tiny.py"]),
        Mode("timeout", "`pynox --timeout=10s tiny.py`", ["--timeout=10s", "tiny.py"],
             ["-I", "tiny.py"]),
        Mode("json", "`pynox --json tiny.py`", ["--json", "tiny.py"], ["-I", "tiny.py"]),
        Mode("memory", "`pynox --memory=1g tiny.py`", ["--memory=1g", "tiny.py"],
             ["-I", "tiny.py"]),
        Mode("json_memory", "`pynox --json --memory=1g tiny.py`",
             ["--json", "--memory=1g", "tiny.py"], ["-I", "tiny.py"]),
        Mode("configured", "`pynox tiny.py` with `timeout = \"10s\"` in pynox.toml",
             ["tiny.py"], ["-I", "tiny.py"], directory="configured"),
        Mode("code", "`pynox -c CODE`", ["-c", code], ["-I", "-c", code]),
        # python -m finds the module in the working directory only without -P, which -I
        # implies: -E -s is -I without it.
        Mode("module", "`pynox -m tiny`", ["-m", "tiny"], ["-E", "-s", "-m", "tiny"]),
        Mode("no_sandbox", "`pynox --no-sandbox -I tiny.py`", ["--no-sandbox", "-I", "tiny.py"],
             ["-I", "tiny.py"]),
        Mode("imports_os", "`pynox tiny.py`, its first line `import os` (no target)", ["tiny.py"],
             ["-I", "tiny.py"], directory="imports_os", judged=False),
        Mode("write", f"`pynox --allow-write {OUTPUT} tiny.py` (no target)",
             ["--allow-write", OUTPUT, "tiny.py"], ["-I", "tiny.py"], judged=False),
    ]  # fmt: skip


def _directories(workdir: str) -> dict[str, str]:
    """A directory per kind of mode, each holding tiny.py; "configured" has a pynox.toml,
    and "imports_os" a tiny.py that imports os first."""
    found = {}
    for name in ("plain", "configured", "imports_os"):
        directory = os.path.join(workdir, "modes", name)
        os.makedirs(directory, exist_ok=True)
        Path(directory, "tiny.py").write_text(TINY.read_text())
        found[name] = directory
    os.makedirs(os.path.join(found["plain"], OUTPUT), exist_ok=True)
    Path(found["configured"], "pynox.toml").write_text('[permissions]\ntimeout = "10s"\n')
    Path(found["imports_os"], "tiny.py").write_text("import os\n" + TINY.read_text())
    return found


def measure_modes(python: str, pynox: str, workdir: str, rounds: int) -> list[ModeResult]:
    """Every mode beside its python, all interleaved in the same rounds."""
    directories = _directories(workdir)
    subjects = {}
    for mode in modes():
        cwd = directories[mode.directory]
        subjects[f"pynox:{mode.key}"] = _measure([pynox, *mode.pynox], cwd)
        subjects[f"python:{mode.key}"] = _measure([python, *mode.python], cwd)
    samples = interleave(subjects, rounds)
    results = []
    for mode in modes():
        ours, theirs = samples[f"pynox:{mode.key}"], samples[f"python:{mode.key}"]
        results.append(
            ModeResult(mode, summarize(ours), summarize(theirs), paired_ratio(ours, theirs))
        )
    return results


def _measure(command: list[str], cwd: str):  # noqa: ANN202 - a timing.Measure
    return lambda: time_command(command, cwd)
