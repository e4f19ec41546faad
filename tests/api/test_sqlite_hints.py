"""SQLite databases opened through the API: the hint names the grant, and following it
works, however the program names the database."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from pynox.api.pool import Pool


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    with Pool(workers=1) as pool:
        yield pool


def _database(folder: Path) -> Path:
    path = folder / "notes.db"
    db = sqlite3.connect(path)
    db.execute("create table notes(body text)")
    db.execute("insert into notes values ('first')")
    db.commit()
    db.close()
    return path


@pytest.mark.parametrize(
    "uri", ["file:{}?mode=ro", "file://{}?mode=ro", "file://localhost{}", "file:{}#part"]
)
def test_a_database_opened_read_only_by_uri(pool: Pool, tmp_path: Path, uri: str) -> None:
    """connect("file:...?mode=ro", uri=True), the usual way to only read a database."""
    path = os.path.realpath(_database(tmp_path))
    code = (
        "import sqlite3\n"
        f"db = sqlite3.connect({uri.format(path)!r}, uri=True)\n"
        "print(db.execute('select body from notes').fetchall())"
    )
    failed = pool.run(code)
    assert failed.error is not None
    assert failed.error["hint"] == (
        f"reading {path} is not allowed; grant it with allow_read=[{path!r}]"
    )
    followed = pool.run(code, allow_read=[path])
    assert followed.ok and followed.stdout == "[('first',)]\n", followed.text


def test_a_database_whose_uri_escapes_a_byte_that_is_not_utf8(pool: Pool, tmp_path: Path) -> None:
    """%E9 in a URI is the byte SQLite opens, not U+FFFD: the hint names the file that
    is there (its name as os.fsdecode spells it), never a folder above it."""
    folder = os.fsencode(tmp_path.resolve()) + b"/caf\xe9"
    os.mkdir(folder)
    path = os.fsdecode(_database(Path(os.fsdecode(folder))))
    uri = f"file:{tmp_path.resolve()}/caf%E9/notes.db?mode=ro"
    query = "execute('select 1').fetchall()"
    code = f"import sqlite3\nprint(sqlite3.connect({uri!r}, uri=True).{query})"
    failed = pool.run(code)
    assert failed.error is not None
    assert failed.error["hint"] == (
        f"reading {path!r} is not allowed; grant it with allow_read=[{path!r}]"
    )
    followed = pool.run(code, allow_read=[path])
    assert followed.ok and followed.stdout == "[(1,)]\n", followed.text


def test_a_database_in_memory_by_uri_gets_no_hint(pool: Pool) -> None:
    result = pool.run(
        "import sqlite3\nsqlite3.connect('file:x?mode=memory', uri=True).execute('select')"
    )
    assert result.error is not None and result.error["hint"] is None
