"""The package's layout: imports point one way, with no cycle, deferred imports included.

Every `import` of a pynox module anywhere in pynox/ counts, inside functions too (a
deferred import is still a dependency), except those under `if TYPE_CHECKING:`, which
never run. The subpackages are layers: each may import only those the map below allows.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parent.parent / "pynox"  # the sources, as laid out

# What each part may import besides itself and the root modules (errors, units, ...).
ALLOWED = {
    "policy": set(),
    "jsonfast": set(),
    "engine": {"policy", "jsonfast"},
    "pool": {"engine", "policy", "jsonfast"},
    "cli": {"policy", "engine", "pool", "jsonfast", "mcp", "api"},
    "api": {"policy"},
    "mcp": {"api", "policy"},
    "integrations": {"api"},
    "ray": {"api", "policy"},
}
# Parts whose package is itself an import path users write (`from pynox.ray import
# RayPool`): their __init__.py re-exports; every other part's is empty.
PUBLIC_PACKAGES = {"ray"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node, skipping the bodies of `if TYPE_CHECKING:`."""
    found: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def imports_of(name: str) -> set[str]:
    tree = ast.parse(MODULES[name].read_text())
    targets: set[str] = set()
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                targets.add(submodule if submodule in MODULES else node.module)
    return {t for t in targets if t in MODULES and t != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def part_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ALLOWED) else None


def test_the_subpackages_are_the_ones_the_map_describes() -> None:
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert packages == set(ALLOWED)
    for package in packages - PUBLIC_PACKAGES:
        assert (PACKAGE / package / "__init__.py").read_text() == "", f"{package}/__init__.py"


def test_no_import_cycle() -> None:
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for target in sorted(GRAPH[name]):
            if state.get(target) == "open":
                cycle = trail[trail.index(target) :] + [target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, [*trail, target])
        state[name] = "done"

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])


def test_imports_point_one_way() -> None:
    wrong = []
    for name, targets in GRAPH.items():
        part = part_of(name)
        for target in targets:
            other = part_of(target)
            if other is None or other == part:
                continue
            if part is None:
                # Root modules (errors, units, the start-up) stand below every part, but
                # the start-up itself hands over to the command.
                if name != "pynox._boot":
                    wrong.append(f"{name} -> {target}")
            elif other not in ALLOWED[part]:
                wrong.append(f"{name} -> {target}")
    assert wrong == [], "imports against the layers: " + ", ".join(sorted(wrong))


def test_the_detector_sees_deferred_imports_and_skips_type_checking_ones() -> None:
    """A check that could not fail would prove nothing: a deferred import is an edge (the
    command loads its configuration inside a function), a TYPE_CHECKING one is not (the
    child names Program only for type checkers)."""
    assert "pynox.policy.cache" in GRAPH["pynox.cli.main"]
    assert "pynox.engine.program" not in GRAPH["pynox.engine.child"]
