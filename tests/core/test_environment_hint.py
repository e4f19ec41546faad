"""A program that reads a variable its environment lacks (os.environ["NAME"]): pynox
passes on only the variables a run is granted, so the hint names the grant that passes
it, which works whether or not the variable was set where pynox runs, and never shows
its value."""

from __future__ import annotations

import json
import sys

import pytest
from support.commands import pynox

import pynox as api

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

READS = "import os\nprint(os.environ['PYNOX_TEST_TOKEN'])\n"
SECRET = "s3cr3t-value"


def _hint(grant: str) -> str:
    return (
        "the environment variable PYNOX_TEST_TOKEN is not in the program's environment, which "
        "holds only the variables the run is granted of those where pynox runs (set "
        f"PYNOX_TEST_TOKEN there if it is not); grant it with {grant}"
    )


def test_a_variable_set_where_pynox_runs_gets_the_grant_that_passes_it() -> None:
    env = {"PYNOX_TEST_TOKEN": SECRET}
    failed = pynox("-c", READS, env=env)
    err = failed.stderr.decode()
    assert failed.returncode == 1
    assert "KeyError: 'PYNOX_TEST_TOKEN'" in err
    assert err.splitlines()[-1] == "pynox: " + _hint("--allow-env=PYNOX_TEST_TOKEN")
    result = json.loads(pynox("--json", "-c", READS, env=env).stdout)
    assert result["error"]["hint"] == _hint("--allow-env=PYNOX_TEST_TOKEN")
    assert SECRET not in err and SECRET not in json.dumps(result)
    followed = pynox("--allow-env=PYNOX_TEST_TOKEN", "-c", READS, env=env)
    assert (followed.returncode, followed.stdout) == (0, f"{SECRET}\n".encode()), followed.stderr


def test_a_variable_set_nowhere_gets_the_same_hint_which_works_once_it_is_set() -> None:
    failed = pynox("-c", READS)
    assert failed.stderr.decode().splitlines()[-1] == (
        "pynox: " + _hint("--allow-env=PYNOX_TEST_TOKEN")
    )
    followed = pynox("--allow-env=PYNOX_TEST_TOKEN", "-c", READS, env={"PYNOX_TEST_TOKEN": "x"})
    assert (followed.returncode, followed.stdout) == (0, b"x\n"), followed.stderr


def test_the_pool_names_its_own_grant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYNOX_TEST_TOKEN", SECRET)
    with api.Pool() as pool:
        failed = pool.run(READS)
        assert failed.error is not None
        assert failed.error["hint"] == _hint("allow_env=['PYNOX_TEST_TOKEN']")
        assert SECRET not in failed.text
        followed = pool.run(READS, allow_env=["PYNOX_TEST_TOKEN"])
        assert (followed.exit, followed.stdout) == (0, f"{SECRET}\n"), followed.text


def test_other_missing_keys_get_no_hint() -> None:
    failed = pynox("-c", "settings = {}\nsettings['PYNOX_TEST_TOKEN']")
    assert failed.returncode == 1
    assert "pynox:" not in failed.stderr.decode()


def test_a_granted_variable_set_nowhere_says_where_to_set_it() -> None:
    """Granted but missing: it was not set where pynox runs, which the program's own
    environment already tells it. Setting it there, as the hint says, passes it on."""
    granted = pynox("--allow-env=PYNOX_TEST_TOKEN", "--json", "-c", READS)
    result = json.loads(granted.stdout)
    assert "KeyError: 'PYNOX_TEST_TOKEN'" in result["stderr"]
    assert result["error"]["hint"] == (
        "the environment variable PYNOX_TEST_TOKEN is granted to the run, but it was not set "
        "where pynox runs: set it there"
    )
    followed = pynox("--allow-env=PYNOX_TEST_TOKEN", "-c", READS, env={"PYNOX_TEST_TOKEN": "x"})
    assert (followed.returncode, followed.stdout) == (0, b"x\n"), followed.stderr


def test_a_pool_started_without_a_granted_variable_says_to_set_it_before_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A variable set in os.environ after the pool started reaches none of its runs."""
    monkeypatch.delenv("PYNOX_TEST_TOKEN", raising=False)
    with api.Pool() as pool:
        pool.run("pass")  # started
        monkeypatch.setenv("PYNOX_TEST_TOKEN", SECRET)
        failed = pool.run(READS, allow_env=["PYNOX_TEST_TOKEN"])
    assert failed.error is not None
    assert failed.error["hint"] == (
        "the environment variable PYNOX_TEST_TOKEN is granted to the run, but it was not set "
        "where the pool started, whose environment is the one its runs are passed variables "
        "from: set it there before the pool starts"
    )
    with api.Pool() as pool:  # started with it set
        followed = pool.run(READS, allow_env=["PYNOX_TEST_TOKEN"])
    assert (followed.exit, followed.stdout) == (0, f"{SECRET}\n"), followed.text
