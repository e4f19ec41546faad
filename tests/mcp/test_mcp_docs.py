"""The MCP client configurations the documentation shows, started as a client would start
them: docs/mcp.md (stdio and streamable HTTP) and examples/mcp_server.md.

Each page's pynox.toml is written into a project directory that stands for
/home/you/project; the configuration's command and arguments start the server, the SDK's
client lists its tools, and the descriptions name the directories the profile grants.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support.paths import TESTS

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")
pytest.importorskip("mcp", reason="the MCP SDK comes with the test extra (pynox[mcp])")

from support.mcp_client import Client, free_port, http_server, stdio_server  # noqa: E402

ROOT = TESTS.parent
SHOWN_PROJECT = "/home/you/project"
PAGES = [ROOT / "docs" / "mcp.md", ROOT / "examples" / "mcp_server.md"]


def titled(page: Path, lang: str, title: str) -> str:
    match = re.search(rf'```{lang} title="{re.escape(title)}"\n(.*?)\n```', page.read_text(), re.S)
    assert match, f"{page.name} has no {lang} block titled {title}"
    return match[1]


def project(page: Path, tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "pynox.toml").write_text(titled(page, "toml", "pynox.toml") + "\n")
    return tmp_path


def assert_serves_the_profile(client: Client, root: Path) -> None:
    tools = {tool.name: tool for tool in client.list_tools().tools}
    assert sorted(tools) == ["close_python_session", "python_session", "run_python"]
    description = tools["run_python"].description
    assert f"Reading files: {root / 'data'}" in description
    assert f"Writing files: beneath {root / 'out'}" in description
    result = client.call("run_python", {"code": "print('from the docs')"})
    assert [block.text for block in result.content] == ["from the docs"]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_the_stdio_configuration_starts_the_server(page: Path, tmp_path: Path) -> None:
    root = project(page, tmp_path)
    config = json.loads(titled(page, "json", "mcp.json").replace(SHOWN_PROJECT, str(root)))
    (server,) = config["mcpServers"].values()
    assert server["command"] == "pynox"
    client = stdio_server(server["args"][1:], cwd=TESTS)  # not the project: --config finds it
    try:
        assert_serves_the_profile(client, root)
    finally:
        client.close()


def test_the_http_command_and_configuration_work_together(tmp_path: Path) -> None:
    page = ROOT / "docs" / "mcp.md"
    root = project(page, tmp_path)
    (command,) = re.findall(r"```text\n(pynox mcp .*--http 8000)\n```", page.read_text())
    args = shlex.split(command.replace(SHOWN_PROJECT, str(root)))[2:]
    config = json.loads(titled(page, "json", "mcp-http.json"))
    (server,) = config["mcpServers"].values()
    assert server == {"type": "http", "url": "http://127.0.0.1:8000/mcp"}
    port = free_port()
    args[args.index("--http") + 1] = str(port)
    url = server["url"].replace(":8000/", f":{port}/")
    with http_server(args, cwd=TESTS, url=url) as client:
        assert_serves_the_profile(client, root)
        # As the page says: a page on another site cannot reach it through DNS rebinding.
        assert post(url, {"Host": f"attacker.example:{port}"}) == 421
        assert post(url, {"Origin": "http://attacker.example"}) == 403


def post(url: str, headers: dict[str, str]) -> int:
    """The status of an initialize request to `url` with these extra headers."""
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "page", "version": "1"},
        },
    }
    request = urllib.request.Request(
        url,
        data=json.dumps(hello).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
    )
    try:
        # Straight to loopback, whatever proxy the environment names.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
