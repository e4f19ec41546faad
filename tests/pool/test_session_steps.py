"""Session steps as python's REPL runs its inputs: each step's code under a file name of
its own, so that tracebacks, warnings and inspect show every step's lines."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support.commands import python
from support.pool_client import PoolClient
from support.pool_requests import assert_ok, close_session, new_id, step

DEFINES_F = "def f():\n    return 1 / 0\n"


def _without_carets(traceback: str) -> str:
    """traceback without the lines that only point at part of the line above: which parts
    get one, and how, changes with python's version (3.11 began them, 3.13 marks more)."""
    return "".join(line for line in traceback.splitlines(keepends=True) if line.strip(" ~^\n"))


def _as_python_shows(source: str, name: str, directory: Path) -> str:
    """What python prints for source run as a file, its path shown as name: which parts
    of a line get a caret line, and how, changes with python's version."""
    program = directory / "program.py"
    program.write_text(source, encoding="utf-8")
    return python(str(program)).stderr.decode().replace(str(program), name)


def test_an_earlier_steps_function_shows_its_own_lines(pool: PoolClient) -> None:
    """Every step's code was named agent.py: a traceback through a function of an earlier
    step showed the line of that number of the latest step ("y = 2"), and
    inspect.getsource gave the latest step's lines."""
    name = new_id("lines")
    assert step(pool, name, DEFINES_F)["exit"] == 0
    failed = step(pool, name, "x = 1\ny = 2\nf()")
    assert _without_carets(failed["stderr"]).endswith(
        'Traceback (most recent call last):\n  File "<step-2>", line 3, in <module>\n'
        '    f()\n  File "<step-1>", line 2, in f\n    return 1 / 0\n'
        "ZeroDivisionError: division by zero\n"
    ), failed["stderr"]
    assert (failed["error"]["file"], failed["error"]["line"]) == ("<step-1>", 2)
    assert_ok(step(pool, name, "import inspect\nprint(inspect.getsource(f), end='')"), DEFINES_F)
    warned = step(pool, name, "import warnings\nwarnings.warn('careful')")
    assert warned["stderr"] == "<step-4>:2: UserWarning: careful\n  warnings.warn('careful')\n"
    close_session(pool, name)


def test_a_named_step_keeps_its_name(pool: PoolClient) -> None:
    """A name the client gives is the step's file name; the session's sys.argv stays the
    first step's name (agent.py when it had none)."""
    name = new_id("named")
    assert step(pool, name, DEFINES_F, name="cell1.py")["exit"] == 0
    failed = step(pool, name, "import sys\nprint(sys.argv)\nf()", name="cell2.py")
    assert failed["stdout"] == "['cell1.py']\n"
    assert '  File "cell2.py", line 3, in <module>\n    f()\n' in failed["stderr"]
    assert '  File "cell1.py", line 2, in f\n    return 1 / 0\n' in failed["stderr"]
    close_session(pool, name)


def test_only_the_latest_steps_lines_are_kept(pool: PoolClient) -> None:
    """What linecache held grew with every step, for as long as the session lived."""
    name = new_id("bounded")
    assert step(pool, name, DEFINES_F)["exit"] == 0
    for number in range(1000):
        assert step(pool, name, f"x = {number}")["exit"] == 0
    # Step 1002 keeps the lines of steps 3 to 1002: those of the first two are let go of.
    last = step(
        pool,
        name,
        "import linecache\n"
        "print(sorted(int(k[6:-1]) for k in linecache.cache if k.startswith('<step-')) "
        "== list(range(3, 1003)))\n"
        "f()",
    )
    assert last["stdout"] == "True\n"
    assert '  File "<step-1>", line 2, in f\nZeroDivisionError' in last["stderr"], last
    close_session(pool, name)


def test_the_lines_kept_are_bounded_by_their_size_in_memory(pool: PoolClient) -> None:
    """The bound counted characters: code whose characters take two bytes each (or four)
    was kept up to twice (four times) the memory the bound allows."""
    name = new_id("bounded-bytes")
    padding = "# " + "\u0100" * (6 << 20) + "\n"  # 12 MiB in memory (and in UTF-8)
    for code in (DEFINES_F + padding, padding):
        request = {"id": new_id("s"), "session": name, "code": code}
        pool.send_raw(json.dumps(request, ensure_ascii=False).encode() + b"\n")
        assert pool.result(request["id"])["exit"] == 0
    failed = step(pool, name, "f()")
    assert '  File "<step-1>", line 2, in f\nZeroDivisionError' in failed["stderr"], failed
    close_session(pool, name)


def test_a_step_shows_the_warnings_an_earlier_step_showed(pool: PoolClient) -> None:
    """A warning an earlier step showed from the same line was not shown again: a step run
    a second time seemed to warn no more. python's REPL shows it at each input."""
    name = new_id("warnings")
    assert step(pool, name, "import warnings")["exit"] == 0
    for number in (2, 3):
        warned = step(pool, name, "warnings.warn('careful')")
        assert warned["stderr"] == (
            f"<step-{number}>:1: UserWarning: careful\n  warnings.warn('careful')\n"
        ), warned
    close_session(pool, name)


def test_a_step_finds_the_last_error_where_python_leaves_it(pool: PoolClient) -> None:
    """python (3.12 on) keeps an uncaught exception in sys.last_exc too, where the REPL's
    next input, pdb.pm() and traceback.print_last() find it; a step found none there."""
    name = new_id("last-error")
    assert step(pool, name, "1 / 0")["exit"] == 1
    found = step(pool, name, "import sys\nprint(repr(getattr(sys, 'last_exc', None)))")
    expected = "ZeroDivisionError('division by zero')" if sys.version_info >= (3, 12) else "None"
    assert_ok(found, expected + "\n")
    close_session(pool, name)


def test_a_line_after_a_form_feed_is_shown_as_python_shows_a_files(
    pool: PoolClient, tmp_path: Path
) -> None:
    """The code's lines were split at every break str.splitlines knows, a form feed or
    U+2028 in a string too, where python ends no line: the traceback showed a line off."""
    name = new_id("breaks")
    source = 'x = 1 \f\ny = "\u2028"\nz = 2\n1 / 0\n'
    failed = step(pool, name, source)
    assert failed["stderr"] == _as_python_shows(source, "<step-1>", tmp_path)
    close_session(pool, name)


def test_a_last_line_without_a_line_end_gets_pythons_caret_line(
    pool: PoolClient, tmp_path: Path
) -> None:
    """A step's last line was kept without a line end, which python's linecache gives a
    file's last line: 3.11 and 3.12 drew its caret line one column right of the
    expression it points at."""
    name = new_id("carets")
    source = "x = 1\nx / 0"
    failed = step(pool, name, source)
    assert failed["stderr"] == _as_python_shows(source, "<step-1>", tmp_path)
    close_session(pool, name)


def test_a_compiler_warning_shows_its_line(pool: PoolClient, tmp_path: Path) -> None:
    """On 3.10 a step's SyntaxWarning came without its line, which python shows for a
    file: CPython read it from the file, and a step has none."""
    name = new_id("compiler-warning")
    source = "x = 1\nif x is 1:\n    print('one')\n"
    warned = step(pool, name, source)
    assert warned["stderr"] == _as_python_shows(source, "<step-1>", tmp_path)
    assert '<step-1>:2: SyntaxWarning: "is" with ' in warned["stderr"]
    close_session(pool, name)


def test_a_syntax_error_on_a_tab_indented_line_is_shown_as_python_shows_it(
    pool: PoolClient, tmp_path: Path
) -> None:
    """Before 3.13, the line of a step's SyntaxError kept the tab it was indented with,
    and so did its caret line, where python shows the line from its first character
    (3.13's python keeps the tab as well)."""
    name = new_id("tabs")
    source = "def f():\n\treturn g(a b)\n"
    failed = step(pool, name, source)
    assert failed["stderr"] == _as_python_shows(source, "<step-1>", tmp_path)
    assert "SyntaxError: invalid syntax. Perhaps you forgot a comma?" in failed["stderr"]
    close_session(pool, name)


def test_a_misspelt_name_gets_pythons_suggestion(pool: PoolClient, tmp_path: Path) -> None:
    """Before 3.12 only python's own display suggests a name ("Did you mean: 'total'?"),
    not the traceback module, which shows a step's lines: a step's error came without."""
    for source in ("total = 1\nprint(totl)\n", "import math\nmath.sqr(2)\n"):
        name = new_id("suggestion")
        failed = step(pool, name, source)
        assert failed["stderr"] == _as_python_shows(source, "<step-1>", tmp_path)
        assert ". Did you mean: " in failed["stderr"], failed["stderr"]
        close_session(pool, name)


def test_a_future_import_holds_for_the_steps_after_it(pool: PoolClient) -> None:
    """python's REPL (and a notebook) compiles each input under the `from __future__`
    imports of the inputs before it; a step forgot them, and annotations a later step
    wrote for a name defined further on failed with a NameError."""
    name = new_id("future")
    assert step(pool, name, "from __future__ import annotations")["exit"] == 0
    later = step(pool, name, "def f(x: Later) -> Later:\n    pass\nf.__annotations__")
    assert later["exit"] == 0 and later["value"] == "{'x': 'Later', 'return': 'Later'}", later
    refused = step(pool, name, "from __future__ import barry_as_FLUFL")
    assert refused["exit"] == 0
    compared = step(pool, name, "print('run')\n1 != 2")
    assert compared["stdout"] == "" and compared["error"]["type"] == "SyntaxError", compared
    assert_ok(step(pool, name, "1 <> 2"), "")
    close_session(pool, name)


def test_an_error_found_past_parsing_shows_its_line(pool: PoolClient) -> None:
    """python shows the line of a SyntaxError its compiler finds once the code parsed
    ('return' outside function), reading it from the file; a step showed none."""
    name = new_id("compiler-error")
    failed = step(pool, name, "x = 1\nfor y in []:\n    pass\nreturn x\n")
    assert failed["stderr"] == (
        '  File "<step-1>", line 4\n    return x\n    ^^^^^^^^\n'
        "SyntaxError: 'return' outside function\n"
    ), failed["stderr"]
    close_session(pool, name)


def test_a_program_that_breaks_linecache_fails_its_step_not_the_session(
    pool: PoolClient,
) -> None:
    """The program owns linecache: letting go of an old step's lines outside the step's
    error handling ended the session's process with a traceback of pynox's own."""
    name = new_id("broken-cache")
    breaks = (
        "import linecache\n"
        "class Broken(dict):\n"
        "    def pop(self, *args):\n"
        "        raise RuntimeError('broken cache')\n"
        "linecache.cache = Broken(linecache.cache)\n"
    )
    assert step(pool, name, breaks)["exit"] == 0
    padding = "# " + "x" * (12 << 20) + "\n"  # two of them pass the bound on lines kept
    results = []
    for _ in range(2):
        request = {"id": new_id("s"), "session": name, "code": padding}
        pool.send_raw(json.dumps(request).encode() + b"\n")
        results.append(pool.result(request["id"]))
    failed = results[-1]
    assert failed["error"]["type"] == "RuntimeError", failed
    assert failed["session"]["ended"] is None, failed
    assert "pynox/" not in failed["stderr"], failed["stderr"]
    # Each step lets go of one old step's lines, and fails likewise, until none is left
    # past the bound: the session's process lives on throughout.
    for _ in range(3):
        alive = step(pool, name, "print('alive')")
        assert alive["session"]["ended"] is None, alive
        if alive["exit"] == 0:
            break
    assert_ok(alive, "alive\n")
    close_session(pool, name)
