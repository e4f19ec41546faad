"""An application's own code type-checks against the installed package: the package says
it is typed (py.typed), and what the API documents is in its types."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

USER_PROGRAM = """\
import asyncio

import pynox
from pynox.ray import RayPool


def use() -> None:
    run_python: pynox.Tool = pynox.tool(timeout="10s")
    text: str = run_python("print(1)")
    result: pynox.Result = run_python.run("print(1)")
    as_callable: "Callable[[str], str]" = run_python  # what frameworks take
    with pynox.Pool() as pool:
        tool = pool.tool(session=True)
        step: pynox.Result = tool.run("x = 1")
        for item in pool.stream("print(1)"):
            if isinstance(item, pynox.Output):
                chunk: str = item.data
        pool.stream("print(1)").close()  # leaving a stream early, as documented
        pool.session().stream("print(1)").close()
    if result.error is not None:
        hint: str | None = result.error["hint"]


def use_on_ray(pool: RayPool) -> None:
    result: pynox.Result = pool.tool().run("1")  # the same tool as pynox.Pool's


async def use_async() -> None:
    result: pynox.Result = await pynox.arun("1")
    with pynox.Pool() as pool:
        await pool.astream("print(1)").aclose()
        await pool.session().astream("print(1)").aclose()
"""


def test_user_code_type_checks_strictly(tmp_path: Path) -> None:
    program = tmp_path / "app.py"
    program.write_text("from collections.abc import Callable\n" + USER_PROGRAM)
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir=/dev/null", str(program)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
