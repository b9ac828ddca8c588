"""`calib apply --on-invalid error|null|skip` as a property: invalid rows (empty, NaN, infinite,
or refused by the map) at generated positions, across record-batch boundaries, in every input
and output format and in directories of parts. The output must equal the row-wise expectation:
each valid row's value is the map's prediction of that one score alone."""

from __future__ import annotations

import contextlib
import io as _io
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from typer.testing import CliRunner

from calibcli.fitting import pipeline as fitting
from calibcli.maps import envelope as maps
from calibcli.applying.stream import apply_file
from calibcli.cli.app import app
from calibcli.errors import InputError
from calibcli.io import parquet, parsers
from calibcli.requests import ApplyRequest

KINDS = ("ok", "ok", "ok", "null", "nan", "inf", "-inf", "out")
_MAPS: dict[str, Path] = {}


def _map(method: str) -> Path:
    """A map fitted once on probabilities (setup): beta refuses scores outside [0, 1]."""
    if method not in _MAPS:
        d = Path(tempfile.mkdtemp(prefix="calib-maps-"))
        rng = np.random.default_rng(5)
        s = rng.uniform(0.01, 0.99, 400)
        y = (rng.random(400) < s).astype(int)
        (d / "train.csv").write_text("score,label\n" + "".join(f"{float(a)!r},{b}\n" for a, b in zip(s, y)))
        fitting.fit_file(str(d / "train.csv"), fitting.FitRequest.build(method), out=str(d / "m.json"))
        _MAPS[method] = d / "m.json"
    return _MAPS[method]


def _value(kind: str, u: float) -> float | None:
    return {"ok": u, "null": None, "nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"),
            "out": 1.0 + u if u > 0.5 else -0.1 - u}[kind]


def _write(path: Path, fmt: str, ids: list[int], scores: list, group: int) -> None:
    if fmt == "parquet":
        table = pa.table({"id": pa.array(ids, pa.int64()), "score": pa.array(scores, pa.float64())})
        pq.write_table(table, path, row_group_size=group)
    elif fmt == "csv":
        def cell(v):
            return "" if v is None else repr(float(v))
        path.write_text("id,score\n" + "".join(f"{i},{cell(v)}\n" for i, v in zip(ids, scores)))
    else:  # JSON has no NaN or infinity: those are nulls here
        path.write_text("".join(json.dumps({"id": i, "score": v if v is not None and np.isfinite(v) else None})
                                + "\n" for i, v in zip(ids, scores)))


def _read(path: Path, fmt: str) -> pa.Table:
    if fmt == "parquet":
        return pq.read_table(path)
    if fmt == "csv":
        return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
            null_values=[""], column_types={"calibrated": pa.float64(), "id": pa.int64()}))
    if path.stat().st_size == 0:  # JSON lines of no rows: an empty file
        return pa.table({"id": pa.array([], pa.int64()), "calibrated": pa.array([], pa.float64())})
    return pajson.read_json(path, parse_options=pajson.ParseOptions(
        explicit_schema=pa.schema([("id", pa.int64()), ("calibrated", pa.float64())]),
        unexpected_field_behavior="infer"))


@contextlib.contextmanager
def _small_batches(rows: int, block: int):
    """Record batches of a few rows in every format, so invalid rows fall across boundaries."""
    original_csv, original_json = parsers._csv_options, pajson.open_json

    def csv_options(fmt, string_columns, block_size=None, float_columns=()):
        return original_csv(fmt, string_columns, block if block_size else None, float_columns)

    def open_json(stream, read_options=None, parse_options=None):
        return original_json(stream, read_options=pajson.ReadOptions(block_size=block), parse_options=parse_options)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parquet, "PARQUET_BATCH_ROWS", rows)
        mp.setattr(parsers, "_csv_options", csv_options)
        mp.setattr(pajson, "open_json", open_json)
        yield


@st.composite
def cases(draw):
    n = draw(st.integers(1, 60))
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=n, max_size=n))
    lead = draw(st.integers(0, 20))  # a first block of empty scores (nulls first, as sorted exports have)
    kinds = ["null"] * min(lead, n) + kinds[lead:]
    us = draw(st.lists(st.sampled_from([0.0, 1.0, 0.25, 0.5]) | st.floats(0, 1), min_size=n, max_size=n))
    return {
        "kinds": kinds, "us": us,
        "method": draw(st.sampled_from(["beta", "isotonic"])),
        "in_fmt": draw(st.sampled_from(["csv", "jsonl", "parquet"])),
        "out_fmt": draw(st.sampled_from(["csv", "jsonl", "parquet"])),
        "mode": draw(st.sampled_from(["error", "null", "skip"])),
        "batch": draw(st.integers(1, 9)),
        "block": draw(st.sampled_from([64, 96, 160, 1 << 16])),
        "parts": draw(st.integers(0, 3)),  # 0: one file; else a directory of that many parts
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_invalid_rows_follow_the_policy_row_by_row(case):
    kinds, n = case["kinds"], len(case["kinds"])
    scores = [_value(k, u) for k, u in zip(kinds, case["us"])]
    if case["in_fmt"] == "jsonl":  # no NaN or infinity in JSON: written as null (still invalid)
        kinds = ["null" if k in ("nan", "inf", "-inf") else k for k in kinds]
    map_path = _map(case["method"])
    cal, _ = maps.load_map(str(map_path))
    invalid = np.array([k in ("null", "nan", "inf", "-inf") or (k == "out" and cal.needs_probabilities)
                        for k in kinds])
    expected = [None if bad else float(cal.predict(np.array([float(v)]))[0])
                for v, bad in zip(scores, invalid)]
    root = Path(tempfile.mkdtemp(prefix="calib-invalid-"))
    try:
        ext = case["in_fmt"]
        if case["parts"] and ext != "parquet":
            ext = "parquet"  # parts of a directory are Parquet
        ids = list(range(n))
        if case["parts"]:
            cuts = sorted({0, n, *np.linspace(0, n, case["parts"] + 1).astype(int).tolist()})
            pieces = [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
            for j, (a, b) in enumerate(pieces):
                (root / "in").mkdir(exist_ok=True)
                _write(root / "in" / f"p{j}.parquet", "parquet", ids[a:b], scores[a:b], case["batch"])
            src, out = root / "in", root / "out"
        else:
            pieces = [(0, n)]
            src, out = root / f"in.{ext}", root / f"out.{case['out_fmt']}"
            _write(src, ext, ids, scores, case["batch"])
        with _small_batches(case["batch"], case["block"]):
            try:
                done = apply_file(str(map_path), str(src), str(out), ApplyRequest.build(on_invalid=case["mode"]),
                                  output_format=case["out_fmt"])
            except InputError as exc:
                assert case["mode"] == "error" and invalid.any(), exc
                first = int(np.argmax(invalid))  # the error names an invalid row of the part that stopped
                a, b = next((a, b) for a, b in pieces if a <= first < b)
                named = [f"row {i - a + 1}:" for i in range(a, b) if invalid[i]]
                assert any(r in exc.message for r in named), (exc.message, named)
                assert not out.exists()
                return
        assert case["mode"] != "error" or not invalid.any(), "an invalid row did not stop the run"
        files = sorted(out.rglob(f"*.{case['out_fmt']}")) if case["parts"] else [out]
        table = pa.concat_tables([_read(f, case["out_fmt"]).select(["id", "calibrated"]) for f in files]) \
            if files else None
        got_ids = table.column("id").to_pylist() if table is not None else []
        got = table.column("calibrated").to_pylist() if table is not None else []
        keep = [i for i in ids if case["mode"] != "skip" or not invalid[i]]
        assert got_ids == keep
        assert got == [expected[i] for i in keep]
        assert (done.invalid, done.rows, done.written) == (int(invalid.sum()) if case["mode"] != "error" else 0,
                                                          n, len(keep))
        if case["parts"]:
            marker = json.loads((out / ".calibcli-output").read_text())
            assert (marker["invalid_rows"], marker["rows"], marker["on_invalid"]) == \
                (done.invalid, n, case["mode"])
    finally:
        shutil.rmtree(root, ignore_errors=True)


runner = CliRunner()


@pytest.mark.parametrize("mode, what", [("null", "written with an empty calibrated value"), ("skip", "skipped")])
def test_the_count_goes_to_stderr_in_one_line(tmp_path, mode, what):
    (tmp_path / "in.csv").write_text("id,score\n1,0.3\n2,\n3,nan\n4,0.8\n5,inf\n")
    res = runner.invoke(app, ["apply", str(_map("beta")), str(tmp_path / "in.csv"), "--on-invalid", mode])
    assert res.exit_code == 0, res.stderr
    assert res.stderr.splitlines() == [
        f"3 of 5 rows had an invalid score (empty, NaN, infinite or outside the map's domain): {what}"]
    rows = pacsv.read_csv(_io.BytesIO(res.stdout.encode()), convert_options=pacsv.ConvertOptions(null_values=[""]))
    assert rows.column("id").to_pylist() == ([1, 2, 3, 4, 5] if mode == "null" else [1, 4])


def test_an_unknown_mode_is_one_line(tmp_path):
    (tmp_path / "in.csv").write_text("score\n0.3\n")
    res = runner.invoke(app, ["apply", str(_map("beta")), str(tmp_path / "in.csv"), "--on-invalid", "drop"])
    assert res.exit_code == 2 and res.stderr.startswith("error: --on-invalid 'drop'"), res.stderr
    assert res.stdout == ""


@pytest.mark.parametrize("mode", ["null", "skip"])
def test_text_that_is_no_number_still_stops_the_run(tmp_path, mode):
    """Only empty, NaN, infinite and refused scores are rows to pass over: other text is a wrong file."""
    (tmp_path / "in.csv").write_text("id,score\n1,0.3\n2,n/a\n")
    res = runner.invoke(app, ["apply", str(_map("beta")), str(tmp_path / "in.csv"), "--on-invalid", mode,
                              "-o", str(tmp_path / "out.csv")])
    assert res.exit_code == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert lines[0].startswith("error: ") and "column 'score'" in lines[0] and "'n/a' is not a number" in lines[0]
    assert len(lines) <= 2 and not (tmp_path / "out.csv").exists()


def test_refusal_after_the_first_parquet_batch_leaves_stderr_one_error(tmp_path):
    """A bad score in a later row group: the aborted Parquet writer is closed while its file is
    open, so no 'write to closed file' traceback follows the one-line error at exit."""
    import subprocess
    import sys

    rng = np.random.default_rng(0)
    s = rng.random(3000)
    pq.write_table(pa.table({"score": s, "label": (rng.random(3000) < s).astype(np.int64)}), tmp_path / "cal.parquet")
    s[-5] = np.nan
    pq.write_table(pa.table({"score": s}), tmp_path / "test.parquet", row_group_size=500)
    run = [sys.executable, "-m", "calibcli"]
    subprocess.run([*run, "fit", "-m", "isotonic", "cal.parquet", "-o", "map.json"], cwd=tmp_path, check=True,
                   capture_output=True)
    done = subprocess.run([*run, "apply", "map.json", "test.parquet", "-o", "out.parquet"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "row 2996" in done.stderr and "Exception" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out.parquet").exists()
