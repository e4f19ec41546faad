"""The documentation site: it builds strictly, and every command it shows is accounted for.

One convention for commands on every page: a ```console block, each command on a line
that starts with "$ ", followed by what it prints (standard output and error together).
Each command is either

- run here, when its program is cheap and deterministic (RUNNABLE): in a fresh project
  directory per page that holds a copy of examples/ and every file the page shows in a
  block with a title (```python title="report.py"), written when the page reaches it. The
  output must match what the page shows, where "..." stands for any text, caret lines
  under a traceback are ignored (they differ between CPython versions) and the project
  directory reads as /home/you/project; or
- listed in CI_COMMANDS with what runs it (a test, a nox session or the CI script), and
  that test, session or line must exist; or
- in STAND_INS: `make bundle SIGN_KEY=...` on the installation page, which would build a
  bundle from the network. The test session's bundle (built from a local runtime, see
  tests/support/bundles) stands in for the build, and is signed with the page's key by the
  same function `make bundle` signs with; the page's later commands (install.sh with the
  signature check, the installed pynox) then run for real.

A command that is neither fails. Blocks fenced as sh, bash or shell are refused, so no
command can hide from this test. The build runs `mkdocs build --strict` into a temporary
directory; the docs session of the noxfile installs the pinned MkDocs and sets
PYNOX_DOCS_BUILD=1, which turns a missing MkDocs into a failure instead of a skip.
"""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.bundles.artifacts import bundle_from_runtime

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
SHOWN_PROJECT = "/home/you/project"

# Programs whose commands the pages may show and this test runs.
RUNNABLE = frozenset(
    {"pynox", "python", "mkdir", "cat", "echo", "ls", "ssh-keygen", "install/install.sh"}
    | {"~/.local/bin/pynox"}
)
SHELL_FENCES = frozenset({"sh", "bash", "shell", "zsh", "shell-session", "sh-session"})

# Commands the pages show that are too slow or too machine-changing to run here, and what
# runs them: ".ci/run" (a line of the CI script), "Makefile:test" (a prerequisite of
# `make test`, which CI runs), "noxfile.py::SESSION" (a session `make test` runs) or
# "tests/FILE.py::TEST" (a test of the suite).
CI_COMMANDS = {
    "make setup": "Makefile:test",
    "make test": ".ci/run",
    "make conformance": ".ci/run",
    "make docs": "noxfile.py::docs",
    "make bench": "tests/test_bench.py::test_machine_and_method",
    "make bundle": "tests/test_bundle.py::test_bundles_are_byte_reproducible",
    "python examples/agents/pydantic_ai_agents.py": "noxfile.py::examples",
    "python examples/agents/strands_agents.py": "noxfile.py::examples",
    "python examples/agents/smolagents_agents.py": "noxfile.py::examples",
    "python examples/agents/smolagents_executor.py": "noxfile.py::examples",
    "python examples/monty_bridge.py": "noxfile.py::examples",
    # RayPool's page: the ray session installs the extra and runs the page's program.
    "pip install 'pynox[ray]'": "noxfile.py::ray",
    "python evaluate.py": "tests/ray/test_ray_pool.py::test_the_ray_page_runs_as_shown",
    # The network of a test machine reaches no public server: a loopback one stands in.
    "pynox --package-dir=packages --allow-network tasks/fetch.py": (
        "tests/test_agent_tasks.py::test_requests_over_https_to_a_loopback_server"
    ),
}


@dataclass
class Command:
    page: str
    line: int
    text: str
    expected: list[str] = field(default_factory=list)


@dataclass
class File:
    path: str
    content: str


@dataclass
class Block:
    page: str
    line: int
    lang: str
    title: str | None
    body: list[str]


FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, in order, with their language and title."""
    found: list[Block] = []
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, info = match["indent"], match["fence"], match["info"].strip()
        lang = info.split(None, 1)[0].lstrip(".").lower() if info else ""
        title = re.search(r'title="([^"]+)"', info)
        body: list[str] = []
        start = i + 1
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            line = lines[i]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            i += 1
        found.append(Block(page.name, start, lang, title[1] if title else None, body))
        i += 1
    return found


def steps(page: Path) -> list[Command | File]:
    """What a page shows, in order: files to write, commands with their output."""
    result: list[Command | File] = []
    for block in blocks(page):
        if block.title is not None:
            result.append(File(block.title, "\n".join(block.body) + "\n"))
        if block.lang != "console":
            continue
        for offset, line in enumerate(block.body):
            if line.startswith("$ "):
                result.append(Command(block.page, block.line + offset + 1, line[2:].strip()))
            elif result and isinstance(result[-1], Command):
                result[-1].expected.append(line)
    return result


def commands(page: Path) -> list[Command]:
    return [step for step in steps(page) if isinstance(step, Command)]


def programs_of(command: str) -> list[str]:
    """The programs a command line starts (each part of a pipe or a list), past leading
    VAR=value assignments."""
    programs = []
    for part in re.split(r"\|\|?|;|&&", re.sub(r"'[^']*'|\"[^\"]*\"", "''", command)):
        words = part.split()
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", words[0]):
            words.pop(0)
        if words[:1] == ["sh"] and len(words) > 1:
            words.pop(0)  # a script the shell runs is the program
        programs.append(words[0] if words else "")
    return programs


def runnable(command: str) -> bool:
    return all(program in RUNNABLE for program in programs_of(command))


# --- what covers the commands that are not run here ----------------------------------


def coverage_problem(command: str, covered_by: str) -> str | None:
    """None when `covered_by` really runs `command`, else what is wrong."""
    makefile = (ROOT / "Makefile").read_text()
    test_line = re.search(r"^test:(.*)\n\t(.*)$", makefile, flags=re.M)
    if command.startswith("make "):
        target = command.split()[1]
        if not re.search(rf"^{re.escape(target)}:", makefile, flags=re.M):
            return f"the Makefile has no target {target}"
    if covered_by == ".ci/run":
        # A line of its own, or one that runs it through the script's timer, `step`.
        ci = {
            line.removeprefix("step ") for line in (ROOT / ".ci" / "run").read_text().splitlines()
        }
        return None if command in ci else f".ci/run does not run `{command}`"
    if covered_by == "Makefile:test":
        target = command.split()[1]
        if test_line and target in test_line[1].split():
            return None
        return f"`make test` does not depend on {target}"
    name, _, function = covered_by.partition("::")
    path = ROOT / name
    if not path.is_file() or not re.search(rf"^def {function}\(", path.read_text(), flags=re.M):
        return f"{covered_by} does not exist"
    if name == "noxfile.py":
        if not test_line or not re.search(rf"\b{function}\b", test_line[2]):
            return f"`make test` does not run the nox session {function}"
        if command.startswith("make "):
            target = command.split()[1]
            recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
            if not recipe or f"-s {function}" not in recipe[1]:
                return f"`{command}` does not run the nox session {function}"
        example = re.search(r"\bexamples/(\S+\.py)", command)
        session_test = ROOT / "tests" / f"test_{function}.py"
        if example and example[1] not in session_test.read_text():
            return f"{session_test.name}, which the session runs, does not run {example[1]}"
    return None


# --- running the commands a page shows ----------------------------------------------


def environment(home: Path) -> dict[str, str]:
    """PATH leads to this environment's pynox and python; nothing else leaks in."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {"PATH": path, "LANG": "C.UTF-8", "HOME": str(home)}


def normalize(text: str) -> str:
    lines = [line.rstrip() for line in text.splitlines()]
    lines = [line for line in lines if not re.fullmatch(r"\s*[\^~]+", line)]
    return "\n".join(lines).strip("\n")


def matches(expected: str, actual: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, actual, flags=re.S) is not None


def run_in(project: Path, command: Command, home: Path) -> str:
    """Runs a command as at a terminal: standard output and error are one pseudo-terminal,
    so buffering and the order of lines are what a user sees."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        ["sh", "-c", command.text],
        cwd=project,
        env=environment(home),
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    output = bytearray()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], deadline - time.monotonic())
            if not ready:
                break
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: every holder of the terminal has closed it
                break
            if not chunk:
                break
            output += chunk
    finally:
        os.close(controller)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert time.monotonic() < deadline, f"`{command.text}` ran for too long"
    text = output.decode(errors="replace").replace("\r\n", "\n")
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # colour of newer CPython tracebacks
    return text.replace(str(project), SHOWN_PROJECT)


# Commands a test cannot run as shown, and what stands in for them: (project, bundles).
StandIn = Callable[[Path, Path], None]


def _signed_bundle(project: Path, built: Path) -> None:
    """`make bundle SIGN_KEY=release-key`: the session's bundle in dist/, signed there."""
    from bundler.digest import write_sums
    from bundler.signing import sign

    dist = project / "dist"
    dist.mkdir()
    archive = dist / built.name
    shutil.copyfile(built, archive)
    write_sums(archive)
    sign(archive, project / "release-key")


STAND_INS: dict[str, StandIn] = {"make bundle SIGN_KEY=release-key": _signed_bundle}


def check_page(page: Path, tmp_path: Path, built: Path | None = None) -> int:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "examples", project / "examples")
    if any("install/install.sh" in command.text for command in commands(page)):
        shutil.copytree(ROOT / "install", project / "install")
    if any(_PACKAGES_DIR in command.text for command in commands(page)):
        _link_packages(project)
    home = tmp_path / "home"
    home.mkdir()
    ran = 0
    for step in steps(page):
        if isinstance(step, File):
            target = project / step.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step.content)
            continue
        where = f"{step.page}:{step.line}: `{step.text}`"
        if step.text in STAND_INS:
            assert built is not None, f"{where} needs the test session's bundle"
            STAND_INS[step.text](project, built)
            continue
        if step.text in CI_COMMANDS:
            problem = coverage_problem(step.text, CI_COMMANDS[step.text])
            assert problem is None, f"{where} is listed as run by CI, but {problem}"
            continue
        assert runnable(step.text), (
            f"{where} is neither run by this test (programs {sorted(RUNNABLE)}) nor listed "
            "in CI_COMMANDS with what runs it"
        )
        actual = normalize(run_in(project, step, home))
        expected = normalize("\n".join(step.expected))
        assert matches(expected, actual), (
            f"{where} printed something else than the page shows.\n"
            f"--- the page\n{expected}\n--- the command\n{actual}"
        )
        ran += 1
    return ran


# Pages whose commands import numpy, pandas and the like name this directory of the project.
_PACKAGES_DIR = "--package-dir=packages"


def _link_packages(project: Path) -> None:
    """project/packages: the agents' packages the test session installed
    (requirements/agent-tasks.txt), as a virtual environment's site-packages."""
    packages = os.environ.get("PYNOX_TEST_PACKAGES")
    if not packages:
        if os.environ.get("PYNOX_DOCS_BUILD") == "1":
            pytest.fail("PYNOX_TEST_PACKAGES is unset: the docs session installs the packages")
        pytest.skip("PYNOX_TEST_PACKAGES is unset: `nox -s docs` installs the agents' packages")
    project.mkdir(parents=True, exist_ok=True)
    (project / "packages").symlink_to(packages)


# --- the tests ------------------------------------------------------------------------


def test_the_docs_have_pages_and_commands() -> None:
    assert (DOCS / "pool-protocol.md") in PAGES
    shown = [command for page in PAGES for command in commands(page)]
    assert len([c for c in shown if runnable(c.text)]) >= 10, shown
    assert [c for c in shown if c.text in CI_COMMANDS]


@pytest.mark.unit
def test_commands_use_the_console_convention() -> None:
    for page in PAGES:
        for block in blocks(page):
            where = f"{block.page}:{block.line}"
            assert block.lang not in SHELL_FENCES, (
                f"{where}: a ```{block.lang} block; show commands in ```console blocks with "
                "'$ ' prompts, so that this test sees them"
            )
            if block.lang == "console":
                assert block.body and block.body[0].startswith("$ "), (
                    f"{where}: a console block starts with a '$ ' command"
                )
            elif block.lang in ("", "text"):
                prompts = [line for line in block.body if line.startswith("$ ")]
                assert not prompts, f"{where}: commands belong in a ```console block: {prompts}"


@pytest.mark.unit
def test_every_ci_command_is_shown_and_covered() -> None:
    shown = {command.text for page in PAGES for command in commands(page)}
    for command, covered_by in CI_COMMANDS.items():
        assert command in shown, f"CI_COMMANDS lists `{command}`, which no page shows"
        problem = coverage_problem(command, covered_by)
        assert problem is None, f"`{command}`: {problem}"


def needs_a_bundle(page: Path) -> bool:
    return any(command.text in STAND_INS for command in commands(page))


@pytest.mark.parametrize(
    "page",
    [pytest.param(p, marks=pytest.mark.slow) if needs_a_bundle(p) else p for p in PAGES],
    ids=lambda page: page.name,
)
def test_page_commands(
    page: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    built = bundle_from_runtime(tmp_path_factory) if needs_a_bundle(page) else None
    check_page(page, tmp_path, built)


@pytest.mark.unit
def test_the_installation_page_runs_every_command() -> None:
    """The air-gapped walkthrough: no command of it is left to CI."""
    shown = commands(DOCS / "installation.md")
    assert any("--verify-key=" in command.text for command in shown)
    left = [c.text for c in shown if c.text in CI_COMMANDS and c.text != "make bundle"]
    assert not left, f"installation.md leaves these to CI: {left}"


def test_a_changed_output_fails(tmp_path: Path) -> None:
    """The comparison can fail: a page whose output is wrong is caught."""
    page = tmp_path / "wrong.md"
    page.write_text("```console\n$ pynox examples/hello.py\nHello from Python!\n```\n")
    with pytest.raises(AssertionError, match="something else than the page shows"):
        check_page(page, tmp_path)
    unknown = tmp_path / "unknown.md"
    unknown.write_text("```console\n$ curl https://example.org\n```\n")
    with pytest.raises(AssertionError, match="neither run by this test"):
        check_page(unknown, tmp_path / "other")


def prose(text: str) -> str:
    """A page without its code: fenced blocks, inline code and snippet lines."""
    text = re.sub(r"^(\s*)(`{3,}|~{3,}).*?^\1\2\s*$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


MEASUREMENT = re.compile(
    r"\d+(?:\.\d+)?\s?(?:ms|µs|us|ns|milliseconds?|microseconds?|x|×|%|[A-Za-z]*/s)(?!\w)"
    r"|\d+(?:\.\d+)?\s?(?:times) (?:faster|slower)"
)
# A size to a fraction of a unit was measured (limits and bounds are whole: 8 MiB, 64 KiB);
# a program's own message, quoted, is not. The security page's table records what each
# finding measured when it was found.
MEASURED_SIZE = re.compile(r"\d+\.\d+\s?[KMGT]i?B\b")
FINDINGS_PAGES = frozenset({"security.md"})


@pytest.mark.unit
def test_no_measurement_outside_the_bench_results() -> None:
    """Every figure of the site comes from `make bench`, which writes bench/results.md."""
    for page in PAGES:
        found = MEASUREMENT.findall(prose(page.read_text()))
        assert not found, f"{page.name} states figures of its own: {found}"
        if page.name not in FINDINGS_PAGES:
            text = re.sub(r'"[^"]*"', "", prose(page.read_text()))
            sizes = MEASURED_SIZE.findall(text)
            assert not sizes, f"{page.name} states sizes it measured: {sizes}"
    performance = (DOCS / "performance.md").read_text()
    assert '--8<-- "bench/results.md"' in performance


def mkdocs_or_skip() -> None:
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        if os.environ.get("PYNOX_DOCS_BUILD") == "1":
            raise
        pytest.skip("MkDocs is not installed here; the docs session (make docs) builds the site")


def test_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs_or_skip()
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"))
    plugins = set(config["plugins"])
    assert plugins <= {"search", "material/search"}, f"a plugin may reach the network: {plugins}"
    nav_pages = re.findall(r"[\w-]+\.md", str(config["nav"]))
    assert sorted(nav_pages) == sorted(page.name for page in PAGES), "a page is not in the nav"
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    built = (site / "performance" / "index.html").read_text()
    results = (ROOT / "bench" / "results.md").read_text()
    header = next(line for line in results.splitlines() if line.startswith("|"))
    first_cell = header.strip("|").split("|")[0].strip()
    assert first_cell and first_cell in built, "bench/results.md is not on the performance page"
    for page in PAGES:
        assert (site / page.stem / "index.html").exists() or page.stem == "index", page


# --- tables and lists the code defines ------------------------------------------------


def section(page: Path, heading: str) -> str:
    """The text of a page from `heading` to the next heading of the same or a higher level."""
    text = page.read_text()
    level = heading.split(" ", 1)[0]
    start = text.index(f"\n{heading}\n") + len(heading) + 2
    end = re.search(rf"^#{{1,{len(level)}}} ", text[start:], flags=re.M)
    return text[start : start + end.start()] if end else text[start:]


def first_cells(text: str) -> list[str]:
    """The first cell of every body row of the Markdown tables in `text`."""
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    cells = [row.strip("|").split("|")[0].strip() for row in rows]
    return [cell for cell in cells if cell not in ("flag", "status", "page", "---")]


def help_flags() -> set[str]:
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "pynox"), "--help"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    return set(re.findall(r"^  (--[a-z-]+)", proc.stdout, flags=re.M))


@pytest.mark.unit
def test_the_flag_table_is_the_parsers() -> None:
    """Every flag pynox takes is in the table of the commands page and in --help, and no
    other."""
    from pynox.cli.arguments import _OWN_FLAGS

    table = first_cells(section(DOCS / "commands.md", "## Flags"))
    shown = {re.sub(r"[=`].*", "", cell.strip("`")) for cell in table}
    parsed = set(_OWN_FLAGS) | {"--no-sandbox"}
    assert shown == parsed, f"the flag table of commands.md differs from the parser: {shown}"
    assert help_flags() == parsed, "pynox --help lists other flags than the parser takes"


@pytest.mark.unit
def test_the_configuration_keys_are_the_grants() -> None:
    from pynox.policy.grants import GRANT_FIELDS

    text = " ".join(section(DOCS / "commands.md", "## `pynox.toml`").split())
    listed = re.search(r"`\[permissions\]` and each profile take (.*?)\.", text)
    assert listed, "commands.md no longer lists the keys [permissions] takes"
    assert set(re.findall(r"`(\w+)`", listed[1])) == {f.name for f in GRANT_FIELDS}


@pytest.mark.unit
def test_the_exit_status_table_is_the_codes() -> None:
    from pynox import errors

    table = first_cells(section(DOCS / "commands.md", "## Exit statuses and `pynox:` lines"))
    assert sorted(int(cell) for cell in table) == sorted(
        {errors.EXIT_TIMEOUT, errors.EXIT_SETUP_FAILURE, errors.EXIT_USAGE}
    )


@pytest.mark.unit
def test_the_synopsis_is_the_usage() -> None:
    """The command lines at the top of the commands page are those of `pynox --help`."""
    from pynox.cli.arguments import USAGE

    usage = USAGE.split("\n\n")[0].removeprefix("usage:")
    usage_lines = [" ".join(line.split()) for line in re.split(r"\n(?=\s+pynox )", usage)]
    synopsis = next(b for b in blocks(DOCS / "commands.md") if b.lang == "text").body
    assert [" ".join(line.split()) for line in synopsis] == usage_lines


@pytest.mark.unit
def test_every_page_is_linked_from_the_front_pages() -> None:
    """The site's home page and the README each link every page."""
    for front, prefix in ((DOCS / "index.md", ""), (ROOT / "README.md", "docs/")):
        linked = set(re.findall(r"\]\(([\w/-]+\.md)\)", front.read_text()))
        missing = [
            page.name
            for page in PAGES
            if page.name != "index.md" and prefix + page.name not in linked
        ]
        assert not missing, f"{front.name} links no {missing}"


@pytest.mark.unit
def test_every_configuration_shown_is_valid() -> None:
    """Each pynox.toml the pages show parses, with no unknown key or table."""
    from pynox.errors import PynoxError
    from pynox.policy.config import parse_config_bytes

    shown = [ROOT / "README.md", *PAGES, *sorted((ROOT / "examples").glob("*.md"))]
    checked = 0
    for page in shown:
        for block in blocks(page):
            if block.lang == "toml":
                where = f"{page.name}:{block.line}"
                text = "\n".join(block.body) + "\n"
                try:
                    parse_config_bytes(text.encode(), f"{SHOWN_PROJECT}/pynox.toml", {})
                except PynoxError as failure:
                    pytest.fail(f"{where}: {failure}")
                checked += 1
    assert checked >= 5


@pytest.mark.unit
def test_the_readme_shows_what_make_demo_runs() -> None:
    """The README's demo block shows the commands `make demo` echoes, in order."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert recipe, "the Makefile has no demo target"
    echoed = re.findall(r'@echo "\\\$\$ (.*)"', recipe[1])
    demo = next(b for b in blocks(ROOT / "README.md") if any("hello.py" in x for x in b.body))
    shown = [line[2:] for line in demo.body if line.startswith("$ ")]
    assert shown == echoed
