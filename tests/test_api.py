"""The Python API (`calibcli.fit/load_map/save_map/evaluate`); the estimator is in test_sklearn.py."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import calibcli
from calibcli.errors import CalibError
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
    from calibcli.evaluation.metrics.binary import INTERVAL_KEYS
    from calibcli.evaluation.metrics.selection import ALL, DEFAULT

    assert set(by_name) == set(DEFAULT) | set(INTERVAL_KEYS)
    every = calibcli.evaluate(y, s, fields=list(names), metrics="all", bands=20)
    assert set(every) == set(ALL) | set(INTERVAL_KEYS)
    assert {k: every[k] for k in by_name} == pytest.approx(by_name, nan_ok=True)
    assert list(calibcli.evaluate(y, s, metrics="smece,brier")) == ["brier", "smece", *INTERVAL_KEYS]
    # Field-ECE by hand: sum over fields of |sum(y - p)| / n
    hand = sum(abs(np.sum(y[names == f] - s[names == f])) for f in ("de", "fr", "it")) / s.size
    assert by_name["field_ece"] == pytest.approx(hand, rel=1e-12)
    assert calibcli.methods() == available()


def test_fit_auto_warns_when_it_reads_near_probabilities_as_logits():
    """score_kind="auto" keeps its spec (probabilities only when every row is within 1e-6) but
    warns when most rows are probabilities to 1e-3, as `calib fit --score-cols` does."""
    from calibcli.errors import CalibWarning, FitError

    rng = np.random.default_rng(2)
    P = np.round(rng.dirichlet([1.0, 1.0, 1.0, 1.0], 400), 6)
    P[0] = [0.25, 0.25, 0.25, 0.2500021]
    y = rng.integers(0, 4, 400)
    with pytest.warns(CalibWarning, match=r"--score-kind auto reads the scores as logits, though 400 of 400 rows "
                                          r"are probabilities to within 0\.001 .*--score-kind probability"):
        cm = calibcli.fit(P, y, method="temperature")
    assert cm.score_kind == "logit"
    with pytest.raises(CalibError, match=r"scores\[0\]: the probabilities sum to"):
        calibcli.fit(P, y, method="temperature", score_kind="probability")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibWarning)
        calibcli.fit(np.log(P + 0.1), y, method="temperature")  # logits: no warning
        calibcli.fit(P / P.sum(axis=1, keepdims=True), y, method="temperature")  # probabilities


def test_fit_binary_text_labels_need_pos_label_as_the_cli():
    from calibcli.errors import FitError

    s, y01 = _data()
    words = np.where(y01 == 1, "churn", "stay")
    with pytest.raises(CalibError, match=r"labels\[0\]: label '(churn|stay)' is not 0/1 or true/false") as err:
        calibcli.fit(s, words)
    assert "pos_label=" in err.value.hint and "could not convert" not in str(err.value)
    ref = calibcli.fit(s, y01, method="logistic")
    got = calibcli.fit(s, words, method="logistic", pos_label="churn")
    assert got.get_state() == ref.get_state()
    minus = calibcli.fit(s, np.where(y01 == 1, 1, -1), method="logistic", pos_label=1)
    assert minus.get_state() == ref.get_state()
    with pytest.raises(CalibError, match=r"pos_label 'CHURN' is not a label \(its values: 'churn', 'stay'\)"):
        calibcli.fit(s, words, pos_label="CHURN")
    with pytest.raises(CalibError, match="is a third value"):
        calibcli.fit(s, np.where(np.arange(s.size) == 0, "maybe", words), pos_label="churn")
    with pytest.raises(calibcli.errors.UsageError, match="cannot be combined with --pos-label"):
        calibcli.fit(np.column_stack([s, 1 - s]), words, method="temperature", pos_label="churn")


@pytest.mark.parametrize("labels", [["1", 1, "0", 0, 1, "0"], np.array(["1", 1, "0", 0, "1", 0], dtype=object)])
def test_fit_refuses_labels_mixing_text_and_numbers(labels):
    """np.asarray(["1", 1]) is all text: "1" and 1 would be merged into one class silently."""
    from calibcli.errors import FitError

    P = np.random.default_rng(0).dirichlet([1.0, 1.0], 6)
    with pytest.raises(CalibError, match="labels mix text and numbers") as err:
        calibcli.fit(P, labels, method="temperature")
    assert err.value.hint == "give every label as text or every label as a number"
    assert calibcli.fit(P, [str(v) for v in labels], method="temperature").classes_.tolist() == ["0", "1"]


def test_weights_is_the_deprecated_name_of_sample_weight():
    """`sample_weight=` as in scikit-learn; `weights=`, the old name, still works with a
    FutureWarning and gives the same map and metrics; both at once are refused."""
    rng = np.random.default_rng(5)
    s = rng.uniform(0, 1, 400)
    y = (rng.uniform(0, 1, 400) < s).astype(float)
    w = rng.uniform(0.5, 2.0, 400)
    want = calibcli.fit(s, y, sample_weight=w).predict(s)
    with pytest.warns(FutureWarning, match="sample_weight"):
        got = calibcli.fit(s, y, weights=w).predict(s)
    assert got.tobytes() == want.tobytes()
    with pytest.warns(FutureWarning, match="sample_weight"):
        old = calibcli.evaluate(y, s, weights=w)
    new = calibcli.evaluate(y, s, sample_weight=w)
    assert old.keys() == new.keys() and all(old[k] == new[k] or old[k] != old[k] for k in new)
    with pytest.raises(calibcli.errors.UsageError, match="sample_weight only"):
        calibcli.fit(s, y, sample_weight=w, weights=w)
