"""RayPool against a local Ray instance: runs, map, sessions, dead actors, limits, shutdown.

`nox -s ray` (part of `make test`) runs this file; the `tests` sessions leave tests/ray out.
One local Ray instance (ray.init(num_cpus=2)) serves the module, started on first use; the
last test stops it and checks that nothing Ray or the pools started still runs, so keep it
last. This directory has no __init__.py or conftest.py: as a package on the tests' path it
would be imported in place of Ray itself.
"""

from __future__ import annotations

import _thread
import asyncio
import ctypes
import gc
import os
import pickle
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import KEPT_OPEN, open_descriptors

import pynox

pytestmark = pytest.mark.ray

pytest.importorskip("ray.exceptions", reason="tests/ray need Ray: pip install 'pynox[ray]'")
import ray  # noqa: E402

from pynox.ray import RayPool  # noqa: E402
from pynox.ray.actor import NodePool  # noqa: E402
from pynox.ray.actor import _remove_orphans as remove_orphans  # noqa: E402

PR_SET_CHILD_SUBREAPER = 36
# A quarter of a CPU each, so that the pools of several tests fit in ray.init(num_cpus=2).
ACTOR = {"actor_options": {"num_cpus": 0.25}}
PROGRAMS = 500


def programs(count: int) -> list[str]:
    """A function and asserts on it, every tenth wrong, every 50th a NameError; each prints
    its index, so the order of the results shows."""
    made = []
    for index in range(count):
        factor = index % 7 + 1
        expected = 3 * factor + (1 if index % 10 == 9 else 0)
        source = f"def scale(x):\n    return x * {factor}\n\nprint({index})\n"
        source += f"assert scale(3) == {expected}, 'scale(3)'\n"
        if index % 50 == 25:
            source += "undefined_name\n"
        made.append(source)
    return made


def verdict(result: pynox.Result) -> tuple[int, str, str | None]:
    return result.exit, result.stdout, None if result.error is None else result.error["type"]


def wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


def kill_actor_running(pool: RayPool) -> None:
    """SIGKILL the process of the actor that has a request in flight, as a crash would."""
    busy = [slot for slot in pool._slots if slot.in_flight]
    assert len(busy) == 1
    pid = ray.get(busy[0].actor.ready.remote())["pid"]
    os.kill(pid, signal.SIGKILL)


class LocalRay:
    """Starts and stops the local instance, noting the descriptors Ray's driver keeps open
    after ray.shutdown() (its core worker's logs and event loop), which no test can close."""

    def __init__(self, config: pytest.Config, temp_dir: Path) -> None:
        self.config = config
        self.temp_dir = temp_dir
        self.before: dict[str, str | None] = {}

    def start(self) -> None:
        if not ray.is_initialized():
            self.before = open_descriptors()
            # Ray puts the driver's working directory first on its workers' path: from the
            # project's root, actors would import pynox's sources, not the installed build.
            cwd = os.getcwd()
            os.chdir(self.temp_dir)
            try:
                ray.init(
                    num_cpus=2,
                    include_dashboard=False,
                    log_to_driver=False,
                    configure_logging=False,
                    _temp_dir=str(self.temp_dir),
                )
            finally:
                os.chdir(cwd)

    def stop(self) -> None:
        if ray.is_initialized():
            ray.shutdown()
            now = open_descriptors()
            kept = {fd for fd, target in now.items() if self.before.get(fd) != target}
            self.config.stash.setdefault(KEPT_OPEN, set()).update(kept)


@pytest.fixture(scope="module")
def _ray_module(request: pytest.FixtureRequest) -> Iterator[LocalRay]:
    # Processes orphaned below this one (a killed actor's pool, say) become its children
    # rather than init's, so that "nothing left running" sees them.
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0, os.strerror(ctypes.get_errno())
    # Short: Ray's socket paths beneath it must fit in a socket address.
    temp_dir = Path(tempfile.mkdtemp(prefix="ray-", dir=os.environ.get("TMPDIR")))
    local = LocalRay(request.config, temp_dir)
    yield local
    local.stop()
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture
def local_ray(_ray_module: LocalRay) -> LocalRay:
    """The module's local instance, started if it is not running (a test may stop it)."""
    _ray_module.start()
    return _ray_module


@pytest.fixture(scope="module")
def pool(_ray_module: LocalRay) -> Iterator[RayPool]:
    """Shared by the tests that do not make their own (a test may kill its actors)."""
    _ray_module.start()
    with RayPool(actors=2, workers=1, **ACTOR) as made:
        yield made


def test_actors_import_the_pynox_under_test(local_ray: LocalRay) -> None:
    @ray.remote
    def imported_from() -> str:
        import pynox

        return pynox.__file__

    assert ray.get(imported_from.remote()) == pynox.__file__


def test_run_gives_the_result_a_local_pool_gives(pool: RayPool) -> None:
    result = pool.run("print(6 * 7)")
    assert result.ok and result.stdout == "42\n"
    awaited = asyncio.run(pool.arun("print(7 * 6)"))
    assert awaited.ok and awaited.stdout == "42\n"
    code = "open('/etc/hostname').read()"
    with pynox.Pool(1) as local:
        expected = local.run(code)
    got = pool.run(code)
    assert got.exit == expected.exit == 1
    assert got.error is not None and got.error["type"] == "PermissionError"
    assert got.text == expected.text


def test_map_gives_the_verdicts_of_a_local_pool_in_order(pool: RayPool) -> None:
    codes = programs(PROGRAMS)
    with pynox.Pool(2) as local, ThreadPoolExecutor(4) as threads:
        expected = [verdict(result) for result in threads.map(local.run, codes)]
    got = [verdict(result) for result in pool.map(codes)]
    assert got == expected
    assert [stdout for _, stdout, _ in got] == [f"{index}\n" for index in range(PROGRAMS)]
    assert {error for _, _, error in got} == {None, "AssertionError", "NameError"}


def test_map_takes_programs_only_as_results_are_taken(pool: RayPool) -> None:
    taken = 0

    def codes() -> Any:
        nonlocal taken
        for index in range(20):
            taken += 1
            yield f"print({index})"

    results = pool.map(codes(), max_in_flight=3)
    assert taken == 0  # nothing is sent before the first result is asked for
    first = next(results)
    assert first.stdout == "0\n"
    assert taken <= 4  # three in flight, and the one that made room
    assert [result.stdout for result in results] == [f"{i}\n" for i in range(1, 20)]


def test_a_session_keeps_its_variables_across_calls(pool: RayPool) -> None:
    with pool.session() as session:
        first = session.run("total = 40")
        second = session.run("total += 2\nprint(total)")
    assert first.ok and second.ok and second.stdout == "42\n"
    assert second.session is not None and second.session["id"] == session.id
    assert second.session["step"] == 2 and not second.session["restarted"]


def test_ctrl_c_during_a_session_step_ends_the_session(pool: RayPool, tmp_path: Path) -> None:
    """The step is cancelled on the node, which ends its session there, as a cancelled
    arun does: the session no longer counts as alive, and the next step says it restarted."""
    marker = tmp_path / "started"
    with pool.session(allow_write=[str(tmp_path)]) as session:
        assert session.run("x = 1").ok and session.alive

        def interrupt() -> None:
            wait_for(marker)
            _thread.interrupt_main()

        interrupter = threading.Thread(target=interrupt)
        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            session.run(f"open({str(marker)!r}, 'w').close()\nimport time\ntime.sleep(60)")
        interrupter.join()
        assert not session.alive
        after = session.run("print(x)")
        assert after.session is not None and after.session["restarted"]
        assert after.error is not None and after.error["type"] == "NameError"


def test_a_session_collected_inside_a_locked_section_does_not_deadlock(
    local_ray: LocalRay,
) -> None:
    """The collector runs a session's finalizer in whatever thread allocates, maybe one in
    the middle of a section holding the pool's lock: the finalizer must not take it again,
    and the node's session still ends."""
    with RayPool(actors=1, workers=1, **ACTOR) as pool:
        session = pool.session()
        assert session.run("x = 1").ok
        session_id = session.id
        session.cycle = session  # type: ignore[attr-defined]  # freed by the collector only
        del session

        def collect_holding_the_lock() -> None:
            with pool._lock:
                gc.collect()

        collector = threading.Thread(target=collect_holding_the_lock, daemon=True)
        collector.start()
        collector.join(30)
        deadlocked = collector.is_alive()
        if deadlocked:
            pool._lock.release()  # lets the finalizer go on, so that the pool can close
        assert not deadlocked
        deadline = time.monotonic() + 30
        while session_id in pool._slots[0].sessions:
            assert time.monotonic() < deadline, "the collected session was never closed"
            time.sleep(0.05)
        assert pool.run("print(1)").stdout == "1\n"


def test_a_replacement_the_cluster_cannot_place_is_reported_in_time(
    local_ray: LocalRay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dead actor's replacement that can never be scheduled (it asks for more than the
    cluster has, as after the cluster shrank) fails requests with a sentence saying what to
    do once its start timeout has passed, instead of leaving them waiting for good."""
    with ThreadPoolExecutor(2) as threads, RayPool(actors=1, workers=1, **ACTOR) as pool:
        # Once the pool's first actor has started, in its own time.
        monkeypatch.setattr("pynox.ray.pool.START_TIMEOUT", 3.0)
        pool._actor_class = ray.remote(NodePool).options(num_cpus=64, max_restarts=0)
        running = threads.submit(pool.run, "import time\ntime.sleep(60)")
        deadline = time.monotonic() + 30
        while not pool._slots[0].in_flight:
            assert time.monotonic() < deadline, "the request was never sent"
            time.sleep(0.05)
        kill_actor_running(pool)
        died = running.result(60)
        assert died.error is not None and "died before it answered" in died.error["message"]
        for call in (lambda: pool.run("print(1)"), lambda: asyncio.run(pool.arun("print(1)"))):
            result = threads.submit(call).result(60)  # not a wait without end
            assert result.exit == 125 and result.error is not None
            assert result.error["type"] == "PoolError"
            assert result.error["message"] == (
                "the Ray actor that replaced a dead one did not start within 3 s; the cluster "
                "may lack what it asks for (num_cpus=0.25): free that, or close this RayPool "
                "and make one whose actor_options it can meet"
            )
        with pool.session() as session:
            assert threads.submit(session.run, "x = 1").result(60).error is not None
        assert list(threads.submit(pool.map, ["print(1)"]).result(60))[0].exit == 125
    remove_orphans()  # the killed actor's config, which its replacement would have removed


def test_closing_a_session_lets_its_step_finish_and_frees_its_place(
    local_ray: LocalRay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close() returns once the node's session is gone, after its running step, as a local
    session's close does: a session opened then fits under max_sessions. It gave up after
    a fixed grace, with the step still holding the place."""
    monkeypatch.setattr("pynox.ray.pool.CLOSE_GRACE", 1.0)  # what close gave up after
    config = tmp_path / "pynox.toml"
    config.write_text("[pool]\nmax_sessions = 1\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    marker = shared / "started"
    with (
        ThreadPoolExecutor(1) as threads,
        RayPool(actors=1, workers=1, config=config, **ACTOR) as pool,
    ):
        first = pool.session(timeout=30, allow_write=[str(shared)])
        code = f"open({str(marker)!r}, 'w').close()\nimport time\ntime.sleep(4)\nprint(1)"
        step = threads.submit(first.run, code)
        wait_for(marker)
        first.close()
        with pool.session() as second:
            assert second.run("print(2)").text == "2"
        assert step.result(30).text == "1"


def test_a_forked_child_is_refused_as_by_a_pool(pool: RayPool) -> None:
    """The child has no Ray driver of its own, and its copy of the pool's lock may be held
    for good: run says so, as pynox.Pool's does, and close leaves the parent's actors be."""
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with Ray's threads
        child = os.fork()
    if child == 0:
        try:
            try:
                pool.run("print(1)")
                said = "ran"
            except pynox.PoolError as exc:
                said = str(exc)
            pool.close()
            os.write(write, said.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        ready, _, _ = select.select([answer], [], [], 60)
        said = answer.read().decode() if ready else "no answer within 60 s"
    if not ready:
        os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    assert said == "a RayPool cannot be used in a forked child; create one there"
    assert not pool.closed and pool.run("print(2)").stdout == "2\n"


def test_tool_returns_the_text(pool: RayPool) -> None:
    run_python = pool.tool(session=True)
    # The Python of the nodes, which Ray requires to be the driver's minor.
    assert pool.python == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert run_python.__doc__ is not None
    assert run_python.__doc__.startswith(f"Run Python {pool.python} code in a persistent")
    assert run_python("x = 3") == "(no output)"
    assert run_python("print(x * 2)").strip() == "6"
    assert "run_python" in run_python.__name__


def test_host_functions_are_refused_with_a_reason(pool: RayPool) -> None:
    with pytest.raises(ValueError, match="host functions run in the caller's process"):
        pool.run("pass", functions=[print])
    # Files too, before anything is sent: not as a RequestError Result from the node.
    with pytest.raises(ValueError, match="files: a RayPool request does not carry files"):
        pool.run("pass", files={"x.txt": b"data"})
    with pytest.raises(ValueError, match="files: a RayPool request does not carry files"):
        pool.map(["pass"], files={"x.txt": b"data"})


def test_bad_arguments_are_refused_before_any_actor_starts(tmp_path: Path) -> None:
    config = tmp_path / "pynox.toml"
    config.write_text("[pool.limits]\ntimeout = 'soon'\n")
    with pytest.raises(ValueError, match="timeout"):
        RayPool(config=config)
    with pytest.raises(ValueError, match="retries=2: give 0 or 1"):
        RayPool(retries=2)
    with pytest.raises(ValueError, match="actors=0: give a whole number of at least 1"):
        RayPool(actors=0)


def test_a_bad_close_timeout_leaves_the_pool_open(local_ray: LocalRay) -> None:
    """Checked before anything closes, as pynox.Pool checks it: not a pool marked closed
    whose actors were never stopped."""
    with RayPool(actors=1, workers=1, **ACTOR) as pool:
        for timeout in ("soon", None, -1):
            with pytest.raises(ValueError) as caught:
                pool.close(timeout=timeout)  # type: ignore[arg-type]
            assert str(caught.value) == (
                f"timeout={timeout!r}: give a number of seconds of at least 0"
            )
        assert not pool.closed
        assert pool.run("print(1)").stdout == "1\n"


def test_files_of_a_session_step_are_refused_before_anything_is_sent(pool: RayPool) -> None:
    """As run(files=...) is: a ValueError here, not a RequestError Result from the node."""
    with pool.session() as session:
        with pytest.raises(ValueError) as caught:
            session.run("pass", files={"data.txt": b"x"})
        assert str(caught.value) == (
            "files: a RayPool request does not carry files to its node; put them where the "
            "nodes can read them and grant that with allow_read, or use pynox.Pool"
        )
        with pytest.raises(ValueError, match="a RayPool request does not carry files"):
            asyncio.run(session.arun("pass", files={"data.txt": b"x"}))
        assert session.steps == 0
        assert session.run("print(1)").stdout == "1\n"


def test_sessions_and_tools_refuse_what_a_pool_refuses_as_it_does(pool: RayPool) -> None:
    """The same exception, type and sentence, as pynox.Pool raises for the same call."""
    calls = [
        lambda p: p.session(files={"data.txt": b"x"}),
        lambda p: p.session(args=["x"]),
        lambda p: p.tool(files={"data.txt": b"x"}),
        lambda p: p.tool(session=True, args=["x"]),
        lambda p: p.tool(session="yes"),
    ]
    with pynox.Pool(1, lazy=True) as local:
        for call in calls:
            with pytest.raises(TypeError) as expected:
                call(local)
            with pytest.raises(TypeError) as got:
                call(pool)
            assert str(got.value) == str(expected.value)


def test_a_ray_pool_cannot_be_pickled(pool: RayPool) -> None:
    """Handed to a Ray task, it says so, not what Ray's pickling of its actor class says."""
    with pytest.raises(TypeError) as caught:
        pickle.dumps(pool)
    assert str(caught.value) == (
        "a RayPool cannot be pickled (passed to a Ray task or actor, say): its actors belong "
        "to the process that made it; call it there and pass the code or the Results instead"
    )


def test_map_refuses_an_idempotent_that_is_not_a_bool_at_once(pool: RayPool) -> None:
    """As run does: not accepted unread until an actor dies and a retry is weighed."""
    with pytest.raises(TypeError, match="^idempotent takes True or False$"):
        pool.map(["print(1)"], idempotent="yes")  # type: ignore[arg-type]


def test_async_with_closes_the_pool_as_for_a_local_pool(local_ray: LocalRay) -> None:
    async def main() -> tuple[RayPool, pynox.Result]:
        async with RayPool(actors=1, workers=1, **ACTOR) as pool:
            result = await pool.arun("print(1)")
            assert not pool.closed
        return pool, result

    pool, result = asyncio.run(main())
    assert result.stdout == "1\n" and pool.closed


@pytest.mark.parametrize(
    "options",
    [{"preload": ["not a module"]}, {"warmup": "x = 1\0"}, {"warmup": "x = '\ud800'"}],
)
def test_preload_and_warmup_are_checked_as_a_pool_checks_them(
    local_ray: LocalRay, options: dict[str, Any]
) -> None:
    """Before any actor starts, with pynox.Pool's ValueError: not the PoolError of actors
    whose pools could not start."""
    with pytest.raises(ValueError) as expected:
        pynox.Pool(1, lazy=True, **options)
    with pytest.raises(ValueError) as got:
        RayPool(actors=1, workers=1, **options, **ACTOR)
    assert str(got.value) == str(expected.value)


def test_map_refuses_one_program_given_as_a_str(pool: RayPool) -> None:
    """Not each of its characters run as a program of its own."""
    with pytest.raises(TypeError) as caught:
        pool.map("print(1)")
    assert str(caught.value) == (
        "map takes an iterable of programs, not one program as a str; pass a list such as "
        "[code], or call run(code)"
    )


def test_a_relative_path_in_the_config_is_refused_before_any_actor_starts(
    tmp_path: Path,
) -> None:
    """Each node reads the config's text from a private file of its own: a relative path
    would name a directory beside that file there, not the one beside the caller's."""
    (tmp_path / "data").mkdir()
    config = tmp_path / "pynox.toml"
    config.write_text(
        f'[permissions]\nallow_read = ["{tmp_path}"]\n[profiles.a]\nallow_read = ["data"]\n'
    )
    with pytest.raises(ValueError) as caught:
        RayPool(config=config)
    assert str(caught.value) == (
        f"allow_read in [profiles.a] of {config} lists the relative path 'data'; RayPool sends "
        "the file's text to the nodes, where it would name another directory: write it as an "
        "absolute path"
    )


def test_an_actor_that_cannot_start_its_pool_says_why(local_ray: LocalRay) -> None:
    """The node's own sentence, not Ray's header (in colour) and the actor's traceback:
    from the pool the actor started, and from the actor's constructor. Neither leaves the
    directory of its copy of the config behind (the actor is killed, never shut down)."""

    def config_copies() -> set[Path]:  # other pools' actors have theirs
        return set(Path(tempfile.gettempdir()).glob("pynox-ray-*"))

    before = config_copies()
    with pytest.raises(pynox.PoolError) as caught:
        RayPool(actors=1, workers=1, preload=["pynox_no_such_module"], **ACTOR)
    assert str(caught.value).startswith(
        "the RayPool's actors could not start: the pool exited with status 125: pynox: "
        "cannot preload pynox_no_such_module: ModuleNotFoundError("
    )
    assert config_copies() <= before
    missing = "/pynox-no-such-directory"
    with pytest.raises(pynox.PoolError) as caught:
        RayPool(actors=1, workers=1, package_dirs=[missing], **ACTOR)
    assert str(caught.value) == (
        f"the RayPool's actors could not start: package_dirs lists {missing}, which does not "
        "exist; give the site-packages directory that holds the packages"
    )
    assert config_copies() <= before


def test_an_actor_killed_mid_request_fails_it_and_the_rest_go_on(
    pool: RayPool, tmp_path: Path
) -> None:
    other = pool.session()
    assert other.run("kept = 'still here'").ok
    doomed = pool.session(allow_write=[str(tmp_path)])
    assert doomed.slot is not other.slot  # sessions spread over the actors
    marker = tmp_path / "started"
    code = f"open({str(marker)!r}, 'w').close()\nimport time\ntime.sleep(60)"
    with ThreadPoolExecutor(1) as thread:
        step = thread.submit(doomed.run, code)
        wait_for(marker)
        kill_actor_running(pool)
        lost = step.result(timeout=60)
    assert lost.exit == 125 and lost.error is not None and lost.error["type"] == "PoolError"
    assert "the Ray actor running this request died before it answered" in lost.text
    # The session on the other actor goes on; the lost one starts afresh on the replacement.
    assert other.run("print(kept)").stdout == "still here\n"
    fresh = doomed.run("print('again')")
    assert fresh.ok and fresh.session is not None and fresh.session["restarted"]
    assert "[a new session started" in fresh.text
    results = list(pool.map(["print(1)"] * 10))
    assert all(result.ok for result in results)
    other.close()
    doomed.close()


def test_an_idempotent_run_is_sent_again_once(local_ray: LocalRay, tmp_path: Path) -> None:
    marker = tmp_path / "attempts"
    code = (
        f"with open({str(marker)!r}, 'a') as f:\n    f.write('x')\n"
        "import time\ntime.sleep(1)\nprint('done')"
    )
    with RayPool(actors=1, workers=1, retries=1, **ACTOR) as pool:
        with ThreadPoolExecutor(1) as thread:
            run = thread.submit(pool.run, code, allow_write=[str(tmp_path)], idempotent=True)
            wait_for(marker)
            kill_actor_running(pool)
            result = run.result(timeout=60)
        assert result.ok and result.stdout == "done\n"
        assert marker.read_text() == "xx"


def test_the_warmup_runs_in_each_actors_pool(local_ray: LocalRay) -> None:
    """What the warm-up leaves in a preloaded module, every request on the actor finds."""
    warmup = "import fractions\nfractions.warmed_by = 'the warm-up'"
    with RayPool(actors=1, workers=1, preload=["fractions"], warmup=warmup, **ACTOR) as pool:
        results = list(pool.map(["import fractions\nprint(fractions.warmed_by)"] * 3))
        assert [result.stdout for result in results] == ["the warm-up\n"] * 3
    with pytest.raises(TypeError, match="warmup takes Python code as a string"):
        RayPool(warmup=b"import fractions")  # type: ignore[arg-type]


def test_the_limits_of_the_config_hold_on_the_actor(local_ray: LocalRay, tmp_path: Path) -> None:
    config = tmp_path / "pynox.toml"
    config.write_text('[pool.limits]\ntimeout = "2s"\n')
    with RayPool(actors=1, workers=1, config=config, **ACTOR) as pool:
        # Widening the file here changes nothing: the nodes hold the text sent at creation.
        config.write_text('[pool.limits]\ntimeout = "1h"\n')
        refused = pool.run("print('hi')", timeout="10s")
        assert refused.error is not None and refused.error["type"] == "RequestError"
        assert "timeout exceeds [pool.limits]" in refused.text
        assert pool.run("print('hi')", timeout="1s").ok
    # An actor asked directly, past RayPool's client: the same refusal, and no field of a
    # request names another config.
    actor = ray.remote(NodePool).remote(1, '[pool.limits]\ntimeout = "2s"\n', 1, [], [])
    try:
        raw = ray.get(actor.run.remote({"code": "pass", "timeout": "10s"}, None))
        assert raw["error"]["type"] == "RequestError"
        assert "timeout exceeds [pool.limits]" in raw["error"]["message"]
        forged = {"code": "pass", "config": str(config), "timeout": "10s"}
        raw = ray.get(actor.run.remote(forged, None))
        assert raw["error"] == {
            "type": "RequestError",
            "message": "a RayPool request cannot carry config",
            "file": None,
            "line": None,
            "path": None,
            "hint": None,
        }
        raw = ray.get(actor.run.remote({"code": "print(1)", "timeout": "1s"}, None))
        assert raw["exit"] == 0 and raw["stdout"] == "1\n"
        # The spelling of hints travels as RayPool's client sends it, a Python caller's.
        raw = ray.get(actor.run.remote({"code": "print(1)", "hints": "python"}, None))
        assert raw["exit"] == 0 and raw["stdout"] == "1\n"
        raw = ray.get(actor.run.remote({"code": "print(1)", "hints": "json"}, None))
        assert raw["error"]["message"] == (
            "a RayPool request's hints are spelled 'python', for Python"
        )
    finally:
        ray.get(actor.shutdown.remote())
        ray.kill(actor)


def test_map_keeps_twice_the_workers_the_config_gives_in_flight(
    local_ray: LocalRay, tmp_path: Path
) -> None:
    """Without workers=, each actor's pool takes [pool] workers from the config, and the
    default of max_in_flight follows it, as the page says."""
    config = tmp_path / "pynox.toml"
    config.write_text("[pool]\nworkers = 1\n")
    with RayPool(actors=1, config=config, **ACTOR) as pool:
        assert pool.max_in_flight == 2
        assert [result.stdout for result in pool.map(["print(1)"] * 3)] == ["1\n"] * 3


def test_a_pool_whose_ray_connection_ended_says_so(local_ray: LocalRay) -> None:
    """After ray.shutdown(), a call neither starts a new Ray instance nor fails with Ray's
    "Can't find actor": the pool says what happened, as it does once Ray runs anew."""
    ended = (
        "Ray was shut down (or connected anew) since this RayPool was made, and its actors "
        "ended with that connection; create a new RayPool"
    )
    first, second = (RayPool(actors=1, workers=1, **ACTOR) for _ in range(2))
    session = first.session()
    assert session.run("x = 1").ok
    local_ray.stop()
    for call in (lambda: first.run("pass"), lambda: session.run("pass")):
        with pytest.raises(pynox.PoolError) as caught:
            call()
        assert str(caught.value) == ended
    assert first.closed and not ray.is_initialized()
    session.close()
    first.close()
    local_ray.start()
    with pytest.raises(pynox.PoolError) as caught:
        list(second.map(["pass"]))
    assert str(caught.value) == ended
    second.close()
    second.close()


def test_the_ray_page_runs_as_shown(local_ray: LocalRay, pool: RayPool, tmp_path: Path) -> None:
    """docs/ray.md's evaluate.py, run as a driver of this instance, prints what it shows."""
    from test_docs import DOCS, Command, File, steps

    page = steps(DOCS / "ray.md")
    source = next(s for s in page if isinstance(s, File) and s.path == "evaluate.py")
    shown = next(s for s in page if isinstance(s, Command) and s.text == "python evaluate.py")
    (tmp_path / "evaluate.py").write_text(source.content)
    pool.close()  # the page's actors take a CPU each: room for them on the instance's two
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    done = subprocess.run(
        [sys.executable, "evaluate.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == shown.expected


def _descendants() -> dict[int, str]:
    """Live processes below this one (orphans included: it is their subreaper)."""
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue
        parents[int(entry)] = int(fields[1])
        commands[int(entry)] = command.decode(errors="replace").strip()
    below = {os.getpid()}
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in below and pid not in below:
                below.add(pid)
                changed = True
    below.discard(os.getpid())
    return {pid: commands[pid] for pid in below}


def test_nothing_is_left_running_after_shutdown(local_ray: LocalRay, pool: RayPool) -> None:
    pool.close()  # the module's, before Ray stops
    fresh = RayPool(actors=2, workers=1, **ACTOR)
    assert [result.ok for result in fresh.map(["print(1)"] * 4)] == [True] * 4
    session = fresh.session()
    assert session.run("x = 1").ok
    pool_pids = [info["pool_pid"] for info in fresh.info]
    running = _descendants()
    assert all(pid in running for pid in pool_pids)
    assert any("raylet" in command for command in running.values())
    fresh.close()
    fresh.close()  # harmless
    with pytest.raises(pynox.PoolError, match="this RayPool is closed"):
        fresh.run("pass")
    local_ray.stop()
    deadline = time.monotonic() + 30
    while (left := _descendants()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == {}, "still running after close() and ray.shutdown(): " + "; ".join(
        f"{pid} {command[:120]}" for pid, command in left.items()
    )
