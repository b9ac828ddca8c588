"""A fit never makes its own training rows worse than the scores, nor gives a class probability 0
where the data had it, without a word (issue #33): properties over random K, class counts
(absent classes included) and zero entries, for the native K-class methods, one-vs-rest and
the binary methods; the absent-class guard of vector and dirichlet; `calib fit` and --strict."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import calibcli
from calibcli.calibrators import fitcheck
from calibcli.errors import CalibWarning
from calibcli.evaluation.metrics import binary as binary_metrics, kclass as kclass_metrics

CALIB = [sys.executable, "-m", "calibcli"]


def _fit(*args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = calibcli.fit(*args, **kwargs)
    return fitted, [str(c.message) for c in caught if issubclass(c.category, CalibWarning)]


@st.composite
def kclass_data(draw, kinds=("probability", "logit"), max_zeros=3):
    """(scores (n, K), codes, kind, absent classes): random K, some classes absent, some
    probabilities exactly 0 (on the true class too), logits up to +-40."""
    k = draw(st.integers(3, 6))
    n = draw(st.integers(30, 160))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    absent = draw(st.lists(st.integers(0, k - 1), max_size=k - 2, unique=True))
    z = rng.normal(size=(n, k)) * draw(st.sampled_from([0.5, 2.0, 8.0]))
    P = np.exp(z - z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    present = [c for c in range(k) if c not in absent]
    y = np.array([rng.choice(present, p=P[i, present] / P[i, present].sum()) for i in range(n)])
    kind = draw(st.sampled_from(kinds))
    zeros = draw(st.integers(0, max_zeros))
    if kind == "probability":
        for i in rng.choice(n, size=zeros, replace=False):  # a row certain of the wrong class
            P[i] = 0.0
            P[i, (y[i] + 1 + rng.integers(k - 1)) % k] = 1.0
        return P, y, kind, np.array(absent, dtype=np.int64)
    z = np.clip(z * 5, -40, 40)
    return z, y, kind, np.array(absent, dtype=np.int64)


def _identity(S: np.ndarray, kind: str) -> np.ndarray:
    if kind == "probability":
        return S
    e = np.exp(S - S.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("method", ["temperature", "vector", "dirichlet", "isotonic", "binning"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=kclass_data())
def test_kclass_fit_is_never_silently_worse_or_zero(method, data):
    S, y, kind, absent = data
    if method == "binning" and kind == "logit":
        kind_args = {"score_kind": "logit"}
    else:
        kind_args = {"score_kind": kind}
    cm, said = _fit(S, y, method, classes=list(range(S.shape[1])), **kind_args)
    Q = cm.predict(S)
    rows = np.arange(y.size)
    worse = kclass_metrics.log_loss(y, Q) > kclass_metrics.log_loss(y, _identity(S, kind)) * (1 + 1e-12) + 1e-15
    if worse:
        assert any("worse than the scores' own" in m for m in said), said
    if np.any(Q[rows, y] == 0):
        assert any("probability 0 for their own class" in m for m in said), said
    if absent.size and np.any(Q[:, absent] == 0):
        assert any("have no rows in the calibration set and the map gives them probability 0" in m
                   for m in said), said


@pytest.mark.parametrize("method", ["vector", "dirichlet"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=kclass_data(kinds=("probability",), max_zeros=0))
def test_absent_class_keeps_a_probability(method, data):
    """vector/dirichlet hold an absent class's scale at the identity: its probability is never
    exactly 0 and its scale never runs away (the issue's K = 4 case ran it to ~2600). Rows
    certain of a wrong class (a 0 read as ln 2^-1075) can still pull a map to 0: the property
    test above checks that this is said."""
    S, y, kind, absent = data
    if not absent.size:
        absent = np.array([int(np.argmin(np.bincount(y, minlength=S.shape[1])))])
        keep = y != absent[0]
        S, y = S[keep], y[keep]
        if np.unique(y).size < 2:
            return
    cm, _ = _fit(S, y, method, classes=list(range(S.shape[1])), score_kind="probability")
    cal = cm.calibrator
    scale = cal.w_ if cal.w_.ndim == 1 else np.diag(cal.w_)
    assert np.all(scale[absent] == 1.0)
    if cal.w_.ndim == 2:
        assert np.all(cal.w_[absent] == np.eye(S.shape[1])[absent])
    positive = S[:, absent] > 0  # a class the scores themselves give 0 may stay 0
    assert np.all(cm.predict(S)[:, absent][positive] > 0)


def test_temperature_pulled_by_a_zero_probability_warns():
    """The issue's case: one row giving its own class probability 0 moves T far from 1 and
    makes the training log-loss worse than the scores': a warning naming that row."""
    rng = np.random.default_rng(1)
    z = rng.normal(size=(400, 5)) * 1.5
    P = np.exp(z)
    P /= P.sum(axis=1, keepdims=True)
    y = (P.cumsum(axis=1) < rng.random(400)[:, None]).sum(axis=1).clip(0, 4)
    P[7] = 0.0
    P[7, (y[7] + 1) % 5] = 1.0
    cm, said = _fit(P, y, "temperature")
    assert cm.calibrator.temperature_ > 5
    assert kclass_metrics.log_loss(y, cm.predict(P)) > kclass_metrics.log_loss(y, P)
    assert any("worse than the scores' own" in m and "row 7" in m for m in said), said


BINARY = [m for m in calibcli.methods() if m not in ("field-aware",)]


@st.composite
def binary_data(draw):
    n = draw(st.integers(20, 200))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    p = rng.beta(2, 2, n)
    y = (rng.random(n) < p).astype(float)
    if y.min() == y.max():
        y[0] = 1 - y[0]
    weights = draw(st.sampled_from(["none", "tiny", "spread"]))
    w = {"none": None, "tiny": np.full(n, 1e-3), "spread": np.exp(rng.uniform(-30, 30, n))}[weights]
    return p, y, w


@pytest.mark.parametrize("method", BINARY)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=binary_data())
def test_binary_fit_is_never_silently_worse_than_the_scores(method, data):
    p, y, w = data
    params = {"samples": 200} if method == "bayes-iso" else {}
    cal, said = _fit(p, y, method, sample_weight=w, **params)
    q = cal.predict(p)
    if binary_metrics.log_loss(y, q, sample_weight=w) > binary_metrics.log_loss(y, p, sample_weight=w) * (1 + 1e-12):
        assert any("worse than the scores' own" in m for m in said), (method, said)
    if np.any(np.where(y == 1, q, 1 - q) == 0):
        assert any("probability 0 to the label" in m for m in said), (method, said)


def test_worse_than_scores_tolerates_rounding_only():
    assert fitcheck.worse_than_scores("m", 0.5, 0.5 * (1 + 1e-13)) is None
    assert fitcheck.worse_than_scores("m", 0.5, 0.5001) is not None
    assert fitcheck.worse_than_scores("m", float("nan"), 1.0) is None


def test_calib_fit_says_it_and_strict_refuses(tmp_path):
    """Well-calibrated scores binned: the summary's log-loss rises, the CLI says so on stderr,
    and --strict makes it exit 2 without a map."""
    rng = np.random.default_rng(3)
    p = rng.beta(2, 2, 4000)
    y = (rng.random(4000) < p).astype(int)
    src = tmp_path / "cal.csv"
    src.write_text("score,label\n" + "".join(f"{float(a)!r},{b}\n" for a, b in zip(p, y)))
    run = subprocess.run([*CALIB, "fit", "--method", "binning", str(src), "-o", str(tmp_path / "m.json")],
                         capture_output=True, text=True)
    assert run.returncode == 0
    assert "worse than the scores' own" in run.stderr
    run = subprocess.run([*CALIB, "--strict", "fit", "--method", "binning", str(src), "-o", str(tmp_path / "s.json")],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "worse than the scores' own" in run.stderr
    assert not (tmp_path / "s.json").exists()


def test_all_equal_scores_describe_the_map_truly(tmp_path):
    """'the map is a constant' only when it is: venn-abers and ilps are not."""
    src = tmp_path / "eq.csv"
    src.write_text("score,label\n" + "".join(f"0.3,{b}\n" for b in (0, 1, 1, 0, 1)))
    for method, constant in (("isotonic", True), ("venn-abers", False), ("ilps", False)):
        run = subprocess.run([*CALIB, "fit", "--method", method, str(src), "-o", str(tmp_path / f"{method}.json")],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert ("the map is the constant" in run.stderr) == constant, run.stderr
        assert ("the map is not a constant" in run.stderr) == (not constant), run.stderr
