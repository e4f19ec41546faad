"""The pool's warm-up (`--warmup`, `[pool].warmup`): host code that runs once in the pool
server after its preloads and again in each spare while it waits for its request, with none of
its names, output or open files reaching a request."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from support.pool_client import PYNOX, PoolClient, clean_env
from support.pool_requests import assert_ok, code, new_id, write_config

PACKAGES = os.environ.get("PYNOX_TEST_PACKAGES")

# Counts its runs where a request can see them: on the sys module, which every child shares.
COUNTING = "import sys\nsys.pynox_warmups = getattr(sys, 'pynox_warmups', 0) + 1\n"
SHOW_COUNT = "import sys; print(getattr(sys, 'pynox_warmups', 0))"
# Time for a spare to get ready: one whose request is already there skips its warm-up.
SETTLE = 0.5


def _start_fails(*flags: str, cwd: str = "/") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [PYNOX, "pool", *flags],
        input=b"",
        capture_output=True,
        env=clean_env(),
        timeout=60,
        cwd=cwd,
    )


def test_the_warmup_runs_in_the_pool_and_again_in_the_spare_before_its_request() -> None:
    with PoolClient("--warmup", COUNTING, workers=1) as client:
        time.sleep(SETTLE)
        # Once in the pool server (inherited by the zygote), once in this spare.
        assert_ok(client.run({"id": new_id(), "code": SHOW_COUNT}), "2\n")
        time.sleep(SETTLE)
        # The next spare forks from the same zygote: its count starts from the server's too.
        assert_ok(client.run({"id": new_id(), "code": SHOW_COUNT}), "2\n")
        assert client.close() == 0


# Tries to start a program, and keeps where and how that went on the shared sys module.
STARTS_A_PROGRAM = code("""
    import subprocess, sys
    try:
        subprocess.run(["/bin/true"], check=True)
        seen = "ran"
    except OSError as exc:
        seen = type(exc).__name__
    sys.pynox_warmup_runs = getattr(sys, "pynox_warmup_runs", ()) + (seen,)
""")


def test_in_a_spare_the_warmup_may_not_start_a_program_and_the_request_runs() -> None:
    """The server's run is not filtered; a spare's runs under the part of the seccomp
    filter the zygote installed for every spare, so there it fails, quietly."""
    with PoolClient("--warmup", STARTS_A_PROGRAM, workers=1) as client:
        time.sleep(SETTLE)
        shown = "import sys; print(*sys.pynox_warmup_runs)"
        assert_ok(client.run({"id": new_id(), "code": shown}), "ran PermissionError\n")
        assert client.close() == 0


def test_a_spare_forked_for_a_waiting_request_skips_the_warmup() -> None:
    """In a busy pool, warming a spare up would only take CPU time from the requests
    that run meanwhile: the requests queued behind the first get spares that skip it."""
    with PoolClient("--warmup", COUNTING, workers=1) as client:
        time.sleep(SETTLE)
        ids = [new_id() for _ in range(3)]
        # The first runs long enough for a spare to warm up before the second may start.
        codes = ["import time; time.sleep(0.3)\n" + SHOW_COUNT, SHOW_COUNT, SHOW_COUNT]
        lines = b"".join(
            json.dumps({"id": i, "code": text}).encode() + b"\n"
            for i, text in zip(ids, codes, strict=True)
        )
        client.send_raw(lines)  # all at once: the second and third wait for spares
        outputs = [client.result(i)["stdout"] for i in ids]
        assert outputs == ["2\n", "1\n", "1\n"]
        time.sleep(SETTLE)
        # Idle again: the next spare warms up while it waits.
        assert_ok(client.run({"id": new_id(), "code": SHOW_COUNT}), "2\n")
        assert client.close() == 0


def test_without_a_warmup_nothing_runs() -> None:
    with PoolClient(workers=1) as client:
        assert_ok(client.run({"id": new_id(), "code": SHOW_COUNT}), "0\n")
        assert client.close() == 0


def test_the_warmups_names_are_not_the_requests() -> None:
    warmup = "secret = 42\ndef helper():\n    return 1\n"
    program = code("""
        import sys
        print(sorted(n for n in globals() if not n.startswith("__")))
        print(sorted(n for n in vars(sys.modules["__main__"]) if not n.startswith("__")))
    """)
    with PoolClient("--warmup", warmup, workers=1) as client:
        time.sleep(SETTLE)
        assert_ok(client.run({"id": new_id(), "code": program}), "['sys']\n['sys']\n")
        assert client.close() == 0


def test_what_the_warmup_prints_goes_to_the_pools_stderr_once() -> None:
    """The protocol stream holds only the pool's lines; the server's run shows its output on
    stderr once, and the spares' runs show theirs nowhere."""
    warmup = "import os, sys\nprint('from print')\nos.write(1, b'from fd 1\\n')\n"
    warmup += (
        "print('to stderr', file=sys.stderr)\nprint('to the first stdout', file=sys.__stdout__)\n"
    )
    with PoolClient("--warmup", warmup, workers=2) as client:
        for _ in range(4):
            time.sleep(SETTLE / 2)
            assert_ok(client.run({"id": new_id(), "code": "print(1)"}), "1\n")
        assert client.close() == 0
        assert all("event" in line or "id" in line for line in client.lines)
        stderr = client.stderr().decode()
    assert stderr.count("from print\n") == 1, stderr
    assert stderr.count("from fd 1\n") == 1, stderr
    assert stderr.count("to stderr\n") == 1, stderr
    assert stderr.count("to the first stdout\n") == 1, stderr


# Leaves a thread in the pool server that prints, through Python and through fd 1, until
# the pool ends: without a pause for its first half second, while the pool forks its
# zygote, so that the fork finds the thread holding sys.stdout's lock.
TICKING = code("""
    import os, threading, time
    def tick():
        busy_until = time.monotonic() + 0.5
        while True:
            print("tick", flush=True)
            os.write(1, b"tock\\n")
            if time.monotonic() > busy_until:
                time.sleep(0.005)
    threading.Thread(target=tick, daemon=True).start()
""")


def test_what_a_warmup_thread_prints_later_never_reaches_the_protocol_stream() -> None:
    """The thread prints while the pool serves, long after the warm-up returned: the
    client still reads the pool's lines alone. The zygote, forked while the thread held
    sys.stdout's lock, makes its standard streams anew: it would wait for that lock."""
    with PoolClient("--warmup", TICKING, workers=1) as client:
        for _ in range(4):
            time.sleep(0.05)
            assert_ok(client.run({"id": new_id(), "code": "print(1)"}), "1\n")
        assert client.close() == 0
        assert all("event" in line or "id" in line for line in client.lines)
        stderr = client.stderr().decode()
    assert stderr.count("tick\n") > 4 and stderr.count("tock\n") > 4, stderr


@pytest.mark.parametrize("workers", [1, 2])
def test_what_a_preloaded_module_prints_goes_to_the_pools_stderr_once(
    tmp_path: Path, workers: int
) -> None:
    """As with the warm-up: text a module prints as it is imported must not wait in the
    server's stdout buffer, to be written by every child into its request's output."""
    (tmp_path / "chatty.py").write_text(
        "import os, sys\nprint('from print')\nos.write(1, b'from fd 1\\n')\n"
        "print('to the first stdout', file=sys.__stdout__)\n"
    )
    with PoolClient("--package-dir", str(tmp_path), workers=workers, preload=["chatty"]) as client:
        for _ in range(3):
            result = client.run({"id": new_id(), "code": "print(1)"})
            assert_ok(result, "1\n")
            assert result["stdout_truncated"] is False
        assert client.close() == 0
        assert all("event" in line or "id" in line for line in client.lines)
        stderr = client.stderr().decode()
    for line in ("from print\n", "from fd 1\n", "to the first stdout\n"):
        assert stderr.count(line) == 1, stderr


def test_a_file_the_warmup_leaves_open_is_closed_before_the_request_runs(
    tmp_path: Path,
) -> None:
    """The warm-up runs unconfined; a descriptor it keeps must not hand a request a file
    its policy does not grant. (This one opens it in the spare's run only: the pool
    refuses a warm-up that leaves one open in its own run, see the next test.)"""
    secret = tmp_path / "secret.txt"
    secret.write_text("the-secret-text\n")
    warmup = COUNTING + f"if sys.pynox_warmups == 2:\n    sys.pynox_kept = open({str(secret)!r})\n"
    program = code("""
        import os, sys
        found = []
        for fd in range(256):
            try:
                found.append(os.pread(fd, 100, 0))
            except OSError:
                pass
        print(any(b"the-secret-text" in data for data in found))
        try:
            sys.pynox_kept.read()
        except OSError as exc:
            print(type(exc).__name__)
    """)
    with PoolClient("--warmup", warmup, workers=1) as client:
        time.sleep(SETTLE)
        assert_ok(client.run({"id": new_id(), "code": program}), "False\nOSError\n")
        # Nor can it open the file by name: the warm-up grants nothing.
        result = client.run({"id": new_id(), "code": f"open({str(secret)!r})"})
        assert result["exit"] == 1
        assert "PermissionError" in result["stderr"]
        assert client.close() == 0


def test_a_warmup_that_leaves_a_file_open_stops_the_pool_naming_it(tmp_path: Path) -> None:
    kept = tmp_path / "kept.log"
    done = _start_fails("--warmup", f"import sys\nsys.pynox_kept = open({str(kept)!r}, 'w')")
    assert done.returncode != 0
    assert done.stdout == b""
    assert done.stderr.decode().splitlines() == [
        f"pynox: the pool's warm-up code leaves {kept} open, which each child closes before"
        " its request runs, so a request would find it closed; close it in the warm-up, or"
        " leave out the step that opens it"
    ]
    # Closed in the warm-up, it starts.
    closing = f"with open({str(kept)!r}, 'w') as log:\n    log.write('ready')\n"
    with PoolClient("--warmup", closing, workers=1) as client:
        assert_ok(client.run({"id": new_id(), "code": "print(1)"}), "1\n")
        assert client.close() == 0


@pytest.mark.parametrize(
    "failure", ["AssertionError('only the first run passes')", "SystemExit(3)"]
)
def test_a_warmup_that_fails_in_a_spare_leaves_its_request_alone(failure: str) -> None:
    """It already ran in the pool server; a spare whose run fails is only less warm."""
    warmup = COUNTING + f"if sys.pynox_warmups > 1:\n    raise {failure}\n"
    with PoolClient("--warmup", warmup, workers=1) as client:
        for _ in range(2):
            time.sleep(SETTLE)
            assert_ok(client.run({"id": new_id(), "code": SHOW_COUNT}), "2\n")
        assert client.close() == 0
        assert b"only the first run passes" not in client.stderr()


def test_a_warmup_that_fails_stops_the_pool_with_one_sentence() -> None:
    done = _start_fails("--warmup", "import json\nraise ValueError('no data')")
    assert done.returncode != 0
    assert done.stdout == b""
    assert done.stderr.decode().splitlines() == [
        "pynox: the pool's warm-up code failed: ValueError('no data'); fix or remove it"
    ]


def test_a_warmup_that_does_not_compile_stops_the_pool_with_one_sentence() -> None:
    done = _start_fails("--warmup", "x = 1\nimport (")
    assert done.returncode != 0
    assert done.stdout == b""
    (line,) = done.stderr.decode().splitlines()
    assert line.startswith("pynox: the pool's warm-up code does not compile (line 2): ")
    assert line.endswith("; fix or remove it")


def test_the_pool_table_sets_the_warmup_and_the_flag_replaces_it(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        f"""
        [pool]
        warmup = {json.dumps(COUNTING + "sys.pynox_source = 'file'")}
        """,
    )
    show = "import sys; print(getattr(sys, 'pynox_source', None))"
    with PoolClient(config=config, workers=1) as client:
        time.sleep(SETTLE)
        assert_ok(client.run({"id": new_id(), "code": show}), "file\n")
        assert client.close() == 0
    flag = "import sys; sys.pynox_source = 'flag'"
    with PoolClient("--warmup", flag, config=config, workers=1) as client:
        time.sleep(SETTLE)
        assert_ok(client.run({"id": new_id(), "code": show}), "flag\n")
        assert client.close() == 0


def test_a_warmup_that_is_not_a_string_is_a_config_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, "[pool]\nwarmup = 3\n")
    done = _start_fails("--config", str(config))
    assert done.returncode != 0
    assert done.stderr.decode().splitlines() == [
        f"pynox: warmup in [pool] of {config} must be a string of Python code, like warmup ="
        ' "import pandas"'
    ]


@pytest.mark.skipif(not PACKAGES, reason="needs PYNOX_TEST_PACKAGES (pandas installed)")
def test_a_pandas_warmup_from_the_package_dir() -> None:
    """The warm-up sees the pool's package directories as preloading does, and a request
    in the warmed pool gets the same answer as in a cold one."""
    assert PACKAGES is not None
    group_by = code("""
        import pandas as pd
        frame = pd.DataFrame({"key": [i % 10 for i in range(1000)], "value": range(1000)})
        print(int(frame.groupby("key")["value"].sum().iloc[3]))
    """)
    with PoolClient(
        "--package-dir", PACKAGES, "--warmup", group_by, workers=2, preload=["pandas"]
    ) as client:
        for _ in range(3):
            time.sleep(SETTLE / 2)
            assert_ok(client.run({"id": new_id(), "code": group_by}), "49800\n")
        assert client.close() == 0
        # Its own output went to stderr, once.
        assert client.stderr().decode().count("49800") == 1


# What writing a CSV imports that preloading pandas did not (docs/agent-tasks.md's way to
# find it).
CSV_IMPORTS = code("""
    import sys
    import pandas as pd
    before = set(sys.modules)
    pd.DataFrame({"a": [1]}).to_csv()
    print(*sorted(name for name in set(sys.modules) - before if name.startswith("pandas")))
""")


@pytest.mark.skipif(not PACKAGES, reason="needs PYNOX_TEST_PACKAGES (pandas installed)")
@pytest.mark.parametrize(
    ("preload", "warmup", "imported"),
    [
        (["pandas"], None, True),  # the case the docs warn of
        (["pandas", "pandas.io.formats.csvs"], None, False),  # their first remedy
        (["pandas"], "import pandas as pd\npd.DataFrame({'a': [1]}).to_csv()", False),
    ],
    ids=["pandas-only", "csv-writer-preloaded", "warmed-up"],
)
def test_a_lazy_import_comes_into_each_request_unless_preloaded_or_warmed_up(
    preload: list[str], warmup: str | None, imported: bool
) -> None:
    """docs/agent-tasks.md: DataFrame.to_csv imports pandas' CSV writer on first use;
    preloading it, or a warm-up that calls it, leaves the request nothing to import."""
    assert PACKAGES is not None
    flags = ["--package-dir", PACKAGES] + (["--warmup", warmup] if warmup else [])
    with PoolClient(*flags, workers=1, preload=preload) as client:
        time.sleep(SETTLE)
        result = client.run({"id": new_id(), "code": CSV_IMPORTS})
        assert result["exit"] == 0, result
        shown = result["stdout"].split()
        assert ("pandas.io.formats.csvs" in shown) is imported, result["stdout"]
        assert client.close() == 0


@pytest.mark.skipif(not PACKAGES, reason="needs PYNOX_TEST_PACKAGES (matplotlib installed)")
def test_a_chart_warmup_leaves_the_request_its_fonts_and_no_figure() -> None:
    """matplotlib keeps the font files it drew with open; the spare's copy would be closed
    under the request. Nor may the warm-up's own figure come back as the request's image."""
    assert PACKAGES is not None
    chart = code("""
        import io
        import matplotlib.pyplot as plt
        figure, axes = plt.subplots()
        axes.bar(["north", "south"], [120, 80])
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        print(buffer.getvalue()[:4] == b"\\x89PNG")
    """)
    with PoolClient(
        "--package-dir", PACKAGES, "--warmup", chart, workers=1, preload=["matplotlib.pyplot"]
    ) as client:
        for _ in range(2):
            time.sleep(SETTLE * 2)
            assert_ok(client.run({"id": new_id(), "code": chart}), "True\n")
            result = client.run({"id": new_id(), "code": "print(2)"})
            assert_ok(result, "2\n")
            assert result["images"] == []
        assert client.close() == 0


# Starts a thread that never ends, in spares only: the pool server's own run passes.
STARTS_A_THREAD_IN_SPARES = COUNTING + code("""
    import threading
    if sys.pynox_warmups > 1:
        threading.Thread(target=threading.Event().wait, daemon=True).start()
""")


def test_a_warmup_that_leaves_threads_in_a_spare_is_skipped_by_spares() -> None:
    """The sandbox confines only a process of one thread: a warmed spare with a thread
    left would fail every request it took. Spares skip such a warm-up, and the pool says so."""
    with PoolClient("--warmup", STARTS_A_THREAD_IN_SPARES, workers=1) as client:
        for _ in range(2):
            time.sleep(SETTLE)
            assert_ok(client.run({"id": new_id(), "code": SHOW_COUNT}), "1\n")
        assert client.close() == 0
        stderr = client.stderr().decode()
    assert stderr.splitlines() == [
        "pynox: the pool's warm-up code leaves threads running in a child (a BLAS library's"
        " workers, say), which no sandbox can confine, so spares skip it and only the pool's"
        " own run of it is shared; for spares to run it too, have it start no thread (for"
        " numpy, use arrays small enough for one thread)"
    ]


@pytest.mark.skipif(not PACKAGES, reason="needs PYNOX_TEST_PACKAGES (numpy installed)")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS starts no workers on one CPU")
def test_a_warmup_with_a_large_matrix_product_leaves_requests_running() -> None:
    """After a fork, OpenBLAS starts its workers again at the next large product."""
    assert PACKAGES is not None
    product = "import numpy as np\nprint(int((np.ones((400, 400)) @ np.ones((400, 400))).sum()))"
    flags = ["--package-dir", PACKAGES, "--warmup", product]
    with PoolClient(*flags, workers=1, preload=["numpy"]) as client:
        time.sleep(SETTLE)
        assert_ok(client.run({"id": new_id(), "code": product}), "64000000\n")
        assert client.close() == 0
