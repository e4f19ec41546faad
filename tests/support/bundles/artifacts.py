"""The expensive artefacts the bundle tests share, each made once per test session.

A runtime packed from the CPython running the tests (pack-runtime), a
dist-config whose pin is that archive's real sha256, a mirror folder laid out
like the release, and the bundle built twice: from PYNOX_RUNTIME (signed with a
throwaway key, as `make bundle SIGN_KEY=...` does), and through the loopback HTTP
mirror. Pytest fixtures of scope "session" in each test
module call these; the cache here makes them run once whichever module asks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.bundles import PROJECT
from support.bundles.http_mirror import Mirror

TAG = "test"
FLAVOR = "install_only_stripped"
# The runtime and bundles below are made once per process: under pytest-xdist, the
# modules that use them run on one worker (nox passes --dist loadgroup), marked so.
SHARES_BUNDLES = pytest.mark.xdist_group("bundles")
TIMINGS: dict[str, float] = {}
_made: dict[str, object] = {}


def host_python() -> str:
    """The interpreter of the base installation behind the test environment."""
    base = getattr(sys, "_base_executable", "") or sys.executable
    path = Path(base).resolve()
    if Path(sys.base_prefix) in path.parents:
        return str(path)
    return str(
        Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    )


def minor() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without anything that steers the bundler or pynox."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYNOX_", "SOURCE_DATE"))}
    env.update(extra)
    return env


def bundler(
    args: list[str], env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bundler", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def host_target() -> tuple[str, str]:
    """(target name, PBS triple) of this machine."""
    from bundler.config import load_matrix
    from bundler.host import host_target as name

    target = load_matrix(PROJECT / "dist-config").target(name())
    return target.name, target.pbs_triple


@dataclass(frozen=True)
class Runtime:
    archive: Path  # named as the pinned asset
    sha256: str
    version: str
    config: Path  # a dist-config pinning it
    mirror: Path  # a folder laid out as TAG/NAME
    cache: Path  # XDG_CACHE_HOME for the bundler runs


def runtime(factory: pytest.TempPathFactory) -> Runtime:
    if "runtime" in _made:
        return _made["runtime"]  # type: ignore[return-value]
    from bundler.digest import sha256_file
    from bundler.pins import asset_name

    work = factory.mktemp("runtime")
    version = ".".join(map(str, sys.version_info[:3]))
    target, triple = host_target()
    name = asset_name(version, TAG, triple, FLAVOR)
    archive = work / name
    started = time.monotonic()
    done = bundler(
        ["pack-runtime", "--python", host_python(), "--output", str(archive)], clean_env()
    )
    TIMINGS["pack-runtime"] = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    sha256 = sha256_file(archive)
    config = work / "dist-config"
    shutil.copytree(PROJECT / "dist-config", config)
    (config / "runtimes.toml").write_text(
        f'[release]\ntag = "{TAG}"\n'
        f'url = "https://example.invalid/releases/download/{{tag}}/{{name}}"\n'
        f'flavor = "{FLAVOR}"\nsums = "SHA256SUMS"\nsha256_source = "the test session"\n\n'
        f'[[assets]]\ntarget = "{target}"\npython = "{version}"\nname = "{name}"\n'
        f'url = "https://example.invalid/releases/download/{TAG}/{name}"\nsha256 = "{sha256}"\n',
        encoding="utf-8",
    )
    mirror = work / "mirror"
    (mirror / TAG).mkdir(parents=True)
    try:
        os.link(archive, mirror / TAG / name)
    except OSError:
        shutil.copyfile(archive, mirror / TAG / name)
    made = Runtime(archive, sha256, version, config, mirror, work / "cache")
    _made["runtime"] = made
    return made


@dataclass(frozen=True)
class Bundles:
    from_archive: Path  # with ARCHIVE.sig, made with signing_key
    from_mirror: Path  # unsigned
    mirror_requests: int
    signing_key: Path  # an ed25519 private key; its public half is signing_key.pub


def throwaway_key(folder: Path, comment: str = "pynox test") -> Path:
    """A new ed25519 key pair without a passphrase: folder/key and folder/key.pub."""
    folder.mkdir(parents=True, exist_ok=True)
    key = folder / "key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)],
        check=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    return key


def _from_runtime(factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The bundle built from PYNOX_RUNTIME, signed with a throwaway key; and that key."""
    if "from_runtime" in _made:
        return _made["from_runtime"]  # type: ignore[return-value]
    packed = runtime(factory)
    work = factory.mktemp("bundle")
    env = clean_env(XDG_CACHE_HOME=str(packed.cache), PYNOX_DIST_CONFIG=str(packed.config))
    key = throwaway_key(work / "signing key")
    started = time.monotonic()
    built = bundler(
        ["bundle", "--out", str(work / "one"), "--python", minor(), "--compiler", "native"]
        + ["--sign-key", str(key)],
        {**env, "PYNOX_RUNTIME": str(packed.archive)},
    )
    TIMINGS["bundle from PYNOX_RUNTIME"] = time.monotonic() - started
    assert built.returncode == 0, built.stderr
    made = (Path(built.stdout.strip().splitlines()[-1]), key)
    _made["from_runtime"] = made
    return made


def bundle_from_runtime(factory: pytest.TempPathFactory) -> Path:
    """The bundle built from PYNOX_RUNTIME alone (signed), for tests that need a bundle
    and not the second build through the mirror, which takes as long again."""
    return _from_runtime(factory)[0]


def bundles(factory: pytest.TempPathFactory) -> Bundles:
    """The bundle built from PYNOX_RUNTIME, then again through the loopback mirror."""
    if "bundles" in _made:
        return _made["bundles"]  # type: ignore[return-value]
    packed = runtime(factory)
    first, key = _from_runtime(factory)
    work = factory.mktemp("bundles")
    env = clean_env(XDG_CACHE_HOME=str(packed.cache), PYNOX_DIST_CONFIG=str(packed.config))
    with Mirror(packed.mirror) as mirror:
        started = time.monotonic()
        second = bundler(
            ["bundle", "--out", str(work / "two"), "--python", minor(), "--compiler", "native"],
            {**env, "PYNOX_PBS_MIRROR": mirror.url},
        )
        TIMINGS["bundle through the mirror"] = time.monotonic() - started
        requests = len(mirror.state.requests)
    assert second.returncode == 0, second.stderr
    made = Bundles(
        first,
        Path(second.stdout.strip().splitlines()[-1]),
        requests,
        key,
    )
    _made["bundles"] = made
    return made
