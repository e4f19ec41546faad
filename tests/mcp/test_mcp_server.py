"""`pynox mcp` driven by the MCP SDK's own client, over stdio and streamable HTTP.

One server per transport serves the module (the `mcp` fixture is parametrized), started
with a pynox.toml and --profile, so every test runs over both transports.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP SDK comes with the test extra (pynox[mcp])")

from support.mcp_client import Client, http_server, stdio_server  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

PACKAGES = os.environ.get("PYNOX_TEST_PACKAGES", "")
NO_PACKAGES = (
    "PYNOX_TEST_PACKAGES is unset: `nox -s tests` installs the agents' packages "
    "(requirements/agent-tasks.txt) on the CPython that runs nox and sets it"
)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pynox.toml: the packages (when given) for every run, a data directory for the
    "data" profile the server starts with, and a bound of two sessions."""
    root = tmp_path_factory.mktemp("mcp")
    (root / "data").mkdir()
    (root / "data" / "numbers.txt").write_text("3\n4\n5\n")
    (root / "secret.txt").write_text("not for the model\n")
    packages = f"package_dirs = [{PACKAGES!r}]\n" if PACKAGES else ""
    (root / "pynox.toml").write_text(
        f"[permissions]\n{packages}timeout = '20s'\n\n"
        f"[profiles.data]\nallow_read = [{str(root / 'data')!r}]\n\n"
        "[pool]\nworkers = 2\nmax_sessions = 2\n"
    )
    return root


@pytest.fixture(scope="module", params=["stdio", "http"])
def mcp(request: pytest.FixtureRequest, root: Path) -> Iterator[Client]:
    args = ["--config", str(root / "pynox.toml"), "--profile", "data"]
    if request.param == "stdio":
        client = stdio_server(args, root)
        try:
            yield client
        finally:
            client.close()
    else:
        with http_server(args, root) as client:
            yield client


def texts(result: Any) -> list[str]:
    return [block.text for block in result.content if block.type == "text"]


def test_lists_the_three_tools_described_from_the_policy(mcp: Client, root: Path) -> None:
    tools = {tool.name: tool for tool in mcp.list_tools().tools}
    assert sorted(tools) == ["close_python_session", "python_session", "run_python"]
    description = tools["run_python"].description
    assert description.startswith("Run Python 3.")
    assert f"Reading files: {root / 'data'}" in description  # the profile's grant
    assert "Network: none" in description
    assert "20s of wall-clock time per call" in description  # [permissions] timeout
    assert "persistent sandboxed session" in tools["python_session"].description
    assert "session_id" in tools["python_session"].description
    assert tools["run_python"].input_schema["required"] == ["code"]
    # The model is told how to hand files back, which the client then receives.
    files = "Files the code writes into out/ of its home directory (Path.home() / 'out', "
    assert files in description
    assert "out/ is then emptied" in tools["python_session"].description


def test_runs_code_and_gives_the_text_pynox_tool_gives(mcp: Client, root: Path) -> None:
    result = mcp.call("run_python", {"code": "print(sum(range(10)))\n6 * 7"})
    assert not result.is_error
    assert texts(result) == ["45\nOut: 42"]
    data = f"print(sum(map(int, open({str(root / 'data' / 'numbers.txt')!r}))))"
    assert texts(mcp.call("run_python", {"code": data})) == ["12"]


def test_a_denial_comes_back_with_its_hint(mcp: Client, root: Path) -> None:
    secret = str(root / "secret.txt")
    result = mcp.call("run_python", {"code": f"print(open({secret!r}).read())"})
    assert result.is_error
    (text,) = texts(result)
    assert "PermissionError" in text
    assert "at agent.py:1" in text
    assert f"reading {secret} is not allowed" in text


def test_a_denial_s_hint_names_the_grant_as_the_server_s_pynox_toml_takes_it(
    mcp: Client, root: Path
) -> None:
    """No call can grant anything: the hint names the key of the profile the server runs,
    and never says to start a new session with it, which would be refused the same."""
    secret = str(root / "secret.txt")
    where = f"[profiles.data] of {os.path.realpath(root / 'pynox.toml')}"
    code = f"print(open({secret!r}).read())"
    for tool in ("run_python", "python_session"):
        reply = texts(mcp.call(tool, {"code": code}))
        if tool == "python_session":  # max_sessions: the tests that follow open theirs
            mcp.call("close_python_session", {"session_id": reply[-1].split()[1]})
        hint = reply[0].splitlines()[-1]
        assert hint.startswith(f"pynox: reading {secret} is not allowed; grant it with "), hint
        assert f"allow_read = [{secret!r}]; this server's permissions are those of {where}" in hint
        assert "tell the user, who can grant it there and restart the server" in hint
        assert "session.close()" not in hint and "allow_read=" not in hint


def test_a_session_keeps_state_across_three_calls(mcp: Client) -> None:
    first = mcp.call("python_session", {"code": "total = 1"})
    assert not first.is_error
    note = texts(first)[-1]
    assert note.startswith("session_id: ")
    session_id = note.split()[1]
    mcp.call("python_session", {"code": "total += 10", "session_id": session_id})
    third = mcp.call("python_session", {"code": "print(total * 2)", "session_id": session_id})
    assert texts(third) == ["22", f"session_id: {session_id}"]
    closed = mcp.call("close_python_session", {"session_id": session_id})
    assert texts(closed) == [f"session {session_id} closed"]
    with pytest.raises(Exception, match="there is no session"):
        mcp.call("python_session", {"code": "total", "session_id": session_id})


def test_sessions_are_bounded_by_max_sessions(mcp: Client) -> None:
    ids = [texts(mcp.call("python_session", {"code": "x = 1"}))[-1].split()[1] for _ in "ab"]
    with pytest.raises(Exception, match="2 sessions are open, the most this server allows"):
        mcp.call("python_session", {"code": "x = 1"})
    for session_id in ids:
        mcp.call("close_python_session", {"session_id": session_id})
    assert not mcp.call("python_session", {"code": "x = 1"}).is_error


@pytest.mark.skipif(not PACKAGES, reason=NO_PACKAGES)
def test_a_matplotlib_figure_comes_back_as_image_content(mcp: Client) -> None:
    code = (
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "plt.plot([1, 2, 3])\nplt.show()\n"
    )
    result = mcp.call("run_python", {"code": code})
    assert not result.is_error, texts(result)
    images = [block for block in result.content if block.type == "image"]
    assert len(images) == 1
    assert images[0].mime_type == "image/png"
    import base64

    assert base64.b64decode(images[0].data).startswith(b"\x89PNG\r\n\x1a\n")
    assert "[image 1:" in texts(result)[0]


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("run_shell", {"code": "1"}, "there is no tool 'run_shell'"),
        ("run_python", {"code": 42}, "code must be a string of Python source, not a number"),
        ("run_python", {}, "code is missing"),
        ("run_python", {"code": "1", "allow_read": ["/"]}, "takes only code, not 'allow_read'"),
        ("run_python", {"code": "x" * (1 << 20 | 1)}, "more than the 1048576 a call may carry"),
        ("python_session", {"code": "1", "session_id": 7}, "session_id must be a string"),
        ("close_python_session", {"session_id": "nope"}, "there is no session 'nope'"),
    ],
)
def test_bad_calls_get_an_mcp_error_and_the_server_keeps_serving(
    mcp: Client, tool: str, arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(Exception, match=message):
        mcp.call(tool, arguments)
    assert texts(mcp.call("run_python", {"code": "print('still here')"})) == ["still here"]


def test_files_written_into_out_come_back_as_embedded_resources(mcp: Client) -> None:
    """The text says the files were returned: they are, text as text, bytes as base64."""
    code = (
        "from pathlib import Path\nout = Path.home() / 'out'\nout.mkdir(exist_ok=True)\n"
        "size = (out / 'r.csv').write_text('a,b\\n1,2\\n')\n"
        "size = (out / 'x y.bin').write_bytes(b'\\xff\\x00')\n"
    )
    result = mcp.call("run_python", {"code": code})
    assert not result.is_error, texts(result)
    assert texts(result) == ["[files returned: out/r.csv (8 bytes), out/x y.bin (2 bytes)]"]
    resources = {block.resource.uri: block.resource for block in result.content[1:]}
    assert sorted(resources) == ["pynox:out/r.csv", "pynox:out/x%20y.bin"]
    assert resources["pynox:out/r.csv"].text == "a,b\n1,2\n"
    assert resources["pynox:out/r.csv"].mime_type == "text/csv"
    binary = resources["pynox:out/x%20y.bin"]
    assert (binary.mime_type, binary.blob) == ("application/octet-stream", "/wA=")


def test_a_message_with_a_lone_surrogate_comes_back_escaped(mcp: Client) -> None:
    """As python prints it; JSON cannot carry the character, and the server must not end
    for what a program chose to raise."""
    result = mcp.call("run_python", {"code": "raise ValueError('\\ud800 alone')"})
    assert result.is_error
    assert texts(result) == ["ValueError: \\ud800 alone\nat agent.py:1"]
    assert texts(mcp.call("run_python", {"code": "print('still here')"})) == ["still here"]
