"""Preloading (`pynox pool --preload`, `[pool].preload`): host code that runs once in the
pool server, whose modules every request then shares, so nothing of the pool's own
environment may reach a request through them, and a module that fails stops the pool
with one sentence."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.pool_client import PYNOX, PoolClient, clean_env
from support.pool_requests import assert_ok, code, new_id

# Keeps, as it is imported, what the environment holds then.
KEEPS_THE_ENVIRONMENT = code("""
    import os
    KEY = os.environ.get("SERVICE_KEY")
    SEEN = sorted(os.environ)
""")


def test_a_preloaded_module_keeps_nothing_of_the_pools_environment(tmp_path: Path) -> None:
    """A package that reads a key as it is imported would hand it to every request: the
    preload and the warm-up see the environment a request sees, the locale alone."""
    (tmp_path / "keeps.py").write_text(KEEPS_THE_ENVIRONMENT)
    warmup = "import os, sys\nsys.pynox_key = os.environ.get('SERVICE_KEY')\n"
    env = clean_env({"SERVICE_KEY": "the-service-key"})
    show = "import keeps, sys; print(keeps.KEY, keeps.SEEN, sys.pynox_key)"
    with PoolClient(
        "--package-dir", str(tmp_path), "--warmup", warmup, workers=1, preload=["keeps"], env=env
    ) as client:
        assert_ok(client.run({"id": new_id(), "code": show}), "None ['LANG'] None\n")
        # The pool's environment is as it was: a request granted the variable gets it.
        granted = "import os; print(os.environ['SERVICE_KEY'])"
        request = {"id": new_id(), "code": granted, "allow_env": ["SERVICE_KEY"]}
        assert_ok(client.run(request), "the-service-key\n")
        assert client.close() == 0


def test_what_a_preloaded_module_sets_in_the_environment_stays(tmp_path: Path) -> None:
    (tmp_path / "sets.py").write_text("import os\nos.environ['SET_BY_PRELOAD'] = 'yes'\n")
    env = clean_env({"SERVICE_KEY": "the-service-key"})
    with PoolClient("--package-dir", str(tmp_path), workers=1, preload=["sets"], env=env) as client:
        show = "import os; print(os.environ.get('SET_BY_PRELOAD'), os.environ['SERVICE_KEY'])"
        request = {"id": new_id(), "code": show, "allow_env": ["SET_BY_PRELOAD", "SERVICE_KEY"]}
        assert_ok(client.run(request), "yes the-service-key\n")
        assert client.close() == 0


def _start_fails(tmp_path: Path, *flags: str) -> list[str]:
    """The lines on stderr of a pool that stops before it is ready."""
    done = subprocess.run(
        [PYNOX, "pool", "--package-dir", str(tmp_path), *flags],
        input=b"",
        capture_output=True,
        env=clean_env(),
        timeout=60,
    )
    assert done.returncode == 125, done
    assert done.stdout == b""
    return done.stderr.decode().splitlines()


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("import sys\nsys.exit('needs a display')\n", "SystemExit('needs a display')"),
        ("class Stop(BaseException):\n    pass\nraise Stop('odd')\n", "Stop('odd')"),
    ],
    ids=["sys.exit", "BaseException"],
)
def test_a_module_that_exits_as_it_is_preloaded_stops_the_pool_naming_it(
    tmp_path: Path, source: str, shown: str
) -> None:
    (tmp_path / "leaves.py").write_text(source)
    assert _start_fails(tmp_path, "--preload", "leaves") == [
        f"pynox: cannot preload leaves: {shown}; fix or remove it"
    ]


@pytest.mark.parametrize("name", ["json,csv", "json csv", "json..decoder", "json.class", ""])
def test_a_preload_flag_that_is_not_a_module_name_says_to_give_one_each(name: str) -> None:
    """Not a hint to add a package directory, which would not help."""
    done = subprocess.run(
        [PYNOX, "pool", "--preload", name], input=b"", capture_output=True, env=clean_env()
    )
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        f"pynox: --preload={name} is not a module name; give one importable name per flag,"
        " like --preload=numpy.linalg"
    ]


def test_a_submodule_missing_from_a_package_found_gets_no_package_dir_hint(
    tmp_path: Path,
) -> None:
    assert _start_fails(tmp_path, "--preload", "json.nowhere") == [
        'pynox: cannot preload json.nowhere: ModuleNotFoundError("No module named'
        " 'json.nowhere'\"); fix or remove it"
    ]


# Registers, as it is imported, the removal of a cache directory of the pool's host.
REMOVES_ITS_CACHE_AT_EXIT = code("""
    import atexit, os, shutil, sys
    CACHE = os.path.join(os.path.dirname(__file__), "cache")
    os.makedirs(CACHE, exist_ok=True)
    atexit.register(shutil.rmtree, CACHE)
""")
# What a request's exit runs as python's does: its own handlers, then logging's flush.
EXITS_AS_PYTHON = code("""
    import atexit, logging, logging.handlers, sys
    logging.getLogger().addHandler(
        logging.handlers.MemoryHandler(100, target=logging.StreamHandler(sys.stdout))
    )
    logging.warning("logged")
    atexit.register(print, "its own handler")
""")


def test_a_request_does_not_run_the_exit_handlers_of_preloaded_modules(tmp_path: Path) -> None:
    """They are the pool's: run in a request, they act on the host's files, or fail on
    them with a traceback in every request's stderr. The standard library's still run."""
    (tmp_path / "caching.py").write_text(REMOVES_ITS_CACHE_AT_EXIT)
    with PoolClient(
        "--package-dir", str(tmp_path), workers=1, preload=["caching", "logging"]
    ) as client:
        result = client.run({"id": new_id(), "code": "import caching; print(1)"})
        assert_ok(result, "1\n")
        assert result["stderr"] == ""
        result = client.run({"id": new_id(), "code": EXITS_AS_PYTHON})
        assert_ok(result, "its own handler\nlogged\n")
        assert result["stderr"] == ""
        assert client.close() == 0
    assert (tmp_path / "cache").is_dir()


def test_a_module_that_keeps_a_file_open_is_not_preloaded(tmp_path: Path) -> None:
    """Each child closes it before its request runs: the module's writes would land in
    the first file the request opens, which gets its number."""
    log = tmp_path / "host.log"
    (tmp_path / "logs.py").write_text(f"LOG = open({str(log)!r}, 'a', buffering=1)\n")
    assert _start_fails(tmp_path, "--preload", "json", "--preload", "logs") == [
        f"pynox: cannot preload logs: it leaves {log} open, which each child closes before"
        " its request runs, so the module would find it closed (or a file of the request's"
        " at its number); remove it from preload, and requests import it themselves"
    ]


# Raises an exception whose repr raises too.
RAISES_WITHOUT_A_REPR = code("""
    class Unprintable(Exception):
        def __repr__(self):
            raise RuntimeError("no repr")
    raise Unprintable()
""")


def test_a_failure_without_a_repr_still_gets_its_sentence(tmp_path: Path) -> None:
    """Not pynox's "internal error": the failure is the module's, or the warm-up's."""
    (tmp_path / "unprintable.py").write_text(RAISES_WITHOUT_A_REPR)
    assert _start_fails(tmp_path, "--preload", "unprintable") == [
        "pynox: cannot preload unprintable: Unprintable; fix or remove it"
    ]
    assert _start_fails(tmp_path, "--warmup", RAISES_WITHOUT_A_REPR) == [
        "pynox: the pool's warm-up code failed: Unprintable; fix or remove it"
    ]


def test_a_request_makes_temporary_files_in_its_own_directory_after_a_warmup_found_one() -> None:
    """tempfile keeps the first directory it finds: found in the pool, it would be one
    the request may not write."""
    program = code("""
        import os, tempfile
        print(tempfile.gettempdir() == os.environ["TMPDIR"])
        with tempfile.NamedTemporaryFile() as made:
            print(os.path.dirname(made.name) == os.environ["TMPDIR"])
    """)
    with PoolClient("--warmup", "import tempfile\ntempfile.gettempdir()", workers=1) as client:
        for _ in range(2):  # whether its spare ran the warm-up or not
            assert_ok(client.run({"id": new_id(), "code": program}), "True\nTrue\n")
        assert client.close() == 0


def _package(root: Path, name: str, modules: dict[str, str]) -> None:
    """A package of that name under root, with these modules (by name) beside its
    empty __init__."""
    (root / name).mkdir()
    (root / name / "__init__.py").write_text("")
    for module, source in modules.items():
        (root / name / f"{module}.py").write_text(source)


# What a request prints: which of the modules a first use would import it starts with.
STARTS_WITH = (
    "import sys; print([name in sys.modules for name in ('numpy.ma', 'pyarrow.pandas_compat')])"
)


def test_a_preloaded_package_comes_with_what_its_first_use_imports(tmp_path: Path) -> None:
    """numpy's median imports numpy.ma, pandas' first frame pyarrow's pandas layer: each
    child would import them for its request's first use, about half of a small request."""
    _package(tmp_path, "numpy", {"ma": ""})
    _package(tmp_path, "pandas", {})
    _package(tmp_path, "pyarrow", {"pandas_compat": ""})
    flags = ("--package-dir", str(tmp_path))
    with PoolClient(*flags, workers=1, preload=["numpy", "pandas"]) as client:
        assert_ok(client.run({"id": new_id(), "code": STARTS_WITH}), "[True, True]\n")
        assert client.close() == 0
    # Only with the package they come with.
    with PoolClient(*flags, workers=1, preload=["json"]) as client:
        assert_ok(client.run({"id": new_id(), "code": STARTS_WITH}), "[False, False]\n")
        assert client.close() == 0


def test_what_a_first_use_imports_is_left_to_requests_when_it_cannot_be_imported(
    tmp_path: Path,
) -> None:
    """Not installed (pandas without pyarrow), or failing: no module the pool was asked
    for, so the pool starts as it did, and a request that needs it imports it itself."""
    _package(tmp_path, "numpy", {"ma": "raise ImportError('a broken build')\n"})
    _package(tmp_path, "pandas", {})
    with PoolClient(
        "--package-dir", str(tmp_path), workers=1, preload=["numpy", "pandas"]
    ) as client:
        assert_ok(client.run({"id": new_id(), "code": STARTS_WITH}), "[False, False]\n")
        assert client.close() == 0


def test_what_a_first_use_imports_may_not_keep_a_file_open_either(tmp_path: Path) -> None:
    log = tmp_path / "host.log"
    _package(tmp_path, "numpy", {"ma": f"LOG = open({str(log)!r}, 'a')\n"})
    assert _start_fails(tmp_path, "--preload", "numpy") == [
        f"pynox: cannot preload numpy (with numpy.ma, which it imports on first use): it leaves"
        f" {log} open, which each child closes before its request runs, so the module would"
        " find it closed (or a file of the request's at its number); remove it from preload,"
        " and requests import it themselves"
    ]
