"""pynox.toml as the command sees it: discovery, profiles, refusals."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.commands import pynox


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def policy_of(*args: str, cwd: Path, env: dict[str, str] | None = None) -> dict:
    proc = pynox("--json", *args, "-c", "pass", cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["policy"]


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "data").mkdir(parents=True)
    (root / "out").mkdir()
    (root / "extra").mkdir()
    write(
        root / "pynox.toml",
        '[permissions]\nallow_read = ["data"]\nallow_write = ["out"]\ntimeout = "10s"\n\n'
        '[profiles.fetch]\nallow_network = true\nallow_env = ["API_KEY"]\ntimeout = "20s"\n',
    )
    return root


def test_pynox_toml_in_the_working_directory_applies(tmp_path: Path) -> None:
    root = project(tmp_path)
    policy = policy_of(cwd=root)
    assert policy["allow_read"] == [str(root / "data")]
    assert policy["allow_write"] == [str(root / "out")]
    assert policy["timeout_ms"] == 10_000
    assert policy["network"] == "deny"


def test_profile_sits_between_permissions_and_flags(tmp_path: Path) -> None:
    root = project(tmp_path)
    policy = policy_of("--profile=fetch", "--allow-read=extra", "--timeout=30s", cwd=root)
    assert policy["allow_read"] == [str(root / "data"), str(root / "extra")]
    assert policy["network"] == "allow"
    assert policy["allow_env"] == ["API_KEY"]
    assert policy["timeout_ms"] == 30_000
    assert policy_of("--profile=fetch", cwd=root)["timeout_ms"] == 20_000


def test_config_flag_and_environment_variable(tmp_path: Path) -> None:
    root = project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    by_flag = policy_of(f"--config={root / 'pynox.toml'}", cwd=elsewhere)
    assert by_flag["allow_read"] == [str(root / "data")]  # relative to the file
    by_env = policy_of(cwd=elsewhere, env={"PYNOX_CONFIG": str(root / "pynox.toml")})
    assert by_env["allow_write"] == [str(root / "out")]


def test_a_config_beside_the_script_is_never_read(tmp_path: Path) -> None:
    root = project(tmp_path)
    script = write(root / "job.py", "print(open('/etc/hostname').read())\n")
    write(root / "pynox.toml", '[permissions]\nallow_read = ["/etc"]\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = pynox(str(script), cwd=elsewhere)
    assert proc.returncode == 1
    assert "PermissionError" in proc.stderr.decode()


def test_unknown_profile_names_the_available_ones(tmp_path: Path) -> None:
    root = project(tmp_path)
    proc = pynox("--profile=nope", "-c", "pass", cwd=root)
    assert proc.returncode == 125
    stderr = proc.stderr.decode()
    assert stderr.startswith("pynox: ") and stderr.count("\n") == 1
    assert "nope" in stderr and "fetch" in stderr


def test_profile_without_config_is_a_usage_error(tmp_path: Path) -> None:
    proc = pynox("--profile=fetch", "-c", "pass", cwd=tmp_path)
    assert proc.returncode == 2
    assert "needs a pynox.toml" in proc.stderr.decode()


def test_unknown_key_is_an_error_naming_key_and_file(tmp_path: Path) -> None:
    config = write(tmp_path / "pynox.toml", '[permissions]\nallow_reed = ["data"]\n')
    proc = pynox("-c", "pass", cwd=tmp_path)
    assert proc.returncode == 125
    stderr = proc.stderr.decode()
    assert stderr.startswith("pynox: ") and stderr.count("\n") == 1
    assert "allow_reed" in stderr and str(config) in stderr
    assert "Traceback" not in stderr


def test_wrong_type_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "pynox.toml", '[permissions]\nallow_read = "data"\n')
    proc = pynox("-c", "pass", cwd=tmp_path)
    assert proc.returncode == 125
    assert "allow_read" in proc.stderr.decode() and "list" in proc.stderr.decode()


@pytest.mark.parametrize(
    "nested",
    ["allow_read = " + "[" * 5000 + '"x"' + "]" * 5000, "x = " + "{a = " * 5000 + "1" + "}" * 5000],
    ids=["arrays", "inline-tables"],
)
def test_a_config_nested_thousands_deep_gets_one_line(tmp_path: Path, nested: str) -> None:
    config = write(tmp_path / "pynox.toml", f"[permissions]\n{nested}\n")
    proc = pynox("-c", "pass", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (125, b"")
    assert proc.stderr.decode() == (
        f"pynox: {config} nests arrays or inline tables too deeply to read (hundreds of "
        "levels); no setting needs more than one level, so flatten it\n"
    )


@pytest.mark.parametrize("key", ["memory", "timeout", "workers"])
def test_an_integer_too_long_for_python_gets_one_line(tmp_path: Path, key: str) -> None:
    """TOML's parser reads an integer with int(), which refuses more than 4300 digits with
    a ValueError of its own, not a TOML error."""
    table = "pool" if key == "workers" else "permissions"
    config = write(tmp_path / "pynox.toml", f"[{table}]\n{key} = 1{'0' * 5000}\n")
    proc = pynox("-c", "pass", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (125, b"")
    assert proc.stderr.decode() == (
        f"pynox: {config} holds an integer too long for Python to read (thousands of "
        "digits); no setting takes one, so shorten it\n"
    )


def test_toml_syntax_error(tmp_path: Path) -> None:
    write(tmp_path / "pynox.toml", "[permissions\n")
    proc = pynox("-c", "pass", cwd=tmp_path)
    assert proc.returncode == 125
    assert proc.stderr.decode().startswith("pynox: ")
    assert "Traceback" not in proc.stderr.decode()


def test_config_under_a_path_it_makes_writable_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "pynox.toml", '[permissions]\nallow_write = ["."]\n')
    proc = pynox("-c", "pass", cwd=tmp_path)
    assert proc.returncode == 125
    assert "could grant itself more next time" in proc.stderr.decode()
    # The same holds when a flag makes it writable.
    write(tmp_path / "pynox.toml", "[permissions]\n")
    proc = pynox(f"--allow-write={tmp_path}", "-c", "pass", cwd=tmp_path)
    assert proc.returncode == 125


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    root = project(tmp_path)
    cache = tmp_path / "cache"
    env = {"XDG_CACHE_HOME": str(cache)}
    assert policy_of(cwd=root, env=env)["timeout_ms"] == 10_000
    assert any(cache.rglob("*")), "the validated configuration should be cached"
    write(root / "pynox.toml", '[permissions]\ntimeout = "3s"\n')
    assert policy_of(cwd=root, env=env)["timeout_ms"] == 3_000


def test_a_run_that_may_write_the_cache_cannot_poison_later_runs(tmp_path: Path) -> None:
    root = project(tmp_path)
    cache = tmp_path / "cache"
    env = {"XDG_CACHE_HOME": str(cache)}
    assert policy_of(cwd=root, env=env)["allow_read"] == [str(root / "data")]
    entries = [p for p in cache.rglob("*") if p.is_file()]
    assert entries
    # The program rewrites every cache entry it can reach.
    poison = (
        f"import pathlib\nfor p in pathlib.Path({str(cache)!r}).rglob('*'):\n"
        "    p.is_file() and p.write_bytes(b'x')\n"
    )
    proc = pynox(f"--allow-write={cache}", f"--allow-read={cache}", "-c", poison, cwd=root, env=env)
    assert proc.returncode == 125
    assert "cache of validated configurations" in proc.stderr.decode()
    assert all(p.read_bytes() != b"x" for p in entries), "the program ran and wrote the cache"
    assert policy_of(cwd=root, env=env)["allow_read"] == [str(root / "data")]


def test_a_name_that_is_not_utf8_is_granted_through_a_link(tmp_path: Path) -> None:
    """TOML cannot spell the name, so the message for one says to name a link to it:
    the grant follows the link, and the program reads the file by its own name."""
    real = os.fsencode(tmp_path) + b"/caf\xe9"
    os.mkdir(real)
    Path(os.fsdecode(real + b"/menu.txt")).write_text("soup")
    (tmp_path / "cafe").symlink_to(os.fsdecode(real))
    root = tmp_path / "project"
    write(root / "pynox.toml", '[permissions]\nallow_read = ["../cafe"]\n')
    program = f"print(open({real + b'/menu.txt'!r}).read())"
    proc = pynox("--json", "-c", program, cwd=root)
    result = json.loads(proc.stdout)
    assert result["stdout"] == "soup\n", result
    assert result["policy"]["allow_read"] == [os.fsdecode(real)]
