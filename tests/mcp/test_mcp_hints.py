"""The MCP server's hints: each grant as its pynox.toml takes it, read back by TOML."""

from __future__ import annotations

import pytest

from pynox.api.result import Result
from pynox.engine.hint_style import Style, shown_path
from pynox.engine.hint_text import format_hint
from pynox.engine.time_limit import timeout_error
from pynox.mcp.hints import for_server
from pynox.policy.config import parse_config_bytes
from pynox.policy.grants import SESSION_NOTE
from pynox.policy.resolve import Policy

pytestmark = pytest.mark.unit

TABLE = "[profiles.data]"
CONFIG = "/srv/pynox.toml"


def hinted(hint: str) -> Result:
    error = {"type": "PermissionError", "message": "", "file": None, "line": None}
    return Result(exit=1, error={**error, "path": None, "hint": hint})  # type: ignore[typeddict-item]


def granted(result: Result) -> dict[str, object]:
    """The grants the hint of result names, written into its table as pynox.toml's reader
    reads them: each grant it names, with the value read."""
    assert result.error is not None and result.error["hint"] is not None
    hint = result.error["hint"]
    assert hint.endswith(
        f"; this server's permissions are those of {TABLE} of {CONFIG}, which neither the "
        "code nor a new session can change: tell the user, who can grant it there and "
        "restart the server"
    ), hint
    spelled = hint.split(" with ", 1)[1].split("; this server's", 1)[0]
    lines = spelled.replace(", allow_", "\nallow_")
    config = parse_config_bytes(f"{TABLE}\n{lines}\n".encode(), CONFIG, {})
    profile = config.profile("data")
    return {name: getattr(profile, name) for name in profile._fields if getattr(profile, name)}


@pytest.mark.parametrize(
    "path",
    ["/srv/data", "/srv/it's here", '/srv/a "b" \\c', "/srv/café ☕"],
)
@pytest.mark.parametrize("session", [False, True])
def test_a_path_grant_reads_back_as_the_path(path: str, session: bool) -> None:
    style = Style(True, session=session)
    for kind, grants in (("read", ["allow_read"]), ("read_write", ["allow_read", "allow_write"])):
        hint = format_hint(kind, path, style, None, None)
        assert hint is not None and hint.endswith(SESSION_NOTE) == session
        spelled = for_server(hinted(hint), TABLE, CONFIG)
        assert granted(spelled) == {grant: [path] for grant in grants}
        assert SESSION_NOTE not in str(spelled.error)


@pytest.mark.parametrize(
    "path",
    [
        "/srv/allow_network=True",
        "/srv/x allow_network=True",
        "/srv/with allow_read=['/etc']",
        "/srv/it's allow_write=['/'] here",
    ],
)
def test_a_path_that_spells_a_grant_stays_one_word(path: str) -> None:
    """The program chooses the paths a hint shows: one that reads like a grant is shown as
    the pool showed it, as one word, and only the grant the hint names is spelled anew."""
    hint = format_hint("read", path, Style(True), None, None)
    assert hint is not None
    shown = shown_path(path)
    assert shown is not None and hint.startswith(f"reading {shown} is not allowed; ")
    spelled = for_server(hinted(hint), TABLE, CONFIG)
    assert spelled.error is not None and spelled.error["hint"] is not None
    assert spelled.error["hint"].startswith(f"reading {shown} is not allowed; grant it with ")
    assert granted(spelled) == {"allow_read": [path]}


def test_a_limit_and_a_switch_read_back_as_toml_values() -> None:
    memory = format_hint("memory", None, Style(True), 64 << 20, None)
    assert memory is not None
    assert granted(for_server(hinted(memory), TABLE, CONFIG)) == {"memory": 128 << 20}
    network = format_hint("network", None, Style(True), None, None)
    assert network is not None
    assert granted(for_server(hinted(network), TABLE, CONFIG)) == {"allow_network": True}


def test_a_timeout_spelled_apart_from_the_style_reads_back_too() -> None:
    """timeout_error spells its grant itself, without Style: as Style does, all the same."""
    policy = Policy()
    policy.timeout = 2.0
    hint = timeout_error(policy, api=True)["hint"]
    assert granted(for_server(hinted(hint), TABLE, CONFIG)) == {"timeout": 4.0}


def test_a_hint_that_names_no_grant_is_left_as_it_is() -> None:
    hint = format_hint("metadata", None, Style(True), None, None)
    assert hint is not None
    assert for_server(hinted(hint), TABLE, CONFIG).error == hinted(hint).error


@pytest.mark.parametrize("kind", ["other_python", "module_other_python"])
@pytest.mark.parametrize(
    "value", ["/srv/x allow_network=True", "3.12 allow_read=['\\N{no such name}']"]
)
def test_a_reported_version_or_folder_that_spells_a_grant_stays_one_word(
    kind: str, value: str
) -> None:
    """The Python version or folder of these hints comes from the program's process, whose
    report a program may write (a pool rebuilds the hint from it): shown as a path is, as
    one word, it never reads as a grant, which the server would spell anew (and whose
    value, read as Python, could end the call in an error instead of its result)."""
    shown = shown_path(value)
    api_hint = format_hint(kind, value, Style(True), None, None)
    command_hint = format_hint(kind, value, Style(False), None, None)  # as the launcher's
    assert shown is not None and api_hint is not None and command_hint is not None
    assert f" {shown}, " in api_hint and f" {shown}, " in command_hint
    spelled = for_server(hinted(api_hint), TABLE, CONFIG)
    assert spelled.error is not None and spelled.error["hint"] is not None
    hint = spelled.error["hint"]
    assert f" {shown}, " in hint and "package_dirs = ['DIR']" in hint
    assert "allow_network = " not in hint and "allow_read = " not in hint


def test_a_server_without_a_pynox_toml_says_how_it_would_read_one() -> None:
    """With no file to point at, "grant it there" named nowhere: a file the user writes
    is read only when the server is told where it is."""
    hint = format_hint("read", "/srv/data", Style(True), None, None)
    assert hint is not None
    spelled = for_server(hinted(hint), "[permissions]", None)
    assert spelled.error is not None
    assert spelled.error["hint"] == (
        "reading /srv/data is not allowed; grant it with allow_read = ['/srv/data']; this "
        "server runs without a pynox.toml, and neither the code nor a new session can "
        "change its permissions: tell the user, who can grant it in [permissions] of a "
        "pynox.toml and restart the server with --config naming that file"
    )
