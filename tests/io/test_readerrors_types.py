"""A value of the wrong type is named by its row (issue #33): a JSON line whose key holds
another JSON type than the rows before it (a string, boolean, list or object in a number
column), and a CSV number pyarrow does not read (`1_000`, `1,000`, `0x1F`), name their true
1-based row and column in every command, whole-file or streamed, from a file or stdin; never
"a row after row 0" nor a column "holding values that are not numbers" with no row."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from typer.testing import CliRunner

from calibcli.cli.app import app

runner = CliRunner()
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def small_blocks(monkeypatch):
    from calibcli.io import batches, reading

    monkeypatch.setattr(reading, "_BLOCK", {k: 1 << 16 for k in reading._BLOCK})
    monkeypatch.setattr(batches, "_STREAM_BLOCK", {k: 1 << 16 for k in batches._STREAM_BLOCK})


def _rows(n: int):
    rng = np.random.default_rng(0)
    s = np.round(rng.random(n), 4)
    return s, (rng.random(n) < s).astype(int)


@pytest.fixture(scope="module")
def map_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("map")
    s, y = _rows(200)
    (d / "cal.csv").write_text("score,label\n" + "".join(f"{a},{b}\n" for a, b in zip(s, y)))
    res = runner.invoke(app, ["-q", "fit", str(d / "cal.csv"), "-o", str(d / "map.json")])
    assert res.exit_code == 0, res.stderr
    return str(d / "map.json")


def _commands(map_path: str, path: str):
    return (["fit", path], ["summarize", path], ["apply", map_path, path], ["evaluate", path, "--prob-col", "score"])


@SETTINGS
@given(bad=st.sampled_from([1, 2, 700, 3_001, 11_999]), value=st.sampled_from(['"x"', "true", "[1]", '{"a": 1}', '"0.5"']),
       key=st.sampled_from(["score", "label"]), stdin=st.booleans())
def test_a_json_key_of_another_type_is_named_by_its_row(tmp_path, small_blocks, map_path, bad, value, key, stdin):
    s, y = _rows(12_000)
    rows = [{"score": float(a), "label": int(b)} for a, b in zip(s, y)]
    lines = [json.dumps(r) for r in rows]
    lines[bad - 1] = lines[bad - 1].replace(f'"{key}": {json.dumps(rows[bad - 1][key])}', f'"{key}": {value}')
    text = "\n".join(lines) + "\n"
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    for args in _commands(map_path, "-" if stdin else str(path)):
        out = {"apply": ["-o", str(tmp_path / "o.jsonl")], "fit": ["-o", str(tmp_path / "m.json")]}.get(args[0], [])
        res = runner.invoke(app, [*args, *out, *(["--format", "jsonl"] if stdin else [])], input=text if stdin else None)
        assert res.exit_code == 2, (args, res.stderr)
        first = res.stderr.splitlines()[0]
        assert "a row after row" not in first, (args, first)
        if bad > 1:  # row 1 sets the type: a later row is the one that changed
            assert f"row {bad}:" in first and repr(key) in first, (args, first)


@SETTINGS
@given(bad=st.sampled_from([1, 2, 900, 5_001, 11_999]), value=st.sampled_from(["1_000", '"1,000"', "0x1F", "1e", "--1"]),
       stdin=st.booleans())
def test_a_csv_number_pyarrow_does_not_read_is_named_by_its_row(tmp_path, small_blocks, map_path, bad, value, stdin):
    s, y = _rows(12_000)
    lines = ["score,label"] + [f"{a},{b}" for a, b in zip(s, y)]
    lines[bad] = f"{value},{y[bad - 1]}"
    text = "\n".join(lines) + "\n"
    path = tmp_path / "t.csv"
    path.write_text(text)
    for args in _commands(map_path, "-" if stdin else str(path)):
        out = {"apply": ["-o", str(tmp_path / "o.csv")], "fit": ["-o", str(tmp_path / "m.json")]}.get(args[0], [])
        res = runner.invoke(app, [*args, *out], input=text if stdin else None)
        assert res.exit_code == 2, (args, res.stderr)
        first = res.stderr.splitlines()[0]
        assert "holds values that are not numbers" not in first, (args, first)
        if not (stdin and args[0] in ("summarize", "apply", "evaluate")):  # a pipe streamed is not read again
            assert f"column 'score', row {bad}: " in first, (args, first)
