"""pynox.tool: a plain typed function whose docstring tells a model what it may do
(grants, limits, host functions, sessions), in the shape docstring parsers expect."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import pynox
from pynox.api.pool import Pool
from pynox.api.tool import tool_docstring
from pynox.policy.config import Grants

pytestmark = pytest.mark.unit


def test_tool_is_a_plain_typed_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "out").mkdir()
    pool = Pool(lazy=True)
    run_python = pool.tool(allow_read=["data"], allow_write=["out"], timeout="10s", memory="256m")
    assert run_python.__name__ == "run_python"
    assert str(inspect.signature(run_python)) == "(code: str) -> str"
    assert run_python.__annotations__ == {"code": str, "return": str}
    assert isinstance(run_python, pynox.Tool) and not isinstance(print, pynox.Tool)
    doc = inspect.getdoc(run_python) or ""
    assert f"Reading files: {tmp_path / 'data'}" in doc
    assert f"Writing files: beneath {tmp_path / 'out'}" in doc
    assert "Network: none" in doc
    assert "10s of wall-clock time per call, 256 MiB of memory" in doc
    assert "fresh sandboxed process" in doc
    assert "agent.py:LINE" in doc
    assert doc.rstrip().endswith("a hint if it failed.")
    assert "\nArgs:\n    code: " in doc and "\nReturns:\n    " in doc
    pool.close()


def test_docstring_names_paths_that_are_not_plain_text_as_python_literals() -> None:
    """A name that is not UTF-8 (its surrogates) would make the docstring text no model
    API can encode, a line break would end its list, and ", " would split a path in
    two: each is shown as the literal the code writes to open it."""
    odd = ["/srv/caf\udce9", "/srv/new\nline", "/srv/a, b"]
    grants = Grants(allow_read=["/srv/data", *odd], timeout=30.0, max_output=65536)
    doc = tool_docstring(grants, [], session=False)
    doc.encode()
    listed = ", ".join(repr(path) for path in odd)
    assert f"Reading files: /srv/data, {listed}, and Python's standard library\n" in doc


def test_docstring_is_one_description_then_args_and_returns() -> None:
    doc = tool_docstring(Grants(timeout=30.0, max_output=65536), [], session=False)
    description, _, sections = doc.partition("\n\nArgs:\n")
    # Docstring parsers end the description at a line like "Title:" or a section word.
    for line in description.splitlines():
        assert not line.rstrip().endswith(":"), line
    for word in ("Args:", "Returns:", "Raises:"):
        assert word not in description
    assert sections.count("\n") == 3


def test_docstring_lists_host_functions_and_session_state() -> None:
    functions = [
        {
            "name": "search",
            "signature": "(query: str, limit: int = 5) -> list[dict]",
            "doc": "Search the product catalog.\n\nMore.",
        },
        {"name": "ping", "signature": "()", "doc": ""},
    ]
    grants = Grants(
        allow_network=True,
        allow_env=["API_KEY"],
        package_dirs=["/venv/site"],
        timeout=5.0,
        max_output=1 << 20,
        max_file_size=100 << 20,
    )
    doc = tool_docstring(grants, functions, session=True)
    assert "from pynox_host import search, ping" in doc
    # Each call's code is a file of its own in a session (not agent.py).
    assert "the line as <step-N>:LINE, N being the number of the call that ran" in doc
    assert "- search(query: str, limit: int = 5) -> list[dict]: Search the product catalog." in doc
    assert "- ping()\n" in doc
    assert "pynox_host.HostError" in doc
    assert "persistent sandboxed session" in doc and "still there in the next" in doc
    assert "Network: allowed" in doc and "Environment variables: API_KEY" in doc
    assert "packages in /venv/site" in doc
    assert "Of a stream longer than 1 MiB, only its start and its end come back" in doc
    assert "5s of wall-clock time per call, files of at most 100 MiB" in doc


def test_tool_docstring_shows_the_profile_and_the_limits(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    config = tmp_path / "pynox.toml"
    config.write_text(
        '[profiles.analysis]\nallow_read = ["data"]\nallow_network = true\n'
        '[pool.limits]\ntimeout = "20s"\nmemory = "1g"\n'
    )
    pool = Pool(config=config, lazy=True)
    doc = pool.tool(profile="analysis", allow_env=["HOME"]).__doc__ or ""
    assert f"Reading files: {tmp_path / 'data'}" in doc
    assert "Network: allowed" in doc and "Environment variables: HOME" in doc
    assert "20s of wall-clock time per call, 1 GiB of memory" in doc
    with pytest.raises(ValueError, match="'nope' is not in"):
        pool.tool(profile="nope")
    pool.close()


def test_a_tool_beyond_the_pool_limits_is_refused_at_once(tmp_path: Path) -> None:
    """As pynox mcp refuses to start with them: every call would be refused, with a message
    that tells the model to ask for what it cannot, under a docstring that promised it."""
    (tmp_path / "data").mkdir()
    (tmp_path / "other").mkdir()
    config = tmp_path / "pynox.toml"
    config.write_text(
        '[profiles.slow]\ntimeout = "1h"\n'
        '[pool.limits]\ntimeout = "20s"\nmemory = "1g"\nallow_read = ["data"]\n'
    )
    pool = Pool(config=config, lazy=True)
    with pytest.raises(ValueError) as refused:
        pool.tool(timeout="1h")
    assert str(refused.value) == (
        "the pool would refuse every call of this tool: timeout exceeds [pool.limits]: 1h is "
        "above its limit of 20s; ask for 20s or less"
    )
    with pytest.raises(ValueError, match="memory exceeds .* 2g is above its limit of 1g"):
        pool.tool(memory="2g", session=True)
    with pytest.raises(ValueError, match="timeout exceeds"):
        pool.tool(profile="slow")
    with pytest.raises(ValueError, match="allow_read exceeds .* is outside what it allows"):
        pool.tool(allow_read=[tmp_path / "other"])
    # Within them, or leaving them to the limits: a tool, as before.
    doc = pool.tool(timeout="10s", allow_read=[tmp_path / "data"]).__doc__ or ""
    assert "10s of wall-clock time per call, 1 GiB of memory" in doc
    pool.close()


def test_a_tool_granted_a_path_that_does_not_exist_is_refused_at_once(tmp_path: Path) -> None:
    """Every call would be refused, telling the model, which cannot make the path, to
    create it: the tool is refused as it is made, in one sentence, for each path grant."""
    pool = Pool(lazy=True)
    missing = tmp_path / "missing"
    for option, kind in [
        ("allow_read", "reading"),
        ("allow_write", "writing"),
        ("package_dirs", "imports from"),
    ]:
        with pytest.raises(ValueError) as refused:
            pool.tool(**{option: [missing]})
        assert str(refused.value) == (
            f"the pool would refuse every call of this tool: cannot grant {kind} {missing}: "
            "it does not exist; create it first or correct the path"
        )
    with pytest.raises(ValueError, match="cannot grant reading .*missing: it does not exist"):
        pynox.tool(allow_read=[missing], session=True)
    missing.mkdir()
    assert "Reading files: " + str(missing) in (pool.tool(allow_read=[missing]).__doc__ or "")
    pool.close()


def test_a_profile_without_a_config_is_refused_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYNOX_CONFIG", raising=False)
    with pytest.raises(ValueError, match="needs a pynox.toml"):
        Pool(lazy=True).tool(profile="analysis")


def test_docstring_names_the_scratch_space_and_reading_back() -> None:
    one_shot = tool_docstring(Grants(allow_write=["/w"], timeout=5.0), [], session=False)
    assert "Writing files: beneath /w (writing there does not allow reading it back)" in one_shot
    assert "private, empty directory of its own, which tempfile, $TMPDIR and $HOME name" in (
        one_shot
    )
    assert "It is deleted when the call ends" in one_shot
    session = tool_docstring(Grants(timeout=5.0), [], session=True)
    assert "It lasts as long as the session" in session
    assert "Writing files: nowhere but the scratch space below" in session


def test_every_grant_is_described_to_the_model() -> None:
    """Each grant of the grant table has its line (or is told with the limits): a new
    grant cannot reach the model's manual unexplained."""
    from pynox.api.tool import _GRANT_LINES
    from pynox.policy.grants import GRANT_FIELDS

    assert list(_GRANT_LINES) == [field.name for field in GRANT_FIELDS]


def test_the_pools_package_directories_are_importable_in_the_docstring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    pool = Pool(lazy=True, package_dirs=[str(site)])
    doc = inspect.getdoc(pool.tool()) or ""
    assert f"the standard library and the packages in {site}" in doc
    pool.close()


def test_a_partial_host_function_shows_the_documentation_of_its_function() -> None:
    import functools

    def search(query: str, *, limit: int = 5) -> list[str]:
        """Search the product catalog."""
        return [query][:limit]

    pool = Pool(lazy=True)
    doc = pool.tool(functions={"search": functools.partial(search, limit=3)}).__doc__ or ""
    pool.close()
    line = "- search(query: str, *, limit: int = 3) -> list[str]: Search the product catalog."
    assert line in doc
