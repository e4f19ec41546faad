"""What must keep working inside the sandbox: threads, asyncio, SQLite, temporary files,
randomness, time zones, TLS contexts, the usual imports, and flushing at exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.commands import python, run
from support.probes import MODES, World, make_world, outcomes, run_probe

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


WORKING_PROBE = """
import asyncio, os, random, socket, sqlite3, tempfile, threading, time
rw = W["rw"]


def threads():
    out = []
    ts = [threading.Thread(target=out.append, args=(i,)) for i in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return sorted(out)


async def echo():
    a, b = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=a)
    r2, w2 = await asyncio.open_connection(sock=b)
    writer.write(b"ping\\n")
    await writer.drain()
    line = await r2.readline()
    writer.close()
    w2.close()
    results = await asyncio.gather(asyncio.sleep(0.01, "x"), asyncio.sleep(0, "y"))
    return line, results


def sqlite_file():
    path = os.path.join(rw, "db.sqlite3")
    con = sqlite3.connect(path)
    con.execute("create table t (x)")
    con.executemany("insert into t values (?)", [(1,), (2,), (3,)])
    con.commit()
    con.close()
    con = sqlite3.connect(path)
    total = con.execute("select sum(x) from t").fetchone()[0]
    con.close()
    return total


def temp():
    fd, path = tempfile.mkstemp(dir=rw, suffix=".tmp")
    os.write(fd, b"temp data")
    os.close(fd)
    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    with tempfile.TemporaryDirectory(dir=rw) as d:
        open(os.path.join(d, "f"), "w").write("x")
    return data


def devnull():
    with open(os.devnull, "w") as f:
        f.write("discarded")
    with open(os.devnull, "rb") as f:
        return f.read()


def output_file():
    with open(os.path.join(rw, "result.txt"), "w") as f:
        f.write("written inside, read outside\\n")
    return sorted(os.listdir(rw))


def imports():
    names = ["json", "csv", "decimal", "ssl", "hashlib", "zlib", "lzma", "bz2", "ctypes",
             "sqlite3", "zoneinfo", "asyncio", "multiprocessing", "unicodedata", "uuid",
             "xml.etree.ElementTree", "email", "http.client", "urllib.request", "logging"]
    for name in names:
        __import__(name)
    return len(names)


attempt("threads", threads)
attempt("asyncio-socketpair", asyncio.run, echo())
attempt("sqlite-file", sqlite_file)
attempt("urandom", lambda: len(os.urandom(32)))
attempt("random", lambda: random.Random(7).randint(0, 10**6) == random.Random(7).randint(0, 10**6))
attempt("system-random", lambda: 0 <= random.SystemRandom().random() < 1)
attempt("tempfile-mkstemp", temp)
attempt("dev-null", devnull)
attempt("cpu-count", lambda: (os.cpu_count() or 0) >= 1)
attempt("localtime", lambda: time.localtime().tm_year >= 2024)
attempt("zoneinfo", lambda: str(__import__("zoneinfo").ZoneInfo("Europe/Paris")))
attempt("ssl-context", lambda: type(__import__("ssl").create_default_context()).__name__)
attempt("hashlib", lambda: __import__("hashlib").sha256(b"").hexdigest()[:8])
attempt("imports", imports)
attempt("output-file", output_file)
attempt("stdout-isatty", sys.stdout.isatty)
"""

WORKING_EXPECTED: list[tuple[str, str]] = [
    ("threads", "ok [0, 1, 2, 3, 4, 5, 6, 7]"),
    ("asyncio-socketpair", "ok (b'ping\\n', ['x', 'y'])"),
    ("sqlite-file", "ok 6"),
    ("urandom", "ok 32"),
    ("random", "ok True"),
    ("system-random", "ok True"),
    ("tempfile-mkstemp", "ok b'temp data'"),
    ("dev-null", "ok b''"),
    ("cpu-count", "ok True"),
    ("localtime", "ok True"),
    ("zoneinfo", "ok 'Europe/Paris'"),
    ("ssl-context", "ok 'SSLContext'"),
    ("hashlib", "ok 'e3b0c442'"),
    ("imports", "ok 20"),
    ("output-file", "ok ['db.sqlite3', 'result.txt']"),
    ("stdout-isatty", "ok False"),
]


@pytest.fixture(scope="module")
def working_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[World, subprocess.CompletedProcess[bytes]]:
    w = make_world(tmp_path_factory.mktemp("working"))
    return w, run_probe(w, WORKING_PROBE, f"--allow-read={w.rw}", f"--allow-write={w.rw}")


def test_working_probe_exits_cleanly(working_run) -> None:  # type: ignore[no-untyped-def]
    w, proc = working_run
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stderr == b""
    assert (w.rw / "result.txt").read_text() == "written inside, read outside\n"
    assert sorted(os.listdir(w.rw)) == ["db.sqlite3", "result.txt"]


@pytest.mark.parametrize(
    ("attempt", "expected"), WORKING_EXPECTED, ids=[a for a, _ in WORKING_EXPECTED]
)
def test_keeps_working(working_run, attempt: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    assert outcomes(working_run[1]).get(attempt) == expected


@pytest.mark.parametrize("mode", list(MODES))
def test_unclosed_file_in_a_granted_dir_is_flushed_at_exit(tmp_path: Path, mode: str) -> None:
    """python flushes a file the program never closed; its data must not be lost."""
    script = tmp_path / "app.py"
    out = tmp_path / "out"
    out.mkdir()
    script.write_text(
        "f = open('out/result.txt', 'w')\n"
        "f.write('line written without close()\\n' * 3)\n"
        "def helper():\n    return f\n"
    )
    ref = python(str(script), cwd=tmp_path)
    expected = (out / "result.txt").read_text()
    assert ref.returncode == 0 and expected == "line written without close()\n" * 3
    (out / "result.txt").unlink()
    got = run([*MODES[mode], "--allow-write=out", str(script)], cwd=tmp_path)
    assert (got.returncode, got.stdout, got.stderr) == (0, b"", b"")
    assert (out / "result.txt").read_text() == expected
