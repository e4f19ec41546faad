"""pynox.toml in the working directory: permissions, profiles, and what is never read."""

from __future__ import annotations

from pathlib import Path

from .support import Install, json_line, write

CONFIG = (
    '[permissions]\nallow_read = ["data"]\nallow_write = ["out"]\ntimeout = "10s"\n\n'
    '[profiles.fetch]\nallow_network = true\nallow_env = ["API_KEY"]\ntimeout = "20s"\n'
)


def project(root: Path) -> Path:
    write(root / "data" / "in.txt", "41")
    (root / "out").mkdir()
    write(root / "pynox.toml", CONFIG)
    return root


def test_permissions_apply(sandboxed: Install, tmp_path: Path) -> None:
    root = project(tmp_path)
    code = "open('out/r.txt', 'w').write(str(int(open('data/in.txt').read()) + 1))"
    done = sandboxed.run_pynox("-c", code, cwd=root)
    assert done.returncode == 0, done.stderr
    assert (root / "out" / "r.txt").read_text() == "42"


def test_profile_adds_to_the_permissions(sandboxed: Install, tmp_path: Path) -> None:
    root = project(tmp_path)
    policy = json_line(sandboxed.run_pynox("--json", "--profile=fetch", "-c", "pass", cwd=root))
    assert isinstance(policy["policy"], dict)
    assert policy["policy"]["network"] == "allow"
    assert policy["policy"]["allow_env"] == ["API_KEY"]
    assert policy["policy"]["timeout_ms"] == 20_000
    assert policy["policy"]["allow_read"] == [str(root / "data")]


def test_a_config_beside_the_script_is_never_read(sandboxed: Install, tmp_path: Path) -> None:
    root = tmp_path / "project"
    script = write(root / "job.py", "print(open('/etc/hostname').read())\n")
    write(root / "pynox.toml", '[permissions]\nallow_read = ["/etc"]\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = sandboxed.run_pynox(str(script), cwd=elsewhere)
    assert done.returncode == 1 and "PermissionError" in done.stderr


def test_unknown_key_is_one_line_naming_key_and_file(install: Install, tmp_path: Path) -> None:
    config = write(tmp_path / "pynox.toml", '[permissions]\nallow_reed = ["data"]\n')
    done = install.run_pynox("-c", "pass", cwd=tmp_path)
    assert done.returncode == 125
    assert done.stderr.startswith("pynox: ") and done.stderr.count("\n") == 1
    assert "allow_reed" in done.stderr and str(config) in done.stderr


def test_unknown_profile_names_the_available_ones(install: Install, tmp_path: Path) -> None:
    root = project(tmp_path)
    done = install.run_pynox("--profile=nope", "-c", "pass", cwd=root)
    assert done.returncode == 125
    assert "nope" in done.stderr and "fetch" in done.stderr
