"""`pynox mcp`'s command line: its help, its refusals, and the SDK it needs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.commands import PYNOX, run

from pynox.cli import mcp as mcp_cli
from pynox.errors import UsageError


def test_help_names_the_tools_and_the_http_flag() -> None:
    result = run([PYNOX, "mcp", "--help"])
    assert result.returncode == 0
    out = result.stdout.decode()
    assert out.startswith("usage: pynox mcp [--config FILE] [--profile NAME]")
    assert "run_python, python_session and close_python_session" in out
    assert "--http [HOST:]PORT" in out


def test_help_names_each_value_as_the_usage_does() -> None:
    out = run([PYNOX, "mcp", "--help"]).stdout.decode()
    for flag in ("--config FILE", "--profile NAME", "--workers N"):
        assert f"  {flag} " in out, out
    assert "then ./pynox.toml" in " ".join(out.split())


@pytest.mark.unit
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--wrkers", "2"], "pynox mcp does not take --wrkers; did you mean --workers?"),
        (["--conf", "x"], "pynox mcp does not take --conf; did you mean --config?"),
        (["--profle=a"], "pynox mcp does not take --profle; did you mean --profile?"),
        (
            ["--zzz"],
            "pynox mcp does not take --zzz; it takes --config, --profile, --workers and --http",
        ),
        (["extra"], f"mcp: extra is not a flag; pynox mcp takes flags only ({mcp_cli.USAGE})"),
    ],
)
def test_a_mistyped_flag_is_named_with_the_closest(argv: list[str], message: str) -> None:
    """As `pynox` and `pynox pool` do; an abbreviation is not taken for the flag."""
    with pytest.raises(UsageError) as refused:
        mcp_cli.parse(argv)
    assert refused.value.message == message


@pytest.mark.unit
@pytest.mark.parametrize("workers", ["0", "x", "-1", "1.5", "٣"])
def test_a_bad_worker_count_is_one_sentence(workers: str) -> None:
    """The same sentence for every value that is not a count, as pynox pool gives it."""
    with pytest.raises(UsageError) as refused:
        mcp_cli.parse(["--workers", workers])
    assert refused.value.message == (
        f"mcp: --workers={workers} is not a whole number of at least 1; give one, such as 2"
    )


@pytest.mark.unit
def test_a_worker_count_past_any_machine_is_one_sentence() -> None:
    """More digits than int() reads (4300): pynox pool's sentence, not int()'s error."""
    workers = "9" * 5000
    with pytest.raises(UsageError) as refused:
        mcp_cli.parse(["--workers", workers])
    assert refused.value.message == (
        f"mcp: --workers={workers} is more than any machine can run; give a number like 4"
    )


@pytest.mark.parametrize("address", ["x:y", "0", "70000", "host:", "²", "host:٣", "9" * 5000])
def test_a_bad_http_address_is_one_sentence(address: str) -> None:
    result = run([PYNOX, "mcp", "--http", address])
    assert result.returncode == 2
    assert result.stderr.decode() == (
        f"pynox: mcp: --http={address}: give a port such as 8000 or 127.0.0.1:8000\n"
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "expected"),
    [("8000", ("127.0.0.1", 8000)), ("0.0.0.0:80", ("0.0.0.0", 80)), ("[::1]:9", ("::1", 9))],
)
def test_http_binds_to_loopback_unless_a_host_is_given(
    text: str, expected: tuple[str, int]
) -> None:
    options = mcp_cli.parse(["--http", text])
    assert (options.host, options.port) == expected


@pytest.mark.unit
def test_without_the_sdk_it_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp raises ImportError
    with pytest.raises(UsageError) as caught:
        mcp_cli.mcp_command([])
    assert caught.value.message == (
        "pynox mcp needs the MCP SDK, which the mcp extra installs: pip install 'pynox[mcp]'"
    )


def test_an_address_in_use_is_one_sentence() -> None:
    pytest.importorskip("mcp", reason="the MCP SDK comes with the test extra (pynox[mcp])")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run([PYNOX, "mcp", "--http", str(port)])
    assert result.returncode == 2
    assert result.stderr.decode() == (
        f"pynox: mcp: --http={port}: cannot listen there (Address already in use); give a "
        "free port, and a name or address of this machine\n"
    )


def test_a_profile_without_a_config_is_refused(tmp_path: Path) -> None:
    """Not a server that runs every call without the profile's grants."""
    pytest.importorskip("mcp", reason="the MCP SDK comes with the test extra (pynox[mcp])")
    result = run([PYNOX, "mcp", "--profile", "analysis"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode() == (
        "pynox: mcp: --profile=analysis needs a pynox.toml, and none was found; pass --config "
        "with its absolute path (assistants start servers in a directory of their own), or "
        "set PYNOX_CONFIG\n"
    )


def test_a_missing_config_is_named_as_its_flag(tmp_path: Path) -> None:
    """It was named as the API's argument (config=), which no one running pynox mcp wrote."""
    pytest.importorskip("mcp", reason="the MCP SDK comes with the test extra (pynox[mcp])")
    result = run([PYNOX, "mcp", "--config", "missing.toml"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode() == (
        "pynox: mcp: --config=missing.toml does not exist; pass the path of a pynox.toml\n"
    )


def test_a_profile_the_config_lacks_is_a_usage_error(tmp_path: Path) -> None:
    """A bad --profile is a bad command line (2), not a sandbox that could not be set up."""
    pytest.importorskip("mcp", reason="the MCP SDK comes with the test extra (pynox[mcp])")
    (tmp_path / "pynox.toml").write_text("[profiles.analysis]\nallow_network = true\n")
    result = run([PYNOX, "mcp", "--profile", "nope"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode() == (
        f"pynox: mcp: profile 'nope' is not in {tmp_path.resolve() / 'pynox.toml'}; its "
        "profiles are: analysis\n"
    )


def test_a_closed_standard_input_is_one_sentence() -> None:
    """Not an internal error from the transport, which reads descriptor 0."""
    pytest.importorskip("mcp", reason="the MCP SDK comes with the test extra (pynox[mcp])")
    result = subprocess.run(
        [PYNOX, "mcp"], capture_output=True, preexec_fn=lambda: os.close(0), timeout=60
    )
    assert result.returncode == 2
    assert result.stderr.decode() == (
        "pynox: mcp: standard input is closed; an MCP client starts pynox mcp with a pipe "
        "there, or serve HTTP with --http PORT\n"
    )


@pytest.mark.parametrize(
    ("profile", "refusal"),
    [
        ("slow", "timeout exceeds [pool.limits]: 10s is above its limit of 2s; ask for 2s or less"),
        (
            "gone",
            "cannot grant reading {root}/gone: it does not exist; create it first or correct "
            "the path",
        ),
    ],
)
def test_permissions_the_pool_refuses_are_refused_at_start(
    tmp_path: Path, profile: str, refusal: str
) -> None:
    """Not a server whose every call fails with a refusal the model cannot act on."""
    pytest.importorskip("mcp", reason="the MCP SDK comes with the test extra (pynox[mcp])")
    (tmp_path / "pynox.toml").write_text(
        "[profiles.slow]\ntimeout = '10s'\n\n[profiles.gone]\nallow_read = ['gone']\n\n"
        "[pool.limits]\ntimeout = '2s'\n"
    )
    result = run([PYNOX, "mcp", "--profile", profile], cwd=tmp_path, input=b"")
    assert result.returncode == 2
    root = tmp_path.resolve()
    assert result.stderr.decode() == (
        f"pynox: mcp: the pool refuses the permissions of --profile={profile}: "
        f"{refusal.format(root=root)}\n"
    )


def test_the_grant_a_denial_s_hint_names_written_into_the_profile_lets_the_code_run(
    tmp_path: Path,
) -> None:
    """As a server's owner follows the hint: its grant, into the table it names, and a
    new server."""
    pytest.importorskip("mcp", reason="the MCP SDK comes with the test extra (pynox[mcp])")
    from support.mcp_client import stdio_server

    secret = tmp_path / "secret.txt"
    secret.write_text("granted\n")
    config = tmp_path / "pynox.toml"
    config.write_text("[permissions]\ntimeout = '20s'\n\n[profiles.data]\n")
    code = {"code": f"print(open({str(secret)!r}).read(), end='')"}
    client = stdio_server(["--config", str(config), "--profile", "data"], tmp_path)
    try:
        denied = client.call("run_python", code)
    finally:
        client.close()
    hint = denied.content[0].text.splitlines()[-1]
    grant = hint.split("grant it with ", 1)[1].split("; ", 1)[0]
    assert grant == f"allow_read = [{str(secret)!r}]", hint
    assert f"those of [profiles.data] of {os.path.realpath(config)}" in hint
    config.write_text(config.read_text() + grant + "\n")
    client = stdio_server(["--config", str(config), "--profile", "data"], tmp_path)
    try:
        granted = client.call("run_python", code)
    finally:
        client.close()
    assert not granted.is_error and granted.content[0].text == "granted"
