"""Files in and out through the protocol: a request's "files" land in the run's scratch
directory before its code starts; what the code writes into out/ there comes back in the
result, bounded, without following anything the program planted."""

from __future__ import annotations

import base64
import io
import json
import os
import zipfile
from pathlib import Path

import pytest
from support.commands import limiting_file_size
from support.pool_client import PoolClient
from support.pool_requests import serves

from pynox.limits import MAX_FILES_IN, MAX_FILES_IN_BYTES, MAX_FILES_OUT, MAX_FILES_OUT_BYTES
from pynox.pool.files import PAST_BOUNDS_ADVICE


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def files_of(result: dict) -> dict[str, bytes]:
    return {name: base64.b64decode(data) for name, data in result.get("files", {}).items()}


REPORT = """\
import csv, os
home = os.environ["HOME"]
rows = list(csv.reader(open(os.path.join(home, "data/sales.csv"))))
total = sum(int(amount) for _, amount in rows[1:])
with open(os.path.join(home, "out", "report.txt"), "w") as report:
    report.write(f"total {total}\\n")
os.makedirs(os.path.join(home, "out", "charts"))
open(os.path.join(home, "out", "charts", "bar.bin"), "wb").write(bytes(range(256)))
print(sorted(os.listdir(home)))
"""


def test_a_csv_in_and_a_report_out(pool: PoolClient) -> None:
    csv = b"item,amount\nlamp,3\ndesk,4\n"
    result = pool.run({"id": "report", "code": REPORT, "files": {"data/sales.csv": b64(csv)}})
    assert result["exit"] == 0, result
    assert result["stdout"] == "['data', 'out']\n"
    assert files_of(result) == {"report.txt": b"total 7\n", "charts/bar.bin": bytes(range(256))}
    assert list(result["files"]) == ["charts/bar.bin", "report.txt"]  # sorted
    assert result["files_left_out"] == []


def test_a_run_that_writes_nothing_has_no_files_fields(pool: PoolClient) -> None:
    result = pool.run({"id": "quiet", "code": "print(1)"})
    assert "files" not in result and "files_left_out" not in result


def test_session_files_per_step(pool: PoolClient) -> None:
    step = "import os\nhome = os.environ['HOME']\n"
    first = pool.run(
        {
            "id": "s1",
            "session": "files",
            "files": {"in.txt": b64(b"one")},
            "code": step + "open(home + '/out/a.txt', 'w').write(open(home + '/in.txt').read())",
        }
    )
    assert files_of(first) == {"a.txt": b"one"}
    # out/ was emptied: the next step returns only what it writes; its files replace
    # those of the same name.
    second = pool.run(
        {
            "id": "s2",
            "session": "files",
            "files": {"in.txt": b64(b"two")},
            "code": step + "print(os.listdir(home + '/out'), open(home + '/in.txt').read())",
        }
    )
    assert second["stdout"] == "[] two\n" and "files" not in second
    pool.send({"id": "close-files", "close_session": "files"})
    pool.wait_for(lambda: "close-files" in pool.results)


def test_a_session_step_whose_files_cannot_be_placed_is_refused_alone(pool: PoolClient) -> None:
    made = pool.run(
        {"id": "d1", "session": "dirs", "code": "import os\nos.mkdir(os.environ['HOME'] + '/x')"}
    )
    assert made["exit"] == 0
    refused = pool.run({"id": "d2", "session": "dirs", "code": "pass", "files": {"x": b64(b"")}})
    assert refused["exit"] == 125 and "cannot place file 'x'" in refused["error"]["message"]
    after = pool.run({"id": "d3", "session": "dirs", "code": "print('alive')"})
    assert after["stdout"] == "alive\n" and after["session"]["step"] == 2
    pool.send({"id": "close-dirs", "close_session": "dirs"})
    pool.wait_for(lambda: "close-dirs" in pool.results)


def test_a_refused_step_leaves_the_sessions_files_as_they_were(pool: PoolClient) -> None:
    """Files are placed all or none: a step refused for one name replaced no other file and
    made no folder."""
    work = (
        "import os\nh = os.environ['HOME']\nopen(h + '/notes.txt', 'w').write('an hour of work')\n"
    )
    made = pool.run({"id": "w1", "session": "work", "code": work + "open(h + '/sub', 'w')"})
    assert made["exit"] == 0, made
    new = {"notes.txt": b64(b"new notes"), "new/folder/a": b64(b"a"), "sub/x": b64(b"y")}
    refused = pool.run({"id": "w2", "session": "work", "code": "print('ran')", "files": new})
    assert refused["exit"] == 125 and "cannot place file 'sub/x'" in refused["error"]["message"]
    look = (
        "import os\nh = os.environ['HOME']\n"
        "print(sorted(os.listdir(h)), open(h + '/notes.txt').read())"
    )
    after = pool.run({"id": "w3", "session": "work", "code": look})
    assert after["stdout"] == "['notes.txt', 'out', 'sub'] an hour of work\n", after
    pool.send({"id": "close-work", "close_session": "work"})
    pool.wait_for(lambda: "close-work" in pool.results)


# --- hostile programs ----------------------------------------------------------------------


SPIN_OUT = """\
import os, threading
def spin():
    path = os.environ["HOME"] + "/out"
    while True:
        try:
            os.mkdir(path)
        except OSError:
            pass
threading.Thread(target=spin, daemon=True).start()
"""


def test_a_session_that_makes_out_again_while_the_pool_empties_it(fresh: PoolClient) -> None:
    """A thread of the session's program makes out/ over and over, racing the pool that
    moves out/ away and makes a new one after each step: each step still returns what
    it wrote, and the pool keeps serving."""
    started = fresh.run({"id": "spin", "session": "spinning", "code": SPIN_OUT})
    assert started["exit"] == 0, started
    for i in range(40):
        written = fresh.run(
            {
                "id": f"spin-{i}",
                "session": "spinning",
                "code": f"import os\nopen(os.environ['HOME'] + '/out/{i}.txt', 'w').write('{i}')",
            }
        )
        assert written["exit"] == 0, written
        assert files_of(written) == {f"{i}.txt": str(i).encode()}, written
        assert written["session"]["step"] == i + 2 and not written["session"]["restarted"]
    fresh.send({"id": "close-spinning", "close_session": "spinning"})
    fresh.wait_for(lambda: "close-spinning" in fresh.results)
    serves(fresh)


def run_hostile(pool: PoolClient, request_id: str, code: str) -> dict:
    prelude = "import os\nhome = os.environ['HOME']\nout = home + '/out/'\n"
    result = pool.run({"id": request_id, "code": prelude + code})
    assert result["exit"] == 0, result
    return result


@pytest.mark.parametrize("target", ["/etc", "/proc/self", "/proc/1/root/etc"])
def test_out_as_a_link_is_never_followed(pool: PoolClient, target: str) -> None:
    result = run_hostile(pool, "link-" + target, f"os.rmdir(out)\nos.symlink({target!r}, out[:-1])")
    assert result["files"] == {}
    assert result["files_left_out"] == ["out: not a directory (a link is never followed)"]


def test_an_empty_directory_out_links_to_is_left_alone(pool: PoolClient, tmp_path: Path) -> None:
    """An empty out/ goes with its run; one that is a link takes nothing with it."""
    empty = tmp_path / "empty"
    empty.mkdir()
    code = f"os.rmdir(out)\nos.symlink({str(empty)!r}, out[:-1])"
    result = run_hostile(pool, "link-empty", code)
    assert result["files_left_out"] == ["out: not a directory (a link is never followed)"]
    assert empty.is_dir()


def test_links_fifos_sparse_files_and_hard_links_are_left_out(
    pool: PoolClient, tmp_path: Path
) -> None:
    code = (
        "os.mkfifo(out + 'fifo')\n"
        "os.symlink('/etc/passwd', out + 'passwd')\n"
        "os.symlink('/etc', out + 'etc')\n"
        "with open(out + 'sparse', 'wb') as f:\n    f.truncate(1 << 30)\n"
        "open(home + '/kept', 'w').write('x')\n"
        "os.link(home + '/kept', out + 'hard')\n"
        "open(out + 'ok', 'w').write('fine')\n"
    )
    result = run_hostile(pool, "odd-files", code)
    assert files_of(result) == {"ok": b"fine"}
    *left_out, advice = result["files_left_out"]
    assert advice == PAST_BOUNDS_ADVICE  # the sparse file passed the bytes a result carries
    reasons = dict(line.split(": ", 1) for line in left_out)
    assert set(reasons) == {"etc", "fifo", "hard", "passwd", "sparse"}
    assert reasons["sparse"].startswith("1073741824 bytes, past the")
    assert reasons["hard"] == "linked from elsewhere too (a hard link)"


def test_thousands_of_files_are_bounded(pool: PoolClient) -> None:
    code = "for i in range(3000):\n    open(out + f'{i:05}', 'w').write('x' * 10)\n"
    result = run_hostile(pool, "many", code)
    assert len(result["files"]) == MAX_FILES_OUT
    assert list(result["files"])[:2] == ["00000", "00001"]
    assert len(result["files_left_out"]) == 22
    assert result["files_left_out"][0] == f"{MAX_FILES_OUT:05}: past the 100 files a result carries"
    assert result["files_left_out"][-2] == f"and {3000 - MAX_FILES_OUT - 20} more entries"
    assert result["files_left_out"][-1] == PAST_BOUNDS_ADVICE
    # Following it: the same files in one compressed archive all come back.
    packed = (
        "import zipfile\n"
        "with zipfile.ZipFile(out + 'all.zip', 'w', zipfile.ZIP_DEFLATED) as z:\n"
        "    for i in range(3000):\n        z.writestr(f'{i:05}', 'x' * 10)\n"
    )
    followed = run_hostile(pool, "many-packed", packed)
    assert "files_left_out" not in followed or followed["files_left_out"] == [], followed
    with zipfile.ZipFile(io.BytesIO(files_of(followed)["all.zip"])) as archive:
        assert len(archive.namelist()) == 3000


def test_what_is_no_file_is_named_so_past_the_count_too(pool: PoolClient) -> None:
    """A link or a FIFO after the 100th file is left out for what it is: fewer files, which
    the advice for files past the count says to write, would not bring it back."""
    code = (
        f"for i in range({MAX_FILES_OUT + 1}):\n    open(out + f'f{{i:03}}', 'w').write('x')\n"
        "os.symlink('/etc/passwd', out + 'link')\n"
        "os.mkfifo(out + 'pipe')\n"
    )
    result = run_hostile(pool, "count-then-odd", code)
    assert len(result["files"]) == MAX_FILES_OUT
    *left_out, advice = result["files_left_out"]
    assert left_out == [
        f"f{MAX_FILES_OUT:03}: past the {MAX_FILES_OUT} files a result carries",
        "link: not a regular file (a link, say)",
        "pipe: not a regular file",
    ]
    assert advice == PAST_BOUNDS_ADVICE


def test_bytes_out_are_bounded_in_total(pool: PoolClient) -> None:
    half = MAX_FILES_OUT_BYTES // 2 + 1
    code = f"for name in 'abc':\n    open(out + name, 'wb').write(b'x' * {half})\n"
    result = run_hostile(pool, "big", code)
    assert list(result["files"]) == ["a"]
    *left_out, advice = result["files_left_out"]
    assert [line.split(":")[0] for line in left_out] == ["b", "c"]
    assert advice == PAST_BOUNDS_ADVICE


def test_names_that_are_not_utf8_are_left_out(pool: PoolClient) -> None:
    """Each is named apart, its bytes that are not UTF-8 as python's bytes show them:
    as U+FFFD, two names would read alike."""
    code = (
        "for name in (b'bad\\xff', b'bad\\xfe'):\n"
        "    open(os.fsencode(out) + name, 'w').write('x')\n"
        "open(out + 'good', 'w').write('y')"
    )
    result = run_hostile(pool, "names", code)
    assert files_of(result) == {"good": b"y"}
    assert result["files_left_out"] == [
        "bad\\xfe: its name is not UTF-8",
        "bad\\xff: its name is not UTF-8",
    ]
    json.dumps(result)  # the result stays plain JSON


def test_deep_directories_are_bounded(pool: PoolClient) -> None:
    code = "os.makedirs(out + '/'.join('d' * 40))\nopen(out + 'top', 'w').write('t')"
    result = run_hostile(pool, "deep", code)
    assert files_of(result) == {"top": b"t"}
    assert len(result["files_left_out"]) == 1
    assert "nested deeper than" in result["files_left_out"][0]


def test_a_planted_link_in_a_session_cannot_redirect_files_in(
    pool: PoolClient, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    plant = (
        "import os\nhome = os.environ['HOME']\n"
        f"os.symlink({str(victim)!r}, home + '/data.csv')\n"
        f"os.symlink({str(tmp_path)!r}, home + '/sub')\n"
    )
    assert pool.run({"id": "p1", "session": "plant", "code": plant})["exit"] == 0
    replaced = pool.run(
        {
            "id": "p2",
            "session": "plant",
            "files": {"data.csv": b64(b"new")},
            "code": "import os\nh = os.environ['HOME']\n"
            "print(os.path.islink(h + '/data.csv'), open(h + '/data.csv').read())",
        }
    )
    assert replaced["stdout"] == "False new\n"  # the link was replaced, not followed
    through = pool.run(
        {"id": "p3", "session": "plant", "code": "pass", "files": {"sub/x": b64(b"evil")}}
    )
    assert through["exit"] == 125 and "cannot place file 'sub/x'" in through["error"]["message"]
    assert victim.read_text() == "untouched" and not (tmp_path / "x").exists()
    pool.send({"id": "close-plant", "close_session": "plant"})
    pool.wait_for(lambda: "close-plant" in pool.results)


# --- requests ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"../x": "eA=="}, 'files name \'../x\' has an empty, "." or ".." component'),
        ({"a/./b": "eA=="}, "files name 'a/./b' has an empty"),
        ({"/etc/passwd": "eA=="}, "files name '/etc/passwd' is absolute"),
        ({"a\u0000b": "eA=="}, "contains a NUL character"),
        (
            {"caf\udce9": "eA=="},
            "files name 'caf\\udce9' is not valid Unicode: it holds a lone surrogate; give a "
            "name that UTF-8 can encode",
        ),
        ({"": "eA=="}, "files name '' is not a non-empty string"),
        (
            {"d/" + "x" * 256: "eA=="},
            "has a component longer than 255 bytes, the most a file system takes",
        ),
        ({"a": "not base64!"}, "files['a'] is not base64"),
        ({"a": 3}, "files['a'] must be a base64 string"),
        ([], "files must be an object"),
    ],
)
def test_bad_files_are_refused(pool: PoolClient, files: object, message: str) -> None:
    result = pool.run({"id": "bad", "code": "print('ran')", "files": files})
    assert result["exit"] == 125 and result["error"]["type"] == "RequestError"
    assert message in result["error"]["message"]
    assert result["stdout"] == ""


def test_a_name_given_twice_is_refused(pool: PoolClient) -> None:
    pool.send_raw(b'{"id": "twice", "code": "pass", "files": {"a": "eA==", "a": "eQ=="}}\n')
    result = pool.result("twice")
    assert result["exit"] == 125
    assert result["error"]["message"] == "files names 'a' more than once; give each file once"


def test_a_file_and_a_directory_of_one_name_are_refused(pool: PoolClient) -> None:
    result = pool.run({"id": "clash", "code": "pass", "files": {"a": "eA==", "a/b": "eA=="}})
    assert result["exit"] == 125
    assert "cannot place file 'a/b'" in result["error"]["message"]


def test_oversized_files_are_refused(pool: PoolClient) -> None:
    many = {f"f{i}": "" for i in range(MAX_FILES_IN + 1)}
    result = pool.run({"id": "many-in", "code": "pass", "files": many})
    assert f"more than the {MAX_FILES_IN} a request may hand in" in result["error"]["message"]
    chunk = b64(b"x" * (MAX_FILES_IN_BYTES // 2 + 3))
    result = pool.run({"id": "big-in", "code": "pass", "files": {"a": chunk, "b": chunk}})
    assert f"more than the {MAX_FILES_IN_BYTES} bytes" in result["error"]["message"]


def test_no_scratch_directory_is_left_by_refused_files(fresh: PoolClient) -> None:
    fresh.run({"id": "warm", "code": "pass"})
    result = fresh.run({"id": "clash", "code": "pass", "files": {"a": "eA==", "a/b": "eA=="}})
    assert result["exit"] == 125
    root = os.path.dirname(fresh.run({"id": "where", "code": "pass"})["policy"]["scratch"])
    # The pool keeps a few made ahead, and removes used ones when idle; the refused
    # request's directory, with its file "a", is gone at once.
    assert not any(os.path.exists(os.path.join(root, d, "a")) for d in os.listdir(root))


def test_files_with_no_room_are_refused_with_what_to_do() -> None:
    """A file the pool's file system has no room for: the error says so, not that its
    name is wrong, and the pool goes on."""
    with PoolClient(workers=1, launched_by=limiting_file_size(1 << 20)) as client:
        big = b64(b"x" * (2 << 20))
        result = client.run({"id": "big", "code": "pass", "files": {"data.bin": big}})
        assert result["exit"] == 125
        message = result["error"]["message"]
        assert "cannot place file 'data.bin'" in message
        assert "hand in fewer or smaller files" in message and "names" not in message
        serves(client)
