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


def describe(python_version: str, pynox: str) -> Machine:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return Machine(
        cpu=f"{_cpu_model()} ({platform.machine()})",
        cores=cores or 1,
        kernel=f"{platform.system()} {platform.release()}",
        python=python_version,
        pynox=_pynox_version(pynox),
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    )
