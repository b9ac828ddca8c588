"""CORP: PAV recalibration, the score decomposition (against model-diagnostics), the
consistency bands and the resampling test of calibration (its size by simulation)."""

import numpy as np
import pytest

from calibcli.evaluation.metrics import corp
from calibcli.evaluation.state.binary import EvalState


def _data(n, seed, power=1.3, decimals=2):
    rng = np.random.default_rng(seed)
    p = np.round(rng.uniform(0.02, 0.98, n), decimals)
    y = (rng.uniform(size=n) < p ** power).astype(float)
    return y, p, rng.uniform(0.2, 3.0, n)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("decimals", [2, 12])  # many ties, and (almost) none
def test_decomposition_equals_model_diagnostics(weighted, decimals):
    md = pytest.importorskip("model_diagnostics.scoring")
    y, p, w = _data(3000, 7 + decimals, decimals=decimals)
    w = w if weighted else None
    state = EvalState.from_arrays(y, p, sample_weight=w)
    v, n0, n1 = state.pooled()
    got = corp.decomposition(v, n1, n0, state.brier_sum / state.weight, state.log_loss_sum / state.weight)
    for name, fn in (("brier", md.SquaredError()), ("log_loss", md.LogLoss())):
        ref = md.decompose(y, p, weights=w, scoring_function=fn)
        assert got[f"{name}_mcb"] == pytest.approx(ref["miscalibration"][0], abs=1e-12)
        assert got[f"{name}_dsc"] == pytest.approx(ref["discrimination"][0], abs=1e-12)
        assert got[f"{name}_unc"] == pytest.approx(ref["uncertainty"][0], abs=1e-12)
        score = state.brier_sum / state.weight if name == "brier" else state.log_loss_sum / state.weight
        assert got[f"{name}_mcb"] - got[f"{name}_dsc"] + got[f"{name}_unc"] == pytest.approx(score, abs=1e-12)
        assert got[f"{name}_mcb"] >= -1e-15 and got[f"{name}_dsc"] >= -1e-15


def test_decomposition_from_distribution_alone_matches_state_sums():
    y, p, _ = _data(500, 3)
    v, n0, n1 = EvalState.from_arrays(y, p).pooled()
    alone = corp.decomposition(v, n1, n0)
    with_sums = corp.decomposition(v, n1, n0, float(np.mean((p - y) ** 2)),
                                   float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p))))
    assert alone == pytest.approx(with_sums, abs=1e-12)


def test_pav_recalibration_is_sklearn_isotonic_on_pooled_ties():
    from sklearn.isotonic import IsotonicRegression

    y, p, w = _data(2000, 11)
    v, n0, n1 = EvalState.from_arrays(y, p, sample_weight=w).pooled()
    fitted = corp.pav_recalibration(v, n1, n0)
    ref = IsotonicRegression().fit(p, y, sample_weight=w).predict(v)
    np.testing.assert_allclose(fitted, ref, atol=1e-12)
    assert np.all(np.diff(fitted) >= 0) and fitted.min() >= 0 and fitted.max() <= 1


def test_pav_recalibration_fills_weightless_entries_from_their_neighbours():
    v = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    pos, neg = np.array([0.0, 0.0, 1.0, 0.0, 0.0]), np.array([1.0, 0.0, 1.0, 2.0, 0.0])
    fitted = corp.pav_recalibration(v, pos, neg)
    kept = corp.pav_recalibration(v[[0, 2, 3]], pos[[0, 2, 3]], neg[[0, 2, 3]])
    np.testing.assert_array_equal(fitted[[0, 2, 3]], kept)
    assert fitted[1] == kept[1] and fitted[4] == kept[2]


def test_decomposition_without_weight_is_nan():
    out = corp.decomposition(np.array([0.5]), np.array([0.0]), np.array([0.0]))
    assert set(out) == set(corp.DECOMPOSITION_KEYS) and all(v != v for v in out.values())


def _pvalue(y, p, rounds, seed):
    v, n0, n1 = EvalState.from_arrays(y, p).pooled()
    return corp.consistency_bands(v, n0 + n1, rounds, seed, pos_w=n1).p_value


def test_corp_p_rejects_calibrated_forecasts_at_the_nominal_rate():
    rng = np.random.default_rng(2024)
    pvals = []
    for k in range(240):
        p = rng.beta(2, 3, 150)
        y = (rng.uniform(size=p.size) < p).astype(float)
        pvals.append(_pvalue(y, p, 99, k))
    rate = np.mean(np.asarray(pvals) <= 0.05)
    assert 0.02 <= rate <= 0.09, rate
    assert all(0 < q <= 1 for q in pvals)


def test_corp_p_detects_miscalibration():
    rng = np.random.default_rng(5)
    hits = 0
    for k in range(30):
        p = rng.uniform(0.05, 0.95, 400)
        y = (rng.uniform(size=p.size) < p ** 2).astype(float)  # overconfident upward
        hits += _pvalue(y, p, 99, k) <= 0.05
    assert hits >= 27


def test_bands_are_seeded_ordered_and_cover_the_calibrated_diagonal():
    rng = np.random.default_rng(9)
    p = np.round(rng.uniform(0, 1, 5000), 3)
    y = (rng.uniform(size=p.size) < p).astype(float)
    v, n0, n1 = EvalState.from_arrays(y, p).pooled()
    a = corp.consistency_bands(v, n0 + n1, 60, 3, level=0.9, pos_w=n1)
    b = corp.consistency_bands(v, n0 + n1, 60, 3, level=0.9, pos_w=n1)
    c = corp.consistency_bands(v, n0 + n1, 60, 4, level=0.9, pos_w=n1)
    np.testing.assert_array_equal(a.lower, b.lower)
    assert a.p_value == b.p_value and not np.array_equal(a.lower, c.lower)
    assert np.all(a.lower <= a.upper) and a.lower.min() >= 0 and a.upper.max() <= 1
    assert a.x.size <= corp.BAND_POINTS + 2 and np.all(np.diff(a.x) > 0)
    inside = (a.lower <= a.x + 1e-12) & (a.x <= a.upper + 1e-12)  # under calibration, E p-hat(x) = x
    assert inside.mean() > 0.9


def test_bands_with_fractional_weights_and_no_rounds():
    v = np.linspace(0.1, 0.9, 50)
    w = np.full(50, 2.5)
    bands = corp.consistency_bands(v, w, 20, 0, pos_w=w * v)
    assert bands.x.size == 50 and np.all(bands.lower <= bands.upper) and 0 < bands.p_value <= 1
    none = corp.consistency_bands(v, w, 0, 0, pos_w=w * v)
    assert none.x.size == 0 and none.rounds == 0
