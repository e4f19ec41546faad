"""docker or podman: one long-lived container per cell, driven with cp and exec."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from bundler import commands
from bundler.commands import Result
from bundler.conformance.engines.base import BASE_ENV, delete_libraries


def available(engine: str, image: str, platform: str) -> tuple[bool, str]:
    """Whether ENGINE answers and runs a trivial container of IMAGE, and if not why."""
    if shutil.which(engine) is None:
        return False, f"{engine} is not installed"
    info = commands.run([engine, "info"], capture=True, check=False, timeout=60)
    if info.returncode != 0:
        return False, f"`{engine} info` failed: {_last_line(info.stderr)}"
    trivial = commands.run(
        [engine, "run", "--rm", "--platform", platform, image, "true"],
        capture=True, check=False, timeout=600,
    )  # fmt: skip
    if trivial.returncode != 0:
        return False, f"`{engine} run {image} true` failed: {_last_line(trivial.stderr)}"
    return True, f"{engine} runs {image}"


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no message"


class OCIContainer:
    def __init__(self, engine: str, image: str, platform: str) -> None:
        self.engine = engine
        self.root = f"image {image} ({platform})"
        started = commands.run(
            [engine, "run", "--detach", "--rm", "--platform", platform, "--network", "none",
             image, "sleep", "infinity"],
            capture=True, timeout=600,
        )  # fmt: skip
        self.name = started.stdout.strip()

    def copy_in(self, source: Path, destination: PurePosixPath) -> None:
        self.call(["mkdir", "-p", str(destination.parent)])
        commands.run([self.engine, "cp", source, f"{self.name}:{destination}"], timeout=600)

    def copy_out(self, source: PurePosixPath, destination: Path) -> None:
        commands.run([self.engine, "cp", f"{self.name}:{source}", destination], timeout=600)

    def call(
        self, args: list[str], env: Mapping[str, str] | None = None, cwd: str = "/"
    ) -> Result[str]:
        command = [self.engine, "exec", "--workdir", cwd]
        for name, value in {**BASE_ENV, **(env or {})}.items():
            command += ["--env", f"{name}={value}"]
        return commands.run([*command, self.name, *args], capture=True, check=False, timeout=3600)

    def hide(self, patterns: tuple[str, ...]) -> list[str]:
        # The container is this cell's own: its libraries are simply deleted.
        return delete_libraries(self, patterns)

    def close(self) -> None:
        commands.run([self.engine, "rm", "--force", self.name], check=False, timeout=120)
