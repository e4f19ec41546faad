"""Start-up of the `pynox` command: its hot modules from one file instead of one import each.

Importing a module costs a cold process about 0.1 ms beyond running its code
(finding it, stat calls, opening and reading its .pyc). A run needs the same
modules every time, so their code objects live in one file beside the .pyc
files, `__pycache__/_boot.<cache tag>.image`, loaded at once.

The image is made when the wheel or bundle is built (`python -m pynox._boot
--write-image DIRECTORY`, with the interpreter it is for), never at run time:
nothing a run writes may be code a later run executes before its sandbox
exists. Another interpreter version or a damaged file makes the image unused,
and the modules import as usual; so does each module whose source is not of
the size its entry records, and each whose part turns out damaged once
unpacked. The code objects name their files as compiled in the build; loading
points them at the sources where they are now, as importlib does for a .pyc, so
that tracebacks name the installed files wherever the prefix moved.

The file holds the length of its index (4 bytes, little-endian), the index
(marshalled: the magic number and, per module, its source relative to the
package, the source's size, where the part with its code lies after the index
and its place in that part), then the parts, one after another: each a
marshalled tuple of code, and last the values made when the image was built
(BAKED: a marshalled dict, whose place the index gives too). The modules that run
together (COMMAND_MODULES, and CHILD_MODULES) form one part each, every other
module a part of its own. A run maps the file whole, once, and unmarshals only
the parts of the modules it imports (and the values, if it asks for one),
straight from that one mapping.

The finder serves only pynox's own modules and leaves sys.meta_path before
the program runs (pynox.engine.runner.end_start_up), so the program never sees it.
It also runs groups of modules a run needs at once (run_all: main() the command's
half, the engine the rest as it needs them), without the import system's own work
per module.
"""

import marshal
import posix  # not os: pynox.lean_os says why
import sys
from _frozen_importlib import ModuleSpec, module_from_spec
from _frozen_importlib_external import MAGIC_NUMBER, ExtensionFileLoader
from _imp import _fix_co_filename, extension_suffixes  # type: ignore[attr-defined]

from pynox import PACKAGE_DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ast
    from collections.abc import Sequence
    from types import CodeType, ModuleType

    # A module in the image: its source's path and size, the part with its code and
    # its place there.
    Entry = tuple[str, int, "_Part", int]

# Every plain run imports these, subpackages included (tests/test_boot.py checks this
# list against what runs import). They run at once, in this order, each after the
# modules its own top level imports (tests/test_boot.py checks that too): main() runs
# the command's half, and the process that runs the program the child's half
# (pynox.engine.runner.run_from_image), so that a supervisor forks without the latter.
COMMAND_MODULES = (
    "pynox.lean_os",
    "pynox.errors",
    "pynox.limits",
    "pynox.policy",
    "pynox.policy.grants",
    "pynox.policy.location",
    "pynox.policy.resolve",
    "pynox.policy.system_paths",
    "pynox.cli",
    "pynox.cli.main",
    "pynox.cli.arguments",
    "pynox.engine",
    "pynox.engine.program",
    "pynox.engine.launcher_link",
    "pynox.engine.scratch",
    "pynox.engine.child_setup",
    "pynox.engine.job_group",
    "pynox.engine.runner",
)
CHILD_MODULES = (
    "pynox.policy.user_paths",  # the home /etc/passwd lists, read before the sandbox
    "pynox.engine.access_log",
    "pynox.engine.sandbox",
    "pynox.jsonfast",
    "pynox.jsonfast.hook",
    "pynox.engine.child",
)
HOT_MODULES = COMMAND_MODULES + CHILD_MODULES
# Modules marshalled together, because every run that runs one of them runs them all:
# a name that several of them use is then written once and made once as the part is
# unpacked, where module by module it would be made again for each (this takes 40% off
# unpacking the command's modules). Any other module is a part of its own.
PARTS = (COMMAND_MODULES, CHILD_MODULES)

# What other runs import on top, in groups that run at once (pynox.engine.runner). The
# image holds them too; as every module in it, each is unpacked only when imported, so
# a plain run pays for reading their bytes alone. A time limit's wording, which the
# launcher prints when the limit is reached:
TIME_LIMIT_MODULES = ("pynox.unit_format", "pynox.engine.time_limit")
# What a run with --json under the launcher imports: what the launcher is told to write
# the result with (the wording of a time limit, the result's fixed fields; the hints' come
# from the image's baked values, BAKED, unless the run has a memory or file size limit).
RESULT_MODULES = TIME_LIMIT_MODULES + (
    "pynox.readable_json",
    "pynox.engine.signal_names",
    "pynox.engine.result_frame",
)
# What a run with a memory limit under the launcher imports to tell it what to print
# when native code ends the program; with --json, also a run with a file size limit: the
# wording of the hints that depend on those limits (not of the rest, pynox.engine.hint_text).
NATIVE_END_MODULES = (
    "pynox.unit_format",
    "pynox.file_names",
    "pynox.engine.hint_style",
    "pynox.engine.limit_hints",
    "pynox.engine.signal_names",
    "pynox.engine.native_end",
)
# Then what a limit given on the command line (--timeout, --memory) and a Python
# supervisor, which builds and writes the result itself, import on top of those.
SUPERVISED_MODULES = RESULT_MODULES + (
    "pynox.file_names",
    "pynox.engine.hint_style",
    "pynox.engine.limit_hints",
    "pynox.engine.hint_text",
    "pynox.engine.native_end",
    "pynox.units",
    "pynox.strict_json",
    "pynox.engine.result",
    "pynox.engine.scratch_removal",
    "pynox.engine.supervisor",
)
# What a run in a project with a pynox.toml imports on top: its cached configuration,
# run at once (pynox.cli.main), and, when the cache misses, the file's reader and the
# cache's writer.
CACHED_CONFIG_MODULES = (
    "pynox.policy.config_values",
    "pynox.policy.cache",
)
CONFIGURED_MODULES = CACHED_CONFIG_MODULES + ("pynox.policy.config", "pynox.policy.cache_writer")
# What a run with a limit on the command line imports to read it (pynox.cli.main), and
# to tell the launcher its wording when it is a time limit.
LIMIT_MODULES = TIME_LIMIT_MODULES + ("pynox.units",)
# What some runs import one at a time, which the import system finds in the image: a
# run that grants paths or the network, to resolve them, one that grants a write, where
# OpenSSL reads its configuration, one told where its pynox.toml is, and
# `pynox --no-sandbox`.
ON_DEMAND_MODULES = (
    "pynox.policy.path_grant",
    "pynox.policy.openssl_dirs",
    "pynox.policy.ca_store",
    "pynox.policy.user_paths",
    "pynox.jsonfast.no_sandbox",
)
# The groups the engine has run at once, by name (pynox.engine.runner.run_from_image).
GROUPS = {
    "child": CHILD_MODULES,
    "result": RESULT_MODULES,
    "time_limit": TIME_LIMIT_MODULES,
    "limit": LIMIT_MODULES,
    "config": CACHED_CONFIG_MODULES,
    "native_end": NATIVE_END_MODULES,
}
IMAGE_MODULES = tuple(
    dict.fromkeys(HOT_MODULES + SUPERVISED_MODULES + CONFIGURED_MODULES + ON_DEMAND_MODULES)
)

# Values the image holds beside the code, each made by a function of pynox's when the
# image is built, by name: what every run of some mode would otherwise compute anew, from
# nothing a run can change. The launcher's hint templates for a --json run with neither a
# memory nor a file size limit (pynox.engine.result_frame). Made from the package's
# sources alone: pynox._native is not built yet.
BAKED = {"unlimited_hint_texts": ("pynox.engine.hint_text", "unlimited_hint_texts")}
# Where the loaded image holds those, unpacked the first time one is asked for (see baked).
_baked_values: "list[memoryview | dict[str, object]]" = []

_IMAGE = f"{PACKAGE_DIR}/__pycache__/_boot.{sys.implementation.cache_tag}.image"
_PACKAGE_FILE = "__init__.py"
_INDEX_SIZE_BYTES = 4


class _ImageFinder:
    """Finds pynox's hot modules in the image; every other import goes on as usual."""

    pynox_start_up = True  # what end_start_up recognizes it by

    def __init__(self, codes: "dict[str, Entry]") -> None:
        self.codes = codes

    def find_spec(
        self,
        name: str,
        path: "Sequence[str] | None" = None,
        target: "ModuleType | None" = None,
    ) -> "ModuleSpec | None":
        if name == NATIVE_MODULE:
            return _native_spec()
        entry = self.codes.get(name)
        if entry is None or not _unchanged([entry])[0]:
            return None
        return self._spec_of(name, entry[0])

    def _spec_of(self, name: str, source: str) -> "ModuleSpec":
        package = source.endswith(_PACKAGE_FILE)
        spec = ModuleSpec(name, self, origin=source, is_package=package)  # type: ignore[arg-type]
        if package:
            spec.submodule_search_locations = [source.rpartition("/")[0]]
        spec.has_location = True  # so the module gets __file__, as when imported
        spec.cached = _cached_path(source)
        return spec

    def create_module(self, spec: "ModuleSpec") -> None:
        return None  # the default module object

    def exec_module(self, module: "ModuleType") -> None:
        code = unpack(self.codes[module.__name__])
        exec(code, module.__dict__)  # noqa: S102 - pynox's own code

    @staticmethod
    def baked(name: str) -> object:
        """The value the image holds under name (see BAKED)."""
        return baked(name)

    def run_group(self, group: str) -> None:
        """run_all of a group the engine names (see GROUPS)."""
        self.run_all(GROUPS[group])

    def run_all(self, names: "Sequence[str]") -> None:
        """Runs these modules, in order, as an import of each would, without the import
        system's own work per module (its locks, its search of sys.meta_path, its
        checks on the way back), which costs a cold process some 30 µs a module: 0.6 ms
        of a plain run. A module that one of them imports before its turn is imported
        as usual; so is one whose source changed (find_spec leaves it to the path finder).
        """
        names = [name for name in names if name not in sys.modules and name in self.codes]
        entries = [self.codes[name] for name in names]
        for name, entry, unchanged in zip(names, entries, _unchanged(entries), strict=True):
            if not unchanged or name in sys.modules:
                continue
            module = _module_for(self._spec_of(name, entry[0]))
            sys.modules[name] = module
            try:
                self.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
            parent, _, child = name.rpartition(".")
            setattr(sys.modules[parent], child, module)


_ModuleType = type(sys)
_CodeType = type((lambda: None).__code__)


def _module_for(spec: "ModuleSpec") -> "ModuleType":
    """The module importlib's module_from_spec makes from a spec of _ImageFinder's, with
    the attributes it would set (tests/test_boot.py compares the two), without its
    general-purpose checks: some 4 µs a module in a cold process."""
    module = _ModuleType(spec.name)
    module.__loader__ = spec.loader
    module.__package__ = spec.parent
    module.__spec__ = spec
    if spec.submodule_search_locations is not None:
        module.__path__ = spec.submodule_search_locations
    module.__file__ = spec.origin
    cached = spec.cached
    if cached is not None:
        module.__cached__ = cached  # type: ignore[attr-defined]
    return module


# pynox's compiled module, which every run loads: the finder takes it from the one file
# a build names it (WITH_SOABI), where the import system would first list the
# package's directory to find it.
NATIVE_MODULE = "pynox._native"


def _native_spec() -> "ModuleSpec | None":
    """The spec of pynox._native in this interpreter's own file name; None when there
    is no such file, which leaves it to the path finder."""
    path = f"{PACKAGE_DIR}/_native{extension_suffixes()[0]}"
    if _size(path) < 0:
        return None
    spec = ModuleSpec(NATIVE_MODULE, ExtensionFileLoader(NATIVE_MODULE, path), origin=path)
    spec.has_location = True
    return spec


def _cached_path(source: str) -> "str | None":
    """The module's __cached__ as importlib's cache_from_source names it, in the one case
    every run is (no -O, no pycache prefix), without the import system's own path
    handling per module; None leaves it to importlib."""
    tag = sys.implementation.cache_tag
    if tag is None or sys.flags.optimize or sys.pycache_prefix is not None:
        return None
    directory, _, name = source.rpartition("/")
    return f"{directory}/__pycache__/{name[:-3]}.{tag}.pyc"


def _unchanged(entries: "list[Entry]") -> "list[bool]":
    """Whether each module's source is still of the size it had when the image was made:
    in one call of pynox._native where it is loaded (a stat call builds a stat_result for
    each, which costs more than the system call)."""
    native = sys.modules.get(NATIVE_MODULE)
    if native is not None:
        sizes = native.file_sizes(tuple(entry[0] for entry in entries))
        return [size == entry[1] for size, entry in zip(sizes, entries, strict=True)]
    return [_size(entry[0]) == entry[1] for entry in entries]


def _size(path: str) -> int:
    try:
        return posix.stat(path).st_size
    except OSError:
        return -1


class _Part:
    """Modules' code marshalled together, unpacked the first time one of them is needed."""

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self._codes: list[CodeType | None] | None = None

    def take(self, position: int) -> "CodeType":
        """The code at position, which the part then lets go of: a module runs once.
        Should it run again (its first run raised, and it is imported once more), the
        part is unpacked anew."""
        codes = self._codes
        if codes is None or codes[position] is None:
            codes = self._codes = list(marshal.loads(self.data))
        code = codes[position]
        codes[position] = None
        return code  # type: ignore[return-value]  # not None: just unpacked, if it was


def unpack(entry: "Entry") -> "CodeType":
    """A module's code from the image, naming its source where it is now (inner
    functions included): tracebacks name the installed files after a move. A part the
    image holds damaged (its length intact, its bytes not) gives way to the source."""
    source, _, part, position = entry
    try:
        code = part.take(position)
    except (ValueError, EOFError, TypeError, IndexError):  # what marshal makes of bad data
        code = None
    if type(code) is not _CodeType:
        with open(source, "rb") as file:
            return compile(file.read(), source, "exec", dont_inherit=True)
    _fix_co_filename(code, source)
    return code


def main() -> None:
    """Runs the pynox command, its hot modules from the image when there is a valid one.

    The one way in: the launcher (pynox/_start.py), its fallback (`python -I -S -c`) and
    `python -m pynox` all call this. pynox.engine.runner.end_start_up takes the finder
    off sys.meta_path before any program runs.
    """
    try:
        codes = _load_image()
        if codes is not None:
            finder = _ImageFinder(codes)
            sys.meta_path.insert(0, finder)
            finder.run_all(COMMAND_MODULES)
        from pynox.cli.main import main as command
    except KeyboardInterrupt:
        from pynox.interrupted import die_interrupted

        die_interrupted()
    command()


def baked(name: str) -> object:
    """The value the loaded image holds under name (see BAKED); None without an image,
    where the caller computes it."""
    if not _baked_values:
        return None
    values = _baked_values[0]
    if isinstance(values, memoryview):  # unpacked once, by the first run that needs it
        try:
            values = marshal.loads(values)
        except (ValueError, EOFError, TypeError):  # damaged: the callers make their own
            values = {}
        _baked_values[0] = values if isinstance(values, dict) else {}
    return _baked_values[0].get(name)  # type: ignore[union-attr]


def _relative_source(name: str) -> str:
    """Where a hot module's source is, relative to the package: a module or a package."""
    import os  # the build's: os is loaded then anyway

    parts = name.split(".")[1:]
    module = os.path.join(*parts) + ".py"
    if os.path.isfile(os.path.join(PACKAGE_DIR, module)):
        return module
    return os.path.join(*parts, _PACKAGE_FILE)


def _image_bytes() -> memoryview:
    """The image, mapped (pynox._native.map_file: why, in runtime/image.c), or read where
    pynox._native cannot be loaded or the file cannot be mapped."""
    native = sys.modules.get(NATIVE_MODULE) or _load_native()
    fd = posix.open(_IMAGE, posix.O_RDONLY | posix.O_CLOEXEC)
    try:
        if native is not None:
            try:
                return native.map_file(fd)  # type: ignore[no-any-return]
            except OSError:
                pass  # a file system that maps no files: read as before
        with open(fd, "rb", closefd=False) as image:
            return memoryview(image.read())
    finally:
        posix.close(fd)


def _load_native() -> "ModuleType | None":
    """pynox._native, loaded as importing it would, ahead of the image it maps: every run
    that loads the image loads it anyway. None where there is no such file."""
    spec = _native_spec()
    if spec is None:
        return None
    native = module_from_spec(spec)
    spec.loader.exec_module(native)  # type: ignore[union-attr]
    sys.modules[NATIVE_MODULE] = native
    sys.modules["pynox"]._native = native  # type: ignore[attr-defined] # as importing sets it
    return native


def _load_image() -> "dict[str, Entry] | None":
    try:
        data = _image_bytes()
        index_size = int.from_bytes(data[:_INDEX_SIZE_BYTES], "little")
        body = data[_INDEX_SIZE_BYTES + index_size :]
        header = marshal.loads(data[_INDEX_SIZE_BYTES : _INDEX_SIZE_BYTES + index_size])
        magic, index, (values_offset, values_length) = header
        if magic != MAGIC_NUMBER or set(index) != set(IMAGE_MODULES):
            return None
        codes = {}
        parts: dict[int, _Part] = {}
        end = 0
        for name, (relative, size, offset, length, position) in index.items():
            part = parts.get(offset)
            if part is None:
                if offset != end:
                    return None  # the parts follow the index, one after another
                end = offset + length
                part = parts[offset] = _Part(body[offset:end])
            elif len(part.data) != length:
                return None
            # Joined by hand: os.path.join's checks are of no use on these POSIX paths.
            codes[name] = (f"{PACKAGE_DIR}/{relative}", size, part, position)
        # The baked values follow the parts, and end the file.
        if values_offset != end or end + values_length != len(body):
            return None
        _baked_values[:] = [body[end:]]
        return codes
    except Exception:  # noqa: BLE001 - a missing or unusable image means importing as usual
        return None


def write_image(directory: str) -> str:
    """Compiles the imaged modules' sources into an image in `directory`; returns its path.

    For the build only: the same sources always give the same bytes when run with
    PYTHONHASHSEED=0 (set and frozenset constants keep their order).
    """
    import gc
    import os  # the build's: os is loaded then anyway
    from importlib import import_module

    gc.disable()  # collections change reference counts, which marshal writes (FLAG_REF)
    grouped = {name for part in PARTS for name in part}
    parts = [*PARTS, *((name,) for name in IMAGE_MODULES if name not in grouped)]
    index = {}
    written_parts = []
    offset = 0
    for names in parts:
        sources = [_relative_source(name) for name in names]
        sizes = []
        codes = []
        for relative in sources:
            with open(os.path.join(PACKAGE_DIR, relative), "rb") as source:
                text = source.read()
            # Without docstrings (as `python -OO` compiles) or what only type checkers
            # read: nothing reads them there, and the image loads faster. These modules
            # have no asserts. The file name is fixed up when a module is unpacked (see
            # unpack).
            tree = _parsed_without_type_checking_blocks(text, "pynox/" + relative)
            codes.append(compile(tree, "pynox/" + relative, "exec", dont_inherit=True, optimize=2))
            sizes.append(len(text))
        data = marshal.dumps(tuple(codes))
        for position, name in enumerate(names):
            index[name] = (sources[position], sizes[position], offset, len(data), position)
        written_parts.append(data)
        offset += len(data)
    values = marshal.dumps(
        {name: getattr(import_module(module), call)() for name, (module, call) in BAKED.items()}
    )
    header = marshal.dumps((MAGIC_NUMBER, index, (offset, len(values))))
    path = os.path.join(directory, os.path.basename(_IMAGE))
    # A new file in the old one's place, never the old one rewritten: running processes
    # (a pool, for hours) keep the old one mapped, and would fault on a file cut short.
    written = f"{path}.{os.getpid()}.new"
    with open(written, "wb") as image:
        image.write(
            len(header).to_bytes(_INDEX_SIZE_BYTES, "little")
            + header
            + b"".join(written_parts)
            + values
        )
    os.replace(written, path)
    return path


def _parsed_without_type_checking_blocks(text: bytes, filename: str) -> "ast.Module":
    """The module's syntax tree without its top-level `if TYPE_CHECKING:` blocks, which
    never run (TYPE_CHECKING is False but for type checkers): their classes and imports
    would still be unpacked with the module."""
    import ast

    tree = ast.parse(text, filename)
    tree.body = [
        statement
        for statement in tree.body
        if not (
            isinstance(statement, ast.If)
            and isinstance(statement.test, ast.Name)
            and statement.test.id == "TYPE_CHECKING"
            and not statement.orelse
        )
    ]
    return tree


if __name__ == "__main__":
    # python -m pynox._boot --write-image DIRECTORY (the build's step; see the docstring)
    if sys.argv[1:2] != ["--write-image"] or len(sys.argv) != 3:
        sys.exit("usage: python -m pynox._boot --write-image DIRECTORY")
    print(write_image(sys.argv[2]))
