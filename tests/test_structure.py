"""The package's shape: no import cycle among calibcli modules, no module over 450 lines of code.

Read with `ast`, not by importing: an import counts when it runs at module level (function-level
imports are deliberate, lazy and break no load order). `from calibcli.x import y` is an edge to
`calibcli.x.y` when that is a module, else to `calibcli.x`; the package `__init__` Python runs
first is not counted (it imports every calibrator for registration, so counting it would make
every calibrator import every other).
"""

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
REPEAT_LINES = 6  # no block of this many lines may appear twice in calibcli/calibrators
# Modules outside the calibrators' restructuring still over the limit or in a cycle; each is
# being reworked in its own change. Remove a name once its module is split or untangled.
NOT_YET_SPLIT = {"calibcli.evaluation.metrics", "calibcli.io.reading"}
NOT_YET_UNTANGLED = {"calibcli.evaluation.baseline", "calibcli.evaluation.gates"}


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


def module_imports(name: str) -> set[str]:
    """calibcli modules `name` imports at module level (including inside if/try at top level)."""
    tree = ast.parse(MODULES[name].read_text())
    package = name if _is_package(name) else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(nodes):
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    found.add(sub if sub in MODULES else base)
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(node.orelse)
                for h in getattr(node, "handlers", []):
                    visit(h.body)
                visit(getattr(node, "finalbody", []))

    visit(tree.body)
    return {m for m in found if m in MODULES and m != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of module names (first repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = dfs(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = dfs(start)
            if found:
                return found
    return None


def code_lines(path: Path) -> int:
    """Non-blank lines that are not comments (docstrings count: they are part of the module)."""
    return sum(1 for line in path.read_text().splitlines()
               if line.strip() and not line.strip().startswith("#"))


def test_find_cycle_finds_a_cycle_and_only_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_module_imports_reads_module_level_imports_only():
    imports = module_imports("calibcli.calibrators.registry")
    assert "calibcli.calibrators.base" in imports and "calibcli.errors" in imports
    assert "calibcli.calibrators.registry" in module_imports("calibcli.calibrators")
    assert "calibcli.calibrators.registry" not in module_imports("calibcli.bounds")  # inside functions


def test_no_import_cycle():
    graph = {name: module_imports(name) - NOT_YET_UNTANGLED for name in MODULES}
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_no_import_cycle_not_yet_untangled():
    graph = {name: module_imports(name) for name in MODULES}
    cycle = find_cycle(graph)
    if cycle is not None and set(cycle) <= NOT_YET_UNTANGLED:
        pytest.xfail(" -> ".join(cycle) + ": not untangled yet")
    assert cycle is None, " -> ".join(cycle)


@pytest.mark.parametrize("name", [n for n in MODULES if n not in NOT_YET_SPLIT])
def test_module_size(name):
    n = code_lines(MODULES[name])
    assert n <= MAX_CODE_LINES, f"{name} has {n} lines of code, more than {MAX_CODE_LINES}: split it by topic"


@pytest.mark.parametrize("name", sorted(NOT_YET_SPLIT))
def test_module_size_not_yet_split(name):
    n = code_lines(MODULES[name])
    if n > MAX_CODE_LINES:
        pytest.xfail(f"{name} has {n} lines of code: not split yet")


def _normalised_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, tokens) of the code lines, names, numbers and strings replaced by
    placeholders (the same shape with other names and constants is a repeat). Docstrings,
    imports and the `params` declarations of a class (one option per line, alike by nature)
    are left out."""
    source = path.read_text()
    skip: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        doc = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        declared = (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "params")
        if doc or declared or isinstance(node, (ast.Import, ast.ImportFrom)):
            skip.update(range(node.lineno, node.end_lineno + 1))
    tokens: dict[int, list[str]] = defaultdict(list)
    layout = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in layout or tok.start[0] in skip:
            continue
        name = tok.type == tokenize.NAME and not keyword.iskeyword(tok.string)
        tokens[tok.start[0]].append("N" if name else {tokenize.NUMBER: "0", tokenize.STRING: "'s'"}.get(tok.type, tok.string))
    return [(line, " ".join(words)) for line, words in sorted(tokens.items())]


def repeated_blocks(paths: list[Path], size: int = REPEAT_LINES) -> list[list[tuple[str, int]]]:
    """Places (file, first line) sharing a block of `size` consecutive code lines."""
    seen: dict[tuple[str, ...], list[tuple[str, int]]] = defaultdict(list)
    for path in paths:
        lines = _normalised_lines(path)
        for i in range(len(lines) - size + 1):
            seen[tuple(text for _, text in lines[i:i + size])].append((path.name, lines[i][0]))
    return [where for where in seen.values() if len(where) > 1]


def test_repeated_blocks_finds_a_block_with_other_names_and_constants(tmp_path):
    body = "    x = {n}\n    y = x * {n}\n    z = y + 1\n    w = z - x\n    v = w / 2\n    return v\n"
    one, two = tmp_path / "a.py", tmp_path / "b.py"
    one.write_text("def f():\n" + body.format(n=3))
    two.write_text('def g():\n    """Doc."""\n' + body.format(n=4.5).replace("x", "k"))
    assert [("a.py", 2), ("b.py", 3)] in repeated_blocks([one, two])
    two.write_text("def g():\n" + body.format(n=3).replace("z - x", "z - x * x"))
    assert repeated_blocks([one, two]) == []


def test_no_repeated_block_in_calibrators():
    found = repeated_blocks(sorted((ROOT / "calibrators").glob("*.py")))
    assert not found, "blocks repeated (file, first line): " + "; ".join(map(str, found))
