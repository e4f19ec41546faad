"""What the numbers were measured on: CPU, cores, kernel, Python, pynox, date."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Machine:
    cpu: str
    cores: int
    kernel: str
    python: str
    pynox: str
    date: str
    scratch: str
    """Where runs and pools make their scratch directories, and its file system."""


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _pynox_version(pynox: str) -> str:
    completed = subprocess.run([pynox, "--version"], capture_output=True, text=True, check=True)
    version = completed.stdout.strip()
    try:
        commit = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
        )
    except OSError:
        return version
    return f"{version}, commit {commit.stdout.strip()}" if commit.returncode == 0 else version


def scratch_base(pynox: str) -> str:
    """The directory pynox makes a run's scratch directory in, as a run of it reports
    (the program's TMPDIR is its scratch directory)."""
    report = "import os; print(os.path.dirname(os.environ['TMPDIR']))"
    completed = subprocess.run([pynox, "-c", report], capture_output=True, text=True, check=True)
    return completed.stdout.strip()


def scratch_place(pynox: str) -> str:
    """scratch_base and the file system it is on, as the report shows them."""
    base = scratch_base(pynox)
    return f"{base} ({file_system(base)})"


def file_system(path: str) -> str:
    """The type of the file system path is on (the longest mount point above it)."""
    found, best = "unknown", ""
    try:
        with open("/proc/self/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    found, best = fields[2], point
    except OSError:
        pass
    return found


def describe(python_version: str, pynox: str) -> Machine:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return Machine(
        cpu=f"{_cpu_model()} ({platform.machine()})",
        cores=cores or 1,
        kernel=f"{platform.system()} {platform.release()}",
        python=python_version,
        pynox=_pynox_version(pynox),
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        scratch=scratch_place(pynox),
    )
