"""[pool.limits]: a request asking for more than the limits is refused; an omitted
timeout is filled in; an empty list still limits."""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.pool_client import PoolClient, clean_env
from support.pool_requests import assert_ok, assert_refused, write_config


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PoolClient, Path]]:
    base = tmp_path_factory.mktemp("limits")
    data = base / "data"
    data.mkdir()
    (data / "in.txt").write_text("inside")
    outside = base / "outside"
    outside.mkdir()
    config = write_config(
        base / "config",
        f"""
        [pool.limits]
        allow_read = [{json.dumps(str(data))}]
        allow_network = false
        timeout = "5s"
        memory = "512m"
    """,
    )
    with PoolClient(config=config) as client:
        yield client, base
        assert client.close() == 0


def test_limits_refuse_a_read_outside(limited: tuple[PoolClient, Path]) -> None:
    client, base = limited
    refused = client.run({"id": "out", "code": "", "allow_read": [str(base / "outside")]})
    assert_refused(refused, "out", "allow_read", "[pool.limits]", str(base / "outside"))
    inside = client.run(
        {
            "id": "in",
            "allow_read": [str(base / "data")],
            "code": f"print(open({str(base / 'data' / 'in.txt')!r}).read())",
        }
    )
    assert_ok(inside, "inside\n")
    sneaky = client.run(
        {"id": "dotdot", "code": "", "allow_read": [str(base / "data" / ".." / "outside")]}
    )
    assert_refused(sneaky, "dotdot", "allow_read")


def test_limits_refuse_network(limited: tuple[PoolClient, Path]) -> None:
    client, _ = limited
    assert_refused(
        client.run({"id": "net", "code": "", "allow_network": True}),
        "net",
        "allow_network",
        "[pool.limits]",
    )
    assert client.run({"id": "nonet", "code": "", "allow_network": False})["exit"] == 0


def test_limits_refuse_a_longer_timeout_and_fill_an_omitted_one(
    limited: tuple[PoolClient, Path],
) -> None:
    client, _ = limited
    assert_refused(
        client.run({"id": "t", "code": "", "timeout": "10s"}), "t", "timeout", "[pool.limits]"
    )
    assert_refused(client.run({"id": "m", "code": "", "memory": "1g"}), "m", "memory")
    filled = client.run({"id": "fill", "code": "print(1)"})
    assert filled["policy"]["timeout_ms"] == 5000
    assert filled["policy"]["memory_bytes"] == 512 << 20
    shorter = client.run({"id": "short", "code": "", "timeout": "2s"})
    assert shorter["policy"]["timeout_ms"] == 2000


def test_a_timeout_is_judged_in_the_milliseconds_it_is_enforced_in(
    limited: tuple[PoolClient, Path],
) -> None:
    """A fraction of a millisecond above the limit is the limit, as the clock enforces it,
    not a refusal that says "5s is above its limit of 5s"; one that rounds above it is
    refused in the units that show the difference."""
    client, _ = limited
    within = client.run({"id": "within", "code": "", "timeout": 5.0004})
    assert within["exit"] == 0, within["error"]
    assert within["policy"]["timeout_ms"] == 5000
    above = client.run({"id": "above", "code": "", "timeout": "5000.6ms"})
    assert above["error"]["message"] == (
        "timeout exceeds [pool.limits]: 5.001s is above its limit of 5s; ask for 5s or less"
    )
    tiny = client.run({"id": "tiny", "code": "", "timeout": 0.0004})
    assert tiny["exit"] == 125 and tiny["policy"] is None
    assert tiny["error"]["message"] == (
        "timeout=0.0004 is below the 1ms minimum; give at least 1ms"
    )


def test_empty_limit_lists_still_limit(tmp_path: Path) -> None:
    """`allow_read = []` in [pool.limits] allows reading nothing (pool_request.cap says "an
    empty list there still limits"); a request asking for a path must be refused."""
    config = write_config(tmp_path / "config", "[pool.limits]\nallow_read = []\nallow_env = []\n")
    with PoolClient(config=config) as client:
        read = client.run({"id": "r", "code": "print(1)", "allow_read": ["/etc"]})
        env = client.run({"id": "e", "code": "print(1)", "allow_env": ["HOME"]})
        print("with empty limits:", read["exit"], read["policy"], env["exit"])
        assert_refused(read, "r", "allow_read")
        assert_refused(env, "e", "allow_env")
        assert client.close() == 0


def test_a_timeout_hint_stays_within_the_limits(tmp_path: Path) -> None:
    """The hint names a limit [pool.limits] lets a request ask for, and following it works;
    at the limit itself, it names no longer one."""
    config = write_config(tmp_path, '[pool.limits]\ntimeout = "1.5s"\n')
    slow = "import time\ntime.sleep(0.8)\nprint('done')"
    with PoolClient(config=config) as client:
        short = client.run({"id": "short", "code": slow, "timeout": "500ms"})
        assert (short["exit"], short["error"]["type"]) == (124, "Timeout")
        # Doubled, 1s; but the pool allows 1.5s, and the hint never goes below 1s.
        assert short["error"]["hint"] == 'make it faster or raise the limit with "timeout": "1s"'
        followed = client.run({"id": "followed", "code": slow, "timeout": "1s"})
        assert_ok(followed, "done\n")
        near = client.run({"id": "near", "code": "while True:\n    pass", "timeout": "1s"})
        assert near["error"]["hint"] == 'make it faster or raise the limit with "timeout": "1.5s"'
        assert client.run({"id": "at", "code": "", "timeout": "1.5s"})["exit"] == 0
        capped = client.run({"id": "capped", "code": "while True:\n    pass"})
        assert capped["error"]["hint"] == (
            "make it faster: 1.5s is the longest time limit [pool.limits] allows"
        )
        session = client.run(
            {"id": "step", "session": "s", "code": "while True:\n    pass", "timeout": "1s"}
        )
        # Each step has its own timeout: the next step may ask for what the hint names.
        assert (
            session["error"]["hint"] == 'make it faster or raise the limit with "timeout": "1.5s"'
        )
        assert (
            client.run({"id": "next", "session": "s", "code": "", "timeout": "1.5s"})["exit"] == 0
        )
        assert client.close() == 0


def test_hints_name_only_what_the_limits_let_a_request_ask_for(
    limited: tuple[PoolClient, Path],
) -> None:
    """Each hint is followed: what it names is granted and works, or it says that
    [pool.limits] lets no request have it."""
    client, base = limited
    grow = "data = bytearray(400 * 1024 * 1024)\nprint(len(data) >> 20)"
    short = client.run({"id": "mem", "code": grow, "memory": "300m"})
    assert short["error"]["type"] == "MemoryError"
    # Doubled, 600m; but the limits allow 512m.
    assert short["error"]["hint"] == (
        "the program used up its 300m memory limit; allocate less or raise the limit with "
        '"memory": "512m"'
    )
    assert_ok(client.run({"id": "mem-followed", "code": grow, "memory": "512m"}), "400\n")
    at_most = client.run({"id": "mem-most", "code": "data = bytearray(600 * 1024 * 1024)"})
    assert at_most["error"]["hint"] == (
        "the program used up its 512m memory limit, the most [pool.limits] allows; allocate less"
    )
    inside = str(base / "data" / "in.txt")
    denied = client.run({"id": "in", "code": f"print(open({inside!r}).read())"})
    assert denied["error"]["hint"] == (
        f'reading {inside} is not allowed; grant it with "allow_read": [{json.dumps(inside)}]'
    )
    followed = client.run(
        {"id": "in-followed", "code": f"print(open({inside!r}).read())", "allow_read": [inside]}
    )
    assert_ok(followed, "inside\n")
    outside = str(base / "outside")
    refused = client.run({"id": "out", "code": f"import os\nos.listdir({outside!r})"})
    assert refused["error"]["hint"] == (
        f"listing {outside} is not allowed; [pool.limits] lets no request grant it"
    )
    network = "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)"
    off = client.run({"id": "net", "code": network})
    assert off["error"]["hint"] == "the network is off; [pool.limits] lets no request grant it"
    # The hint line after the traceback says the same: the program's process, which
    # knows nothing of [pool.limits], wrote "grant it with" there.
    for result in (short, at_most, denied, refused, off):
        assert result["stderr"].endswith(f"\npynox: {result['error']['hint']}\n"), result


def test_the_hint_line_is_judged_when_the_program_wrote_after_it(
    limited: tuple[PoolClient, Path],
) -> None:
    """An atexit handler writes after the traceback and its hint line: that line still
    says what the result's hint says, and what the handler wrote stays after it."""
    client, base = limited
    outside = str(base / "outside")
    program = (
        "import atexit, os, sys\n"
        "atexit.register(lambda: print('cleanup', file=sys.stderr))\n"
        f"os.listdir({outside!r})\n"
    )
    refused = client.run({"id": "after", "code": program})
    hint = f"listing {outside} is not allowed; [pool.limits] lets no request grant it"
    assert refused["error"]["hint"] == hint
    assert refused["stderr"].endswith(f"\npynox: {hint}\ncleanup\n"), refused["stderr"]


def test_a_streamed_hint_line_is_judged_as_the_results(
    limited: tuple[PoolClient, Path],
) -> None:
    """Streamed, the output events carry the hint line the result carries, not the one the
    program's process wrote, with what the program wrote after it; what it wrote before
    comes at once."""
    client, base = limited
    outside = str(base / "outside")
    program = (
        "import atexit, os, sys\n"
        "atexit.register(lambda: print('cleanup', file=sys.stderr))\n"
        "print('before', file=sys.stderr, flush=True)\n"
        f"os.listdir({outside!r})\n"
    )
    refused = client.run({"id": "streamed", "code": program, "stream": True})
    hint = f"listing {outside} is not allowed; [pool.limits] lets no request grant it"
    assert refused["error"]["hint"] == hint
    events = [e for e in client.events if e.get("id") == "streamed"]
    assert all(e["stream"] == "stderr" for e in events), events
    assert events[0]["data"].startswith("before\n"), events
    streamed = "".join(e["data"] for e in events)
    assert streamed == refused["stderr"]
    assert streamed.endswith(f"\npynox: {hint}\ncleanup\n"), streamed


def test_a_hint_is_judged_without_looking_up_the_programs_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The path comes from the program's error report: the pool server must not resolve
    it, which looks up every part of it (a path on a hung mount would stall every request)."""
    from pynox import lean_os
    from pynox.policy import path_grant, pool_limits
    from pynox.policy.config import Grants
    from pynox.policy.pool_limits import refused_by_limits

    limits = Grants(allow_read=["/srv/data"])
    limited = frozenset({"allow_read", "allow_network"})

    def looked_up(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"the pool server looked up {args}")

    monkeypatch.setattr(os, "readlink", looked_up)
    monkeypatch.setattr(os.path, "realpath", looked_up)
    monkeypatch.setattr(lean_os, "realpath", looked_up)  # through pynox._native
    monkeypatch.setattr(path_grant, "real_path", looked_up)
    monkeypatch.setattr(pool_limits, "real_path", looked_up)
    assert not refused_by_limits("allow_read", "/srv/data/in/../x.csv", limits, limited)
    assert refused_by_limits("allow_read", "/srv/data/../etc/passwd", limits, limited)
    assert refused_by_limits("allow_read", "/srv/database", limits, limited)
    assert refused_by_limits("allow_network", None, limits, limited)
    assert not refused_by_limits("allow_write", "/anywhere", limits, limited)  # not limited
    env_limits, env_limited = Grants(allow_env=["LANG"]), frozenset({"allow_env"})
    assert not refused_by_limits("allow_env", "LANG", env_limits, env_limited)
    assert refused_by_limits("allow_env", "SSL_CERT_FILE", env_limits, env_limited)


SCRATCH_WORDS = "the directory of the pool's scratch directories, which hold other requests' files"


def test_no_request_is_granted_the_pools_scratch_directories(tmp_path: Path) -> None:
    """A pool whose scratch directories are made in a directory its limits let requests
    read and write (TMPDIR=/tmp, limits allowing /tmp): a request granted that directory,
    the scratch root, or a run's scratch directory, by any spelling, is refused with a
    sentence that says why; another request's files stay unreadable, and no hint suggests
    a grant that would reach them."""
    base = tmp_path / "tmp"
    (base / "data").mkdir(parents=True)
    (base / "data" / "in.txt").write_text("data")
    link = tmp_path / "link"
    link.symlink_to(base)
    config = write_config(
        tmp_path / "config",
        f"""
        [pool.limits]
        allow_read = [{json.dumps(str(base))}]
        allow_write = [{json.dumps(str(base))}]
        """,
    )
    env = clean_env({"TMPDIR": str(base)})
    with PoolClient(config=config, env=env, workers=2) as client:
        owner = client.run(
            {
                "id": "owner",
                "session": "owner",
                "code": "print('ready')",
                "files": {"secret.txt": base64.b64encode(b"secret").decode()},
            }
        )
        assert_ok(owner, "ready\n")
        scratch = owner["policy"]["scratch"]
        root = os.path.dirname(scratch)
        assert os.path.dirname(root) == os.path.realpath(base)
        asked = [
            ("allow_read", str(base), "reading", "it covers"),
            ("allow_read", str(link), "reading", "it covers"),
            ("allow_write", str(base), "writing", "it covers"),
            ("allow_read", root, "reading", "it is"),
            ("allow_write", root, "writing", "it is"),
            ("allow_read", scratch, "reading", "it lies inside"),
            ("allow_write", scratch + "/out", "writing", "it lies inside"),
        ]
        for number, (field, path, verb, relation) in enumerate(asked):
            request_id = f"grant-{number}"
            request = {"id": request_id, "code": "print('granted')", field: [path]}
            result = client.run(request)
            assert_refused(result, request_id, f"cannot grant {verb} ", relation, SCRATCH_WORDS)
        # A directory beside the scratch root is granted as before.
        beside = client.run(
            {
                "id": "beside",
                "code": code_reading(base / "data" / "in.txt"),
                "allow_read": [str(base / "data")],
            }
        )
        assert_ok(beside, "data\n")
        probe = client.run({"id": "probe", "code": code_reading(Path(scratch) / "secret.txt")})
        assert probe["exit"] == 1 and probe["error"]["type"] == "PermissionError", probe
        hint = probe["error"]["hint"]
        assert "grant it with" not in hint and "no request may be granted it" in hint, hint
        assert probe["stderr"].endswith(f"\npynox: {hint}\n"), probe["stderr"]
        client.send({"id": "close-owner", "close_session": "owner"})
        client.wait_for(lambda: "close-owner" in client.results)
        assert client.close() == 0


def code_reading(path: Path) -> str:
    return f"print(open({str(path)!r}).read())"


@pytest.mark.parametrize(
    ("key", "asked", "message"),
    [
        ("timeout", 60.0, "timeout exceeds [pool.limits]: 1m is above its limit of 10s; ask "
         "for 10s or less"),
        ("memory", 1 << 30, "memory exceeds [pool.limits]: 1g is above its limit of 256m; ask "
         "for 256m or less"),
    ],
)  # fmt: skip
def test_a_limit_refused_is_told_in_the_units_one_writes_it(
    key: str, asked: float, message: str
) -> None:
    from pynox.policy.config import Grants
    from pynox.pool.request import RequestError, cap

    limits = Grants(timeout=10.0, memory=256 << 20)
    limited = frozenset({"timeout", "memory"})
    with pytest.raises(RequestError) as refused:
        cap(Grants(**{key: asked}), limits, limited, "r1")
    assert refused.value.message == message
    # Followed: what it says to ask for is granted.
    most = getattr(limits, key)
    assert getattr(cap(Grants(**{key: most}), limits, limited, "r2"), key) == most


def _package_of_another_python(directory: Path) -> None:
    """A package whose one compiled module was built for an older Python than this one."""
    package = directory / "builtelsewhere"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import _speedups\n")
    other = f"3{sys.version_info[1] - 1}"
    (package / f"_speedups.cpython-{other}-x86_64-linux-gnu.so").write_bytes(b"")


@pytest.mark.parametrize("allowed", [False, True], ids=["no folder", "one folder"])
def test_a_package_of_another_python_names_only_a_folder_the_limits_allow(
    tmp_path: Path, allowed: bool
) -> None:
    """The hint for a package built for another Python says to install it for this one
    and import it from there: under [pool.limits] that allow no package_dirs, no request
    could, and the hint says where to install it instead; under limits that allow a
    folder, it says to install it inside one, where a request may import from."""
    _package_of_another_python(tmp_path / "pool-packages")
    roots = [str(tmp_path / "allowed")] if allowed else []
    config = write_config(
        tmp_path / "config", f"[pool.limits]\npackage_dirs = {json.dumps(roots)}\n"
    )
    package_dir = str(tmp_path / "pool-packages")
    with PoolClient("--package-dir", package_dir, config=config) as client:
        failed = client.run({"id": 1, "code": "import builtelsewhere"})
        assert failed["exit"] == 1, failed
        hint = failed["error"]["hint"]
        inside = tmp_path / "allowed" / "py3"
        inside.mkdir(parents=True)
        followed = client.run({"id": 2, "code": "pass", "package_dirs": [str(inside)]})
        assert client.close() == 0
    if allowed:
        assert hint.endswith(
            "site-packages) inside a folder [pool.limits] allows and import from there with "
            '"package_dirs": ["DIR"]'
        ), hint
        assert_ok(followed, "")
    else:
        assert hint.endswith(
            "site-packages) where the pool itself imports packages from (its [pool] "
            "package_dirs): [pool.limits] lets no request import from another folder"
        ), hint
        assert_refused(followed, 2, "package_dirs exceeds [pool.limits]")
