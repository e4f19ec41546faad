"""Arguments: checked when given, relative grants resolved against the caller's cwd, a
request that carries only what was set, the pool's command line."""

from __future__ import annotations

import functools
import os
import pickle
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import pynox
import pynox.api.shared
from pynox.api.options import Spec, function_signature
from pynox.api.pool import Pool

pytestmark = pytest.mark.unit


def test_relative_grants_resolve_against_the_callers_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = Spec(
        allow_read=["data", Path("more")], allow_write="out", package_dirs=[str(tmp_path / "site")]
    )
    request = spec.request("pass")
    assert request["allow_read"] == [str(tmp_path / "data"), str(tmp_path / "more")]
    assert request["allow_write"] == [str(tmp_path / "out")]
    assert request["package_dirs"] == [str(tmp_path / "site")]
    home = Spec(allow_read="~/x").request("pass")["allow_read"]
    assert home == [os.path.join(os.path.expanduser("~"), "x")]


def test_a_path_may_be_bytes_as_open_takes_it(tmp_path: Path) -> None:
    """A name that is not UTF-8 goes as os.fsdecode spells it, the way a pool request
    carries it; surrogates whose bytes are UTF-8 are the character they make, as python
    would find that file."""
    folder = os.fsencode(tmp_path)
    spec = Spec(
        allow_read=[folder + b"/caf\xe9", Path(os.fsdecode(folder + b"/d\xff"))],
        allow_write=folder + b"/out",
        package_dirs=[os.fsdecode(folder + b"/\xc3\xa9").replace("é", "\udcc3\udca9")],
        args=["\udcc3\udca9", "x\udcff"],
    )
    request = spec.request("pass")
    assert request["allow_read"] == [f"{tmp_path}/caf\udce9", f"{tmp_path}/d\udcff"]
    assert request["allow_write"] == [f"{tmp_path}/out"]
    assert request["package_dirs"] == [f"{tmp_path}/é"]
    assert request["args"] == ["é", "x\udcff"]


def test_options_work_in_a_working_directory_that_was_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server whose release directory was replaced under it still runs code, as python
    does there: a relative grant resolves against the removed directory's path (and the
    pool then says it does not exist), not into a FileNotFoundError of pynox's own."""
    gone = tmp_path / "release"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert Spec(allow_read=["/etc"]).request("pass")["allow_read"] == ["/etc"]
    assert Spec(allow_read=["data"]).request("pass")["allow_read"] == [str(gone / "data")]
    Pool(lazy=True, package_dirs=[str(tmp_path)]).close()
    with Pool(workers=1) as pool:  # started there, as python starts
        assert pool.run("print(1)").stdout == "1\n"


def test_request_sends_only_what_was_set() -> None:
    # Beside the code, only the hints' spelling: a Python caller's (the pool names the run
    # agent.py, a step <step-N>).
    request = Spec().request("print(1)")
    assert request == {"code": "print(1)", "hints": "python"}
    request = Spec(
        timeout="10s",
        memory="256m",
        allow_network=False,
        allow_env="KEY",
        args=["a"],
        profile="p",
        name="job.py",
    ).request("x", session="s1")
    assert request == {
        "code": "x",
        "hints": "python",
        "name": "job.py",
        "profile": "p",
        "allow_env": ["KEY"],
        "args": ["a"],
        "allow_network": False,
        "timeout": "10s",
        "memory": "256m",
        "session": "s1",
    }


@pytest.mark.parametrize(
    ("options", "exception", "fragment"),
    [
        ({"timeout": "soon"}, ValueError, "not a duration"),
        ({"timeout": [1]}, TypeError, "duration"),
        ({"memory": "1m"}, ValueError, "below the 32m minimum"),
        # 5e8 is a number of bytes to a reader: the message says which number is meant.
        ({"memory": 5e8}, TypeError, "a whole number of bytes, not float"),
        ({"timeout": timedelta(seconds=5)}, TypeError, "number of seconds, not timedelta"),
        ({"max_output": "1g"}, ValueError, "above"),
        # Past int()'s 4300 digits: no number in the message, which str() could not write.
        (
            {"memory": 10**5000},
            ValueError,
            r"^memory=<an integer of 4999 digits or more> is above the 1048576t maximum; ",
        ),
        ({"timeout": -(10**5000)}, ValueError, r"^timeout=<an integer of 4999 digits or more> is"),
        ({"allow_read": 5}, TypeError, "allow_read"),
        ({"allow_read": [3]}, TypeError, "allow_read"),
        ({"allow_read": ["/tmp/\ud800"]}, ValueError, "stands for no byte"),
        ({"args": ["\ud800"]}, ValueError, "stands for no byte"),
        ({"allow_read": [""]}, ValueError, "not a path"),
        ({"allow_network": "yes"}, TypeError, "allow_network"),
        ({"functions": {"f": 3}}, TypeError, "not callable"),
        ({"functions": {"not a name": print}}, ValueError, "identifier"),
        ({"functions": {"HostError": print}}, ValueError, "pynox_host's own name"),
        ({"functions": {"_search": print}}, ValueError, "starts? with _"),
        # A lambda or a callable object in a list has no name to import it by: a dict names it.
        ({"functions": [lambda: 1]}, ValueError, r"name it in a dict, like functions=\{'search"),
        ({"functions": [functools.partial(print)]}, ValueError, "name it in a dict"),
        ({"name": ""}, ValueError, "file name"),
        ({"name": "\ud800.py"}, ValueError, "lone surrogate"),
        ({"profile": 3}, TypeError, "profile"),
    ],
)
def test_bad_arguments_raise_at_once(
    options: dict[str, Any], exception: type[Exception], fragment: str
) -> None:
    with pytest.raises(exception, match=fragment):
        Spec(**options)


def test_unknown_keyword_and_bad_code_raise_type_error() -> None:
    """An unknown option is named as an argument of the function called, with the option
    it is closest to, never as one of an internal class."""
    pool = Pool(lazy=True)
    with pytest.raises(TypeError) as caught:
        pool.run("pass", allow_reed=["x"])  # type: ignore[call-arg]
    assert str(caught.value) == (
        "run() got an unexpected keyword argument 'allow_reed'; did you mean 'allow_read'?"
    )
    with pytest.raises(TypeError):
        pool.run(b"print(1)")  # type: ignore[arg-type]
    with pytest.raises(TypeError) as caught:
        pynox.tool(allow_reed=["x"])  # type: ignore[call-arg]
    assert str(caught.value).startswith("tool() got an unexpected keyword argument 'allow_reed'")
    with pytest.raises(TypeError) as caught:
        pynox.run("pass", timout=5)  # type: ignore[call-arg]
    assert str(caught.value).endswith("'timout'; did you mean 'timeout'?")
    with pytest.raises(TypeError) as caught:
        pool.session(zzz=1)  # type: ignore[call-arg]
    assert str(caught.value) == "session() got an unexpected keyword argument 'zzz'"
    pool.close()


def test_args_take_empty_strings_as_a_command_line_does() -> None:
    """`python app.py ''` gives sys.argv[1] == '': so does args=['']; a NUL, which no
    command line can pass, is refused in those words."""
    assert Spec(args=["", "x"]).request("pass")["args"] == ["", "x"]
    with pytest.raises(ValueError) as caught:
        Spec(args=["a\0b"])
    assert str(caught.value) == (
        "args lists 'a\\x00b', which holds a NUL character; no command-line argument can"
    )


def test_a_session_refuses_args_it_would_drop() -> None:
    """A session's process starts once, with only its name in sys.argv: args were sent
    with its steps and silently ignored."""
    pool = Pool(lazy=True)
    with pytest.raises(TypeError, match="a session takes no args"):
        pool.session(args=["x"])  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="a session takes no args"):
        pool.tool(session=True, args=["x"])  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="a session takes no args"):
        pynox.tool(session=True, args=["x"])  # type: ignore[call-arg]
    pool.close()


@pytest.mark.parametrize("name", ["A=B", "\ud800", ""])
def test_allow_env_takes_variable_names_only(name: str) -> None:
    with pytest.raises(ValueError, match="is not an? (environment )?variable name"):
        Spec(allow_env=[name])


def test_pool_arguments_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"warmup is not valid Unicode text: it holds a lone"):
        Pool(warmup="x = '\ud800'", lazy=True)
    with pytest.raises(ValueError, match="workers"):
        Pool(workers=0, lazy=True)
    # Refused here, in the API's words, not by the pool's command line at the first run (or,
    # past 4300 digits, by int()'s own error).
    for workers in (10**18, 10**5000):
        with pytest.raises(ValueError) as refused:
            Pool(workers=workers, lazy=True)
        assert str(refused.value) == (
            "workers is more than any machine can run; give a number like 4"
        )
    with pytest.raises(ValueError, match="module name"):
        Pool(preload=["not a module"], lazy=True)
    # Named as the caller named it: the API has no --config flag.
    with pytest.raises(ValueError, match=r"^config=\S*missing\.toml does not exist; pass the"):
        Pool(config=tmp_path / "missing.toml", lazy=True)
    with pytest.raises(ValueError) as refused:
        Pool(config="pynox.toml\0", lazy=True)
    assert str(refused.value) == (
        "config='pynox.toml\\x00' is not a path; pass the path of a pynox.toml"
    )
    with pytest.raises(TypeError):
        Pool(pynox_command="pynox", lazy=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="warmup takes Python code"):
        Pool(warmup=["import json"], lazy=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NUL"):
        Pool(warmup="import json\0", lazy=True)
    # A string is true, so "no" would start the pool at once: refused, as a typo.
    with pytest.raises(TypeError, match=r"^lazy takes True or False, not str 'no'$"):
        Pool(lazy="no")  # type: ignore[arg-type]


def test_pool_command_line(tmp_path: Path) -> None:
    config = tmp_path / "pynox.toml"
    config.write_text("[pool]\nworkers = 3\n")
    pool = Pool(
        workers=4, preload=["json", "csv"], config=config, lazy=True, pynox_command=["/opt/pynox"]
    )
    assert pool.command == [
        "/opt/pynox",
        "pool",
        "--config",
        str(config),
        "--workers",
        "4",
        "--preload",
        "json",
        "--preload",
        "csv",
    ]
    warmed = Pool(preload=["json"], warmup="import json; json.dumps([1])", lazy=True)
    assert warmed.command[-4:] == ["--preload", "json", "--warmup", "import json; json.dumps([1])"]
    assert Pool(lazy=True, pynox_command=["p"]).command[:2] == ["p", "pool"]


def test_functions_are_described_with_their_signatures() -> None:
    def search(query: str, limit: int = 5) -> list[dict[str, Any]]:
        """Search the product catalog.

        Longer text the model does not need."""
        return []

    spec = Spec(functions={"search": search}).request("pass")["functions"]
    assert spec == [
        {
            "name": "search",
            "signature": "(query: str, limit: int = 5) -> list[dict[str, typing.Any]]",
            "doc": "Search the product catalog.\n\nLonger text the model does not need.",
        }
    ]
    assert Spec(functions=[search]).functions == {"search": search}
    # Annotations written as strings are evaluated; a signature that cannot be read is "(...)".
    namespace: dict[str, Any] = {}
    exec("from __future__ import annotations\ndef f(a: int) -> str: ...", namespace)
    assert function_signature(namespace["f"]) == "(a: int) -> str"


def test_pickling_a_pool_or_session_says_what_to_do_instead() -> None:
    """multiprocessing and Ray pickle what they send: a Pool's process and threads cannot
    go, and the error says so rather than naming a lock inside it."""
    pool = Pool(lazy=True)
    with pytest.raises(TypeError, match="a Pool cannot be pickled: .* make a Pool where"):
        pickle.dumps(pool)
    with pytest.raises(TypeError, match="a Session cannot be pickled"):
        pickle.dumps(pool.session())
    pool.close()
