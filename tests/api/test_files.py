"""run(files=...) and Result.files: a CSV in, a report out, with no path granted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pynox.api.pool import Pool
from pynox.api.result import Result
from pynox.limits import MAX_FILES_IN_BYTES

ANALYSIS = """\
import csv
from pathlib import Path
rows = list(csv.DictReader(open(Path.home() / "sales.csv")))
total = sum(int(row["amount"]) for row in rows)
(Path.home() / "out" / "report.md").write_text(f"# Sales\\n\\ntotal: {total}\\n")
print(len(rows), "rows")
"""


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    with Pool(workers=1) as pool:
        yield pool


def test_a_csv_in_and_a_report_out(pool: Pool) -> None:
    csv = b"item,amount\nlamp,3\ndesk,4\n"
    r = pool.run(ANALYSIS, files={"sales.csv": csv})
    assert r.ok, r.text
    assert r.files == {"report.md": b"# Sales\n\ntotal: 7\n"} and r.files_left_out == []
    assert r.policy is not None and r.policy["allow_read"] == []
    assert r.text == "2 rows\n[files returned: out/report.md (18 bytes)]"


def test_what_is_left_out_is_in_the_text(pool: Pool) -> None:
    r = pool.run("import os\nos.mkfifo(os.environ['HOME'] + '/out/pipe')")
    assert r.files == {} and r.files_left_out == ["pipe: not a regular file"]
    assert r.text == "[files not returned: pipe: not a regular file]"


def test_session_steps_take_and_return_files(pool: Pool) -> None:
    with pool.session() as session:
        step = "from pathlib import Path\nn = Path.home().joinpath('n.txt').read_text()\n"
        step += "Path.home().joinpath('out', 'echo.txt').write_text(n * 2)"
        assert session.run(step, files={"n.txt": b"ab"}).files == {"echo.txt": b"abab"}
        assert session.run("print(n)").files == {}
        assert session.run(step, files={"n.txt": b"c"}).files == {"echo.txt": b"cc"}


def test_any_bytes_like_view_is_handed_in(pool: Pool) -> None:
    """A memoryview with strides is not one contiguous buffer; its bytes go all the same."""
    files = {"a.bin": memoryview(b"abcd")[::2], "b.bin": bytearray(b"xy")}
    read = "from pathlib import Path\nprint(Path('a.bin').read_bytes(), Path('b.bin').read_bytes())"
    r = pool.run(f"import os\nos.chdir(os.environ['HOME'])\n{read}", files=files)
    assert (r.exit, r.stdout) == (0, "b'ac' b'xy'\n")


def test_bad_files_are_refused_before_sending(pool: Pool) -> None:
    with pytest.raises(ValueError, match=r"files name '\.\./x' has an empty"):
        pool.run("pass", files={"../x": b""})
    with pytest.raises(TypeError, match=r"files\['a'\] must be bytes, not str"):
        pool.run("pass", files={"a": "text"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="bytes a run may be handed"):
        pool.run("pass", files={"a": bytes(MAX_FILES_IN_BYTES + 1)})
    with pytest.raises(TypeError, match="session.run"):
        pool.session(files={"a": b""})  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="a tool takes no files"):
        pool.tool(files={"a": b""})  # type: ignore[call-arg]


def test_result_from_json_skips_what_is_not_base64() -> None:
    r = Result.from_json({"exit": 0, "files": {"a": "eA==", "b": "??", "c": 3}})
    assert r.files == {"a": b"x"}
