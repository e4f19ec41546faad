"""bubblewrap over a root file system: each call is one `bwrap` over the same state.

The root is bound read-only; the folders the install and the suite write (/opt,
/usr/local/bin, /root, /conformance) are bound from a scratch folder of this
machine, so what one call writes the next one sees; /tmp is a fresh tmpfs per call.
"""

from __future__ import annotations

import fnmatch
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from bundler import commands
from bundler.commands import Result
from bundler.conformance.engines.base import BASE_ENV, LIBRARY_DIRS, copy_local

WRITABLE = ("/opt", "/usr/local/bin", "/root", "/conformance")


def available() -> tuple[bool, str]:
    """Whether bwrap runs a trivial sandbox here, and if not why."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False, "bwrap is not installed (apt-get install bubblewrap)"
    done = commands.run(
        [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-pid", "true"],
        capture=True,
        check=False,
        timeout=60,
    )
    if done.returncode != 0:
        return False, f"bwrap cannot create a sandbox here: {done.stderr.strip()}"
    return True, "bwrap runs"


def version() -> str:
    done = commands.run(["bwrap", "--version"], capture=True, check=False, timeout=60)
    return done.stdout.strip() or "bubblewrap"


class BubblewrapContainer:
    def __init__(self, rootfs: Path) -> None:
        self.engine = version()
        self.rootfs = rootfs
        self.root = str(rootfs)
        self.scratch = Path(tempfile.mkdtemp(prefix="pynox-bwrap-"))
        self.binds = {}
        for inside in WRITABLE:
            outside = self.scratch / inside.strip("/").replace("/", "-")
            outside.mkdir()
            # The mount point in the (cached, our own) root: bwrap cannot make it read-only.
            (rootfs / inside.strip("/")).mkdir(parents=True, exist_ok=True)
            self.binds[inside] = outside
        self.hidden: list[str] = []  # paths in the root that /dev/null is bound over

    def _outside(self, path: PurePosixPath) -> Path:
        for inside, outside in self.binds.items():
            if path == PurePosixPath(inside) or PurePosixPath(inside) in path.parents:
                return outside / path.relative_to(inside)
        raise ValueError(f"{path} is not under a writable folder ({', '.join(WRITABLE)})")

    def copy_in(self, source: Path, destination: PurePosixPath) -> None:
        copy_local(source, self._outside(destination))

    def copy_out(self, source: PurePosixPath, destination: Path) -> None:
        shutil.copy2(self._outside(source), destination)

    def command(self, args: list[str], env: Mapping[str, str] | None, cwd: str) -> list[str]:
        command = ["bwrap", "--ro-bind", str(self.rootfs), "/"]
        for inside, outside in self.binds.items():
            command += ["--bind", str(outside), inside]
        for path in self.hidden:
            command += ["--ro-bind", "/dev/null", path]
        command += [
            "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--proc", "/proc", "--dev", "/dev",
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
            "--hostname", "pynox-conformance", "--die-with-parent", "--clearenv",
        ]  # fmt: skip
        for name, value in {**BASE_ENV, **(env or {})}.items():
            command += ["--setenv", name, value]
        return [*command, "--chdir", cwd, *args]

    def call(
        self, args: list[str], env: Mapping[str, str] | None = None, cwd: str = "/"
    ) -> Result[str]:
        return commands.run(self.command(args, env, cwd), capture=True, check=False, timeout=3600)

    def hide(self, patterns: tuple[str, ...]) -> list[str]:
        # The cached root is shared with other cells: each library is covered by an empty
        # file (/dev/null bound over it), which the loader refuses, instead of deleted.
        found: set[str] = set()
        for folder in LIBRARY_DIRS:
            base = self.rootfs / folder.lstrip("/")
            if base.is_symlink() or not base.is_dir():
                continue  # merged /usr: lib is usr/lib
            for path in base.rglob("*"):
                if any(fnmatch.fnmatchcase(path.name, p) for p in patterns):
                    real = path.resolve()
                    if real.is_file() and self.rootfs.resolve() in real.parents:
                        found.add("/" + real.relative_to(self.rootfs.resolve()).as_posix())
        self.hidden = sorted(found)
        return self.hidden

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)
