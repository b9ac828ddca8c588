"""The package's shape: no module over 450 lines of code; the kind of scores (binary or K
classes) decided in `calibcli.kinds` only; tests laid out like the code. The import graph:
tests/test_import_graph.py."""

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


# How "is this K-class?" was asked before `calibcli.kinds` decided it once (issue #32), each with
# where it may not come back (every module outside kinds/, or the doors that used it to pick a
# path: the commands and the Python API). Dispatch tables keyed by the decided kind are the way.
KIND_TESTS = [
    (r"score_cols is (not )?None", "a command's K score columns", ("cli/", "api.py")),
    (r"\bnp\.ndim\(", "the number of dimensions of scores", ("",)),
    (r"""["']classes["'] (not )?in\b""", "a key of a map's envelope", ("",)),
    (r"isinstance\([^)]*\b(ClassMap|ClassCalibrator|OneVsRest)\b", "the class of a map", ("",)),
    (r"issubclass\([^)]*\bClassCalibrator\b", "the class of a method", ("",)),
    (r"""getattr\([^)]*["']classes_["']""", "a duck-typed attribute", ("",)),
    (r"""(==|!=|\bis)\s*(kinds\.)?(KCLASS|BINARY|["'](kclass|binary)["'])""", "a comparison with a kind", ("",)),
]
# The registry files each method by the kind its class declares (one table for both kinds).
KIND_TEST_ALLOWED = {"calibrators/registry.py"}


def test_no_module_outside_kinds_tests_the_kind():
    import re

    found = []
    for path in sorted(ROOT.rglob("*.py")):
        where = str(path.relative_to(ROOT))
        if where.startswith("kinds/") or where in KIND_TEST_ALLOWED:
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            code = line.split("#", 1)[0]
            for pattern, what, places in KIND_TESTS:
                if any(where.startswith(place) for place in places) and re.search(pattern, code):
                    found.append(f"{where}:{number} tests {what}: {line.strip()}")
    assert not found, "the kind is decided in calibcli.kinds only:\n" + "\n".join(found)


# Suites that cut across modules, each named for what it checks rather than a module.
CROSS_CUTTING = {
    "contract": "the calibrator contract, run over every registered method",
    "extremes": "every method at the ends of float64",
    "fast_paths": "fast paths against their straightforward versions",
    "bad_inputs": "the bad-input corpus through the real CLI",
    "cli_habits": "global flags, one meaning per option, honest messages, across commands",
    "import_graph": "the package's imports",
    "structure": "the package's shape",
    "docs": "the documentation site: its examples run, its reference is generated, it builds and renders",
}


def _names_in(folder: Path) -> set[str]:
    """The modules and subpackages below a calibcli folder, and the folder itself."""
    names = {path.stem.lstrip("_") for path in folder.rglob("*.py") if path.stem != "__init__"}
    return names | {path.name for path in folder.rglob("*") if path.is_dir() and path.name != "__pycache__"} | {folder.name}


SUPPORT_FOLDERS = {"adversarial": "the trust suite through the real CLI", "fixtures": "saved maps and data",
                   "bad_inputs": "the bad-input corpus"}


def test_tests_are_laid_out_like_the_code():
    """Tests mirror the packages: tests/<package>/test_X.py is named after a module of
    calibcli/<package>/ (X, or X_<aspect> for one aspect of it, e.g. maps/test_maps_loader.py);
    tests/test_X.py after a module at the top of calibcli/, or is a cross-cutting suite above."""
    tests = ROOT.parent / "tests"
    stray = []
    for folder in sorted(p for p in tests.iterdir() if p.is_dir() and p.name not in ("__pycache__", *SUPPORT_FOLDERS)):
        if not (ROOT / folder.name).is_dir():
            stray.append(f"{folder.name}/ (no calibcli/{folder.name}/)")
            continue
        names = _names_in(ROOT / folder.name)
        stray += [f"{folder.name}/{t.name}" for t in sorted(folder.glob("test_*.py"))
                  if not any(t.stem[5:] == m or t.stem[5:].startswith(m + "_") for m in names)]
    top = {path.stem.lstrip("_") for path in ROOT.glob("*.py") if path.stem != "__init__"}
    for test in sorted(tests.glob("test_*.py")):
        name = test.stem[len("test_"):]
        if name in CROSS_CUTTING or any(name == m or name.startswith(m + "_") for m in top):
            continue
        stray.append(test.name)
    assert not stray, f"test modules laid out unlike the code: {stray} (move or rename them, or list the suite)"
