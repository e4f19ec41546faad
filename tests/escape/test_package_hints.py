"""Hints after denials that packages beyond the standard library meet, and following each
hint makes the program work.

The tests with a real package run when $PYNOX_TEST_PACKAGES holds it, and skip otherwise.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.agent_project import make_agent_project
from support.commands import pynox
from support.hints import follow, hint_line
from support.loopback_http import QuietFiles, serving

PACKAGES = os.environ.get("PYNOX_TEST_PACKAGES", "")
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_agent_project(tmp_path)


def _follow_hints(project: Path, code: str, grants: list[str], steps: int = 4) -> list[str]:
    """Runs code, adding each hint's grants until it succeeds: the hints, in order."""
    proc, hints = follow(
        lambda flags: pynox(*flags, "-c", code, cwd=project, timeout=120), grants, steps
    )
    assert proc.stdout.decode().endswith("done\n"), proc.stdout
    return hints


def _package(name: str) -> list[str]:
    """The grant of the package directory that holds name, or a skip."""
    if not PACKAGES or not os.path.isdir(os.path.join(PACKAGES, name)):
        pytest.skip(f"{name} is not installed in $PYNOX_TEST_PACKAGES")
    return [f"--package-dir={PACKAGES}"]


def test_the_programs_own_proc_entry_is_named_by_proc_self(project: Path) -> None:
    """psutil reads /proc/PID/statm: a grant of that PID would not name the next run's
    process, /proc/self does."""
    code = "import os\nopen(f'/proc/{os.getpid()}/statm').read()\nprint('done')\n"
    hints = _follow_hints(project, code, [])
    assert hints == [
        "pynox: reading /proc/self/statm is not allowed; grant it with "
        "--allow-read=/proc/self/statm"
    ]


def test_the_network_statistics_are_named_by_their_folder(project: Path) -> None:
    """psutil.net_io_counters() reads /proc/net/dev, a link into the program's own entry
    whose files the kernel makes anew at each lookup: only their folder can be granted."""
    code = "print(open('/proc/net/dev').read().count(':') > 0, 'done')\n"
    hints = _follow_hints(project, code, [])
    assert hints == [
        "pynox: reading /proc/self/net is not allowed; grant it with --allow-read=/proc/self/net"
    ]


# A library's refusal as its native code reports it: no filename for Python, the file in
# the message alone (PATH stands for it).
LIBRARY_ERRORS = [
    (
        "pyarrow",
        "raise PermissionError(13, \"Failed to open local file 'PATH'. Detail: [errno 13] "
        'Permission denied")',
    ),
    ("polars", "raise PermissionError('Permission denied (os error 13): PATH')"),
    (
        "lxml",
        "raise OSError('Error reading file \\'PATH\\': failed to load \"PATH\": "
        "Permission denied')",
    ),
    (
        "duckdb",
        "class IOException(Exception): pass\n"
        "raise IOException('IO Error: Cannot open file \"PATH\": Permission denied')",
    ),
]


@pytest.mark.parametrize(
    "raising", [error[1] for error in LIBRARY_ERRORS], ids=[error[0] for error in LIBRARY_ERRORS]
)
def test_a_file_named_only_in_a_librarys_message_is_hinted(project: Path, raising: str) -> None:
    data, out = project / "data" / "sales.csv", project / "out"
    refused = pynox("-c", raising.replace("PATH", "data/sales.csv"), cwd=project)
    assert refused.returncode == 1
    assert hint_line(refused.stderr) == (
        f"pynox: reading {data} is not allowed; grant it with --allow-read={data}"
    )
    # A file to be made: its folder is what to grant.
    refused = pynox("-c", raising.replace("PATH", "out/totals.parquet"), cwd=project)
    assert hint_line(refused.stderr) == (
        f"pynox: changing the entries of {out} is not allowed; grant it with --allow-write={out}"
    )


def test_a_glob_in_a_folder_duckdb_was_refused_listing_is_hinted(project: Path) -> None:
    """DuckDB says only that no file matched: the folder it could not list is what to
    grant, and then the files match."""
    data = project / "data"
    raising = (
        "class IOException(Exception): pass\n"
        "raise IOException('IO Error: No files found that match the pattern \"data/*.csv\"')"
    )
    refused = pynox("-c", raising, cwd=project)
    assert hint_line(refused.stderr) == (
        f"pynox: listing {data} is not allowed; grant it with --allow-read={data}"
    )
    # No wildcard: a file that is not there, as under python.
    missing = pynox("-c", raising.replace("*", "missing"), cwd=project)
    assert missing.returncode == 1 and b"pynox:" not in missing.stderr


PARQUET = """
import pandas as pd
pd.read_csv("data/sales.csv").to_parquet("out/sales.parquet")
print(len(pd.read_parquet("out/sales.parquet")), "done")
"""


def test_pandas_parquet_through_pyarrow_follows_its_hints(project: Path) -> None:
    grants = [*_package("pyarrow"), "--allow-read=data"]
    out = project / "out"
    assert _follow_hints(project, PARQUET, grants) == [
        f"pynox: changing the entries of {out} is not allowed; grant it with --allow-write={out}",
        f"pynox: reading {out} is not allowed; grant it with --allow-read={out}",
    ]


DATASET = """
import pyarrow as pa, pyarrow.dataset as ds, pyarrow.parquet as pq
table = pa.table({"region": ["north", "south"], "amount": [120, 80]})
pq.write_to_dataset(table, "out/sales", partition_cols=["region"])
print(ds.dataset("out/sales", partitioning="hive").to_table().num_rows, "done")
"""


def test_a_pyarrow_dataset_made_and_listed_follows_its_hints(project: Path) -> None:
    """pyarrow makes the dataset's folders and lists them in its own code too."""
    out = project / "out"
    assert _follow_hints(project, DATASET, _package("pyarrow")) == [
        f"pynox: changing the entries of {out} is not allowed; grant it with --allow-write={out}",
        f"pynox: listing {out} is not allowed; grant it with --allow-read={out}",
    ]


POLARS = """
import polars as pl
pl.read_csv("data/sales.csv").write_parquet("out/sales.parquet")
print(pl.scan_parquet("out/*.parquet").collect().height, "done")
"""


def test_polars_follows_its_hints(project: Path) -> None:
    data, out = project / "data" / "sales.csv", project / "out"
    assert _follow_hints(project, POLARS, _package("polars")) == [
        f"pynox: reading {data} is not allowed; grant it with --allow-read={data}",
        f"pynox: changing the entries of {out} is not allowed; grant it with --allow-write={out}",
        f"pynox: listing {out} is not allowed; grant it with --allow-read={out}",
    ]


def test_lxml_parsing_a_file_follows_its_hint(project: Path) -> None:
    (project / "data" / "page.html").write_text("<html><body><h1>Title</h1></body></html>")
    code = "import lxml.html\nprint(lxml.html.parse('data/page.html').find('.//h1').text, 'done')\n"
    page = project / "data" / "page.html"
    assert _follow_hints(project, code, _package("lxml")) == [
        f"pynox: reading {page} is not allowed; grant it with --allow-read={page}"
    ]


DUCKDB = """
import duckdb
con = duckdb.connect("out/sales.duckdb")
con.execute("create table sales as select * from read_csv_auto('data/sales.csv')")
print(con.execute("select sum(amount) from sales").fetchone()[0], "done")
"""


def test_a_new_duckdb_database_is_told_to_read_and_write_its_folder(project: Path) -> None:
    """DuckDB makes its database and write-ahead log in the folder and reads them back:
    both grants at once, so that no run leaves an empty database file behind. What it
    reads of the machine as it connects (its control groups' limits) needs no grant."""
    out = project / "out"
    hints = _follow_hints(project, DUCKDB, [*_package("duckdb"), "--allow-read=data"], steps=8)
    assert hints[-1] == (
        f"pynox: the program reads back what it writes in {out}; grant both with "
        f"--allow-read={out} --allow-write={out}"
    )
    assert len(hints) == 1, hints


ARROW_BUFFER = "import pyarrow as pa\nprint(pa.allocate_buffer(1 << 30).size, 'done')\n"


def test_a_pyarrow_allocation_gets_a_limit_that_fits_it(project: Path) -> None:
    """pyarrow says the size it failed to allocate: the hint's limit fits it in one step,
    where twice the limit would not."""
    # 512m: what pyarrow imports (numpy, whose OpenBLAS buffers grow with the cores) fits.
    hints = _follow_hints(project, ARROW_BUFFER, [*_package("pyarrow"), "--memory=512m"])
    assert hints == [
        "pynox: the program used up its 512m memory limit; allocate less or raise the limit "
        "with --memory=2g"
    ]


def test_a_polars_url_without_the_network_is_told_to_grant_it(project: Path) -> None:
    """polars' HTTP client loads the CA store before it connects, even for http://, and
    only a run with the network reads that store."""
    code = "import polars as pl\npl.read_csv('http://127.0.0.1:9/sales.csv')\n"
    refused = pynox(*_package("polars"), "-c", code, cwd=project, timeout=120)
    assert refused.returncode == 1
    assert hint_line(refused.stderr) == "pynox: the network is off; grant it with --allow-network"
    granted = pynox(*_package("polars"), "--allow-network", "-c", code, cwd=project, timeout=120)
    assert b"No CA certificates" not in granted.stderr, granted.stderr


@pytest.fixture
def served(project: Path) -> Iterator[str]:
    """The URL of the project's data/ folder, served over HTTP on loopback."""
    handler = functools.partial(QuietFiles, directory=str(project / "data"))
    with serving(handler) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"


def test_a_polars_url_read_is_told_to_fetch_the_bytes_itself(project: Path, served: str) -> None:
    """polars reads a URL through a temporary folder whose mode it sets, which seccomp
    refuses whatever the grants: the hint's way round works."""
    grants = [*_package("polars"), "--allow-network"]
    url = f"{served}/sales.csv"
    code = f"import polars as pl\nprint(pl.read_csv({url!r}).shape)\n"
    refused = pynox(*grants, "-c", code, cwd=project, timeout=120)
    assert refused.returncode == 1
    assert hint_line(refused.stderr) == (
        "pynox: polars sets the mode of the temporary folder it reads a URL through, which "
        "the sandbox never allows, and there is nothing to grant; fetch the bytes with "
        "urllib.request or requests and give polars io.BytesIO(data) instead"
    )
    fetched = (
        "import io, urllib.request\nimport polars as pl\n"
        f"data = urllib.request.urlopen({url!r}).read()\n"
        "print(pl.read_csv(io.BytesIO(data)).shape)\n"
    )
    done = pynox(*grants, "-c", fetched, cwd=project, timeout=120)
    assert (done.returncode, done.stdout) == (0, b"(3, 2)\n"), done.stderr


DUCKDB_GLOB = """
import duckdb
print(duckdb.sql("select count(*) from read_csv_auto('data/*.csv')").fetchall(), "done")
"""


def test_a_duckdb_glob_follows_its_hints(project: Path) -> None:
    data = project / "data"
    hints = _follow_hints(project, DUCKDB_GLOB, _package("duckdb"), steps=8)
    assert hints[-1] == f"pynox: listing {data} is not allowed; grant it with --allow-read={data}"


@pytest.mark.parametrize(
    "raising",
    [
        "raise SystemError('error return without exception set')",
        "raise SystemError('<function _find_and_load at 0x7f00> returned NULL without setting "
        "an exception')",
        "import errno; raise OSError(errno.ENOMEM, 'Cannot allocate memory', 'pandas/io')",
    ],
    ids=["no-exception-set", "returned-null", "enomem"],
)
def test_a_memory_error_lost_under_the_limit_gets_the_memory_hint(
    project: Path, raising: str
) -> None:
    """Under a memory limit, C code whose allocation failed may end the program without a
    MemoryError (an import of scikit-learn under --memory=256m does, half the time): the
    hint is the memory limit's. Without a limit, python would say the same: no hint."""
    limited = pynox("--memory=64m", "-c", raising, cwd=project)
    assert hint_line(limited.stderr) == (
        "pynox: the program used up its 64m memory limit; allocate less or raise the limit "
        "with --memory=128m"
    )
    unlimited = pynox("-c", raising, cwd=project)
    assert unlimited.returncode == 1 and b"pynox:" not in unlimited.stderr


def test_duckdb_out_of_memory_gets_the_memory_hint(project: Path) -> None:
    """DuckDB's own OutOfMemoryException is no MemoryError; under the limit it is the
    limit's all the same. (A list of 50 million numbers, which DuckDB cannot spill.)"""
    code = "import duckdb\nduckdb.sql('select list(range) from range(50000000)').fetchall()\n"
    proc = pynox(*_package("duckdb"), "--memory=128m", "-c", code, cwd=project)
    assert b"OutOfMemoryException" in proc.stderr, proc.stderr
    assert hint_line(proc.stderr) == (
        "pynox: the program used up its 128m memory limit; allocate less or raise the limit "
        "with --memory=256m"
    )


# xlsxwriter's own line, in a module of its name: it sets the times of the temporary files
# it zips into the workbook, which seccomp refuses whatever the grants.
XLSXWRITER_UTIME = """
import os, tempfile, types
workbook = types.ModuleType("xlsxwriter.workbook")
exec("import os\\ndef store(path):\\n    os.utime(path, (0, 0))\\n", workbook.__dict__)
workbook.store(tempfile.mkstemp()[1])
"""
XLSXWRITER_HINT = (
    "pynox: xlsxwriter sets the times of the temporary files it builds a workbook from, "
    "which the sandbox never allows, and there is nothing to grant; have it build the "
    "workbook in memory: xlsxwriter.Workbook(path, {'in_memory': True}), or from pandas "
    "to_excel(path, engine_kwargs={'options': {'in_memory': True}}) (ExcelWriter takes the "
    "same engine_kwargs)"
)


def test_xlsxwriters_temporary_files_are_told_to_stay_in_memory(project: Path) -> None:
    """Not the metadata hint's shutil.copyfile, which the program never called."""
    refused = pynox("-c", XLSXWRITER_UTIME, cwd=project)
    assert refused.returncode == 1
    assert hint_line(refused.stderr) == XLSXWRITER_HINT


EXCEL = """
import pandas as pd
pd.read_csv("data/sales.csv").to_excel("out/sales.xlsx", index=False{options})
print("done")
"""


def test_pandas_to_excel_through_xlsxwriter_follows_its_hint(project: Path) -> None:
    """pandas writes .xlsx through xlsxwriter wherever it is installed."""
    grants = [*_package("xlsxwriter"), "--allow-read=data", "--allow-write=out"]
    refused = pynox(*grants, "-c", EXCEL.format(options=""), cwd=project, timeout=120)
    assert refused.returncode == 1
    assert hint_line(refused.stderr) == XLSXWRITER_HINT
    in_memory = ", engine_kwargs={'options': {'in_memory': True}}"
    done = pynox(*grants, "-c", EXCEL.format(options=in_memory), cwd=project, timeout=120)
    assert (done.returncode, done.stdout) == (0, b"done\n"), done.stderr
    assert (project / "out" / "sales.xlsx").stat().st_size > 0


# An ORM's own error, raised from SQLite's as SQLAlchemy raises it.
WRAPPED_SQLITE = """
import sqlite3
class OperationalError(Exception): pass
try:
    sqlite3.connect("out/sales.db").execute("create table sales (amount)")
except sqlite3.OperationalError as error:
    raise OperationalError(f"(sqlite3.OperationalError) {error}") from error
print("done")
"""


def test_sqlites_error_raised_from_by_a_library_is_hinted(project: Path) -> None:
    out = project / "out"
    assert _follow_hints(project, WRAPPED_SQLITE, []) == [
        f"pynox: the program reads back what it writes in {out}; grant both with "
        f"--allow-read={out} --allow-write={out}"
    ]


SQLALCHEMY = """
from sqlalchemy import create_engine, text
engine = create_engine("sqlite:///out/sales.db")
with engine.begin() as connection:
    connection.execute(text("create table sales (region text, amount int)"))
    connection.execute(text("insert into sales values ('north', 70)"))
    print(connection.execute(text("select sum(amount) from sales")).scalar(), "done")
"""


def test_a_sqlalchemy_database_follows_its_hints(project: Path) -> None:
    out = project / "out"
    assert _follow_hints(project, SQLALCHEMY, [*_package("sqlalchemy"), "--allow-write=out"]) == [
        f"pynox: reading {out} is not allowed; grant it with --allow-read={out}"
    ]


# What h5py does to make a file, and how HDF5 words its refusal: no filename for Python,
# the flags of the open() in hex.
H5PY_CREATE = """
import os
flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC
try:
    os.close(os.open("out/data.h5", flags, 0o666))
except PermissionError:
    raise PermissionError(13, "Unable to synchronously create file (unable to open file: "
        "name = 'out/data.h5', errno = 13, error message = 'Permission denied', "
        f"flags = 13, o_flags = {flags:x})") from None
print("done")
"""


def test_a_file_h5py_makes_is_told_to_be_read_back(project: Path) -> None:
    """HDF5 opens a file it makes for reading too: the folder needs both grants."""
    out = project / "out"
    assert _follow_hints(project, H5PY_CREATE, ["--allow-write=out"]) == [
        f"pynox: reading {out} is not allowed; grant it with --allow-read={out}"
    ]
    (out / "data.h5").unlink()
    assert _follow_hints(project, H5PY_CREATE, []) == [
        f"pynox: the program reads back what it writes in {out}; grant both with "
        f"--allow-read={out} --allow-write={out}"
    ]


H5PY = """
import h5py, numpy as np
with h5py.File("out/sales.h5", "w") as file:
    file.create_dataset("amount", data=np.array([70, 80, 50]))
with h5py.File("out/sales.h5", "r") as file:
    print(int(file["amount"][:].sum()), "done")
"""


def test_an_hdf5_file_made_and_read_follows_its_hint(project: Path) -> None:
    out = project / "out"
    assert _follow_hints(project, H5PY, [*_package("h5py"), "--allow-write=out"]) == [
        f"pynox: reading {out} is not allowed; grant it with --allow-read={out}"
    ]


# python-docx's error, after zipfile.is_zipfile() passed over the refusal: the same words
# for a file that is missing or no package at all.
DOCX_NOT_FOUND = """
import zipfile
class PackageNotFoundError(Exception): pass
if not zipfile.is_zipfile("PATH"):
    raise PackageNotFoundError("Package not found at 'PATH'")
"""


def test_a_docx_package_not_found_is_hinted_only_when_refused(project: Path) -> None:
    (project / "data" / "report.docx").write_bytes(b"no package")
    report = project / "data" / "report.docx"
    refused = pynox("-c", DOCX_NOT_FOUND.replace("PATH", "data/report.docx"), cwd=project)
    assert refused.returncode == 1
    assert hint_line(refused.stderr) == (
        f"pynox: reading {report} is not allowed; grant it with --allow-read={report}"
    )
    # Readable, or missing: python would fail alike, and no grant would help.
    for path in ("data/report.docx", "data/missing.docx"):
        code = DOCX_NOT_FOUND.replace("PATH", path)
        failed = pynox("--allow-read=data", "-c", code, cwd=project)
        assert failed.returncode == 1 and b"pynox:" not in failed.stderr, failed.stderr


DOCX = """
from docx import Document
document = Document()
document.add_paragraph("Sales went up.")
document.save("out/report.docx")
print(Document("out/report.docx").paragraphs[0].text, "done")
"""


def test_a_docx_written_and_read_back_follows_its_hint(project: Path) -> None:
    out = project / "out"
    assert _follow_hints(project, DOCX, [*_package("docx"), "--allow-write=out"]) == [
        f"pynox: reading {out} is not allowed; grant it with --allow-read={out}"
    ]


# cv2.imread() as OpenCV reads a file: None, and not a word, when it cannot open it.
OPENCV_READ = """
import sys, types
sys.modules.setdefault("cv2", types.ModuleType("cv2"))
def imread(path):
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return None
image = imread("data/sales.csv")
print(image.count(b","), "done")
"""


def test_a_file_opencv_read_as_nothing_is_hinted(project: Path) -> None:
    """The program fails later, on None: the file its frame names that cannot be read is
    the one to grant. Without OpenCV, None is the program's own: no hint, as before."""
    sales = project / "data" / "sales.csv"
    assert _follow_hints(project, OPENCV_READ, []) == [
        f"pynox: reading {sales} is not allowed; grant it with --allow-read={sales}"
    ]
    without = pynox("-c", OPENCV_READ.replace("sys.modules.setdefault", "dict"), cwd=project)
    assert without.returncode == 1 and b"pynox:" not in without.stderr, without.stderr


OPENCV = """
import cv2
image = cv2.imread("data/photo.png")
cv2.imwrite("out/gray.png", cv2.cvtColor(image, cv2.COLOR_BGR2GRAY))
print(cv2.imread("out/gray.png").shape, "done")
"""


def test_an_image_opencv_reads_and_writes_follows_its_hints(project: Path) -> None:
    grants = [*_package("cv2"), "--allow-write=out"]
    code = "import cv2, numpy as np\ncv2.imwrite('data/photo.png', np.zeros((4, 4, 3), 'uint8'))\n"
    assert pynox(*grants, "--allow-write=data", "-c", code, cwd=project).returncode == 0
    photo, out = project / "data" / "photo.png", project / "out"
    assert _follow_hints(project, OPENCV, grants) == [
        f"pynox: reading {photo} is not allowed; grant it with --allow-read={photo}",
        f"pynox: reading {out} is not allowed; grant it with --allow-read={out}",
    ]


# A file made by compiled code's own open() (netCDF4's), which raises no audit event, and
# the PermissionError its Cython source turns a refusal into, with the file's name.
NATIVE_CREATE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.open(b"out/temps.nc", os.O_WRONLY | os.O_CREAT, 0o644)
if fd < 0:
    number = ctypes.get_errno()
    raise PermissionError(number, os.strerror(number), "out/temps.nc")
os.close(fd)
print("done")
"""


def test_a_file_native_code_was_refused_making_names_its_folder(project: Path) -> None:
    """Not reading the file, which is not there to grant."""
    out = project / "out"
    cython = f"exec(compile({NATIVE_CREATE!r}, 'netcdf.pyx', 'exec'))"
    assert _follow_hints(project, cython, []) == [
        f"pynox: changing the entries of {out} is not allowed; grant it with --allow-write={out}"
    ]


NETCDF = """
import netCDF4
with netCDF4.Dataset("out/temps.nc", "w") as data:
    data.createDimension("day", 2)
    data.createVariable("temp", "f8", ("day",))[:] = [21.5, 23.0]
print("done")
"""


def test_a_netcdf_file_made_follows_its_hints(project: Path) -> None:
    out = project / "out"
    assert _follow_hints(project, NETCDF, _package("netCDF4")) == [
        f"pynox: changing the entries of {out} is not allowed; grant it with --allow-write={out}",
        f"pynox: reading {out} is not allowed; grant it with --allow-read={out}",
    ]
