"""A summary read back by `calib fit --from-summary` is checked as strictly as user input.

Mutants of valid summaries (JSON and Parquet; fields dropped, retyped, made negative, huge,
NaN or text; bodies edited) are either refused (exit 2, one line naming the file) or fitted
into a map whose training block holds only what the summary's body supports.
"""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from calibcli.fitting import summary
from calibcli.cli.app import app

runner = CliRunner()

_KEYS = ("format", "schema_version", "rows", "positives", "score_range", "weighted", "step",
         "input", "score_col", "label_col", "score", "n0", "n1")
_ODD = [-1, -(10 ** 30), 10 ** 30, 2 ** 53 + 1, 1e308, -1e308, 0.5, -0.0, "nan", "NaN", "12", "", True, False,
        None, [], [1, 2], {}, {"a": 1}, 3, 0, 1e-300, 7.25]


def _valid(weighted: bool, step: float | None) -> dict:
    rng = np.random.default_rng(1)
    s = np.round(rng.random(40), 2)
    y = (rng.random(40) < s).astype(float)
    w = np.round(rng.random(40) * 3, 2) if weighted else None
    summ = summary.summarize(s, y, w, step=step)
    summ.meta.update({"input": "cal.csv", "score_col": "score", "label_col": "label"})
    meta = json.loads(summ.to_table().schema.metadata[summary.PARQUET_KEY])
    return {**meta, "score": summ.score.tolist(), "n0": summ.n0.tolist(), "n1": summ.n1.tolist()}


@st.composite
def mutants(draw):
    doc = _valid(draw(st.booleans()), draw(st.sampled_from([None, 0.05])))
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(_KEYS))
        action = draw(st.sampled_from(["drop", "set", "element", "shorten", "scale", "shift"]))
        if action == "drop":
            doc.pop(key, None)
        elif action == "set":
            doc[key] = draw(st.sampled_from(_ODD))
        elif isinstance(doc.get(key), list) and doc[key]:
            values = list(doc[key])
            i = draw(st.integers(0, len(values) - 1))
            if action == "element":
                values[i] = draw(st.sampled_from(_ODD))
            elif action == "shorten":
                del values[i]
            elif action == "scale" and isinstance(values[i], (int, float)) and not isinstance(values[i], bool):
                values[i] = values[i] * draw(st.sampled_from([-1, 2, 1e300, 0]))
            elif isinstance(values[i], (int, float)) and not isinstance(values[i], bool):
                values[i] = values[i] + draw(st.sampled_from([1, -1, 0.5, 1e-9]))
            doc[key] = values
        elif isinstance(doc.get(key), (int, float)) and not isinstance(doc.get(key), bool):
            doc[key] = doc[key] + draw(st.sampled_from([1, -1, -(10 ** 20), 0.5]))
    return doc


def _write(doc: dict, path, as_parquet: bool) -> None:
    if not as_parquet:
        text = json.dumps(doc, allow_nan=True)
        path.write_text(text)
        return
    cols = {}
    for name in ("score", "n0", "n1"):
        values = doc.get(name, [])
        try:
            cols[name] = pa.array(values if isinstance(values, list) else [values])
            pq.write_table(pa.table({name: cols[name]}), pa.BufferOutputStream())  # e.g. a struct of no field
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
            # Parquet cannot hold it as a number (or at all): the same values as text
            cols[name] = pa.array([str(v) for v in (values if isinstance(values, list) else [values])], pa.string())
    lengths = {len(c) for c in cols.values()}
    if len(lengths) > 1:  # Parquet columns share a length: pad the short ones with nulls
        n = max(lengths)
        cols = {k: pa.concat_arrays([c, pa.nulls(n - len(c), c.type)]) for k, c in cols.items()}
    header = {k: v for k, v in doc.items() if k not in ("score", "n0", "n1")}
    table = pa.table(cols).replace_schema_metadata(
        {summary.PARQUET_KEY: json.dumps(header, allow_nan=True).encode()})
    pq.write_table(table, path)


def _accepted_is_sane(doc: dict, envelope: dict) -> None:
    """What a fitted map may say about a summary it accepted: only what the body supports."""
    training = envelope["training"]
    rows, positives = training["rows"], training["positives"]
    assert isinstance(rows, int) and isinstance(positives, int) and 0 <= positives <= rows <= 2 ** 53
    lo, hi = training["score_range"]
    assert math.isfinite(lo) and math.isfinite(hi) and lo <= hi
    n0, n1 = np.asarray(doc["n0"], dtype=float), np.asarray(doc["n1"], dtype=float)
    scores = np.asarray(doc["score"], dtype=float)
    if not training["from_summary"]["weighted"]:
        assert float(n0.sum() + n1.sum()) == rows and float(n1.sum()) == positives
    step = training["from_summary"]["step"] or 0.0
    assert lo - step <= scores.min() and scores.max() <= hi + step
    assert training["from_summary"]["entries"] <= rows


@pytest.mark.parametrize("as_parquet", [False, True], ids=["json", "parquet"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=mutants())
def test_mutated_summaries_are_refused_in_one_line_or_fit_sanely(tmp_path, as_parquet, doc):
    path = tmp_path / ("s.parquet" if as_parquet else "s.json")
    _write(doc, path, as_parquet)
    res = runner.invoke(app, ["fit", "--from-summary", str(path), "-m", "isotonic"])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code in (0, 2), res.output
    if res.exit_code == 2:
        lines = res.stderr.splitlines()
        assert lines[0].startswith(f"error: {path}: ") and len(lines) <= 2, res.stderr
        assert "internal error" not in res.stderr and "Traceback" not in res.stderr
        assert res.stdout == ""
    else:
        _accepted_is_sane(doc, json.loads(res.stdout))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("step", [None, 0.05])
def test_valid_summaries_still_fit(tmp_path, weighted, step):
    doc = _valid(weighted, step)
    for as_parquet in (False, True):
        path = tmp_path / ("s.parquet" if as_parquet else "s.json")
        _write(doc, path, as_parquet)
        res = runner.invoke(app, ["fit", "--from-summary", str(path), "-m", "isotonic"])
        assert res.exit_code == 0, res.stderr
        _accepted_is_sane(doc, json.loads(res.stdout))


@pytest.mark.parametrize("field, value, message", [
    ("rows", -3, "header field 'rows' must be a whole number from 0 to 2**53, got -3"),
    ("rows", 1e308, "header field 'rows' must be a whole number"),
    ("rows", "40", "header field 'rows' must be a whole number"),
    ("rows", 41, "header field 'rows' is 41, but n0 + n1 add up to 40"),
    ("positives", 41, "header field 'positives' must be a whole number from 0 to rows (40)"),
    ("score_range", [0.9, 0.1], "header field 'score_range' must be finite with low <= high"),
    ("score_range", [0.0, 0.5], "header field 'score_range' is [0.0, 0.5], but the scores run from"),
    ("weighted", "no", "header field 'weighted' must be true or false"),
    ("step", -1, "header field 'step' must be null or a positive number"),
    ("schema_version", "1", "header field 'schema_version' must be a whole number"),
    ("score", None, "summary is missing the list 'score'"),
])
def test_impossible_headers_name_the_field(tmp_path, field, value, message):
    doc = copy.deepcopy(_valid(False, None))
    doc[field] = value
    path = tmp_path / "s.json"
    _write(doc, path, False)
    res = runner.invoke(app, ["fit", "--from-summary", str(path)])
    assert res.exit_code == 2 and res.stderr.startswith(f"error: {path}: "), res.stderr
    assert message in res.stderr.splitlines()[0], res.stderr


def test_string_scores_and_missing_fields_are_refused(tmp_path):
    doc = _valid(False, None)
    doc["score"] = [str(v) for v in doc["score"]]
    path = tmp_path / "s.json"
    _write(doc, path, False)
    res = runner.invoke(app, ["fit", "--from-summary", str(path)])
    assert res.exit_code == 2 and "column 'score', row 1: '" in res.stderr and "is not a number" in res.stderr
    doc = _valid(False, None)
    del doc["positives"]
    _write(doc, path, False)
    res = runner.invoke(app, ["fit", "--from-summary", str(path)])
    assert res.exit_code == 2 and "the header has no field 'positives'" in res.stderr
    table = pa.table({"score": ["0.1", "0.2"], "n0": [1.0, 1.0], "n1": [1.0, 0.0]})
    pq.write_table(table, tmp_path / "text.parquet")
    res = runner.invoke(app, ["fit", "--from-summary", str(tmp_path / "text.parquet")])
    assert res.exit_code == 2 and "column 'score' has type string, expected numbers" in res.stderr


@pytest.mark.parametrize("n0, n1, weighted, positives, cause", [
    ([0.0, 0.0], [0.0, 0.0], True, 1, "all weights are zero"),
    ([1.0, 2.0], [0.0, 0.0], False, 0, "every label is 0 (negative): n1 is 0 for every score"),
    ([0.0, 0.0], [1.0, 1.0], False, 2, "every label is 1 (positive): n0 is 0 for every score"),
    ([1.5, 2.0], [0.0, 0.0], True, 1, "every row with label 1 has weight zero"),
])
def test_a_summary_with_one_class_says_why(tmp_path, n0, n1, weighted, positives, cause):
    rows = 4 if weighted else int(sum(n0) + sum(n1))
    doc = {"format": "calibcli.fitting.summary", "schema_version": 1, "rows": rows, "positives": positives,
           "score_range": [0.25, 0.75], "weighted": weighted, "step": None,
           "score": [0.25, 0.75], "n0": n0, "n1": n1}
    path = tmp_path / "s.json"
    _write(doc, path, False)
    res = runner.invoke(app, ["fit", "--from-summary", str(path)])
    assert res.exit_code == 2, res.stderr
    assert res.stderr.startswith(f"error: {path}: cannot fit isotonic: {cause}"), res.stderr
