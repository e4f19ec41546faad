"""docker or podman: one long-lived container per cell, driven with cp and exec."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from bundler.conformance.engines.base import BASE_ENV


def available(engine: str, image: str, platform: str) -> tuple[bool, str]:
    """Whether ENGINE answers and runs a trivial container of IMAGE, and if not why."""
    if shutil.which(engine) is None:
        return False, f"{engine} is not installed"
    info = subprocess.run([engine, "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        return False, f"`{engine} info` failed: {_first_line(info.stderr)}"
    trivial = subprocess.run(
        [engine, "run", "--rm", "--platform", platform, image, "true"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if trivial.returncode != 0:
        return False, f"`{engine} run {image} true` failed: {_first_line(trivial.stderr)}"
    return True, f"{engine} runs {image}"


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no message"


class OCIContainer:
    def __init__(self, engine: str, image: str, platform: str) -> None:
        self.engine = engine
        self.root = f"image {image} ({platform})"
        started = subprocess.run(
            [engine, "run", "--detach", "--rm", "--platform", platform, "--network", "none",
             image, "sleep", "infinity"],
            capture_output=True, text=True, timeout=600, check=True,
        )  # fmt: skip
        self.name = started.stdout.strip()

    def copy_in(self, source: Path, destination: PurePosixPath) -> None:
        self.call(["mkdir", "-p", str(destination.parent)])
        subprocess.run(
            [self.engine, "cp", str(source), f"{self.name}:{destination}"], check=True, timeout=600
        )

    def copy_out(self, source: PurePosixPath, destination: Path) -> None:
        subprocess.run(
            [self.engine, "cp", f"{self.name}:{source}", str(destination)], check=True, timeout=600
        )

    def call(
        self, args: list[str], env: Mapping[str, str] | None = None, cwd: str = "/"
    ) -> subprocess.CompletedProcess[str]:
        command = [self.engine, "exec", "--workdir", cwd]
        for name, value in {**BASE_ENV, **(env or {})}.items():
            command += ["--env", f"{name}={value}"]
        return subprocess.run(
            [*command, self.name, *args], capture_output=True, text=True, timeout=3600
        )

    def close(self) -> None:
        subprocess.run([self.engine, "rm", "--force", self.name], capture_output=True, timeout=120)
