"""Every file in examples/ runs as a user would run it, and says what it promises.

Each example runs in its own process with this environment's interpreter (or the `pynox`
command, for the scripts made for it), with an empty HOME and TMPDIR of its own. The checks
read the output the way a user reads it: the denial the agent ran into AND the work that
was done anyway, exit status 0, and nothing left behind in HOME, TMPDIR or examples/.

The framework examples need Pydantic AI, Strands Agents, smolagents or Monty. The `tests`
session skips them when a framework is not installed; the `examples` session installs the
pinned versions (requirements/examples.txt) and sets PYNOX_EXAMPLES_FRAMEWORKS=require, so
that there a missing framework fails instead of skipping.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.commands import PYNOX
from support.paths import TESTS

EXAMPLES = TESTS.parent / "examples"

# Modules the examples import, not examples themselves.
HELPERS = {"use_cases/transcript.py", "agents/scenarios.py"}

# What the model reads in each use case, whichever framework carries it.
ANALYST = [
    "Permission denied: '.env'",
    "grant it with allow_read=",
    "West: 2360.50",
    "- West: 2360.50\n- North: 1931.00\n- South: 1111.50\n",
]
SUPPORT = [
    "refunded 19.50 on order 1042",
    "HostError: PermissionError: refunds above 100.00 per order need a person's approval",
    "sqlite3.OperationalError: unable to open database file",
    "refunds in the database: [(1042, 19.5, 'arrived broken')]",
]
API = [
    "KeyError: 'PARCELS_API_KEY'",
    "<urlopen error [Errno 13] Permission denied>",
    "PX-1001: out for delivery (Lyon)",
    "PX-1002: held at customs (Basel)",
]
# The chart analyst, played when matplotlib is installed beside the interpreter (the
# examples session installs it): a value and an image reach the model.
MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
CHARTS = (
    [
        "> Out: {'North': 1931.0, 'South': 1111.5, 'West': 2360.5}",
        "> [image 1: 640x480 PNG]",
        "images the model was told of: 1",
    ]
    if MATPLOTLIB
    else ["no chart analyst: matplotlib is not installed here"]
)
# Images handed to the model as content, for the frameworks whose tools can return them.
SEES_IMAGE = ["the model sees an image: image/png"] if MATPLOTLIB else []
# Secrets the examples hold that must never reach the model.
SECRETS = ["not-a-real-password", "demo-key-0123456789"]


@dataclass
class Example:
    path: str
    expected: list[str]
    framework: str | None = None  # the module it needs beyond pynox
    minimum_python: tuple[int, int] = (3, 10)
    command: str = "python"  # or "pynox", for the scripts written for the command
    exit: int = 0


EXAMPLE_LIST = [
    Example("hello.py", ["Hello from Pynox!"], command="pynox"),
    # The demo's denied read: Python's traceback, then the grant that would allow it.
    Example(
        "probe.py",
        ["PermissionError", "grant it with --allow-read=/etc/hostname"],
        command="pynox",
        exit=1,
    ),
    Example(
        "agent_tool.py",
        [
            "Hello from an agent tool ['agent.py']",
            "PermissionError: [Errno 13] Permission denied: '/etc/passwd'\nat agent.py:1\n",
            "allow_read=['/etc/passwd']",
            "Out: 447.75",
            *(
                ["[image 1: 640x480 PNG]", "the application holds image/png, 640x480: b'\\x89PNG"]
                if MATPLOTLIB
                else ["matplotlib is not installed beside this Python"]
            ),
        ],
    ),
    Example(
        "use_cases/data_analyst.py",
        [
            *ANALYST,
            "denied: reading .env; its secret never reached the model",
            "done:   out/report.md with 3 regions",
        ],
    ),
    Example(
        "use_cases/support_agent.py",
        [
            *SUPPORT,
            "denied: refunds over 100.00: none went through",
            "done:   19.50 refunded on order 1042",
        ],
    ),
    Example(
        "use_cases/coding_agent.py",
        [
            "test_removes_an_existing_file",
            "PermissionError: [Errno 13] Permission denied",
            "important-notes.txt",
            "denied: deleting ~/important-notes.txt; the notes are intact",
            "done:   the suite ran: 1 failed, 1 passed",
        ],
    ),
    Example(
        "use_cases/api_agent.py",
        [
            *API,
            "denied: the key and the network; the key stayed out",
            "done:   PX-1001: out for delivery (Lyon); PX-1002: held at customs (Basel)",
        ],
    ),
    Example(
        "agents/pydantic_ai_agents.py",
        [
            *ANALYST,
            *SUPPORT,
            *API,
            "the API key appeared in a tool result: no",
            *CHARTS,
            *SEES_IMAGE,
        ],
        framework="pydantic_ai",
        minimum_python=(3, 11),
    ),
    Example(
        "agents/strands_agents.py",
        [
            *ANALYST,
            *SUPPORT,
            *API,
            "the API key appeared in a tool result: no",
            *CHARTS,
            *SEES_IMAGE,
        ],
        framework="strands",
    ),
    Example(
        "agents/smolagents_agents.py",
        [
            *ANALYST,
            *SUPPORT,
            *API,
            "the API key appeared in a tool result: no",
            *CHARTS,
            *SEES_IMAGE,
        ],
        framework="smolagents",
    ),
    Example(
        "agents/smolagents_executor.py",
        [
            "--- observation 1 ---\nObservation:\nExecution logs:\nWest: 2360.50",
            "PermissionError: [Errno 13] Permission denied: '",
            "/.env is not allowed; grant it with allow_read=",
            "target for West: 2000.00, reached: True",  # a host tool, called from the sandbox
            "answer: West sold most: 2360.50 (target 2000.00)",
        ],
        framework="smolagents",
    ),
    Example(
        "monty_bridge.py",
        [
            "monty> West: 2360.50",
            "monty> python() refused: PermissionError: [Errno 13] Permission denied: '/etc/passwd'",
            "monty> pynox: reading /etc/passwd is not allowed",
            "monty refused: PermissionError",
            "to the glue (Monty): yes, to the heavy code (Pynox): yes",
            "done:   best region West, revenue 2360.50",
        ],
        framework="pydantic_monty",
    ),
]


@pytest.mark.unit
def test_every_example_is_checked() -> None:
    files = {str(path.relative_to(EXAMPLES)) for path in EXAMPLES.rglob("*.py")}
    assert files - HELPERS == {example.path for example in EXAMPLE_LIST}


def require_framework(example: Example) -> None:
    if sys.version_info < example.minimum_python:
        version = ".".join(map(str, example.minimum_python))
        pytest.skip(f"{example.framework} needs Python {version} or newer")
    if example.framework is None:
        return
    if os.environ.get("PYNOX_EXAMPLES_FRAMEWORKS") == "require":
        __import__(example.framework)  # the examples session installed it: it must import
    else:
        pytest.importorskip(example.framework, reason="`nox -s examples` runs this one")


def listing(root: Path) -> list[str]:
    """Every path beneath root, except the bytecode caches Python writes on import."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("example", EXAMPLE_LIST, ids=[e.path for e in EXAMPLE_LIST])
def test_example(example: Example, tmp_path: Path) -> None:
    require_framework(example)
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    before = listing(EXAMPLES)
    interpreter = PYNOX if example.command == "pynox" else sys.executable
    proc = subprocess.run(
        [interpreter, str(EXAMPLES / example.path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == example.exit, output
    for text in example.expected:
        assert text in output, f"{text!r} is missing from:\n{output}"
    for secret in SECRETS:
        assert secret not in output
    # pynox itself caches each pynox.toml it parsed, by path, under ~/.cache/pynox, and
    # where the interpreter's OpenSSL reads its configuration, once a run granted a write.
    pynox_cache = (".cache", ".cache/pynox", ".cache/pynox/config", ".cache/pynox/openssl")
    left_in_home = [
        path
        for path in listing(home)
        if path not in pynox_cache and not path.startswith(tuple(f"{p}/" for p in pynox_cache[2:]))
    ]
    assert left_in_home == [], "the example left files in HOME"
    # Each run's scratch directory is removed just after it ends, by a helper for a plain run.
    deadline = time.monotonic() + 10
    while listing(tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert listing(tmp) == [], "the example left files in TMPDIR"
    assert listing(EXAMPLES) == before, "the example left files in examples/"


def test_the_smolagents_executor_checks_its_pool_when_made() -> None:
    """Not at the agent's first step, as an AttributeError from inside the executor."""
    if os.environ.get("PYNOX_EXAMPLES_FRAMEWORKS") != "require":
        pytest.importorskip("smolagents", reason="`nox -s examples` runs this one")
    from pynox.integrations.smolagents import PynoxExecutor

    with pytest.raises(TypeError, match="pool takes a pynox.Pool, not str"):
        PynoxExecutor(pool="notapool")  # type: ignore[arg-type]


def test_the_smolagents_executor_refuses_what_the_pool_would_refuse_when_made(
    tmp_path: Path,
) -> None:
    """A limit above [pool.limits], a loader variable, a path that does not exist: each is
    a ValueError with the pool's sentence now, not an observation the model reads at every
    step and cannot act on."""
    if os.environ.get("PYNOX_EXAMPLES_FRAMEWORKS") != "require":
        pytest.importorskip("smolagents", reason="`nox -s examples` runs this one")
    from pynox import Pool
    from pynox.integrations.smolagents import PynoxExecutor

    config = tmp_path / "pynox.toml"
    config.write_text('[pool.limits]\ntimeout = "10s"\n')
    pool = Pool(config=str(config), lazy=True)
    try:
        with pytest.raises(ValueError, match=r"^timeout exceeds \[pool.limits\]: "):
            PynoxExecutor(pool=pool, timeout="1m")
        with pytest.raises(ValueError, match="LD_PRELOAD steers the dynamic loader"):
            PynoxExecutor(pool=pool, allow_env=["LD_PRELOAD"])
        missing = tmp_path / "missing"
        with pytest.raises(ValueError, match=f"cannot grant reading {missing}: it does not"):
            PynoxExecutor(pool=pool, allow_read=[str(missing)])
    finally:
        pool.close()


def test_the_smolagents_executor_logs_what_the_model_should_read() -> None:
    """final_answer()'s own traceback is not in the step's logs; a session that sys.exit(0)
    ended says so, as Result.text does, since the next step has none of its variables."""
    if os.environ.get("PYNOX_EXAMPLES_FRAMEWORKS") != "require":
        pytest.importorskip("smolagents", reason="`nox -s examples` runs this one")
    from pynox.integrations.smolagents import PynoxExecutor

    executor = PynoxExecutor(timeout="20s")
    try:
        executor.send_tools({})
        answered = executor("print('done computing')\nfinal_answer(42)")
        assert answered.is_final_answer and answered.output == 42
        assert answered.logs == "done computing\n"
        assert executor("y = 7").logs == ""
        ended = executor("import sys\nsys.exit(0)")
        assert ended.logs == (
            "[the session ended (exit); the next call starts a fresh one without the variables "
            "and imports of this one]\n"
        )
    finally:
        executor.cleanup()


def test_the_smolagents_executor_s_tracebacks_number_the_model_s_own_code() -> None:
    """The executor's own steps (its prelude, the variables) take none of the numbers: the
    model's second code fails at <step-2>, on the line it wrote."""
    if os.environ.get("PYNOX_EXAMPLES_FRAMEWORKS") != "require":
        pytest.importorskip("smolagents", reason="`nox -s examples` runs this one")
    from pynox.integrations.smolagents import PynoxExecutor, StepError

    executor = PynoxExecutor(timeout="20s")
    try:
        executor.send_tools({})
        executor.send_variables({"rows": [1, 2]})
        assert executor("total = sum(rows)").logs == ""
        with pytest.raises(StepError) as failed:
            executor("x = 1\ntotal / 0")
        assert str(failed.value) == "ZeroDivisionError: division by zero\nat <step-2>:2"
    finally:
        executor.cleanup()


def test_the_smolagents_executor_s_hint_names_the_grant_alone() -> None:
    """The model reads a denied step as its observation: the grant its application would
    pass to PynoxExecutor, not a session.close() it has no session object for."""
    if os.environ.get("PYNOX_EXAMPLES_FRAMEWORKS") != "require":
        pytest.importorskip("smolagents", reason="`nox -s examples` runs this one")
    from pynox.integrations.smolagents import PynoxExecutor, StepError

    executor = PynoxExecutor(timeout="20s")
    try:
        executor.send_tools({})
        with pytest.raises(StepError) as denied:
            executor("open('/etc/hostname').read()")
        assert str(denied.value).endswith(
            "\npynox: reading /etc/hostname is not allowed; grant it with "
            "allow_read=['/etc/hostname']"
        ), denied.value
    finally:
        executor.cleanup()


def test_the_smolagents_executor_keeps_one_final_answer_per_step() -> None:
    """A step that calls the answer's host function over and over (model-written code can)
    must not make the host hold every answer: the first one is the step's answer."""
    if os.environ.get("PYNOX_EXAMPLES_FRAMEWORKS") != "require":
        pytest.importorskip("smolagents", reason="`nox -s examples` runs this one")
    from pynox.integrations.smolagents import PynoxExecutor

    executor = PynoxExecutor(timeout="20s")
    try:
        executor.send_tools({})
        code = (
            "from pynox_host import pynox_final_answer\n"
            "for i in range(50):\n"
            "    pynox_final_answer('x' * 1000 + str(i))\n"
            "final_answer('last')"
        )
        answered = executor(code)
        assert answered.is_final_answer and answered.output == "x" * 1000 + "0"
        assert len(executor._answered) == 1  # not one per call
    finally:
        executor.cleanup()


def test_the_smolagents_executor_refuses_variables_json_would_change() -> None:
    """A dict whose keys JSON writes alike would reach the steps with one of them: refused
    when the run starts, naming the variable, rather than losing a value unseen."""
    if os.environ.get("PYNOX_EXAMPLES_FRAMEWORKS") != "require":
        pytest.importorskip("smolagents", reason="`nox -s examples` runs this one")
    from pynox.integrations.smolagents import PynoxExecutor

    executor = PynoxExecutor(timeout="20s")
    try:
        with pytest.raises(TypeError) as caught:
            executor.send_variables({"codes": {1: "one", "1": "uno"}})
        assert str(caught.value) == (
            "variable 'codes' holds a dict with two keys that JSON writes alike (as '1'); the "
            "Pynox executor passes variables as JSON, whose keys are strings: give that dict "
            "keys that differ as strings"
        )
        deep: list[object] = []
        for _ in range(100_000):
            deep = [deep]
        with pytest.raises(TypeError, match="variable 'deep' is list, not JSON data"):
            executor.send_variables({"deep": deep})
        executor.send_variables({"rows": [{"a": 1.5, "b": None}]})
        executor.send_tools({})
        assert executor("print(rows)").logs == "[{'a': 1.5, 'b': None}]\n"
        # Whatever their names: none is the assigning code's own, deleted after it ran.
        executor.send_variables({"_json": "kept", "json": "mine"})
        assert executor("print(_json, json)").logs == "kept mine\n"
    finally:
        executor.cleanup()


def test_the_smolagents_executor_checks_its_profile_when_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A profile with no pynox.toml, or one the file lacks: refused when the executor is
    made, not read by the model at every step, which cannot fix it."""
    if os.environ.get("PYNOX_EXAMPLES_FRAMEWORKS") != "require":
        pytest.importorskip("smolagents", reason="`nox -s examples` runs this one")
    from pynox.api.pool import Pool
    from pynox.integrations.smolagents import PynoxExecutor

    config = tmp_path / "pynox.toml"
    config.write_text("[profiles.analysis]\nallow_read = ['data']\n")
    (tmp_path / "data").mkdir()
    with Pool(lazy=True, config=str(config)) as pool:
        PynoxExecutor(pool, profile="analysis").cleanup()
        with pytest.raises(ValueError, match="'reporting'"):
            PynoxExecutor(pool, profile="reporting")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    monkeypatch.delenv("PYNOX_CONFIG", raising=False)
    with pytest.raises(ValueError, match="profile='analysis' needs a pynox.toml"):
        PynoxExecutor(profile="analysis")
