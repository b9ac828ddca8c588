"""The package's shape, read with `ast`: no module over 450 lines of code, no block of six
lines repeated anywhere in calibcli/ (the same lines, or the same shape with other names and
numbers, class headers included). Left out of the repeat check: docstrings, imports, `params`
declarations, a class's constant attributes and bare field declarations, and pure data literals (a dict, list, tuple or set
table of constants, or of calls on constants, assigned to a name): tables, not code. The import
graph: tests/test_import_graph.py."""

from __future__ import annotations

import ast
import io
import keyword
import tokenize
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "calibcli"
MAX_CODE_LINES = 450
REPEAT_LINES = 6  # no block of this many lines may appear twice in calibcli/


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def code_lines(path: Path) -> int:
    """Non-blank lines that are not comments (docstrings count: they are part of the module)."""
    return sum(1 for line in path.read_text().splitlines()
               if line.strip() and not line.strip().startswith("#"))


@pytest.mark.parametrize("name", list(MODULES))
def test_module_size(name):
    n = code_lines(MODULES[name])
    assert n <= MAX_CODE_LINES, f"{name} has {n} lines of code, more than {MAX_CODE_LINES}: split it by topic"


def _is_data(node: ast.AST) -> bool:
    """A constant (or an UPPER_CASE name of one), or a literal/call built only from them: a
    table's row, not code."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id.isupper()
    if isinstance(node, ast.UnaryOp):
        return _is_data(node.operand)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(map(_is_data, node.elts))
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_data(k) for k in node.keys) and all(map(_is_data, node.values))
    if isinstance(node, ast.Call):
        return (isinstance(node.func, (ast.Name, ast.Attribute)) and all(map(_is_data, node.args))
                and all(_is_data(k.value) for k in node.keywords))
    return False


def _is_table(node: ast.AST) -> bool:
    """`NAME = {...}` / `NAME: T = [...]`: a dict, list, tuple or set literal of data."""
    value = getattr(node, "value", None)
    return (isinstance(node, (ast.Assign, ast.AnnAssign))
            and isinstance(value, (ast.Dict, ast.List, ast.Tuple, ast.Set)) and _is_data(value))


def _normalised_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, tokens) of the code lines, names, numbers and strings replaced by
    placeholders (the same shape with other names and constants is a repeat). Docstrings,
    imports, the `params` declarations of a class (one option per line, alike by nature), its
    constant attributes (`name`, `description`, `monotone`, ...: data, not code), its bare
    field declarations (`rows: int`: a dataclass's record layout) and data tables
    (`_is_table`) are left out; class headers and methods count."""
    source = path.read_text()
    skip: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        doc = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        declared = (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "params")
        if doc or declared or _is_table(node) or isinstance(node, (ast.Import, ast.ImportFrom)):
            skip.update(range(node.lineno, node.end_lineno + 1))
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                field = isinstance(stmt, ast.AnnAssign) and stmt.value is None  # a dataclass field
                if field or isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, ast.Constant):
                    skip.update(range(stmt.lineno, stmt.end_lineno + 1))
    tokens: dict[int, list[str]] = defaultdict(list)
    layout = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in layout or tok.start[0] in skip:
            continue
        name = tok.type == tokenize.NAME and not keyword.iskeyword(tok.string)
        tokens[tok.start[0]].append("N" if name else {tokenize.NUMBER: "0", tokenize.STRING: "'s'"}.get(tok.type, tok.string))
    return [(line, " ".join(words)) for line, words in sorted(tokens.items())]


def _where(path: Path) -> str:
    """The file's name below calibcli/ (`evaluation/state.py`), or its bare name elsewhere."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def repeated_blocks(paths: list[Path], size: int = REPEAT_LINES) -> list[list[tuple[str, int]]]:
    """Places (file, first line) sharing a block of `size` consecutive code lines."""
    seen: dict[tuple[str, ...], list[tuple[str, int]]] = defaultdict(list)
    for path in paths:
        lines = _normalised_lines(path)
        for i in range(len(lines) - size + 1):
            seen[tuple(text for _, text in lines[i:i + size])].append((_where(path), lines[i][0]))
    return [where for where in seen.values() if len(where) > 1]


def test_repeated_blocks_finds_a_block_with_other_names_and_constants(tmp_path):
    body = "    x = {n}\n    y = x * {n}\n    z = y + 1\n    w = z - x\n    v = w / 2\n    return v\n"
    one, two = tmp_path / "a.py", tmp_path / "b.py"
    one.write_text("def f():\n" + body.format(n=3))
    two.write_text('def g():\n    """Doc."""\n' + body.format(n=4.5).replace("x", "k"))
    assert [("a.py", 2), ("b.py", 3)] in repeated_blocks([one, two])
    two.write_text("def g():\n" + body.format(n=3).replace("z - x", "z - x * x"))
    assert repeated_blocks([one, two]) == []


def test_repeated_blocks_skips_data_tables_but_not_code(tmp_path):
    table = "T = {\n" + "".join(f"    'k{i}': ('v{i}', {i}, B({i}, low=-{i})),\n" for i in range(7)) + "}\n"
    one, two = tmp_path / "a.py", tmp_path / "b.py"
    one.write_text(table)
    two.write_text(table.replace("T =", "U: dict ="))
    assert repeated_blocks([one, two]) == []
    two.write_text(table.replace("B(", "f(x, "))  # a call on a name is code: it counts
    one.write_text(table.replace("B(", "g(y, ").replace("T =", "def h():\n    return"))
    assert repeated_blocks([one, two]) != []


def test_no_repeated_block_in_calibcli():
    found = repeated_blocks(sorted(ROOT.rglob("*.py")))
    assert not found, "blocks repeated (file, first line): " + "; ".join(map(str, found))


# Suites that cut across modules, each named for what it checks rather than a module.
CROSS_CUTTING = {
    "contract": "the calibrator contract, run over every registered method",
    "extremes": "every method at the ends of float64",
    "fast_paths": "fast paths against their straightforward versions",
    "bad_inputs": "the bad-input corpus through the real CLI",
    "cli_habits": "global flags, one meaning per option, honest messages, across commands",
    "import_graph": "the package's imports",
    "structure": "the package's shape",
    "readme": "the README's commands and examples",
}


def test_tests_are_laid_out_like_the_code():
    """Each tests/test_X.py is named after the calibcli module it tests (X, or X_<aspect> for
    one aspect of it, e.g. test_maps_loader.py), or is a cross-cutting suite listed above."""
    modules = {path.stem.lstrip("_") for path in ROOT.rglob("*.py") if path.stem != "__init__"}
    modules |= {path.name for path in ROOT.rglob("*") if path.is_dir() and path.name != "__pycache__"}
    stray = []
    for test in sorted((ROOT.parent / "tests").glob("test_*.py")):
        name = test.stem[len("test_"):]
        if name in CROSS_CUTTING or any(name == m or name.startswith(m + "_") for m in modules):
            continue
        stray.append(test.name)
    assert not stray, f"test modules named after no calibcli module: {stray} (rename them, or list the suite)"
