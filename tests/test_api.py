"""The Python API (`calibcli.fit/load_map/save_map/evaluate`) and the scikit-learn estimator."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import calibcli
from calibcli.calibrators import available

sklearn = pytest.importorskip("sklearn")


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    y = (rng.random(n) < s**2).astype(float)
    return s, y


@pytest.mark.parametrize("method", ["isotonic", "logistic", "beta", "bayes-iso", "binning"])
def test_api_fit_equals_cli_fit_bit_for_bit(method, tmp_path):
    s, y = _data()
    (tmp_path / "cal.csv").write_text("score,label\n" + "".join(f"{float(a)!r},{int(b)}\n" for a, b in zip(s, y)))
    exe = Path(sys.executable).parent / "calib"
    subprocess.run([str(exe), "fit", "cal.csv", "--method", method, "-o", "m.json"], cwd=tmp_path,
                   check=True, capture_output=True)
    cli = calibcli.load_map(str(tmp_path / "m.json"))
    api = calibcli.fit(s, y, method=method)
    grid = np.linspace(-0.5, 1.5, 1001)
    assert api.predict(grid).tobytes() == cli.predict(grid).tobytes()
    calibcli.save_map(api, str(tmp_path / "api.parquet"))
    assert calibcli.load_map(str(tmp_path / "api.parquet")).predict(grid).tobytes() == cli.predict(grid).tobytes()


def test_evaluate_accepts_string_fields_and_matches_codes():
    s, y = _data(seed=1)
    names = np.array(["de", "fr", "it"])[np.arange(s.size) % 3]
    by_name = calibcli.evaluate(y, s, fields=list(names))
    by_code = calibcli.evaluate(y, s, fields=np.arange(s.size) % 3)
    assert by_name == by_code
    from calibcli.evaluation.metrics import METRICS

    assert set(by_name) == set(METRICS)
    # Field-ECE by hand: sum over fields of |sum(y - p)| / n
    hand = sum(abs(np.sum(y[names == f] - s[names == f])) for f in ("de", "fr", "it")) / s.size
    assert by_name["field_ece"] == pytest.approx(hand, rel=1e-12)
    assert calibcli.methods() == available()


def test_estimator_params_clone_pipeline_and_cross_val_predict():
    from sklearn.base import clone
    from sklearn.model_selection import KFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    from calibcli.sklearn import Calibrator

    s, y = _data(seed=2)
    est = Calibrator(method="bayes-iso", seed=3, samples=300)
    assert est.get_params() == {"method": "bayes-iso", "seed": 3, "samples": 300}
    twin = clone(est).set_params(samples=200)
    assert twin.get_params()["samples"] == 200 and est.get_params()["samples"] == 300
    X = s[:, None]
    folds = KFold(3, shuffle=True, random_state=0)
    got = cross_val_predict(Calibrator("isotonic"), X, y, cv=folds)
    want = np.empty_like(s)
    for train, test in folds.split(X):
        want[test] = calibcli.fit(s[train], y[train]).predict(s[test])
    assert got.tobytes() == want.tobytes()
    pipe = make_pipeline(FunctionTransformer(lambda x: x * 2.0), Calibrator("logistic")).fit(X, y)
    proba = pipe.predict_proba(X)
    assert proba.shape == (s.size, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert np.array_equal(pipe.predict(X), calibcli.fit(2 * s, y, method="logistic").predict(2 * s))


def test_check_estimator_passes_every_check_that_applies_to_one_score_column():
    """The checks that fail do so only because they feed several features; everything else passes."""
    from sklearn.utils.estimator_checks import check_estimator

    from calibcli.sklearn import Calibrator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(Calibrator(), on_fail=None)
    failed = [r for r in results if r["status"] == "failed"]
    passed = [r for r in results if r["status"] == "passed"]
    # Checks that wrap the estimator's error in their own message; each feeds what a binary
    # one-score calibrator must refuse (several features, or labels other than 0/1).
    wrapped = {"check_positive_only_tag_during_fit", "check_sample_weights_pandas_series",
               "check_fit2d_1feature"}
    other = [(r["check_name"], str(r["exception"])[:120]) for r in failed
             if r["check_name"] not in wrapped
             and not any(m in str(r["exception"]) for m in ("takes one score column", "labels must be 0 or 1"))]
    assert other == [], other
    assert len(passed) >= 15


def test_estimator_refuses_bad_input_with_value_errors():
    from calibcli.sklearn import Calibrator

    s, y = _data(seed=3)
    with pytest.raises(ValueError, match="one score column"):
        Calibrator().fit(np.c_[s, s], y)
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        Calibrator().fit(s[:, None], y * 2)
    with pytest.raises(ValueError):
        Calibrator().fit(np.r_[s[:-1], np.nan][:, None], y)
    with pytest.raises(ValueError, match="no parameter"):
        Calibrator("isotonic", nonsense=1).fit(s[:, None], y)
    est = Calibrator("isotonic").fit(s[:, None], y)
    assert json.dumps(est.get_params()) == '{"method": "isotonic"}'
