"""json.dump's fast path writes what CPython's json.dump writes, and raises what it raises.

Each case runs CPython's own json.dump and a copy of it that has the fast path,
side by side, and compares the text written, the exception (type, message,
traceback lines and columns) and every call made to `default`.
"""

import enum
import io
import json
import math
import sys
import traceback
import types

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.commands import PYNOX, pynox, python, run
from support.examples import examples
from support.installations import installation

from pynox.jsonfast import fast_path as json_fast_path
from pynox.jsonfast.fast_path import encode_once


def _copy(function: types.FunctionType) -> types.FunctionType:
    copy = types.FunctionType(
        function.__code__, function.__globals__, function.__name__, function.__defaults__
    )
    copy.__kwdefaults__ = dict(function.__kwdefaults__ or {})
    return copy


ORIGINAL = _copy(json.dump)
FAST = _copy(json.dump)
PATCHED = json_fast_path.patch(json, FAST)
C_INDENTS = sys.version_info >= (3, 13)

pytestmark = pytest.mark.skipif(not PATCHED, reason="json.dump cannot be patched here")


class Count(int):
    pass


class Ratio(float):
    pass


class Name(str):
    pass


class Color(enum.IntEnum):
    RED = 1


class Plain(enum.Enum):
    ONE = 1


class Lying(dict):
    def __len__(self) -> int:
        return 0


class Backwards(list):
    def __iter__(self):  # type: ignore[no-untyped-def]
        return reversed(list.__iter__(self)).__iter__()


class Point:
    def __init__(self, x: int) -> None:
        self.x = x

    def __repr__(self) -> str:
        return f"Point({self.x})"


def specials() -> st.SearchStrategy[object]:
    return st.sampled_from(
        [
            Count(7),
            Ratio(1.5),
            Ratio(math.nan),
            Name("named"),
            Color.RED,
            Plain.ONE,
            Lying(a=1),
            Backwards([1, 2, 3]),
            Point(3),
            {1, 2},
            b"bytes",
            complex(1, 2),
            "\ud800 lone surrogate",
        ]
    ) | st.builds(pow, st.just(10), st.just(5000))  # too long for str(int)


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(),
    st.text(st.characters(codec="utf-8")),
    specials(),
)
keys = st.one_of(
    st.text(max_size=5),
    st.integers(-3, 3),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
    st.sampled_from([(1, 2), Name("k"), Count(2)]),
)


def nested(
    leaves: st.SearchStrategy[object],
    keys: st.SearchStrategy[object],
    size: int,
    max_leaves: int,
) -> st.SearchStrategy[object]:
    """Lists, tuples and dicts of leaves, nested."""
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=size),
            st.lists(children, max_size=size).map(tuple),
            st.dictionaries(keys, children, max_size=size),
        ),
        max_leaves=max_leaves,
    )


data = nested(leaves, keys, size=4, max_leaves=20)
options = st.fixed_dictionaries(
    {},
    optional={
        "skipkeys": st.booleans(),
        "ensure_ascii": st.booleans(),
        "check_circular": st.booleans(),
        "allow_nan": st.booleans(),
        "indent": st.one_of(st.none(), st.integers(-1, 3), st.sampled_from(["", "\t", "--"])),
        "separators": st.sampled_from([None, (",", ":"), (", ", ": "), (";", "=")]),
        "default": st.sampled_from([None, "repr", "reject"]),
        "sort_keys": st.booleans(),
    },
)


class Recorder:
    """A `default` that notes every call, so both sides' calls can be compared."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.calls: list[str] = []

    def __call__(self, o: object) -> object:
        self.calls.append(type(o).__name__)
        if self.mode == "reject":
            raise TypeError(f"no JSON for {type(o).__name__}")
        return repr(o)


def _run(dump, obj, opts, fp):  # type: ignore[no-untyped-def]
    recorder = None
    kwargs = dict(opts)
    if kwargs.get("default") is not None:
        recorder = Recorder(kwargs["default"])
        kwargs["default"] = recorder
    error = None
    try:
        dump(obj, fp, **kwargs)
    except (ValueError, TypeError, RecursionError) as exc:
        frames = traceback.extract_tb(exc.__traceback__)[1:]  # after this function's own
        where = [
            (f.filename, f.lineno, f.name, getattr(f, "colno", None), getattr(f, "end_colno", None))
            for f in frames
        ]
        error = (type(exc), str(exc), where if not isinstance(exc, RecursionError) else None)
    return error, (recorder.calls if recorder else None)


def _compare_in_memory(obj: object, opts: dict) -> None:
    expected_fp, actual_fp = io.StringIO(), io.StringIO()
    expected = _run(ORIGINAL, obj, opts, expected_fp)
    actual = _run(FAST, obj, opts, actual_fp)
    assert actual_fp.getvalue() == expected_fp.getvalue()
    assert actual == expected


@pytest.mark.unit
@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data, options)
def test_same_text_errors_and_calls_in_memory(obj: object, opts: dict) -> None:
    _compare_in_memory(obj, opts)


@pytest.mark.unit
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data,
    options,
    st.sampled_from(["utf-8", "ascii", "latin-1", "utf-16"]),
    st.sampled_from([None, "", "\r\n"]),
)
def test_same_bytes_in_files(
    tmp_path_factory: pytest.TempPathFactory, obj: object, opts: dict, encoding: str, newline
) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("dump")
    results = []
    for name, dump in (("expected", ORIGINAL), ("actual", FAST)):
        path = folder / name
        with open(path, "w", encoding=encoding, newline=newline) as fp:
            fp.write("head ")
            try:
                result = _run(dump, obj, opts, fp)
            except UnicodeEncodeError as exc:
                result = ("UnicodeEncodeError", str(exc))
            fp.write(" tail")
        results.append((result, path.read_bytes()))
    assert results[1] == results[0]


plain_keys = st.one_of(st.text(max_size=5), st.integers(), st.floats(), st.booleans(), st.none())
plain_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**80), 2**80),
    st.floats(),
    st.text(),
    st.text(st.characters(codec="utf-8")),
    st.sampled_from(["\ud800", "\x7f", "\U0001f600", '"\\\b\f\n\r\t\x00\x1f', "\u2028"]),
    st.builds(pow, st.just(10), st.just(5000)),  # too long for str(int) from 3.11 on
)
plain_data = nested(plain_leaves, plain_keys, size=5, max_leaves=30)


@pytest.mark.unit
@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plain_data,
    st.booleans(),
    st.booleans(),
    st.sampled_from([(", ", ": "), (",", ":"), (";", "="), ("\u060c ", ": ")]),
)
def test_the_plain_encoder_writes_what_json_dumps_writes(
    obj: object, ensure_ascii: bool, allow_nan: bool, separators: tuple[str, str]
) -> None:
    from pynox._jsonscan import encode

    text = encode(obj, 500, ensure_ascii, allow_nan, *separators)
    try:
        expected = json.dumps(
            obj, ensure_ascii=ensure_ascii, allow_nan=allow_nan, separators=separators
        )
    except ValueError:  # NaN without allow_nan, an int too long for str()
        expected = None
    if text is NotImplemented:
        # Left to the C encoder: errors, and text that is not (only) what it writes as ASCII.
        ascii_only = expected is not None and expected.isascii() and "\x7f" not in expected
        assert not ascii_only or not "".join(separators).isascii()
    else:
        assert text == expected


@pytest.mark.unit
def test_the_plain_encoder_leaves_what_is_not_plain() -> None:
    from pynox._jsonscan import encode

    for obj in ([Count(1)], {"a": Ratio(1.0)}, {(1, 2): 1}, [[[[1]]]], {1, 2}):
        assert encode(obj, 3, True, True, ", ", ": ") is None
    assert encode([[[1]]], 3, True, True, ", ", ": ") == "[[[1]]]"


@pytest.mark.unit
def test_circular_references_fall_back() -> None:
    looped: list[object] = [1]
    looped.append(looped)
    cyclic: dict[str, object] = {}
    cyclic["self"] = [cyclic]
    for obj in (looped, cyclic):
        _compare_in_memory(obj, {})
        _compare_in_memory(obj, {"check_circular": False})


BRANCHING_CYCLE = """
import io, json
looped = []
looped.append(looped)
looped.append(looped)
try:
    json.dump(looped, io.StringIO())
except ValueError as exc:
    print(type(exc).__name__, exc)
"""


def test_a_branching_cycle_is_reported_at_once_as_by_python() -> None:
    # A cycle with two branches doubles at every level: a walk that did not stop
    # at the first failing path would never end.
    expected = python("-I", "-c", BRANCHING_CYCLE, timeout=30)
    got = pynox("-c", BRANCHING_CYCLE, timeout=30)
    assert expected.stdout == b"ValueError Circular reference detected\n"
    assert (got.returncode, got.stdout, got.stderr) == (0, expected.stdout, b"")


@pytest.mark.unit
def test_deep_nesting_matches_the_recursion_limit() -> None:
    for depth in (50, 400, 900, 990, 1200):
        nested: object = 0
        for _ in range(depth):
            nested = [nested]
        _compare_in_memory(nested, {})


DEEP_WITH_A_RAISED_LIMIT = """
import io, json, sys
from pynox.jsonfast.fast_path import encode_once, patch
assert patch(json)
sys.setrecursionlimit(1_000_000)
nested = 0
for _ in range(300_000):
    nested = [nested]
defaults = [False, True, True, True, None, None, None, False]
print(encode_once(nested, io.StringIO(), None, *defaults, {}))
"""


def test_data_nested_past_the_c_stack_goes_to_cpythons_code() -> None:
    # With the recursion limit raised, CPython's json.dump (3.12 on) nests on the heap;
    # walking such data on the C stack would crash the program.
    got = python("-I", "-c", DEEP_WITH_A_RAISED_LIMIT, timeout=30)
    assert (got.returncode, got.stdout, got.stderr) == (0, b"None\n", b"")


SMALL_THREAD_STACK = """
import io, json, threading
threading.stack_size(32768)  # the smallest a thread may have
nested = 0
for _ in range(60):
    nested = {"a": [nested]}
def dump():
    fp = io.StringIO()
    json.dump(nested, fp, sort_keys=True)  # CPython's C encoder would take ~250 bytes a level
    print(len(fp.getvalue()))
thread = threading.Thread(target=dump)
thread.start()
thread.join()
"""


def test_a_thread_with_a_small_stack_dumps_as_in_python() -> None:
    expected = python("-I", "-c", SMALL_THREAD_STACK, timeout=30)
    got = pynox("-c", SMALL_THREAD_STACK, timeout=30)
    # CPython 3.10 and 3.11 run out of this stack themselves; 3.12 and later do not.
    assert (got.returncode, got.stdout) == (expected.returncode, expected.stdout)
    if expected.returncode == 0:
        assert got.stderr == b""


# The same thread, started with a small stack that the program then sets back: what
# threading.stack_size() says now is not the stack this thread runs on.
STACK_SET_BACK = """
import io, json, sys, threading
nested = []
for _ in range(int(sys.argv[1])):
    nested = [nested]
def dump():
    go.wait()
    fp = io.StringIO()
    json.dump(nested, fp)
    print(len(fp.getvalue()))
go = threading.Event()
threading.stack_size(32768)
thread = threading.Thread(target=dump)
thread.start()
threading.stack_size(0)
go.set()
thread.join()
"""


@pytest.mark.parametrize("depth", [300, 600])
def test_a_thread_whose_stack_size_was_set_back_dumps_as_in_python(depth: int) -> None:
    expected = python("-I", "-c", STACK_SET_BACK, str(depth), timeout=30)
    got = pynox("-c", STACK_SET_BACK, str(depth), timeout=30)
    assert (got.returncode, got.stdout) == (expected.returncode, expected.stdout), got.stderr


@pytest.mark.unit
def test_a_line_end_across_pieces_reads_as_in_python() -> None:
    # The text goes to the file in pieces of 1 MiB; place a "\r\n" separator across
    # the first boundary, for a StringIO that reads universal newlines.
    separators = (",\r\n", ":")
    records = ["a" * 100] * 11000
    text = json.dumps(records, separators=separators)
    boundary = 1 << 20
    records[0] += "a" * (boundary - 1 - text.rfind("\r", 0, boundary))
    expected, actual = io.StringIO(newline=None), io.StringIO(newline=None)
    ORIGINAL(records, expected, separators=separators)
    FAST(records, actual, separators=separators)
    assert actual.getvalue() == expected.getvalue()


def _fast(obj: object, fp: object, **opts: object) -> bool:
    args = {
        "skipkeys": False,
        "ensure_ascii": True,
        "check_circular": True,
        "allow_nan": True,
        "indent": None,
        "separators": None,
        "default": None,
        "sort_keys": False,
    }
    args.update(opts)
    taken = encode_once(obj, fp, None, *args.values(), {})  # type: ignore[arg-type]
    return taken is not None


RECORDS = [{"id": i, "name": f"n{i}", "tags": ["a", i], "score": i / 3} for i in range(50)]


@pytest.mark.unit
def test_plain_data_takes_the_fast_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert _fast(RECORDS, io.StringIO())
    assert _fast(RECORDS, io.StringIO(), sort_keys=True, separators=(",", ":"))
    assert _fast(RECORDS, io.StringIO(), indent=2) == C_INDENTS
    with open(tmp_path / "out.json", "w", encoding="utf-8") as fp:
        assert _fast(RECORDS, fp)
        assert _fast({"é": "ü"}, fp, ensure_ascii=False)


@pytest.mark.unit
def test_what_falls_back(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fp = io.StringIO()
    assert not _fast([Point(1)], fp, default=repr)  # default would run: CPython's code
    assert not _fast([Count(1)], fp)  # subclasses
    assert not _fast({"a": 1}, fp, skipkeys=True)
    assert not _fast({"a": 1}, fp, ensure_ascii=1)  # flags that are not bools
    defaults = [False, True, True, True, None, None, None, False]
    assert encode_once([1], fp, json.JSONEncoder, *defaults, {}) is json.JSONEncoder  # cls
    assert not _fast([1], io.BytesIO())

    class Sink(io.StringIO):
        pass

    assert not _fast([1], Sink())
    with open(tmp_path / "out.json", "w", encoding="utf-8") as fp:
        assert not _fast(["\ud800"], fp, ensure_ascii=False)  # CPython writes a prefix first
    with open(tmp_path / "out.json", "w", encoding="utf-8", buffering=1) as fp:
        assert not _fast([1], fp)  # line-buffered: flushes at other points
    with open(tmp_path / "out.json", "w", encoding="utf-16") as fp:
        assert not _fast([1], fp)
    with open(1, "w", closefd=False) as fp:
        assert not _fast([1], fp)  # a standard stream may share its file with another


@pytest.mark.unit
def test_json_dump_keeps_its_face() -> None:
    assert FAST.__code__.co_filename == ORIGINAL.__code__.co_filename
    assert FAST.__code__.co_firstlineno == ORIGINAL.__code__.co_firstlineno
    assert FAST.__code__.co_varnames == ORIGINAL.__code__.co_varnames
    assert FAST.__code__.co_argcount == ORIGINAL.__code__.co_argcount
    assert FAST.__doc__ == ORIGINAL.__doc__


@pytest.mark.unit
def test_unserialisable_traceback_is_cpythons() -> None:
    expected_fp, actual_fp = io.StringIO(), io.StringIO()
    obj = {"a": [1, 2, {"b": Point(1)}]}
    expected = _run(ORIGINAL, obj, {}, expected_fp)
    actual = _run(FAST, obj, {}, actual_fp)
    assert expected[0] is not None and expected[0][0] is TypeError
    assert actual == expected
    assert actual_fp.getvalue() == expected_fp.getvalue() == '{"a": [1, 2, {"b": '


# --- the command: same files, output and tracebacks as python, in every mode -----------

PROGRAM = """\
import json, os, sys
out = sys.argv[1]
records = [{"id": i, "name": f"n{i}", "tags": ["a", i], "score": i / 3} for i in range(3000)]
with open(os.path.join(out, "plain.json"), "w", encoding="utf-8") as fp:
    json.dump(records, fp)
with open(os.path.join(out, "pretty.json"), "w", encoding="utf-8") as fp:
    json.dump({"b": records[:50], "a": "\\u00e9"}, fp, indent=2, sort_keys=True, ensure_ascii=False)
with open(os.path.join(out, "default.json"), "w", encoding="utf-8") as fp:
    json.dump({"when": {1, 2}}, fp, default=sorted)
print(len(json.load(open(os.path.join(out, "plain.json")))), "FAST_PATH" in os.environ)
with open(os.path.join(out, "partial.json"), "w", encoding="utf-8") as fp:
    json.dump({"ok": [1, 2], "bad": [float("nan")]}, fp, allow_nan=False)
"""


def _outputs(folder) -> dict[str, bytes]:  # type: ignore[no-untyped-def]
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The launcher of an installation with the site hook that bundles carry, which arms
    the fast path under `pynox --no-sandbox` (a wheel leaves it out: see CMakeLists.txt)."""
    return str(installation(tmp_path_factory.mktemp("bundled"), site_hook=True))


@pytest.mark.parametrize("mode", ["sandboxed", "json", "no-sandbox"])
def test_command_parity_with_python(tmp_path, mode: str, bundled: str) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "app.py"
    script.write_text(PROGRAM)
    expected_dir, actual_dir = tmp_path / "python", tmp_path / "pynox"
    expected_dir.mkdir()
    actual_dir.mkdir()
    expected = python(str(script), str(expected_dir), cwd=tmp_path)
    grants = [f"--allow-write={actual_dir}", f"--allow-read={actual_dir}"]
    if mode == "no-sandbox":
        actual = run([bundled, "--no-sandbox", str(script), str(actual_dir)], cwd=tmp_path)
    elif mode == "json":
        result = pynox("--json", *grants, str(script), str(actual_dir), cwd=tmp_path)
        report = json.loads(result.stdout)
        assert report["exit"] == expected.returncode
        assert report["stdout"] == expected.stdout.decode()
        assert report["stderr"].replace(str(actual_dir), "D") == expected.stderr.decode().replace(
            str(expected_dir), "D"
        )
        actual = None
    else:
        actual = pynox(*grants, str(script), str(actual_dir), cwd=tmp_path)
    if actual is not None:
        assert actual.returncode == expected.returncode == 1
        assert actual.stdout == expected.stdout == b"3000 False\n"
        assert actual.stderr.replace(bytes(actual_dir), b"D") == expected.stderr.replace(
            bytes(expected_dir), b"D"
        )
    assert b"ValueError: Out of range float values" in expected.stderr
    assert _outputs(actual_dir) == _outputs(expected_dir)
    assert _outputs(expected_dir)["partial.json"] == b'{"ok": [1, 2], "bad": '


@pytest.mark.parametrize("installed", ["wheel", "bundled"])
@pytest.mark.parametrize("args", [[], ["-S"], ["-I"], ["-X", "dev"], ["-c", "pass", "-S"]])
def test_no_sandbox_leaves_no_trace(args: list[str], installed: str, bundled: str) -> None:
    probe = "import os, posix, sys; print(sorted(os.environ), sorted(posix.environ), sys.argv)"
    args = ["-c", probe, *args[2:]] if args[:1] == ["-c"] else [*args, "-c", probe, "x"]
    expected = python(*args)
    actual = run([PYNOX if installed == "wheel" else bundled, "--no-sandbox", *args])
    assert actual.returncode == expected.returncode == 0, actual.stderr
    assert actual.stdout == expected.stdout


JSON_DUMP_PROBE = "import json; print(type(json.dump.__code__.co_consts[1]).__name__)"


def test_no_sandbox_has_the_fast_path_where_a_bundle_installs_it(bundled: str) -> None:
    got = run([bundled, "--no-sandbox", "-c", JSON_DUMP_PROBE])
    assert got.stdout == (b"_Hook\n" if PATCHED else b"NoneType\n")
    assert run([bundled, "--no-sandbox", "-S", "-c", JSON_DUMP_PROBE]).stdout == b"NoneType\n"


def test_a_wheel_leaves_every_other_python_start_alone() -> None:
    """A .pth file in site-packages would run in every Python of the environment, and the
    first one makes each start import a codec to read it: the wheel installs none, so its
    --no-sandbox is CPython as it is."""
    from importlib.metadata import files

    installed = [str(path) for path in files("pynox") or []]
    assert installed and not [name for name in installed if name.endswith(".pth")]
    probe = "import sys; print(sorted(m for m in sys.modules if 'pynox' in m))"
    assert python("-c", probe).stdout == b"[]\n"
    assert pynox("--no-sandbox", "-c", JSON_DUMP_PROBE).stdout == b"NoneType\n"


NO_SANDBOX_PROBE = """\
import sys
def loaded():
    return sorted(m for m in sys.modules if m.partition(".")[0] in ("pynox", "_pynox_json"))
print(loaded(), sum(type(f).__name__ == "_Armed" for f in sys.meta_path))
import json
armed = sum(type(f).__name__ == "_Armed" for f in sys.meta_path)
print("pynox.jsonfast.fast_path" in loaded(), armed)
print(json.__spec__.loader is json.__loader__, type(json.__loader__).__name__)
"""


def test_no_sandbox_loads_pynox_only_when_json_is_imported(bundled: str) -> None:
    got = run([bundled, "--no-sandbox", "-c", NO_SANDBOX_PROBE])
    assert got.returncode == 0, got.stderr
    before, after, loader = got.stdout.decode().splitlines()
    # Until json: one small top-level module and its finder, nothing of the package.
    assert before == "['_pynox_json'] 1"
    # With json: the fast path, the finder gone, and json's loader as CPython made it.
    assert after == ("True 0" if PATCHED else "False 0")
    assert loader == python("-c", NO_SANDBOX_PROBE).stdout.decode().splitlines()[2]


def test_no_sandbox_fast_path_ignores_a_pynox_beside_the_program(tmp_path, bundled: str) -> None:  # type: ignore[no-untyped-def]
    # `python -c` puts the working directory first on sys.path, before json is imported.
    (tmp_path / "pynox").mkdir()
    (tmp_path / "pynox" / "__init__.py").write_text("print('a pynox of its own')\n")
    got = run([bundled, "--no-sandbox", "-c", JSON_DUMP_PROBE], cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert got.stdout == (b"_Hook\n" if PATCHED else b"NoneType\n")
    # A program that imported its own pynox first gets json without the fast path.
    probe = "import pynox, json; print(type(json.dump.__code__.co_consts[1]).__name__)"
    got = run([bundled, "--no-sandbox", "-c", probe], cwd=tmp_path)
    assert (got.returncode, got.stdout) == (0, b"a pynox of its own\nNoneType\n")


@pytest.mark.unit
def test_no_site_reads_cpythons_command_line() -> None:
    from pynox.jsonfast.no_sandbox import no_site

    assert no_site(["-S", "app.py"])
    assert no_site(["-IS", "app.py"])
    assert no_site(["-X", "dev", "-S"])
    assert no_site(["--check-hash-based-pycs", "always", "-S"])
    assert not no_site(["-Xdev", "app.py", "-S"])
    assert not no_site(["-c", "pass", "-S"])
    assert not no_site(["-m", "mod", "-S"])
    assert not no_site(["-W", "S", "app.py"])
    assert not no_site(["-WS", "app.py"])
    assert not no_site(["-", "-S"])
    assert not no_site([])
