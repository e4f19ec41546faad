"""Wheels: one per CPython, for the CPython asked for, the same bytes when built again.

Building wheels needs zig and auditwheel, which `nox -s wheels` installs; CI builds
the primary CPython's wheel twice with `make wheel WHEEL_ARGS=--check-reproducible`
(.ci/run). What is checked here is how a request reaches the right CPython and how
a wheel for another one, or one that is not reproducible, is refused.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.bundles import PROJECT

# isort: split
from bundler.config import read_toml
from bundler.errors import BundlerError
from bundler.wheel import check_tag, differing_entries

MINOR = f"{sys.version_info.major}.{sys.version_info.minor}"
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


def dry_run(*args: str) -> str:
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("minor", ["3.10", "3.12", "3.14"])
def test_make_wheel_python_runs_that_cpythons_session(minor: str) -> None:
    """`make wheel PYTHON=3.X` once built for the venv's CPython whatever X was."""
    out = dry_run("wheel", f"PYTHON={minor}")
    assert re.search(r'--error-on-missing-interpreters -s "wheels-\$minor"', out)
    assert f'minor="{minor}"' in out


def test_nox_has_a_wheel_session_per_cpython() -> None:
    # The project's venv has nox (make setup); a nox session's venv may not.
    venv = PROJECT / ".venv" / "bin" / "python"
    python = str(venv) if venv.is_file() else sys.executable
    done = subprocess.run(
        [python, "-m", "nox", "--list", "--json", "-s", "wheels"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0 and "No module named nox" in done.stderr:
        pytest.skip("nox is not installed in this environment")
    assert done.returncode == 0, done.stderr
    names = {session["session"] for session in json.loads(done.stdout)}
    assert names == {f"wheels-3.{m}" for m in range(10, 15)}


def test_the_build_uses_exact_versions_and_the_bundles_cffi() -> None:
    """pip builds the wheel with the newest versions the build's requirements allow: a
    new scikit-build-core release changed the wheel's bytes (its WHEEL file names it), and
    a new cffi the binding's source, for a backend the bundles do not ship."""
    requires = read_toml(PROJECT / "pyproject.toml")["build-system"]["requires"]
    assert all(requirement.count("==") == 1 for requirement in requires), requires
    pins = dict(requirement.split("==") for requirement in requires)
    packages = read_toml(PROJECT / "dist-config" / "packages.toml")
    assert pins["cffi"] == packages["cffi"]["version"]
    assert set(pins) == {"scikit-build-core", "cffi"}


def wheel_file(folder: Path, tag: str, entries: dict[str, bytes], stamp: int = 2024) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"pynox-0.1.0-{tag}-{tag}-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in entries.items():
            archive.writestr(zipfile.ZipInfo(name, (stamp, 1, 1, 0, 0, 0)), content)
    return path


def test_a_wheel_for_another_cpython_is_refused(tmp_path: Path) -> None:
    other = "cp39" if TAG != "cp39" else "cp310"
    check_tag(wheel_file(tmp_path, TAG, {"pynox/__init__.py": b""}))
    with pytest.raises(BundlerError, match=f"is for {other}, not {TAG}"):
        check_tag(wheel_file(tmp_path, other, {"pynox/__init__.py": b""}))


def test_differing_entries_names_content_and_timestamps(tmp_path: Path) -> None:
    one = wheel_file(tmp_path / "one", TAG, {"a.py": b"1", "b.py": b"2", "c.py": b"3"})
    two = wheel_file(tmp_path / "two", TAG, {"a.py": b"1", "b.py": b"changed", "d.py": b""})
    assert differing_entries(one, two) == ["b.py", "c.py", "d.py"]
    later = wheel_file(tmp_path / "later", TAG, {"a.py": b"1", "b.py": b"2", "c.py": b"3"}, 2025)
    assert differing_entries(one, later) == ["a.py", "b.py", "c.py"]


def test_a_rebuilt_wheel_is_found_beside_other_cpythons_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make wheel` again after `make wheels`: the wheel it rewrote is the one it reports."""
    from bundler import wheel

    out = tmp_path / "dist"
    out.mkdir()
    plat = wheel.platform_tag()
    tags = f"manylinux2014_x86_64.manylinux_2_17_x86_64.{plat}"
    other = "cp314" if TAG != "cp314" else "cp313"
    for tag in (TAG, other):
        (out / f"pynox-0.1.0-{tag}-{tag}-{tags}.whl").write_bytes(b"an earlier build")
    raw = tmp_path / f"pynox-0.1.0-{TAG}-{TAG}-linux_x86_64.whl"
    raw.write_bytes(b"raw")
    rebuilt = out / f"pynox-0.1.0-{TAG}-{TAG}-{tags}.whl"

    def auditwheel_repair(command: list[object], **options: object) -> None:
        rebuilt.write_bytes(b"this build")  # auditwheel overwrites a wheel of the same name

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1")
    monkeypatch.setattr(wheel.commands, "run", auditwheel_repair)
    monkeypatch.setattr(wheel, "_stdout", lambda *args, **kwargs: "")
    assert wheel.repair(raw, out) == rebuilt
