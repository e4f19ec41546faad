"""A thread that cannot start under --memory because a limit on processes was reached,
not memory: the hint names that limit, not a larger --memory that would change nothing,
and each of its ways out works."""

from __future__ import annotations

import contextlib
import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from support.commands import PYNOX, limiting_processes, limiting_stack, run
from support.other_user import as_nobody, open_to_all
from support.process_groups import limiting_processes_by_group

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

# Forty threads at once, each with an 8 MiB stack: 320 MiB, well within 1g.
THREADS = """
    import threading, time
    threads = [threading.Thread(target=time.sleep, args=(0.3,)) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(len(threads), "threads")
"""
FEWER_THREADS = """
    import time
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=4) as executor:
        print(len(list(executor.map(time.sleep, [0.01] * 40))), "threads")
"""
_HINT = (
    "a thread could not start, though memory had room for its stack: the program reached "
    "the limit on processes and threads of {whose}, which pynox was started under and "
    "cannot raise; run fewer threads at once "
    "(concurrent.futures.ThreadPoolExecutor(max_workers=4)), or raise that limit where "
    "pynox starts"
)
USER_OR_GROUP_HINT = _HINT.format(
    whose="this user (ulimit -u, which counts every process and thread the user runs) or "
    "of the control group pynox runs in (its pids.max)"
)
GROUP_HINT = _HINT.format(whose="the control group pynox runs in (its pids.max)")
EIGHT_MIB_STACKS = limiting_stack(8 << 20)


def _scripts(folder: Path) -> tuple[Path, Path]:
    folder.chmod(0o755)
    threads, fewer = folder / "threads.py", folder / "fewer.py"
    threads.write_text(textwrap.dedent(THREADS))
    fewer.write_text(textwrap.dedent(FEWER_THREADS))
    return threads, fewer


def _assert_hint_and_ways_out(
    under: Callable[[int], list[str]],
    folder: Path,
    hint: str,
    limit: int,
    env: dict[str, str] | None = None,
) -> None:
    """The forty threads fail under `limit` processes with `hint`, on the line and in
    --json; under the same limit fewer threads at once run, and a raised limit runs them."""
    threads, fewer = _scripts(folder)
    failed = run([*under(limit), PYNOX, "--memory=1g", str(threads)], cwd=folder, env=env)
    err = failed.stderr.decode()
    assert failed.returncode == 1, err
    assert "RuntimeError: can't start new thread" in err
    assert err.splitlines()[-1] == "pynox: " + hint
    result = run([*under(limit), PYNOX, "--json", "--memory=1g", str(threads)], cwd=folder, env=env)
    assert json.loads(result.stdout)["error"]["hint"] == hint
    ran = run([*under(limit), PYNOX, "--memory=1g", str(fewer)], cwd=folder, env=env)
    assert (ran.returncode, ran.stdout) == (0, b"40 threads\n"), ran.stderr
    raised = run([*under(limit * 10), PYNOX, "--memory=1g", str(threads)], cwd=folder, env=env)
    assert (raised.returncode, raised.stdout) == (0, b"40 threads\n"), raised.stderr


def test_a_users_process_limit_is_named_rather_than_memory(tmp_path: Path) -> None:
    """ulimit -u holds for every user but root: run as nobody."""
    nobody = as_nobody(tmp_path)

    def under(limit: int) -> list[str]:
        return [*nobody, *EIGHT_MIB_STACKS, *limiting_processes(limit)]

    env = {
        "HOME": str(open_to_all(tmp_path / "home")),
        "TMPDIR": str(open_to_all(tmp_path / "tmp")),
    }
    _assert_hint_and_ways_out(under, tmp_path, USER_OR_GROUP_HINT, 20, env)


def test_a_control_groups_process_limit_is_named_rather_than_memory(tmp_path: Path) -> None:
    """As root, whom ulimit -u does not hold, only a control group's pids.max can be it."""
    with contextlib.ExitStack() as groups:
        prefixes = {
            limit: [*groups.enter_context(limiting_processes_by_group(limit)), *EIGHT_MIB_STACKS]
            for limit in (20, 200)
        }
        _assert_hint_and_ways_out(prefixes.__getitem__, tmp_path, GROUP_HINT, 20)
