"""pynox._boot: the start-up image of pynox's hot modules, and when it is not used."""

from __future__ import annotations

import ast
import errno
import importlib
import json
import marshal
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from importlib import _bootstrap_external
from importlib.util import cache_from_source, module_from_spec
from pathlib import Path

import pytest
from support.commands import pynox as run_pynox
from support.commands import python, run
from support.installations import installation

import pynox
from pynox import _boot

PACKAGE = Path(pynox.__file__).parent


@pytest.fixture
def package_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """_boot pointed at a copy of the package's sources, so tests can change them."""
    copy = tmp_path / "pynox"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    monkeypatch.setattr(_boot, "PACKAGE_DIR", str(copy))
    image = copy / "__pycache__" / Path(_boot._IMAGE).name
    monkeypatch.setattr(_boot, "_IMAGE", str(image))
    monkeypatch.setattr(_boot, "_baked_values", [])  # what loading the copy's image sets
    yield copy


def image_of(copy: Path) -> Path:
    return copy / "__pycache__" / Path(_boot._IMAGE).name


def write_image(copy: Path) -> Path:
    (copy / "__pycache__").mkdir(exist_ok=True)
    return Path(_boot.write_image(str(copy / "__pycache__")))


@pytest.mark.unit
def test_written_image_loads_every_hot_module(package_copy: Path) -> None:
    assert _boot._load_image() is None  # none yet
    assert write_image(package_copy) == image_of(package_copy)
    codes = _boot._load_image()
    assert codes is not None
    assert set(codes) == set(_boot.IMAGE_MODULES)
    # Compiled under a relative name, loaded naming the sources where they are now,
    # inner functions included: tracebacks name the installed files after a move.
    source = codes["pynox.cli.main"][0]
    cli = _boot.unpack(codes["pynox.cli.main"])
    assert source == cli.co_filename == str(package_copy / "cli" / "main.py")
    inner = [c for c in cli.co_consts if hasattr(c, "co_filename")]
    assert inner and {c.co_filename for c in inner} == {source}
    # A subpackage is served as a package, from its __init__.py.
    assert codes["pynox.cli"][0] == str(package_copy / "cli" / "__init__.py")


@pytest.mark.unit
def test_modules_that_run_together_are_unpacked_together(
    package_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each of PARTS is marshalled as one, so a name its modules share is made once: one
    unpacking gives every module of the part. Any other module is unpacked alone."""
    write_image(package_copy)
    codes = _boot._load_image()
    assert codes is not None
    unpacked: list[int] = []
    loads = marshal.loads

    def counted(data: bytes) -> object:
        unpacked.append(len(data))
        return loads(data)

    monkeypatch.setattr(_boot.marshal, "loads", counted)
    for part in _boot.PARTS:
        assert len({id(codes[name][2]) for name in part}) == 1, part
        names = [_boot.unpack(codes[name]).co_filename for name in part]
        assert names == [codes[name][0] for name in part]
        assert unpacked == [len(codes[part[0]][2].data)]
        unpacked.clear()
    alone = [name for name in _boot.IMAGE_MODULES if not any(name in p for p in _boot.PARTS)]
    assert alone and len({id(codes[name][2]) for name in alone}) == len(alone)
    assert _boot.unpack(codes[alone[0]]).co_filename == codes[alone[0]][0]
    assert len(unpacked) == 1


@pytest.mark.unit
def test_a_module_of_a_part_runs_again_when_its_first_run_raised(package_copy: Path) -> None:
    """A part lets go of a module's code once it ran; a module whose run raised is
    imported again, as importlib would, from the part unpacked anew."""
    write_image(package_copy)
    codes = _boot._load_image()
    assert codes is not None
    first = _boot.unpack(codes["pynox.cli.main"])
    again = _boot.unpack(codes["pynox.cli.main"])
    assert again is not first and again.co_filename == first.co_filename
    # Equal code (its instructions, constants, names and positions). Not compared by
    # marshal.dumps: before 3.12 its bytes depend on reference counts (FLAG_REF).
    assert again == first


def _names_in(code: object) -> set[str]:
    """Every name a code object and those nested in it use."""
    names = set(code.co_names)  # type: ignore[attr-defined]
    for const in code.co_consts:  # type: ignore[attr-defined]
        if hasattr(const, "co_names"):
            names |= _names_in(const)
    return names


@pytest.mark.unit
def test_the_image_leaves_out_what_only_type_checkers_read(package_copy: Path) -> None:
    """A module's `if TYPE_CHECKING:` block never runs, but its code (imports, the
    Protocol classes) would be unpacked by every run: the image holds the module
    without it, and the module runs as before."""
    write_image(package_copy)
    codes = _boot._load_image()
    assert codes is not None
    source = (package_copy / "engine" / "child_setup.py").read_text()
    assert "    class PoolLink(Protocol):" in source  # what the image must leave out
    code = _boot.unpack(codes["pynox.engine.child_setup"])
    assert not {"PoolLink", "Protocol", "NoReturn"} & _names_in(code)
    namespace: dict[str, object] = {"__name__": "pynox.engine.child_setup"}
    exec(code, namespace)  # noqa: S102 - the package's own code
    assert namespace["TYPE_CHECKING"] is False and "ChildSetup" in namespace
    assert "PoolLink" not in namespace


@pytest.mark.unit
def test_a_module_from_the_image_names_its_bytecode_without_importlibs_path_work(
    package_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """__cached__ is what importlib would name, worked out once per module by the finder:
    importlib would otherwise run its path handling for every module of every run."""
    write_image(package_copy)
    codes = _boot._load_image()
    assert codes is not None
    expected = {name: cache_from_source(codes[name][0]) for name in _boot.IMAGE_MODULES}

    def unexpected(*args: object, **kwargs: object) -> str:
        raise AssertionError("importlib worked out __cached__ of a module from the image")

    monkeypatch.setattr(_bootstrap_external, "cache_from_source", unexpected)
    finder = _boot._ImageFinder(codes)
    for name in _boot.IMAGE_MODULES:
        spec = finder.find_spec(name)
        assert spec is not None
        assert module_from_spec(spec).__cached__ == expected[name]


@pytest.mark.unit
@pytest.mark.parametrize("prefix", [False, True], ids=["beside-sources", "pycache-prefix"])
def test_modules_run_at_once_are_made_as_importlib_makes_them(
    package_copy: Path, monkeypatch: pytest.MonkeyPatch, prefix: bool
) -> None:
    """run_all makes each module itself rather than through module_from_spec: it gets the
    same attributes, for modules and packages, and with a pycache prefix, where importlib
    works out __cached__ itself."""
    write_image(package_copy)
    codes = _boot._load_image()
    assert codes is not None
    if prefix:
        monkeypatch.setattr(sys, "pycache_prefix", str(package_copy / "prefix"))
    finder = _boot._ImageFinder(codes)
    for name in _boot.IMAGE_MODULES:
        spec = finder.find_spec(name)
        assert spec is not None
        made, expected = vars(_boot._module_for(spec)), vars(module_from_spec(spec))
        assert made == expected, name
        package = _boot._relative_source(name).endswith("__init__.py")
        assert ("__path__" in made) == package and "__cached__" in made, name


def test_the_image_is_the_same_from_one_build_to_the_next(tmp_path: Path) -> None:
    """Bundles and wheels are reproducible: the image's bytes depend only on the sources."""
    images = []
    for build in ("one", "two"):
        out = tmp_path / build
        out.mkdir()
        env = {"PYTHONHASHSEED": "0"}
        # As the build runs it: not -I, which would ignore PYTHONHASHSEED.
        command = ("-B", "-S", "-s", "-m", "pynox._boot", "--write-image", str(out))
        proc = python(*command, env=env, cwd=PACKAGE.parent)
        assert proc.returncode == 0, proc.stderr
        images.append((out / Path(_boot._IMAGE).name).read_bytes())
    assert images[0] == images[1]


@pytest.mark.unit
def test_the_image_is_mapped_or_read_where_it_cannot_be(
    package_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pynox import _native  # the installed one: the copy has no compiled modules

    write_image(package_copy)
    mapped = _boot._load_image()
    assert sys.modules[_boot.NATIVE_MODULE] is _native

    def cannot_map(fd: int) -> memoryview:
        raise OSError(errno.ENODEV, os.strerror(errno.ENODEV))  # a file system without mmap

    monkeypatch.setattr(_native, "map_file", cannot_map)
    read_unmapped = _boot._load_image()
    monkeypatch.delitem(sys.modules, _boot.NATIVE_MODULE)
    monkeypatch.setattr(_boot, "_native_spec", lambda: None)
    read_without_native = _boot._load_image()
    expected = {name: bytes(entry[2].data) for name, entry in (mapped or {}).items()}
    assert expected
    for read in (read_unmapped, read_without_native):
        assert read is not None
        assert {name: bytes(entry[2].data) for name, entry in read.items()} == expected


@pytest.mark.unit
def test_a_rebuilt_image_leaves_the_one_a_process_mapped_as_it_was(package_copy: Path) -> None:
    """A pool runs for hours on the image it mapped; a build that writes the image again
    writes a new file, so the pool's stays whole (the old one cut short would fault)."""
    from pynox import _native  # noqa: F401 - maps the image: the copy has no compiled modules

    write_image(package_copy)
    codes = _boot._load_image()
    assert codes is not None
    before = {name: bytes(entry[2].data) for name, entry in codes.items()}
    source = package_copy / "errors.py"  # in the image's first part
    source.write_text("GROWN = 1\n" + source.read_text())
    write_image(package_copy)
    rebuilt = _boot._load_image()
    assert rebuilt is not None
    assert bytes(rebuilt["pynox.errors"][2].data) != before["pynox.errors"]
    assert {name: bytes(entry[2].data) for name, entry in codes.items()} == before


@pytest.mark.unit
def test_map_file_maps_a_regular_file_and_refuses_anything_else(tmp_path: Path) -> None:
    from pynox._native import map_file

    data = tmp_path / "data"
    data.write_bytes(b"image" * 1000)
    with data.open("rb") as file:
        view = map_file(file.fileno())
    assert view.readonly and bytes(view) == b"image" * 1000  # the file closed, still there
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    read_end, write_end = os.pipe()
    try:
        with empty.open("rb") as file:
            for fd in (file.fileno(), read_end):
                with pytest.raises(ValueError, match="regular file that is not empty"):
                    map_file(fd)
    finally:
        os.close(read_end)
        os.close(write_end)
    with pytest.raises(ValueError, match="file descriptor"):
        map_file(-1)
    with pytest.raises(OSError):
        map_file(9999)  # no such descriptor


@pytest.mark.unit
def test_file_sizes_gives_each_files_size_or_minus_one(tmp_path: Path) -> None:
    from pynox._native import file_sizes

    (tmp_path / "three").write_bytes(b"abc")
    (tmp_path / "empty").write_bytes(b"")
    named = tmp_path / "naïve"
    named.write_bytes(b"12345")
    paths = (str(tmp_path / "three"), str(tmp_path / "empty"), str(tmp_path / "gone"), str(named))
    assert file_sizes(paths) == (3, 0, -1, 5)
    assert file_sizes(()) == ()
    with pytest.raises(TypeError):
        file_sizes([str(named)])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        file_sizes((3,))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        file_sizes(("a\0b",))


@pytest.mark.unit
@pytest.mark.parametrize("native", [True, False], ids=["file_sizes", "os.stat"])
def test_a_group_runs_from_the_image_but_a_module_whose_source_changed(
    package_copy: Path, monkeypatch: pytest.MonkeyPatch, native: bool
) -> None:
    """run_all checks a group's sources at once; one of another size is left to the
    import system, which imports it from its source."""
    write_image(package_copy)
    codes = _boot._load_image()
    assert codes is not None
    source = package_copy / "unit_format.py"
    source.write_text(source.read_text() + "\nCHANGED = True\n")
    importlib.import_module(_boot.NATIVE_MODULE)  # the installed one: the copy has none
    if not native:
        monkeypatch.delitem(sys.modules, _boot.NATIVE_MODULE)
    names = ("pynox.engine", "pynox.unit_format", "pynox.engine.time_limit")
    # What the import system does not find in the image, it finds in the copy; what the
    # group sets on the installed package goes when the test ends.
    monkeypatch.setattr(pynox, "__path__", [str(package_copy)])
    for attribute in ("engine", "unit_format"):
        monkeypatch.setattr(pynox, attribute, getattr(pynox, attribute, None), raising=False)
    monkeypatch.setattr(sys, "meta_path", [_boot._ImageFinder(codes), *sys.meta_path])
    before = {name: sys.modules.pop(name, None) for name in names}
    try:
        _boot._ImageFinder(codes).run_all(names)
        time_limit = sys.modules["pynox.engine.time_limit"]
        unit_format = sys.modules["pynox.unit_format"]  # imported by time_limit, as usual
    finally:
        for name, module in before.items():
            sys.modules.pop(name, None)
            if module is not None:
                sys.modules[name] = module
    assert type(time_limit.__spec__.loader).__name__ == "_ImageFinder"
    assert type(unit_format.__spec__.loader).__name__ != "_ImageFinder"
    assert unit_format.CHANGED is True


@pytest.mark.unit
def test_a_source_of_another_size_imports_as_usual(package_copy: Path) -> None:
    write_image(package_copy)
    source = package_copy / "engine" / "child.py"
    source.write_text(source.read_text() + "\n# changed\n")
    codes = _boot._load_image()
    assert codes is not None
    finder = _boot._ImageFinder(codes)
    assert finder.find_spec("pynox.engine.child") is None  # the path finder's, then
    spec = finder.find_spec("pynox.cli.main")
    assert spec is not None and spec.loader is finder


def test_the_finder_takes_the_compiled_module_from_its_file_or_leaves_it_to_the_path_finder(
    package_copy: Path,
) -> None:
    finder = _boot._ImageFinder({})
    assert finder.find_spec("pynox._native") is None  # the copy has none: not ours to find
    compiled = Path(importlib.import_module("pynox._native").__file__ or "")
    shutil.copyfile(compiled, package_copy / compiled.name)
    spec = finder.find_spec("pynox._native")
    assert spec is not None
    assert spec.origin == str(package_copy / compiled.name)
    assert type(spec.loader).__name__ == "ExtensionFileLoader"
    assert module_from_spec(spec).__file__ == spec.origin


def rewritten_image(image: Path, change: Callable[[bytes, dict[str, tuple]], bytes]) -> None:
    """The image with its index changed: change(magic, index) gives the new magic."""
    data = image.read_bytes()
    size = int.from_bytes(data[:4], "little")
    magic, index, baked_at = marshal.loads(data[4 : 4 + size])
    magic = change(magic, index)
    header = marshal.dumps((magic, index, baked_at))
    image.write_bytes(len(header).to_bytes(4, "little") + header + data[4 + size :])


@pytest.mark.unit
def test_a_damaged_image_or_another_magic_is_unused(package_copy: Path) -> None:
    image = write_image(package_copy)
    data = image.read_bytes()
    image.write_bytes(data[: len(data) // 2])
    assert _boot._load_image() is None
    image.write_bytes(data[:-1])  # only the last byte of the values baked in the image
    assert _boot._load_image() is None
    image.write_bytes(data)
    assert _boot._load_image() is not None
    rewritten_image(image, lambda magic, index: b"\0\0\r\n")
    assert _boot._load_image() is None
    image.write_bytes(data)

    def without_cli_main(magic: bytes, index: dict[str, tuple]) -> bytes:
        del index["pynox.cli.main"]
        return magic

    rewritten_image(image, without_cli_main)
    assert _boot._load_image() is None


@pytest.mark.unit
def test_a_part_damaged_in_place_gives_way_to_the_source(package_copy: Path) -> None:
    """Bytes damaged in the image with its lengths intact show only when a part or the
    baked values are unpacked: the module then runs from its source, as importing it
    would, and the caller makes the value itself, instead of the run failing inside pynox."""
    image = write_image(package_copy)
    data = bytearray(image.read_bytes())
    size = int.from_bytes(data[:4], "little")
    _, index, (values_at, values_length) = marshal.loads(bytes(data[4 : 4 + size]))
    _, _, offset, length, _ = index["pynox.cli.main"]
    body = 4 + size
    data[body + offset : body + offset + length] = b"\xff" * length
    data[body + values_at : body + values_at + values_length] = b"\xff" * values_length
    image.write_bytes(bytes(data))
    codes = _boot._load_image()
    assert codes is not None
    code = _boot.unpack(codes["pynox.cli.main"])
    namespace: dict[str, object] = {"__name__": "pynox.cli.main"}
    exec(code, namespace)  # noqa: S102 - pynox's own source
    assert code.co_filename == str(package_copy / "cli" / "main.py")
    assert callable(namespace["main"])
    assert all(_boot.baked(name) is None for name in _boot.BAKED)


# The launcher's hint texts for a run with no memory or file size limit, made in a
# process under other limits and another environment than the build's.
UNLIMITED_HINT_TEXTS = """
import json, resource
for limit in (resource.RLIMIT_AS, resource.RLIMIT_FSIZE, resource.RLIMIT_NOFILE):
    resource.setrlimit(limit, (1 << 30, 1 << 30) if limit != resource.RLIMIT_NOFILE else (64, 64))
from pynox.engine.hint_text import hint_texts
from pynox.policy.resolve import Policy
print(json.dumps(hint_texts(Policy())))
"""


@pytest.mark.unit
def test_the_image_holds_the_hint_texts_every_run_without_size_limits_would_make(
    package_copy: Path,
) -> None:
    """A --json run takes them from the image instead of making them: they must be what
    any such run makes, wherever the image was built."""
    write_image(package_copy)
    assert _boot.baked("unlimited_hint_texts") is None  # not loaded yet
    assert _boot._load_image() is not None
    baked = _boot.baked("unlimited_hint_texts")
    environment = {"PATH": os.environ["PATH"], "LANG": "C", "HOME": "/nonexistent"}
    proc = python("-c", UNLIMITED_HINT_TEXTS, env=environment)
    assert proc.returncode == 0, proc.stderr
    made_elsewhere = json.loads(proc.stdout)
    assert baked == made_elsewhere
    assert "read" in made_elsewhere  # not an empty table: the hints of a refused read, ...
    assert "memory" not in made_elsewhere  # ... and none of a limit the run has not


@pytest.mark.parametrize(
    ("flags", "loaded"),
    [
        (["--json"], [False, False]),
        (["--json", "--max-file-size=1m"], [False, True]),
        (["--json", "--memory=1g"], [False, True]),
        (["--memory=1g"], [False, True]),
    ],
    ids=["json", "json-file-size", "json-memory", "memory"],
)
def test_a_run_loads_the_wording_of_hints_only_for_its_size_limits(
    tmp_path: Path, flags: list[str], loaded: list[bool]
) -> None:
    """Making every hint's text cost each --json run some 0.6 ms, and loading the wording
    of every kind, which a run with a memory limit did for the lines of native code's
    end, some 0.2 ms more: a --json run without a memory or file size limit takes the
    texts from the image, and a run with either loads only those limits' wording. Their
    hints read the same."""
    names = ("pynox.engine.hint_text", "pynox.engine.limit_hints")
    probe = f"import sys\nprint([n in sys.modules for n in {names!r}])\nopen('/etc/shadow')\n"
    proc = run_pynox(*flags, "-c", probe, cwd=tmp_path)
    hint = "reading /etc/shadow is not allowed; grant it with --allow-read=/etc/shadow"
    if "--json" in flags:
        result = json.loads(proc.stdout)
        output, shown = result["stdout"], result["error"]["hint"]
    else:
        output, shown = proc.stdout.decode(), proc.stderr.decode().splitlines()[-1]
        hint = "pynox: " + hint
    assert output == f"{loaded}\n"
    assert shown == hint


def test_a_run_writes_nothing_into_the_installed_package(tmp_path: Path) -> None:
    """The image comes with the install; a run never writes one (a sandboxed run's
    write grant could otherwise forge what every later run executes unconfined)."""
    assert Path(_boot._IMAGE).exists(), "the installed package has no start-up image"
    # A copy without its image: the installed package, which tests running beside this
    # one use, keeps its own.
    launcher = installation(tmp_path, image=False)
    cache = next(launcher.parent.parent.glob("lib/python*/site-packages/pynox/__pycache__"))
    before = sorted(p.name for p in cache.iterdir())
    for mode in ([], ["--timeout=30s"], ["--json"]):
        proc = run([str(launcher), *mode, "-c", "pass"], cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in cache.iterdir()) == before


PROBE = (
    "import gc, sys\n"
    "print(type(sys.modules['pynox.cli.main'].__spec__.loader).__name__)\n"
    "print(any(type(f).__name__ == '_ImageFinder' for f in sys.meta_path), gc.isenabled())\n"
)


@pytest.mark.parametrize("mode", [[], ["--timeout=30s"]], ids=["in-process", "supervised"])
def test_runs_load_pynox_from_the_image_and_the_program_never_sees_it(mode: list[str]) -> None:
    assert Path(_boot._IMAGE).exists(), "the installed package has no start-up image"
    proc = run_pynox(*mode, "-c", PROBE)
    assert proc.returncode == 0, proc.stderr
    # pynox came from the image; the finder left sys.meta_path and the
    # collector is on, as python starts the program.
    assert proc.stdout.decode() == "_ImageFinder\nFalse True\n"


@pytest.mark.unit
def test_the_image_holds_code_that_optimize_2_leaves_unchanged_but_for_docstrings() -> None:
    """The image compiles as `python -OO` does: no hot module may rely on assert or __debug__."""

    for name in _boot.IMAGE_MODULES:
        tree = ast.parse((PACKAGE / _boot._relative_source(name)).read_text())
        asserts = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)]
        debug = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Name) and node.id == "__debug__"
        ]
        assert asserts == [] and debug == [], (name, asserts, debug)


def _imported_at_top(name: str, group: list[str]) -> set[str]:
    """The modules of group that a module's top level imports (its package's among them)."""
    tree = ast.parse((PACKAGE / _boot._relative_source(name)).read_text())
    parts = name.split(".")
    found = {".".join(parts[:i]) for i in range(2, len(parts))}
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return (found & set(group)) - {name}


@pytest.mark.unit
@pytest.mark.parametrize(
    "group",
    [
        "HOT_MODULES",
        "RESULT_MODULES",
        "TIME_LIMIT_MODULES",
        "LIMIT_MODULES",
        "CACHED_CONFIG_MODULES",
        "NATIVE_END_MODULES",
    ],
)
def test_each_module_run_at_once_comes_after_what_its_top_level_imports(group: str) -> None:
    """A group of modules runs in its order without the import system
    (_ImageFinder.run_all): a module imported before its turn would go through it, and
    cost what the order saves. (The result's modules run after the hot ones.)"""
    order = list(getattr(_boot, group))
    for position, name in enumerate(order):
        later = {m for m in _imported_at_top(name, order) if order.index(m) > position}
        assert not later, f"{name} imports {sorted(later)} at its top, which come after it"


@pytest.mark.parametrize("mode", ["plain", "json", "timeout", "config", "memory", "json-limits"])
def test_a_run_imports_no_module_of_the_image_through_the_import_system(
    tmp_path: Path, mode: str
) -> None:
    """Every hot module of a run, a --json run's result modules, what reads a limit, a
    pynox.toml's cached configuration and the wording of its time limit, and what a run
    with a memory limit loads ahead (the launcher's lines for native code's end) come
    from the image by _ImageFinder.run_all, not one by one through the import system,
    which marks the spec of each module it loads (_initializing) where run_all does not."""
    names = _boot.HOT_MODULES
    if mode == "json":
        names += _boot.RESULT_MODULES
    if mode == "timeout":
        names += _boot.LIMIT_MODULES
    if mode == "memory":
        names += _boot.NATIVE_END_MODULES
    if mode == "json-limits":
        names += _boot.RESULT_MODULES + _boot.NATIVE_END_MODULES
    if mode == "config":
        names += _boot.CACHED_CONFIG_MODULES + _boot.TIME_LIMIT_MODULES
        (tmp_path / "pynox.toml").write_text('[permissions]\ntimeout = "30s"\n')
        assert run_pynox("-c", "pass", cwd=tmp_path).returncode == 0  # the cache's entry
    probe = (
        "import sys\n"
        f"specs = [sys.modules[n].__spec__ for n in {names!r}]\n"
        "print(all(type(s.loader).__name__ == '_ImageFinder' for s in specs),"
        " any(hasattr(s, '_initializing') for s in specs))\n"
    )
    by_mode = {
        "json": ["--json"],
        "timeout": ["--timeout=30s"],
        "memory": ["--memory=1g"],
        "json-limits": ["--json", "--max-file-size=1m"],
    }
    flags = by_mode.get(mode, [])
    proc = run_pynox(*flags, "-c", probe, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    captured = "--json" in flags
    output = json.loads(proc.stdout)["stdout"] if captured else proc.stdout.decode()
    assert output == "True False\n"


MODULES = "import sys\nprint(' '.join(sorted(sys.modules)))\n"
# What pynox itself brings along: its own modules and gc. Not cffi's backend: a run
# calls the sandbox core through pynox._native.
OWN = ("pynox", "gc")


@pytest.mark.parametrize(
    "mode",
    [[], ["--timeout=30s"], ["--json"], ["--memory=1g"], ["--json", "--memory=1g"]],
    ids=["plain", "timeout", "json", "memory", "json-memory"],
)
def test_a_run_imports_nothing_python_would_not(tmp_path: Path, mode: list[str]) -> None:
    """Every module on the start-up path costs every run: only pynox's own may be extra.
    (A --json run tells the launcher how to write its result: that takes no more than
    pynox's own modules either, neither __future__ nor _json.)"""
    script = tmp_path / "modules.py"
    script.write_text(MODULES)
    python_modules = set(python("-I", str(script)).stdout.decode().split())
    proc = run_pynox(*mode, str(script))
    assert proc.returncode == 0, proc.stderr
    output = proc.stdout.decode()
    if "--json" in mode:
        output = json.loads(output)["stdout"]
    extra = set(output.split()) - python_modules
    assert sorted(m for m in extra if m.partition(".")[0] not in OWN) == []


IMPORTED = "import sys; print(' '.join(m for m in sys.modules if m.startswith('pynox.')))"
# Loaded by every run but not from the image: the start-up itself and compiled modules.
NOT_IMAGED = {"pynox._boot", "pynox._native"}


def test_the_image_holds_what_a_plain_run_imports_and_every_mode_uses_all_of_it(
    tmp_path: Path,
) -> None:
    """HOT_MODULES is exactly the plain run's pynox modules (each one missing would cost
    an import, each one too many a load for nothing); the other modes load them too."""
    from support.pool_client import PoolClient

    hot = set(_boot.HOT_MODULES)
    plain = set(run_pynox("-c", IMPORTED, cwd=tmp_path).stdout.decode().split())
    assert plain - NOT_IMAGED == hot
    supervised = run_pynox("--timeout=30s", "-c", IMPORTED, cwd=tmp_path)
    assert hot <= set(supervised.stdout.decode().split())
    result = json.loads(run_pynox("--json", "-c", IMPORTED, cwd=tmp_path).stdout)
    assert hot <= set(result["stdout"].split())
    # What a supervised run adds comes from the image too, never what a plain run loads.
    assert not plain & set(_boot.SUPERVISED_MODULES)
    with PoolClient(cwd=tmp_path, workers=1) as pool:
        in_pool = set(pool.run({"id": 1, "code": IMPORTED})["stdout"].split())
    assert hot <= in_pool


# The supervisor of a --json or --memory run, as the launcher starts it, reporting at its
# end (posix._exit, which pynox.cli.main leaves by) which of pynox's modules it loaded and
# from where.
SUPERVISOR_PROBE = """
import posix, sys
sys.argv = ["pynox", *sys.argv[1:]]
leave, supervisor = posix._exit, posix.getpid()
def report_and_leave(code):
    if posix.getpid() == supervisor:
        loaded = {n: type(m.__spec__.loader).__name__ for n, m in sys.modules.items()
                  if n.startswith("pynox.")}
        posix.write(2, ("LOADED " + repr(loaded) + "\\n").encode())
    leave(code)
posix._exit = report_and_leave
from pynox import _boot
_boot.main()
"""


def test_a_supervisor_loads_its_own_half_from_the_image_and_leaves_the_childs_to_it(
    tmp_path: Path,
) -> None:
    """--json and --memory fork a child to run the program: the supervisor loads what it
    collects output and writes results with from the image, and none of what the child
    sets itself up with (the sandbox core among it), so that it forks a smaller process."""
    for mode in (["--json"], ["--memory=8g"]):
        proc = python("-c", SUPERVISOR_PROBE, *mode, "-c", "print(7)", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert b"7" in proc.stdout, mode
        line = next(x for x in proc.stderr.decode().splitlines() if x.startswith("LOADED "))
        loaded = ast.literal_eval(line.removeprefix("LOADED "))
        for name in ("pynox.engine.supervisor", "pynox.engine.result"):
            assert loaded.get(name) == "_ImageFinder", (mode, name, loaded)
        child_half = {"pynox.engine.child", "pynox.engine.sandbox", "pynox.engine.access_log"}
        assert not child_half & set(loaded), (mode, loaded)


def test_a_run_with_a_pynox_toml_and_a_time_limit_loads_what_they_add_from_the_image(
    tmp_path: Path,
) -> None:
    """The configuration's cache and the time limit's wording come from the image; the
    time limit no longer loads the result's JSON writer (its line is all it needs), and
    a configuration found in the cache does not load the file's reader."""
    (tmp_path / "pynox.toml").write_text('[permissions]\ntimeout = "30s"\n')
    added = ("pynox.policy.cache", "pynox.policy.config_values", "pynox.engine.time_limit")
    left = ("pynox.engine.result", "pynox.strict_json", "pynox.policy.config")
    probe = (
        "import sys\n"
        f"print([type(sys.modules[n].__spec__.loader).__name__ for n in {added!r}])\n"
        f"print([n in sys.modules for n in {left!r}])\n"
    )
    assert run_pynox("-c", "pass", cwd=tmp_path).returncode == 0  # the cache's entry
    proc = run_pynox("-c", probe, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().splitlines() == [str(["_ImageFinder"] * 3), str([False] * 3)]


# Runs the launcher's start file as the launcher does (python -I -S FILE), with an audit
# hook that names every directory listed from then on, before pynox's own code runs. It
# lists the working directory itself first, so that a hook that sees nothing shows.
LISTINGS = """
import posix, sys
def hook(event, args):
    if event == "os.listdir":
        sys.stderr.write(f"listed {args[0]}\\n")
sys.addaudithook(hook)
posix.listdir(".")
start = sys.argv[1]
sys.argv = sys.argv[1:]
exec(compile(open(start).read(), start, "exec"), {"__name__": "__main__", "__file__": start})
"""


def test_the_start_file_finds_pynox_without_searching_sys_path(tmp_path: Path) -> None:
    """Looking pynox up on sys.path lists lib-dynload and site-packages, hundreds of names
    in a busy environment, on every run: the start file loads it from where it lies. Nor
    is the package's own directory listed: the start file loads pynox._boot by its file,
    and the image's finder pynox._native by its file."""
    start = PACKAGE / "_start.py"
    proc = python("-I", "-S", "-c", LISTINGS, str(start), "-c", "print('ran')", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"ran\n"
    listed = {line[len("listed ") :] for line in proc.stderr.decode().splitlines()}
    searched = {
        str(PACKAGE),
        str(PACKAGE.parent),
        *python("-I", "-S", "-c", "import sys; print(*sys.path)").stdout.decode().split(),
    }
    assert "." in listed, "the hook did not see the probe's own listing: it does not work"
    assert not listed & searched, f"listed while starting: {sorted(listed & searched)}"


# Runs the start file as LISTINGS does, naming every file compiled from source from then on.
COMPILED = LISTINGS.replace('event == "os.listdir"', 'event == "compile"').replace(
    'f"listed {args[0]}\\n"', 'f"compiled {args[1]}\\n"'
)


def test_the_start_file_runs_the_start_up_from_its_compiled_file(tmp_path: Path) -> None:
    """CPython compiles a script anew on every run: the start file holds only what turns
    the collector off and runs pynox/_start_up.py, whose code comes from its .pyc."""
    start = PACKAGE / "_start.py"
    tree = ast.parse(start.read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert len(tree.body[1:]) <= 5, "every statement of the start file is compiled on every run"
    assert "compiled" in COMPILED and "listed" not in COMPILED
    proc = python("-I", "-S", "-c", COMPILED, str(start), "-c", "print('ran')", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"ran\n"
    compiled = [line for line in proc.stderr.decode().splitlines() if "pynox" in line]
    assert compiled == [f"compiled {start}"], "pynox compiled a source of its own as it started"


# Counts the calls of the builtin compile() while it imports a module of its own.
COMPILE_CALLS = """
import builtins, sys
calls = []
def profile(frame, event, arg):
    if event == "c_call" and arg is builtins.compile:
        calls.append(frame.f_code.co_name)
sys.setprofile(profile)
import sibling
sys.setprofile(None)
print(sibling.VALUE, calls)
"""


@pytest.mark.parametrize("mode", [[], ["--timeout=30s"]], ids=["in-process", "supervised"])
def test_a_programs_imports_compile_without_the_builtin_compile(
    tmp_path: Path, mode: list[str]
) -> None:
    """The builtin compile() builds every Python AST class on its first call (~1.5 ms).
    python pays that once per module of the program, then reuses the bytecode it wrote
    beside it; a sandboxed program seldom may write there, so a run would pay it each
    time: its imports compile as its script does, without it."""
    (tmp_path / "sibling.py").write_text("VALUE = 'imported'\n")
    (tmp_path / "probe.py").write_text(COMPILE_CALLS)
    # The probe sees python's import call compile() (-B: no bytecode left for pynox).
    assert (
        python("-B", "probe.py", cwd=tmp_path).stdout == b"imported ['_call_with_frames_removed']\n"
    )
    proc = run_pynox(*mode, "probe.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"imported []\n"
    assert not (tmp_path / "__pycache__").exists()


# Counts the modules a program's imports compile from source.
COMPILED_MODULES = """
import sys
compiled = []
def profile(frame, event, arg):
    if event == "c_call" and getattr(arg, "__name__", "") in ("compile", "compile_source"):
        compiled.append(arg.__name__)
sys.setprofile(profile)
import mylib.core
sys.setprofile(None)
print(mylib.core.VALUE, len(compiled))
"""


def test_a_package_directory_compiled_once_is_not_compiled_by_every_run(tmp_path: Path) -> None:
    """A run cannot write the bytecode of what it imports from a package directory (a
    read grant): without it there, every run compiles those modules again. The advice in
    docs/agent-tasks.md, compileall once, leaves them nothing to compile."""
    package = tmp_path / "packages" / "mylib"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "core.py").write_text("VALUE = 'from mylib'\n")
    (tmp_path / "probe.py").write_text(COMPILED_MODULES)
    for _ in range(2):
        proc = run_pynox("--package-dir=packages", "probe.py", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == b"from mylib 2\n"  # both modules, every time
    assert not list(package.rglob("*.pyc")), "a run wrote bytecode into a package directory"
    compiled = python("-m", "compileall", "-q", "packages", cwd=tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    proc = run_pynox("--package-dir=packages", "probe.py", cwd=tmp_path)
    assert proc.stdout == b"from mylib 0\n"
