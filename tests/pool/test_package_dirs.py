"""The pool's own package directories (`pynox pool --package-dir`, `[pool] package_dirs`):
preload imports from them, and every request may import from them with no grant of its
own, lazily imported submodules included."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
from support.pool_client import PYNOX, PoolClient, clean_env
from support.pool_requests import assert_ok, code, new_id, write_config

PACKAGES = os.environ.get("PYNOX_TEST_PACKAGES")
needs_packages = pytest.mark.skipif(
    not PACKAGES,
    reason="PYNOX_TEST_PACKAGES names no directory of installed packages (numpy, pandas); "
    "the nox session sets it",
)

# DataFrame.to_csv and read_csv import pandas.io.formats.csvs, pandas.io.parsers... on
# first use: files a request reads only if it may read the package directory.
PANDAS_PROGRAM = code(
    """
    import io
    import pandas as pd
    frame = pd.DataFrame({"a": [1, 2]})
    print(frame.a.sum())
    print(frame.to_csv(index=False).split())
    print(pd.read_csv(io.StringIO("a\\n3\\n4\\n")).a.sum())
    """
)
PANDAS_OUTPUT = "3\n['a', '1', '2']\n7\n"


@needs_packages
def test_preload_and_requests_import_from_the_pools_package_dir() -> None:
    assert PACKAGES is not None
    with PoolClient("--package-dir", PACKAGES, workers=1, preload=["pandas"]) as client:
        result = client.run({"id": new_id(), "code": PANDAS_PROGRAM})
        assert_ok(result, PANDAS_OUTPUT)
        assert result["policy"]["package_dirs"] == [os.path.realpath(PACKAGES)]
        # Not preloaded, only installed there: imported by the request itself.
        assert_ok(
            client.run({"id": new_id(), "code": "import cycler; print(cycler.__name__)"}),
            "cycler\n",
        )
        # A session's steps too.
        session = new_id("session")
        step = {"id": new_id(), "session": session, "code": "import pandas as pd; x = 2"}
        assert_ok(client.run(step), "")
        step = {"id": new_id(), "session": session, "code": "print(pd.Series([x, 3]).sum())"}
        assert_ok(client.run(step), "5\n")
        assert client.close() == 0


# Packages that pynox's own environment holds too (pytest's dependencies): a copy of each
# in a package directory of the pool is the one preloading and the warm-up must import,
# as a request does.
SHADOWED = ("pluggy", "iniconfig")


@pytest.mark.parametrize("how", ["preload", "warmup"])
def test_preload_and_warmup_import_from_the_package_dirs_as_requests_do(
    tmp_path: Path, how: str
) -> None:
    for name in SHADOWED:
        assert importlib.util.find_spec(name) is not None, f"pynox's environment has no {name}"
        package = tmp_path / "packages" / name
        package.mkdir(parents=True)
        imports = "import iniconfig\n" if name == "pluggy" else ""
        (package / "__init__.py").write_text(f"{imports}WHERE = 'the package dir'\n")
    flags = ["--package-dir", str(tmp_path / "packages")]
    if how == "warmup":
        flags += ["--warmup", "import pluggy"]
    preload = ["pluggy"] if how == "preload" else []
    program = code(
        """
        import sys
        print(sorted(name for name in ("pluggy", "iniconfig") if name in sys.modules))
        import pluggy, iniconfig
        print(pluggy.WHERE, iniconfig.WHERE, sep=", ")
        print(pluggy.__file__.startswith(sys.argv[1]), iniconfig.__file__.startswith(sys.argv[1]))
        """
    )
    with PoolClient(*flags, workers=1, preload=preload) as client:
        request = {"id": new_id(), "code": program, "args": [str(tmp_path / "packages")]}
        result = client.run(request)
        assert_ok(
            result,
            "['iniconfig', 'pluggy']\nthe package dir, the package dir\nTrue True\n",
        )
        assert client.close() == 0


@needs_packages
def test_package_dirs_of_the_pool_table(tmp_path: Path) -> None:
    """[pool] package_dirs, relative to pynox.toml like every path in it, beside preload."""
    assert PACKAGES is not None
    relative = os.path.relpath(PACKAGES, tmp_path)
    config = write_config(
        tmp_path,
        f"""
        [pool]
        preload = ["pandas"]
        package_dirs = [{json.dumps(relative)}]
        """,
    )
    with PoolClient(config=config, workers=1) as client:
        assert_ok(client.run({"id": new_id(), "code": PANDAS_PROGRAM}), PANDAS_OUTPUT)
        assert client.close() == 0


@needs_packages
def test_a_request_reads_a_granted_file_with_a_lazily_imported_parser(tmp_path: Path) -> None:
    assert PACKAGES is not None
    data = tmp_path / "data.csv"
    data.write_text("a,b\n1,2\n3,4\n")
    with PoolClient(f"--package-dir={PACKAGES}", workers=1, preload=["pandas"]) as client:
        request = {
            "id": new_id(),
            "code": f"import pandas as pd\nprint(pd.read_csv({str(data)!r}).b.sum())\n",
            "allow_read": [str(data)],
        }
        assert_ok(client.run(request), "6\n")
        assert client.close() == 0


def test_no_request_may_write_the_pools_package_dir(tmp_path: Path) -> None:
    """Every later request imports from it: a write grant there could plant code."""
    site = tmp_path / "site"
    (site / "inner").mkdir(parents=True)
    (site / "shared.py").write_text("NAME = 'shared'\n")
    with PoolClient(f"--package-dir={site}", workers=1) as client:
        assert_ok(
            client.run({"id": new_id(), "code": "import shared; print(shared.NAME)"}), "shared\n"
        )
        for target in (site, site / "inner", tmp_path):
            request_id = new_id()
            result = client.run({"id": request_id, "code": "pass", "allow_write": [str(target)]})
            assert result["exit"] == 125, result
            assert "a package directory of the pool" in result["error"]["message"]
        assert client.close() == 0


def test_a_write_hint_names_no_grant_of_the_pools_package_dir(tmp_path: Path) -> None:
    """A request refused writing in the package directory, or in the folder holding it,
    is told what the pool grants: nothing there, or a folder beside it."""
    site = tmp_path / "site"
    site.mkdir()
    written = {site: None, tmp_path: tmp_path / "out"}
    with PoolClient(f"--package-dir={site}", workers=1) as client:
        for folder, inside in written.items():
            program = f"open({str(folder / 'x.txt')!r}, 'w').write('x')"
            hint = client.run({"id": new_id(), "code": program})["error"]["hint"]
            assert hint.startswith(f"{folder} cannot be granted for writing: "), hint
            assert f'"allow_write": [{json.dumps(str(folder))}]' not in hint
            if inside is None:
                continue
            assert f'granted with "allow_write": [{json.dumps(str(inside))}]' in hint
            inside.mkdir()
            moved = {
                "code": program.replace(str(folder), str(inside)),
                "allow_write": [str(inside)],
            }
            assert_ok(client.run({"id": new_id(), **moved}), "")
        assert client.close() == 0


def test_a_package_dir_that_does_not_exist_stops_the_pool(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    done = subprocess.run(
        [PYNOX, "pool", f"--package-dir={missing}"],
        input=b"",
        capture_output=True,
        env=clean_env(),
        timeout=30,
    )
    assert done.returncode != 0
    assert done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert lines == [
        f"pynox: cannot grant imports from {missing}: it does not exist; create it first or "
        "correct the path"
    ]


def test_the_flag_needs_a_value() -> None:
    done = subprocess.run(
        [PYNOX, "pool", "--package-dir"], capture_output=True, env=clean_env(), timeout=30
    )
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        "pynox: --package-dir needs a value, as in --package-dir=VALUE"
    ]


def test_a_missing_module_hint_names_a_package_dir_of_the_config(tmp_path: Path) -> None:
    """[permissions] applies to the command line, not to pool requests: a module installed
    in its package_dirs gets a hint in the protocol's spelling, and following it works."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "helper.py").write_text("print('helper imported')\n")
    config = write_config(tmp_path, '[permissions]\npackage_dirs = ["site"]\n')
    with PoolClient(config=config, workers=1) as client:
        result = client.run({"id": new_id(), "code": "import helper"})
        assert result["error"]["type"] == "ModuleNotFoundError"
        hint = result["error"]["hint"]
        assert hint.endswith(f'"package_dirs": [{json.dumps(os.path.realpath(site))}]'), hint
        retry = {"id": new_id(), "code": "import helper", "package_dirs": [str(site)]}
        assert_ok(client.run(retry), "helper imported\n")
        assert client.close() == 0
