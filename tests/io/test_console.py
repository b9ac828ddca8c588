"""What people see: names from the data are shown as text (never markup, emoji or terminal
control), always recoverable, numbers never cut at any width or encoding; no raw warnings,
no stray files or stderr lines from the plot library."""

from __future__ import annotations

import csv
import io
import json
import re
import math
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from calibcli.cli.app import app
from calibcli.io.console import cell, uncell
from repo import REPO

runner = CliRunner()
ROOT = REPO
DATA = ROOT / "examples" / "data"

# Hostile pieces of names: rich markup (also unbalanced), emoji codes, ANSI escapes, newlines,
# pipes, bidi overrides, zero-width characters, wide and combining characters, TeX, backslashes.
PIECES = ["[red]", "[/red]", "[/x]", "[bold]", ":smile:", "\x1b[31m", "\n", "\r", "|", "\u202e", "\u2066",
          "\u200b", "\ufeff", "中文", "é", "e\u0301", "$x^$", "\\", "\\x1b", "_", "*", "`", "<b>", "\t", "\x00",
          "\u2028", "😀"]
name_text = st.lists(st.one_of(st.sampled_from(PIECES), st.text(st.characters(blacklist_categories=("Cs",)),
                                                                  max_size=3)),
                     min_size=1, max_size=5).map("".join).filter(lambda s: s not in ("label", "field") and s.strip() and "\x00" not in s)
# (not blank, no NUL: every command refuses those in a column option, tests/cli/test_cli_messages.py)


def _unsafe(text: str) -> list[str]:
    """Characters that act on a terminal or hide text (newline aside)."""
    return [ch for ch in text if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs")]


def _table_file(tmp_path: Path, names: list[str], fields: list[str]) -> Path:
    rng = np.random.default_rng(len("".join(names)))
    n = 300
    p = rng.random(n)
    cols = {name: np.clip(p + 0.1 * k * rng.standard_normal(n), 0, 1) for k, name in enumerate(names)}
    cols["label"] = (rng.random(n) < p).astype(np.int64)
    cols["field"] = np.array(fields, dtype=object)[rng.integers(0, len(fields), n)]
    path = tmp_path / "named.parquet"
    pq.write_table(pa.table(cols), path)
    return path


def _markdown_cells(line: str) -> list[str]:
    """The cells of one Markdown table row, unescaped (`\\|` and the other inline escapes)."""
    cells, current, i = [], "", 1
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line) and line[i + 1] in "|*_`[]<>~":
            current += line[i + 1]
            i += 2
            continue
        if ch == "\\":
            current += line[i:i + 2]
            i += 2
            continue
        if ch == "|":
            cells.append(current.strip())
            current = ""
        else:
            current += ch
        i += 1
    return cells


@given(st.lists(name_text, min_size=1, max_size=3, unique=True), st.lists(name_text, min_size=1, max_size=3,
                                                                          unique=True),
       st.sampled_from([20, 40, 200]))
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])  # each example runs the CLI 8 times
@example(names=["_", "\x1b[31m\u00fb/\x92\u00f1I\x97P\u00d2"], fields=["6\u00ac\u00a2\t-"], columns=40)
@example(names=["\U000e887a\u00e4 ", "\x1b[31m"], fields=["`\x01\u00e9"], columns=20)
@example(names=["\U0008ea69n"], fields=["\U00040e56\x9b[/x]", "\\x1b\x9f[/x]\u00d4\U000c9f17\xa0"], columns=200)  # NBSP at an end
def test_hostile_names_in_every_output_format(tmp_path, monkeypatch, names, fields, columns):
    path = _table_file(tmp_path, names, fields)
    monkeypatch.setenv("COLUMNS", str(columns))
    args = ["evaluate", str(path), *(f"--prob-col={n}" for n in names), "--field-col", "field", "--by-field"]
    doc = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert [r["name"] for r in doc["results"]] == names

    table = runner.invoke(app, args)
    assert table.exit_code == 0, table.stderr
    out = table.stdout
    assert not _unsafe(out) and "…" not in out
    lines = out.splitlines()
    for r in doc["results"]:
        assert any(cell(r["name"]) in line for line in lines)
        for value in r["metrics"].values():
            assert ("n/a" if value is None else f"{value:.4f}") in out
        for f in r["by_field"]["by_bias"]:
            assert any(uncell(line.split("│")[1].strip() if "│" in line else line) == f["field"] for line in lines)
    named = {cell(n) for n in [*names, *fields]}
    for line in lines:  # a number is never cut or folded: no line ends in a lone sign or "0." word
        if line.strip() in named:
            continue  # a name's own line (a column called "-"), not a cut number
        assert not re.search(r"(?:^|[\s│┃|])(?:-|-?\d+\.)$", line.rstrip()), line

    md = runner.invoke(app, [*args, "--output-format", "markdown"])
    assert md.exit_code == 0 and not _unsafe(md.stdout)
    rows = [ln for ln in md.stdout.splitlines() if ln.startswith("| ")]
    assert len(rows) == 1 + len(names)  # header + one line per result: no name broke the table
    for row, r in zip(rows[1:], doc["results"]):
        got = _markdown_cells(row)
        assert uncell(got[0]) == r["name"]
        keys = [k for k in r["metrics"]]
        assert got[1:] == ["n/a" if r["metrics"][k] is None else f"{r['metrics'][k]:.4f}" for k in keys]

    out_csv = runner.invoke(app, [*args, "--output-format", "csv"])
    assert out_csv.exit_code == 0
    parsed = list(csv.reader(io.StringIO(out_csv.stdout_bytes.decode())))  # .stdout turns \r\n into \n
    header = parsed[0]
    for row, r in zip(parsed[1:], doc["results"]):
        assert row[0] == r["name"]  # CSV is data: quoted, exact
        for key, text in zip(header[2:], row[2:]):
            value = r["metrics"][key]
            assert (text == "" and value is None) or float(text) == value

    cmp_ = runner.invoke(app, ["compare", str(path), "--score-col", names[0], "-m", "isotonic", "-m", "logistic",
                               "--folds", "2"])
    assert cmp_.exit_code == 0, cmp_.stderr
    assert not _unsafe(cmp_.stdout) and "…" not in cmp_.stdout
    for m in json.loads(runner.invoke(app, ["compare", str(path), "--score-col", names[0], "-m", "isotonic",
                                            "-m", "logistic", "--folds", "2", "--json"]).stdout)["methods"]:
        for metric, value in m["mean"].items():
            assert f"{value:.4f} ± {m['sd'][metric]:.4f}" in cmp_.stdout

    fit = runner.invoke(app, ["fit", str(path), "--score-col", names[0], "-o", str(tmp_path / "m.json")])
    assert fit.exit_code == 0 and not _unsafe(fit.stderr)


@pytest.mark.parametrize("name", ["[red]p[/red]", "[/x]", "m[bold].json", ":smile:", "a|b", "x\ny", "\x1b[2Jz"])
def test_markup_and_emoji_are_text_in_names_and_messages(tmp_path, name):
    path = _table_file(tmp_path, [name], ["f"])
    result = runner.invoke(app, ["evaluate", str(path), f"--prob-col={name}"])
    assert result.exit_code == 0, result.stderr
    assert cell(name) in result.stdout
    missing = runner.invoke(app, ["evaluate", str(path), f"--prob-col={name}x"])
    assert missing.exit_code == 2
    first = missing.stderr.splitlines()[0]
    assert first.startswith("error: ") and not _unsafe(missing.stderr)
    assert (cell(name).replace("\\\\", "\\") if "\n" not in name and "\x1b" not in name else "") in first


def test_map_paths_with_markup_are_shown_whole(tmp_path):
    m = tmp_path / "m[bold].json"
    assert runner.invoke(app, ["fit", str(DATA / "cal.csv"), "-o", str(m)]).exit_code == 0
    result = runner.invoke(app, ["evaluate", str(DATA / "test.csv"), "--map", str(m), "--output-format", "markdown"])
    assert result.exit_code == 0 and "m\\[bold\\].json" in result.stdout
    table = runner.invoke(app, ["evaluate", str(DATA / "test.csv"), "--map", str(m)])
    assert "m[bold].json" in table.stdout


def _calib(*args, env=None, **kw):
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "calibcli", *map(str, args)], capture_output=True, env=full,
                          cwd=DATA, **kw)


def test_an_ascii_terminal_gets_escapes_not_a_crash(tmp_path):
    """Tables and messages fall back to escapes; CSV and Markdown are data, written as UTF-8
    (click's choice for a stream that claims ASCII) so no name is changed."""
    env = {"PYTHONIOENCODING": "ascii", "COLUMNS": "200"}
    name = "p中\u202e"
    path = _table_file(tmp_path, [name], ["é"])
    for args, ascii_out in (([path, f"--prob-col={name}", "--field-col", "field", "--by-field"], True),
                            ([path, f"--prob-col={name}", "--plot", "-"], True),
                            ([path, f"--prob-col={name}", "--output-format", "markdown"], False),
                            ([path, f"--prob-col={name}", "--output-format", "csv"], False),
                            ([path, f"--prob-col={name}", "--json"], True),
                            ([path, "--prob-col", "nope中"], True),
                            ([path, f"--prob-col={name}", "--fail-above", "ece=0"], True)):
        result = _calib("evaluate", *args, env=env)
        assert result.returncode in (0, 1, 2), result.stderr
        assert b"Traceback" not in result.stderr and b"internal error" not in result.stderr, result.stderr
        assert result.stderr.isascii(), result.stderr
        if ascii_out:
            assert result.stdout.isascii()
        else:
            assert (name if "csv" in args else cell(name)) in result.stdout.decode("utf-8")
    assert b"p\\u4e2d" in _calib("evaluate", path, f"--prob-col={name}", env=env).stdout
    for args in (["compare", "test.csv", "-m", "isotonic", "--folds", "2"], ["methods"], ["fit", "cal.csv"]):
        result = _calib(*args, env=env)
        assert result.returncode == 0, result.stderr
        assert result.stderr.isascii()


def test_no_raw_numpy_warnings_on_degenerate_data(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("score,label,w\n0,1,1\n1,0,0\n0.5,1,2\n")
    for extra in ([], ["--weight-col", "w"], ["--weight-col", "label", "--step", "0.5"],
                  ["--weight-col", "w", "--calbin-window", "1", "--ece-bins", "1000"]):
        result = _calib("evaluate", data, "--json", *extra)
        assert result.returncode == 0, result.stderr
        assert b"Warning" not in result.stderr and result.stderr == b"", result.stderr
    import calibcli

    with np.errstate(all="raise"):
        out = calibcli.evaluate([1, 1, 1], [0.0, 1.0, 0.5])
    assert math.isnan(out["auc"])


def test_a_library_warning_is_one_line_and_quiet_hides_it(tmp_path):
    code = ("import sys, warnings; from calibcli.cli import app as cli; from calibcli.calibrators import registry\n"
            "sys.argv = ['calib', *sys.argv[1:]]; orig = registry.catalogue\n"
            "def catalogue():\n    warnings.warn('overflow encountered', RuntimeWarning)\n    return orig()\n"
            "registry.catalogue = catalogue; cli.main()")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    loud = subprocess.run([sys.executable, "-c", code, "methods"], capture_output=True, env=env)
    assert loud.stderr.decode().splitlines() == ["warning: RuntimeWarning: overflow encountered"]
    quiet = subprocess.run([sys.executable, "-c", code, "-q", "methods"], capture_output=True, env=env)
    assert quiet.stderr == b""


@pytest.mark.parametrize("suffix", ["png", "html"])
def test_plot_with_tex_like_names_is_quiet_and_leaves_no_files(tmp_path, suffix):
    pytest.importorskip("matplotlib")
    names = ["$x^$", "_hidden", "a$b$c", "\\alpha[red]"]
    path = _table_file(tmp_path, names, ["f"])
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = {"TMPDIR": str(scratch), "HOME": str(home), "XDG_CONFIG_HOME": "", "XDG_CACHE_HOME": ""}
    env_run = {k: v for k, v in {**os.environ, **env, "PYTHONPATH": str(ROOT)}.items()
               if k != "MPLCONFIGDIR" and v != ""}
    out = tmp_path / f"r.{suffix}"
    result = subprocess.run([sys.executable, "-m", "calibcli", "-q", "evaluate", str(path),
                             *(f"--prob-col={n}" for n in names), "--plot", str(out)],
                            capture_output=True, env=env_run)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    assert out.stat().st_size > 0
    assert list(scratch.iterdir()) == [] and list(home.iterdir()) == []
    if suffix == "html":
        page = out.read_text()
        assert "\\\\alpha[red]" in page and "$x^$" in page


@given(st.text())
def test_a_cell_is_recovered_from_what_a_table_prints_even_trimmed(text):
    shown = cell(text)
    assert "\n" not in shown and shown == shown.strip()  # one line, nothing at its ends a table could trim
    assert uncell(shown) == text
