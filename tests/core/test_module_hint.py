"""The hint of a failed import: the package directory that holds the module, when one
pynox knows of does and the run was not given it.

Each test follows the hint as a user or a model would: run the program without the
grant, take the `--package-dir=DIR` (or `package_dirs=[DIR]`) the hint names, run it
again with that grant, and see it work.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from support.commands import PYTHON, pynox, python, run

PACKAGES = os.environ.get("PYNOX_TEST_PACKAGES")
needs_packages = pytest.mark.skipif(
    not PACKAGES,
    reason="PYNOX_TEST_PACKAGES names no directory of installed packages (numpy, pandas); "
    "the nox session sets it",
)
FLAG = re.compile(r"--package-dir=(\S+)")
HINT_LINE = re.compile(r"^pynox: the module is installed in (\S+); import from there with ")
VERSION = f"python{sys.version_info[0]}.{sys.version_info[1]}"


def _hint(stderr: bytes) -> str:
    """The hint line pynox printed after the traceback."""
    last = stderr.decode().rstrip("\n").splitlines()[-1]
    assert HINT_LINE.match(last), stderr.decode()
    return last


def _flag(stderr: bytes) -> str:
    found = FLAG.search(_hint(stderr))
    assert found is not None
    return found.group(0)


def _follow(
    program: list[str], cwd: Path, env: dict[str, str], folder: str | Path, printed: bytes
) -> None:
    """The run fails with a hint naming --package-dir=folder (resolved); run again with it,
    it prints what python printed."""
    failed = pynox(*program, cwd=cwd, env=env)
    assert failed.returncode == 1, failed.stderr.decode()
    flag = _flag(failed.stderr)
    assert flag == f"--package-dir={os.path.realpath(folder)}"
    followed = pynox(flag, *program, cwd=cwd, env=env)
    assert followed.returncode == 0, followed.stderr.decode()
    assert followed.stdout == printed


def _link_tree(source: Path, target: Path) -> None:
    """A copy of a package, made of hard links where the file system allows them."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link, symlinks=True)


@needs_packages
def test_a_package_dir_of_a_profile_the_run_did_not_choose(tmp_path: Path) -> None:
    """A project keeps its analysis packages in one profile of pynox.toml; a plain
    `pynox -c` there does not get them. The hint names the directory; granting it works."""
    assert PACKAGES is not None
    (tmp_path / "pynox.toml").write_text(
        textwrap.dedent(
            f"""
            [profiles.analysis]
            package_dirs = [{json.dumps(PACKAGES)}]
            """
        )
    )
    code = "import numpy; print(numpy.arange(4).sum())"
    failed = pynox("-c", code, cwd=tmp_path)
    assert failed.returncode == 1
    assert b"ModuleNotFoundError: No module named 'numpy'" in failed.stderr
    flag = _flag(failed.stderr)
    assert flag == f"--package-dir={os.path.realpath(PACKAGES)}"
    followed = pynox(flag, "-c", code, cwd=tmp_path)
    assert followed.returncode == 0, followed.stderr.decode()
    assert followed.stdout == b"6\n"


@needs_packages
def test_the_hint_in_a_json_result_is_the_same(tmp_path: Path) -> None:
    """--json results carry the hint the supervisor rebuilds from its kind."""
    assert PACKAGES is not None
    (tmp_path / "pynox.toml").write_text(
        f"[profiles.analysis]\npackage_dirs = [{json.dumps(PACKAGES)}]\n"
    )
    result = json.loads(pynox("--json", "-c", "import numpy", cwd=tmp_path).stdout)
    directory = os.path.realpath(PACKAGES)
    assert result["error"]["type"] == "ModuleNotFoundError"
    assert result["error"]["hint"].endswith(f"--package-dir={directory}")


@needs_packages
def test_the_user_site(tmp_path: Path) -> None:
    """`pip install --user numpy` puts numpy in ~/.local/lib/pythonX.Y/site-packages,
    where `python` finds it and the sandbox, which imports no site-packages unless told,
    does not. The hint names the user site; granting it works."""
    assert PACKAGES is not None
    home = tmp_path / "home"
    site = home / ".local" / "lib" / VERSION / "site-packages"
    site.mkdir(parents=True)
    for name in ("numpy", "numpy.libs"):
        if (Path(PACKAGES) / name).exists():
            _link_tree(Path(PACKAGES) / name, site / name)
    env = {"HOME": str(home)}
    _follow(["-c", "import numpy; print(numpy.ones(3).sum())"], tmp_path, env, site, b"3.0\n")


@needs_packages
def test_a_folder_on_pythonpath(tmp_path: Path) -> None:
    """`PYTHONPATH=packages python chart.py` imports matplotlib from there; the sandbox
    imports from no PYTHONPATH (its environment is emptied). The hint names the folder
    of PYTHONPATH that holds the module; granting it works."""
    assert PACKAGES is not None
    script = tmp_path / "chart.py"
    script.write_text(
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "plt.plot([1, 2, 3])\nprint(type(plt.gcf()).__name__)\n"
    )
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "missing"), PACKAGES])}
    assert python(str(script), cwd=tmp_path, env=env).stdout == b"Figure\n"
    assert b"No module named 'matplotlib'" in pynox(str(script), cwd=tmp_path, env=env).stderr
    _follow([str(script)], tmp_path, env, PACKAGES, b"Figure\n")


def test_a_relative_folder_on_pythonpath(tmp_path: Path) -> None:
    """A relative entry of PYTHONPATH is taken from the directory python runs in."""
    (tmp_path / "libs").mkdir()
    (tmp_path / "libs" / "tally.py").write_text("def total(xs):\n    return sum(xs)\n")
    code = "import tally; print(tally.total([1, 2, 3]))"
    env = {"PYTHONPATH": "libs"}
    assert python("-c", code, cwd=tmp_path, env=env).stdout == b"6\n"
    _follow(["-c", code], tmp_path, env, tmp_path / "libs", b"6\n")


def test_an_activated_virtual_environment(tmp_path: Path) -> None:
    """`source venv/bin/activate` sets VIRTUAL_ENV and puts the environment's python
    first on PATH, so `python stats.py` imports what was installed there; pynox, installed
    elsewhere, does not. The hint names that environment's site-packages; granting it
    works."""
    venv = tmp_path / "venv"
    assert run([PYTHON, "-m", "venv", "--without-pip", str(venv)]).returncode == 0
    site = venv / "lib" / VERSION / "site-packages"
    (site / "stats_helper").mkdir(parents=True)
    (site / "stats_helper" / "__init__.py").write_text(
        "def mean(xs):\n    return sum(xs) / len(xs)\n"
    )
    code = "import stats_helper; print(stats_helper.mean([1, 2, 3]))"
    env = {
        "VIRTUAL_ENV": str(venv),
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
    }
    assert run(["python", "-c", code], cwd=tmp_path, env=env).stdout == b"2.0\n"
    _follow(["-c", code], tmp_path, env, site, b"2.0\n")


def test_the_environment_pynox_runs_in(tmp_path: Path) -> None:
    """pynox installed into a virtual environment beside the project's packages: the
    packages import under `python` but not in the sandbox. pytest is one such package
    here (the suite runs from pynox's environment). The hint names that environment's
    site-packages, and a --package-dir of it is accepted although pynox lives there
    (only writes to it are refused)."""
    site = os.path.dirname(os.path.dirname(pytest.__file__))
    _follow(["-c", "import pytest; print(pytest.__name__)"], tmp_path, {}, site, b"pytest\n")


@pytest.mark.parametrize("module", ["pytest", "_pytest.config"])
def test_a_module_run_with_dash_m(tmp_path: Path, module: str) -> None:
    """`python -m pytest --version` runs a tool installed beside python; `pynox -m` found
    no module, said only runpy's "No module named pytest", and its --json error was
    null. The hint names the site-packages (or that of the package above the module,
    which runpy could not import); granting it runs the tool as python does."""
    program = ["-m", module, "--version"] if module == "pytest" else ["-m", module]
    site = os.path.dirname(os.path.dirname(pytest.__file__))
    failed = pynox(*program, cwd=tmp_path)
    assert failed.returncode == 1, failed.stderr.decode()
    said, hint = failed.stderr.decode().splitlines()
    assert said.endswith(
        ": No module named pytest"
        if module == "pytest"
        else ": Error while finding module specification for '_pytest.config' "
        "(ModuleNotFoundError: No module named '_pytest')"
    )
    assert _flag(failed.stderr) == f"--package-dir={os.path.realpath(site)}"
    result = json.loads(pynox("--json", *program, cwd=tmp_path).stdout)
    assert result["exit"] == 1
    assert result["error"]["type"] == "ModuleNotFoundError"
    assert result["error"]["hint"] == hint.removeprefix("pynox: ")
    followed = pynox(_flag(failed.stderr), *program, cwd=tmp_path)
    assert followed.returncode == python(*program, cwd=tmp_path).returncode
    if module == "pytest":
        assert (
            followed.stdout
            == python(*program, cwd=tmp_path).stdout
            == (f"pytest {pytest.__version__}\n".encode())
        )


def test_a_module_run_with_dash_m_found_nowhere_keeps_runpys_line_alone(tmp_path: Path) -> None:
    """No directory would help: python's line alone, and the error an import would give."""
    for module in ("surely_not_installed_anywhere", "json.nothing"):
        failed = pynox("-m", module, cwd=tmp_path)
        assert failed.returncode == 1
        [said] = failed.stderr.decode().splitlines()
        assert said.endswith(f": No module named {module}")
        error = json.loads(pynox("--json", "-m", module, cwd=tmp_path).stdout)["error"]
        assert (error["type"], error["message"]) == (
            "ModuleNotFoundError",
            f"No module named {module}",
        )
        assert error["hint"] is None


def test_no_hint_names_a_directory_already_granted(tmp_path: Path) -> None:
    """The run was given the directory that holds the module, yet the import fails (the
    program took the directory off sys.path): naming it again would send the reader in
    a circle, so there is no hint."""
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / "helper.py").write_text("VALUE = 1\n")
    (tmp_path / "pynox.toml").write_text('[profiles.tools]\npackage_dirs = ["libs"]\n')
    code = f"import sys; sys.path.remove({str(libs)!r}); import helper"
    failed = pynox("--profile=tools", "-c", code, cwd=tmp_path)
    assert failed.returncode == 1
    assert b"No module named 'helper'" in failed.stderr
    assert not failed.stderr.decode().splitlines()[-1].startswith("pynox:")
    # Without the profile the same directory is not granted, and the hint names it.
    failed = pynox("-c", "import helper", cwd=tmp_path)
    assert _flag(failed.stderr) == f"--package-dir={os.path.realpath(libs)}"
    assert pynox(_flag(failed.stderr), "-c", "import helper", cwd=tmp_path).returncode == 0


def test_only_a_module_found_somewhere_gets_a_hint(tmp_path: Path) -> None:
    """A module installed nowhere pynox knows, or a submodule missing from a package that
    imports (`json.nothing`), gets no hint: no directory would help."""
    found = pynox("-c", "import pytest", cwd=tmp_path)
    assert _flag(found.stderr)
    for code in ("import surely_not_installed_anywhere", "import json.nothing"):
        failed = pynox("-c", code, cwd=tmp_path)
        assert failed.returncode == 1
        assert failed.stderr.decode().splitlines()[-1].startswith("ModuleNotFoundError")


@pytest.mark.parametrize("program", ["-c", "-"])
def test_a_module_in_the_working_directory_of_c_or_standard_input(
    tmp_path: Path, program: str
) -> None:
    """python imports a module beside it for -c and standard input (it puts the working
    directory first on sys.path), which the sandbox leaves unreadable: the hint names the
    directory as the read grant that lets the import through."""
    (tmp_path / "tally.py").write_text("def total(xs):\n    return sum(xs)\n")
    code = "import tally; print(tally.total([1, 2, 3]))"
    args, given = (["-c", code], None) if program == "-c" else (["-"], code.encode())
    assert python(*args, cwd=tmp_path, input=given).stdout == b"6\n"
    failed = pynox(*args, cwd=tmp_path, input=given)
    assert failed.returncode == 1
    here = os.path.realpath(tmp_path)
    assert failed.stderr.decode().splitlines()[-1] == (
        f"pynox: the module is in {here}, the working directory, which python imports from "
        "for -c and standard input, and which the program may not read; grant it with "
        f"--allow-read={here}"
    )
    followed = pynox(f"--allow-read={here}", *args, cwd=tmp_path, input=given)
    assert followed.returncode == 0 and followed.stdout == b"6\n", followed.stderr.decode()
    result = json.loads(pynox("--json", *args, cwd=tmp_path, input=given).stdout)
    assert result["error"]["hint"].endswith(f"grant it with --allow-read={here}")
