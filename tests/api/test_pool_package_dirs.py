"""`Pool(package_dirs=[...])`: the pool preloads from them and every run imports from them
without a grant of its own; a module installed where a run may not import gets a hint
in the API's spelling, which works when followed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pynox.api.connection import PoolError
from pynox.api.pool import Pool

PACKAGES = os.environ.get("PYNOX_TEST_PACKAGES")
needs_packages = pytest.mark.skipif(
    not PACKAGES,
    reason="PYNOX_TEST_PACKAGES names no directory of installed packages (numpy, pandas); "
    "the nox session sets it",
)


@pytest.mark.unit
def test_the_pool_command_carries_the_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "site").mkdir()
    monkeypatch.chdir(tmp_path)
    pool = Pool(package_dirs=["site", tmp_path / "site"], lazy=True, pynox_command=["pynox"])
    assert pool.package_dirs == [str(tmp_path / "site")]
    assert pool.command[-2:] == ["--package-dir", str(tmp_path / "site")]
    pool.close()


@pytest.mark.unit
def test_bad_package_dirs_raise_at_once(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        Pool(package_dirs=[tmp_path / "nowhere"], lazy=True)
    with pytest.raises(TypeError, match="package_dirs takes"):
        Pool(package_dirs=[3], lazy=True)  # type: ignore[list-item]


@needs_packages
def test_preloaded_pandas_needs_no_grant_per_run(tmp_path: Path) -> None:
    assert PACKAGES is not None
    data = tmp_path / "data.csv"
    data.write_text("a,b\n1,2\n3,4\n")
    with Pool(preload=["pandas"], package_dirs=[PACKAGES], workers=1) as pool:
        result = pool.run("import pandas as pd; print(pd.DataFrame({'a': [1, 2]}).a.sum())")
        assert result.ok and result.stdout == "3\n", result.text
        # Submodules pandas imports on first use: the CSV writer and reader.
        result = pool.run("import pandas as pd; print(pd.DataFrame({'a': [5]}).to_csv())")
        assert result.ok and result.stdout == ",a\n0,5\n\n", result.text
        result = pool.run(
            f"import pandas as pd; print(pd.read_csv({str(data)!r}).b.sum())", allow_read=[data]
        )
        assert result.ok and result.stdout == "6\n", result.text
        session = pool.session()
        assert session.run("import pandas as pd; s = pd.Series([1, 2])").ok
        assert session.run("print(s.sum())").stdout == "3\n"
        session.close()


# Which modules a request's first median and first frame import.
FIRST_USE_IMPORTS = """
import sys
import numpy as np
import pandas as pd
before = set(sys.modules)
median = float(np.median(np.arange(5.0)))
total = int(pd.DataFrame({'key': [1, 1], 'value': [2, 3]}).groupby('key')['value'].sum().iloc[0])
print(median, total, sorted(set(sys.modules) - before))
"""


@needs_packages
def test_preloaded_numpy_and_pandas_leave_their_first_use_nothing_to_import() -> None:
    """numpy's median and pandas' first frame import modules of their own on first use
    (numpy.ma; pyarrow's pandas layer): preloaded with their packages, a request finds
    them loaded, where python imports them too."""
    assert PACKAGES is not None
    with Pool(preload=["numpy", "pandas"], package_dirs=[PACKAGES], workers=1) as pool:
        result = pool.run(FIRST_USE_IMPORTS)
        assert result.ok and result.stdout == "2.0 5 []\n", result.text


@needs_packages
def test_the_hint_for_a_module_of_an_unused_profile_works_when_followed(tmp_path: Path) -> None:
    """The project keeps numpy in one profile; a run without it is told which directory,
    spelled as the keyword argument to pass."""
    assert PACKAGES is not None
    config = tmp_path / "pynox.toml"
    config.write_text(f"[profiles.analysis]\npackage_dirs = [{PACKAGES!r}]\n".replace("'", '"'))
    with Pool(config=config, workers=1) as pool:
        failed = pool.run("import numpy; print(numpy.arange(3).sum())")
        assert failed.error is not None and failed.error["type"] == "ModuleNotFoundError"
        directory = os.path.realpath(PACKAGES)
        assert failed.error["hint"].endswith(f"package_dirs=[{directory!r}]")
        followed = pool.run("import numpy; print(numpy.arange(3).sum())", package_dirs=[directory])
        assert followed.ok and followed.stdout == "3\n", followed.text


@needs_packages
def test_a_preload_the_pool_cannot_find_names_the_keyword_that_finds_it() -> None:
    """Pool() starts the pool command, whose refusal must not speak only in its flags."""
    assert PACKAGES is not None
    pool = Pool(preload=["pandas"], workers=1)
    with pytest.raises(PoolError) as refused:
        pool.run("pass")
    pool.close()
    assert "cannot preload pandas" in str(refused.value)
    assert "package_dirs" in str(refused.value)
    with Pool(preload=["pandas"], package_dirs=[PACKAGES], workers=1) as followed:
        assert followed.run("import sys; print('pandas' in sys.modules)").stdout == "True\n"


def test_packages_of_another_python_version_are_named_so(tmp_path: Path) -> None:
    """A virtual environment of another Python minor: its compiled modules do not import,
    and the hint says which version they are for, not only the package's own error."""
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    other = f"3.{sys.version_info[1] - 1}"
    site = tmp_path / "venv" / "lib" / f"python{other}" / "site-packages"
    (site / "fastcalc").mkdir(parents=True)
    (site / "fastcalc" / "__init__.py").write_text("from ._speedups import add\n")
    tag = f"cpython-3{sys.version_info[1] - 1}-x86_64-linux-gnu"
    (site / "fastcalc" / f"_speedups.{tag}.so").write_bytes(b"\x7fELF")
    with Pool(workers=1) as pool:
        failed = pool.run("import fastcalc", package_dirs=[site])
        assert failed.error is not None and failed.error["type"] == "ModuleNotFoundError"
        assert failed.error["hint"] == (
            f"the package was installed for Python {other}, and this is Python {mine}, which "
            f"cannot import its compiled modules; install it for Python {mine} (python{mine} "
            f"-m pip install --target=DIR, or a Python {mine} virtual environment's "
            "site-packages) and import from there with package_dirs=['DIR']"
        )
        # Installed again for this Python (a pure-Python build stands in for it here).
        target = tmp_path / "target"
        (target / "fastcalc").mkdir(parents=True)
        (target / "fastcalc" / "__init__.py").write_text("from ._speedups import add\n")
        (target / "fastcalc" / "_speedups.py").write_text("def add(a, b):\n    return a + b\n")
        followed = pool.run("import fastcalc; print(fastcalc.add(1, 2))", package_dirs=[target])
        assert followed.ok and followed.stdout == "3\n", followed.text
        # A module missing from a package built for this Python gets no such hint.
        ours = f"_fast.cpython-3{sys.version_info[1]}-x86_64-linux-gnu.so"
        (target / "fastcalc" / ours).write_bytes(b"")
        missing = pool.run("import fastcalc._nothere", package_dirs=[target])
        assert missing.error is not None and missing.error["hint"] is None


def _environment(root: Path, minor: int) -> Path:
    """A virtual environment of Python 3.minor holding a pure-Python package, fastcalc."""
    root.mkdir(parents=True)
    (root / "pyvenv.cfg").write_text(f"version = 3.{minor}.0\n")
    site = root / "lib" / f"python3.{minor}" / "site-packages"
    (site / "fastcalc").mkdir(parents=True)
    (site / "fastcalc" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    return site


CODE = "import fastcalc; print(fastcalc.add(1, 2))"


def test_a_virtual_environment_given_whole_names_its_site_packages(tmp_path: Path) -> None:
    site = _environment(tmp_path / "venv", sys.version_info[1])
    with Pool(workers=1) as pool:
        failed = pool.run(CODE, package_dirs=[tmp_path / "venv"])
        assert failed.error is not None and failed.error["type"] == "ModuleNotFoundError"
        assert failed.error["hint"] == (
            f"the module is installed in {site}; import from there with package_dirs=['{site}']"
        )
        followed = pool.run(CODE, package_dirs=[site])
        assert followed.ok and followed.stdout == "3\n", followed.text


def test_a_module_only_in_an_environment_of_another_python_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found in the activated environment, or one given whole, of another version."""
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    site = _environment(tmp_path / "venv", sys.version_info[1] - 1)
    hint = (
        f"the module is installed in {site}, for another version of Python than this one "
        f"({mine}): a pure-Python package imports from there with package_dirs=['{site}']; "
        f"for one with compiled modules, install it for Python {mine} (python{mine} -m pip "
        f"install --target=DIR, or a Python {mine} virtual environment's site-packages) and "
        "import from there with package_dirs=['DIR']"
    )
    with Pool(workers=1) as pool:
        given = pool.run(CODE, package_dirs=[tmp_path / "venv"])
        assert given.error is not None and given.error["hint"] == hint
        followed = pool.run(CODE, package_dirs=[site])
        assert followed.ok and followed.stdout == "3\n", followed.text
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "venv"))
    with Pool(workers=1) as pool:
        activated = pool.run(CODE)
        assert activated.error is not None and activated.error["hint"] == hint
