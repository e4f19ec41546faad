"""How a request's code is compiled apart from its last expression (request_child): the
quick way, without a syntax tree, must give what the tree gives, code object for code
object (bytecode, constants, names and positions), and python's warnings once each, in
python's order; otherwise it must leave the code to the tree."""

from __future__ import annotations

import warnings

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.examples import examples

from pynox.pool import request_child

# Lines and blocks an agent's code is made of, with what trips a line-based split:
# brackets and strings over several lines, continuations, semicolons, blocks, comments,
# flush-left lines inside a string, decorators, `from __future__`, escape sequences and
# numbers run into keywords (python warns of both), and code that does not compile.
PIECES = [
    "x = 41",
    "x + 1",
    "print(x)",
    "x",
    "x = 1; x",
    "x; y = 2",
    "import os",
    "os.getcwd()",
    "def f():\n    return 2",
    "f()",
    "class A:\n    pass",
    "A()",
    "for i in range(3):\n    pass",
    "if x:\n    y = 1\nelse:\n    y = 2",
    "if x: y",
    "with open(f) as g: pass",
    "try:\n    pass\nexcept Exception:\n    pass",
    "values = [\n1,\n2]",
    "total = (1 +\n2)",
    "print(\n1)",
    "f(\n)",
    "s = '''\nx\n'''",
    "'''\nx'''",
    "text = '''\nprint(1)\nx\n'''",
    "y = 1 + \\\n2",
    "1 + \\\n2",
    "# a comment",
    "",
    "   ",
    "\t",
    "@decorator\ndef g():\n    pass",
    "from __future__ import annotations",
    "from __future__ import barry_as_FLUFL",
    "1 <> 2",
    "1 != 2",
    "pattern = '\\d+'",
    "'\\d+'",
    "1if x else 2",
    "x is 1",
    "(1, 2)(3)",
    "lambda: 1",
    "lambda: '\\d'",
    "x: int = 1",
    "d['k'] = 3",
    "match(x)",
    "await x",
    "yield x",
    "def broken(:",
    "x =",
    ")",
    "é = 'ü'",
    "é",
    "'doc'",
    "0x1f",
    "1_000",
    "x if y else z",
    "[i for i in range(3)]",
    "x  # the value",
    "\x0cx",
    "    i",
    "\ti",
    "p = '\\d' + \\\n1",
]


def _compiled(source: str) -> tuple[object, list[tuple[str, str, int]]]:
    """What compile_with_value gives, and the warnings it gave (category, text, line)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = request_child.compile_with_value(source, "<agent>")
    return compiled, [(w.category.__name__, str(w.message), w.lineno) for w in caught]


def _python_warnings(source: str) -> list[tuple[str, str, int]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            compile(source, "<agent>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            pass
    return [(w.category.__name__, str(w.message), w.lineno) for w in caught]


def _same(ours: object, tree: object) -> bool:
    if ours is None or tree is None:
        return ours is tree
    (body, expression), (tree_body, tree_expression) = ours, tree  # type: ignore[misc]
    if body is None:  # nothing before the expression: the tree's body is empty
        body = compile("", "<agent>", "exec", dont_inherit=True)
    return bool(body == tree_body and expression == tree_expression)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(["from __future__ import barry_as_FLUFL", "1 != 2"], "\n", "")
@example(["from __future__ import barry_as_FLUFL", "1 <> 2"], "\n", "")
@example(["from __future__ import barry_as_FLUFL", "pattern = '\\d+'", "1 != 2"], "\n", "")
@example(["from __future__ import annotations", "x: int = 1", "x"], "\n", "\n")
@example(["for i in range(3):\n    pass", "    i"], "\n", "")
@example(["p = '\\d' + \\\n1"], "\n", "")
@given(
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=6),
    st.sampled_from(["\n", "\n\n", "\r\n"]),
    st.sampled_from(["", "\n", "\n\n", "  \n"]),
)
def test_code_compiles_as_the_syntax_tree_compiles_it(
    pieces: list[str], newline: str, ending: str
) -> None:
    source = newline.join(pieces) + ending
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = request_child._compile_from_tree(source, "<agent>")
    ours, warned = _compiled(source)
    assert _same(ours, tree), source
    if tree is not None:
        # A code that compiles warns as python warns when it compiles it.
        assert warned == _python_warnings(source), source


def test_code_ending_in_an_expression_takes_the_quick_way() -> None:
    """The quick way is there for the common case: the tree is left for the rest."""
    quick = request_child._compile_last_line_apart
    assert quick("print(sum(range(10)))", "<agent>") is not None
    assert quick("import os\nx = os.getcwd()\nprint(x)\n", "<agent>") is not None
    assert quick("def f():\n    return 1\n\nf()\n\n", "<agent>") is not None
    for other in ("x = 1", "x = 1; x", "print(\n1)", "'\\d'", "x\n# done", "a = 1\r\nb"):
        assert quick(other, "<agent>") is None, other
