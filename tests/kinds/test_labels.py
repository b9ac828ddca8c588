"""One label rule (`calibcli.kinds.labels`) for every command and entry point: the same labels
give the same answer (the same classes, or the same refusal) through `calib fit`, `calib
evaluate`, `calib compare`, `calibcli.fit`, `calibcli.evaluate`, `calibcli.compare`'s request,
the scikit-learn wrapper and the Dask engine (Spark's reading is the same function on its
partitions: tests/engines/test_spark.py).

Each case is labels as a file holds them (CSV text, or a typed Parquet column) and as Python
holds them (a list), with the answer the rule gives: the class codes, or a refusal."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

import calibcli
from calibcli.cli.app import app
from calibcli.errors import CalibError, Where
from calibcli.evaluation.metrics import binary as bm, kclass as km
from calibcli.kinds import labels

runner = CliRunner()
N = 60
_rng = np.random.default_rng(7)


def _probabilities(k: int) -> np.ndarray:
    P = _rng.dirichlet(np.ones(k), N)
    return P / P.sum(axis=1, keepdims=True)


P3 = _probabilities(3)
P2 = _rng.uniform(0.02, 0.98, N)

# K classes: (case id, score column names in file order, labels, expected codes or None for a refusal).
# Codes index the columns in file order. Columns p_2,p_0,p_1 name the classes "2","0","1".
_cycle = np.arange(N) % 3
KCLASS_CASES = [
    ("names as integers", ["p_2", "p_0", "p_1"], [int(v) for v in _cycle], [[1, 2, 0][v] for v in _cycle]),
    ("names as floats", ["p_2", "p_0", "p_1"], [float(v) for v in _cycle], [[1, 2, 0][v] for v in _cycle]),
    ("names as text of floats", ["p_2", "p_0", "p_1"], [f"{v}.0" for v in _cycle], [[1, 2, 0][v] for v in _cycle]),
    ("names as text", ["p_cat", "p_dog", "p_cow"], [["cat", "dog", "cow"][v] for v in _cycle], list(_cycle)),
    ("indices", ["p_cat", "p_dog", "p_cow"], [int(v) for v in _cycle], list(_cycle)),
    ("indices, a class absent", ["p_cat", "p_dog", "p_cow"], [int(v) % 2 for v in _cycle], [v % 2 for v in _cycle]),
    ("names, a class absent", ["p_cat", "p_dog", "p_cow"], [["cat", "dog"][v % 2] for v in _cycle],
     [v % 2 for v in _cycle]),
    ("booleans as names", ["p_False", "p_True", "p_other"], [["false", "true", "other"][v] for v in _cycle],
     list(_cycle)),
    ("a name and an index", ["p_cat", "p_dog", "p_cow"], ["cat", *[int(v) for v in _cycle[1:]]], None),
    ("an index past K - 1", ["p_cat", "p_dog", "p_cow"], [3, *[int(v) for v in _cycle[1:]]], None),
    ("a missing label", ["p_cat", "p_dog", "p_cow"], [None, *[["cat", "dog", "cow"][v] for v in _cycle[1:]]], None),
]

# Binary: (case id, labels, pos_label, expected 0/1 or None for a refusal).
_half = np.arange(N) % 2
BINARY_CASES = [
    ("0/1 integers", [int(v) for v in _half], None, list(_half)),
    ("0/1 floats", [float(v) for v in _half], None, list(_half)),
    ("booleans", [bool(v) for v in _half], None, list(_half)),
    ("true/false text", [["False", "TRUE"][v] for v in _half], None, list(_half)),
    ("0.0/1.0 text", [f"{v}.0" for v in _half], None, list(_half)),
    ("two words with pos_label", [["stay", "churn"][v] for v in _half], "churn", list(_half)),
    ("-1/1 with pos_label", [[-1, 1][v] for v in _half], "1", list(_half)),
    ("two words without pos_label", [["stay", "churn"][v] for v in _half], None, None),
    ("a 2", [2, *[int(v) for v in _half[1:]]], None, None),
    ("a missing label", [None, *[int(v) for v in _half[1:]]], None, None),
    ("a third value with pos_label", [["stay", "churn", "gone"][v % 3] for v in range(N)], "churn", None),
]


def _write(tmp_path, name: str, columns: dict, typed: bool):
    """The columns as CSV (labels as text) or Parquet (labels typed as Arrow reads the list)."""
    if typed:
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({k: pa.array(v) for k, v in columns.items()}), path)
        return path
    path = tmp_path / f"{name}.csv"
    rows = zip(*columns.values())
    text = ",".join(columns) + "\n" + "".join(
        ",".join("" if v is None else str(v) for v in row) + "\n" for row in rows)
    path.write_text(text)
    return path


def _answers_kclass(tmp_path, cols, raw, typed):
    """What each entry point gives for these labels: codes (by the evaluation it makes) or 'refused'."""
    P = P3
    data = {c: P[:, j] for j, c in enumerate(cols)} | {"label": raw}
    path = _write(tmp_path, "k", data, typed)
    names = [c.split("_", 1)[1] for c in cols]
    out = {}
    result = runner.invoke(app, ["evaluate", str(path), "--prob-cols", ",".join(cols), "--json"])
    out["calib evaluate"] = json.loads(result.stdout)["results"][0]["metrics"]["log_loss"] \
        if result.exit_code == 0 else "refused"
    fit = runner.invoke(app, ["fit", str(path), "--score-cols", ",".join(cols), "-m", "temperature"])
    out["calib fit"] = "fitted" if fit.exit_code == 0 else "refused"
    compare = runner.invoke(app, ["compare", str(path), "--score-cols", ",".join(cols), "-m", "temperature",
                                  "--folds", "2", "--json"])
    out["calib compare"] = "fitted" if compare.exit_code == 0 else "refused"
    for name, call in (("calibcli.evaluate", lambda: calibcli.evaluate(raw, P, classes=names)["log_loss"]),
                       ("calibcli.fit", lambda: calibcli.fit(P, raw, "temperature", classes=names) and "fitted")):
        try:
            out[name] = call()
        except CalibError:
            out[name] = "refused"
    out["dask"] = _dask_kclass(data, cols, names)
    return out


def _dask_kclass(data, cols, names):
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd

    from calibcli.engines import dask as engine

    frame = dd.from_pandas(pd.DataFrame(data), npartitions=2)
    try:
        return engine.evaluate_kclass(frame, [",".join(cols)]).results[0].metrics["log_loss"]
    except CalibError:
        return "refused"


@pytest.mark.parametrize("typed", [False, True], ids=["csv", "parquet"])
@pytest.mark.parametrize("case, cols, raw, expected", KCLASS_CASES, ids=[c[0] for c in KCLASS_CASES])
def test_kclass_labels_read_the_same_everywhere(tmp_path, case, cols, raw, expected, typed):
    if typed and any(isinstance(v, str) for v in raw) and any(isinstance(v, int) for v in raw):
        pytest.skip("a typed column holds one type")
    answers = _answers_kclass(tmp_path, cols, raw, typed)
    if expected is None:
        assert set(answers.values()) == {"refused"}, answers
        return
    truth = km.log_loss(np.asarray(expected), P3)
    for entry, answer in answers.items():
        if isinstance(answer, float):
            assert answer == pytest.approx(truth, rel=1e-12), entry
        else:
            assert answer == "fitted", (entry, answers)


def _answers_binary(tmp_path, raw, pos_label, typed):
    data = {"p": P2, "label": raw}
    path = _write(tmp_path, "b", data, typed)
    pos = [] if pos_label is None else ["--pos-label", pos_label]
    out = {}
    result = runner.invoke(app, ["evaluate", str(path), "--prob-col", "p", "--json", *pos])
    out["calib evaluate"] = json.loads(result.stdout)["results"][0]["metrics"]["log_loss"] \
        if result.exit_code == 0 else "refused"
    fit = runner.invoke(app, ["fit", str(path), "--score-col", "p", "-m", "logistic", *pos])
    out["calib fit"] = "fitted" if fit.exit_code == 0 else "refused"
    compare = runner.invoke(app, ["compare", str(path), "--score-col", "p", "-m", "logistic", "--folds", "2", *pos])
    out["calib compare"] = "fitted" if compare.exit_code == 0 else "refused"
    try:
        out["calibcli.fit"] = calibcli.fit(P2, raw, "logistic", pos_label=pos_label) and "fitted"
    except CalibError:
        out["calibcli.fit"] = "refused"
    if pos_label is None:  # evaluate and the engines take 0/1 labels (no pos_label)
        try:
            out["calibcli.evaluate"] = calibcli.evaluate(raw, P2)["log_loss"]
        except CalibError:
            out["calibcli.evaluate"] = "refused"
        out["dask"] = _dask_binary(data)
    return out


def _dask_binary(data):
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd

    from calibcli.engines import dask as engine

    frame = dd.from_pandas(pd.DataFrame(data), npartitions=2)
    try:
        return engine.evaluate(frame, ["p"]).results[0].metrics["log_loss"]
    except CalibError:
        return "refused"


@pytest.mark.parametrize("typed", [False, True], ids=["csv", "parquet"])
@pytest.mark.parametrize("case, raw, pos_label, expected", BINARY_CASES, ids=[c[0] for c in BINARY_CASES])
def test_binary_labels_read_the_same_everywhere(tmp_path, case, raw, pos_label, expected, typed):
    answers = _answers_binary(tmp_path, raw, pos_label, typed)
    if expected is None:
        assert set(answers.values()) == {"refused"}, answers
        return
    truth = bm.log_loss(np.asarray(expected, dtype=float), P2)
    for entry, answer in answers.items():
        if isinstance(answer, float):
            assert answer == pytest.approx(truth, rel=1e-12), entry
        else:
            assert answer == "fitted", (entry, answers)


def test_the_sklearn_wrapper_reads_labels_by_the_same_rule():
    pytest.importorskip("sklearn")
    from calibcli.sklearn import Calibrator

    y = np.array(["cat", "dog", "cow"])[_cycle]
    wrapped = Calibrator(method="temperature", classes=["cat", "dog", "cow"]).fit(P3, y)
    direct = calibcli.fit(P3, y, "temperature", classes=["cat", "dog", "cow"])
    np.testing.assert_array_equal(wrapped.predict_proba(P3), direct.predict(P3))
    with pytest.raises(ValueError, match="not one of the classes"):
        Calibrator(method="temperature", classes=["cat", "dog", "cow"]).fit(P3, np.where(_cycle == 0, "emu", y))


# The rule itself, on any values: a label's text decides, whatever its type.
_whole = st.integers(-10 ** 6, 10 ** 6)


@settings(max_examples=200, deadline=None)
@given(st.lists(_whole, min_size=1, max_size=30))
def test_a_whole_number_is_one_label_as_integer_float_or_text(values):
    as_int = labels.canonical(labels.as_arrow(values)).to_pylist()
    as_float = labels.canonical(labels.as_arrow([float(v) for v in values])).to_pylist()
    as_text = labels.canonical(labels.as_arrow([f"{v}.0" for v in values])).to_pylist()
    assert as_int == as_float == as_text == [str(v) for v in values]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=40), st.permutations(["a", "b", "c"]))
def test_class_codes_follow_the_names_in_any_column_order(values, order):
    codes = labels.ClassLabels(order).read(values, Where(column="labels"))
    assert [order[c] for c in codes] == values


@pytest.mark.parametrize("missing", [None, float("nan")])
def test_a_missing_label_is_refused_in_python_too(missing):
    with pytest.raises(CalibError, match=r"labels\[1\]: empty label"):
        calibcli.fit(P3[:3], ["cat", missing, "dog"], "temperature", classes=["cat", "dog", "cow"])
    with pytest.raises(CalibError, match=r"labels\[1\]: empty label"):
        calibcli.evaluate([1.0, missing, 0.0], [0.2, 0.3, 0.4])
