"""Real agent tasks with the packages agents use, under the narrowest grants a user writes.

numpy, pandas, matplotlib, Pillow and requests come from PyPI, installed by the test
session into a package directory of their own (requirements/agent-tasks.txt,
$PYNOX_TEST_PACKAGES), granted with --package-dir as a user grants a virtual
environment's site-packages. Where a task is first run with one grant too few, the
denial's hint is followed, and the task then succeeds: a hint is right when following
it works. docs/agent-tasks.md shows the same tasks with their grants.
"""

from __future__ import annotations

import csv
import os
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.agent_project import make_agent_project
from support.commands import pynox
from support.hints import follow, hint_line, hinted_flags
from support.tls import https_server, make_certificates

PACKAGES = os.environ.get("PYNOX_TEST_PACKAGES", "")
pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only"),
    pytest.mark.skipif(
        not PACKAGES,
        reason="PYNOX_TEST_PACKAGES is unset: `nox -s tests` installs the agents' packages "
        "(requirements/agent-tasks.txt) on the CPython that runs nox and sets it",
    ),
]

CHART = """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.bar(["north", "south"], [120, 80])
ax.set_title("Sales by region")
fig.savefig("out/chart.png")
print("saved out/chart.png")
"""
SQLITE = """
import sqlite3
db = sqlite3.connect("out/notes.db")
db.execute("create table if not exists notes(body text)")
db.executemany("insert into notes values (?)", [("first",), ("second",)])
db.commit()
print(db.execute("select count(*) from notes").fetchone()[0], "notes")
"""
TEMPFILES = """
import os, tempfile
with tempfile.NamedTemporaryFile("w+", suffix=".csv") as f:
    f.write("a,b\\n1,2\\n"); f.flush(); f.seek(0)
    print(f.read().splitlines()[1])
fd, path = tempfile.mkstemp(); os.write(fd, b"x"); os.close(fd)
with tempfile.TemporaryDirectory() as d:
    open(os.path.join(d, "part"), "w").write("y")
    print(sorted(os.listdir(d)), os.path.getsize(path))
"""
PANDAS = """
import pandas as pd
sales = pd.read_csv("data/sales.csv")
totals = sales.groupby("region", as_index=False)["amount"].sum()
totals.to_csv("out/totals.csv", index=False)
print(totals.to_string(index=False))
"""
REQUESTS = """
import os, requests
response = requests.get(os.environ["URL"], timeout=10)
print(response.status_code, response.text)
"""
NUMPY = "import numpy as np; print(np.arange(10).reshape(2, 5).sum(axis=1).tolist())"
PILLOW = """
from PIL import Image
Image.new("RGB", (8, 8), "red").save("out/red.png")
print(Image.open("out/red.png").size)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_agent_project(tmp_path)


def _run(project: Path, code: str, *grants: str, env: dict[str, str] | None = None) -> str:
    proc = pynox(*grants, "-c", code, cwd=project, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def _follow_hints(
    project: Path, code: str, grants: list[str], env: dict[str, str] | None = None
) -> tuple[str, list[str]]:
    """Runs code, adding each hint's grants until it succeeds: (its output, the hints)."""
    proc, hints = follow(
        lambda flags: pynox(*flags, "-c", code, cwd=project, env=env, timeout=120), grants
    )
    return proc.stdout.decode(), hints


def test_a_matplotlib_chart_saved_into_out(project: Path) -> None:
    # Pillow writes PNGs with "w+b": written files are read back, so out/ is read too.
    out = str(project / "out")
    output, hints = _follow_hints(
        project, CHART, [f"--package-dir={PACKAGES}", "--allow-write=out"]
    )
    assert hints == [f"pynox: reading {out} is not allowed; grant it with --allow-read={out}"]
    assert output == "saved out/chart.png\n"
    assert (project / "out" / "chart.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_a_chart_saved_in_the_working_directory_is_told_to_go_into_a_folder(
    project: Path,
) -> None:
    """pynox refuses to grant writing the directory that holds pynox.toml: the hint names
    a folder inside it instead, and the chart saved there works."""
    (project / "out").rmdir()
    (project / "pynox.toml").write_text("[permissions]\n")
    code = CHART.replace("out/chart.png", "chart.png")
    first = pynox(f"--package-dir={PACKAGES}", "-c", code, cwd=project, timeout=120)
    assert first.returncode == 1
    out = f"{project}/out"
    assert hint_line(first.stderr) == (
        f"pynox: the program reads back what it writes in {project}, which cannot be granted "
        "for writing: it holds where pynox reads its configuration (pynox.toml), so the "
        "program could grant itself more next time; write into a new folder inside it "
        f"instead, such as {out}, made before the run and granted with --allow-read={out} "
        f"--allow-write={out}, or into the run's scratch directory ($TMPDIR)"
    )
    (project / "out").mkdir()
    grants = [f"--package-dir={PACKAGES}", *hinted_flags(first.stderr)]
    assert _run(project, CHART, *grants) == "saved out/chart.png\n"
    assert (project / "out" / "chart.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_a_new_sqlite_database_in_out(project: Path) -> None:
    out = str(project / "out")
    output, hints = _follow_hints(project, SQLITE, ["--allow-write=out"])
    assert hints == [f"pynox: reading {out} is not allowed; grant it with --allow-read={out}"]
    assert output == "2 notes\n"
    with sqlite3.connect(project / "out" / "notes.db") as db:
        assert db.execute("select body from notes").fetchall() == [("first",), ("second",)]


def test_a_new_sqlite_database_with_no_grant_names_both(project: Path) -> None:
    out = str(project / "out")
    output, hints = _follow_hints(project, SQLITE, [])
    assert hints == [
        f"pynox: the program reads back what it writes in {out}; grant both with "
        f"--allow-read={out} --allow-write={out}"
    ]
    assert output == "2 notes\n"


def test_tempfile_and_named_temporary_files_need_no_grant(project: Path) -> None:
    assert _run(project, TEMPFILES) == "1,2\n['part'] 1\n"


def test_pandas_reads_a_granted_csv_and_writes_into_out(project: Path) -> None:
    grants = [f"--package-dir={PACKAGES}", "--allow-read=data/sales.csv", "--allow-write=out"]
    assert _run(project, PANDAS, *grants).split() == ["region", "amount", "north", "120",
                                                       "south", "80"]  # fmt: skip
    with open(project / "out" / "totals.csv", newline="") as totals:
        assert list(csv.reader(totals)) == [["region", "amount"], ["north", "120"],
                                            ["south", "80"]]  # fmt: skip


def test_pandas_without_the_data_grant_is_told_which_file(project: Path) -> None:
    data = str(project / "data" / "sales.csv")
    grants = [f"--package-dir={PACKAGES}", "--allow-write=out"]
    output, hints = _follow_hints(project, PANDAS, grants)
    assert hints == [f"pynox: reading {data} is not allowed; grant it with --allow-read={data}"]
    assert "north" in output


def test_pillow_saves_and_reads_back_an_image(project: Path) -> None:
    grants = [f"--package-dir={PACKAGES}", "--allow-write=out", "--allow-read=out"]
    assert _run(project, PILLOW, *grants) == "(8, 8)\n"


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    if shutil.which("openssl") is None:
        pytest.fail("the HTTPS task needs the openssl command to make its test CA")
    certificates = make_certificates(tmp_path_factory.mktemp("tls"))
    with https_server(certificates) as url:
        yield url, certificates / "ca.pem"


def test_requests_over_https_to_a_loopback_server(
    project: Path, tls_server: tuple[str, Path]
) -> None:
    url, ca = tls_server
    env = {"URL": url, "REQUESTS_CA_BUNDLE": str(ca)}
    grants = [f"--package-dir={PACKAGES}", "--allow-env=URL", "--allow-env=REQUESTS_CA_BUNDLE"]
    output, hints = _follow_hints(project, REQUESTS, grants, env=env)
    assert hints == ["pynox: the network is off; grant it with --allow-network"]
    assert output == "200 hello over tls\n"


def test_requests_verifying_with_a_ca_file_it_is_told_to_read(
    project: Path, tls_server: tuple[str, Path]
) -> None:
    """verify= names the CA file: OpenSSL's refusal names no file, the hint does."""
    url, ca = tls_server
    code = REQUESTS.replace("timeout=10", f"timeout=10, verify={str(ca)!r}")
    grants = [f"--package-dir={PACKAGES}", "--allow-env=URL", "--allow-network"]
    output, hints = _follow_hints(project, code, grants, env={"URL": url})
    real = os.path.realpath(ca)
    assert hints == [f"pynox: reading {real} is not allowed; grant it with --allow-read={real}"]
    assert output == "200 hello over tls\n"


def test_numpy_past_the_memory_limit_is_told_a_limit_that_fits(project: Path) -> None:
    """numpy says how much it asked for: one step of the hint is enough."""
    code = "import numpy as np\nprint(np.ones((8000, 8000)).shape)"  # 488 MiB
    output, hints = _follow_hints(project, code, [f"--package-dir={PACKAGES}", "--memory=256m"])
    assert hints == [
        "pynox: the program used up its 256m memory limit; allocate less or raise the limit "
        "with --memory=1g"
    ]
    assert output == "(8000, 8000)\n"


def test_numpy_from_the_environment_after_following_the_hint(project: Path) -> None:
    """numpy is installed in a package directory pynox.toml names for a profile the run
    does not use: the hint names that directory, and granting it works."""
    (project / "pynox.toml").write_text(f'[profiles.analysis]\npackage_dirs = ["{PACKAGES}"]\n')
    real = os.path.realpath(PACKAGES)
    output, hints = _follow_hints(project, NUMPY, [])
    assert hints == [
        f"pynox: the module is installed in {real}; import from there with --package-dir={real}"
    ]
    assert output == "[10, 35]\n"


def test_a_preloaded_pandas_in_the_pool_needs_no_grant_per_request(project: Path) -> None:
    from pynox import Pool

    code = (
        "import pandas as pd, io\n"
        "frame = pd.read_csv(io.StringIO('a,b\\n1,2\\n3,4\\n'))\n"
        "print(frame.b.sum(), frame.to_csv(index=False).splitlines()[-1])"
    )
    with Pool(workers=1, preload=["pandas"], package_dirs=[PACKAGES]) as pool:
        result = pool.run(code)
        assert result.ok, result.text
        assert result.stdout == "6 3,4\n"
        assert "pandas" in pool.run("import sys; print(sorted(sys.modules))").stdout
