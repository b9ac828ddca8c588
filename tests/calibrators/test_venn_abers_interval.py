"""A Venn-Abers map's interval always holds its point prediction (`predict_interval`,
`calib apply --interval`), for both variants and both losses; CVAP's interval merges the
folds' pairs as the point does (docs/algorithms.md, "Venn-Abers")."""

from __future__ import annotations

import numpy as np
import pyarrow.csv as pacsv
from hypothesis import HealthCheck, given, settings, strategies as st
from typer.testing import CliRunner

from calibcli.calibrators import registry
from calibcli.cli.app import app

runner = CliRunner()
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def _geo(a: np.ndarray) -> np.ndarray:
    return np.exp(np.mean(np.log(a), axis=0))


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(4, 300), variant=st.sampled_from(["ivap", "cvap"]),
       loss=st.sampled_from(["log", "brier"]), folds=st.integers(2, 10), ties=st.booleans(),
       weighted=st.booleans())
def test_the_interval_holds_the_point(seed, n, variant, loss, folds, ties, weighted):
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    if ties:
        s = np.round(s, 1)
    y = (rng.random(n) < rng.random() * s + rng.random() * (1 - s)).astype(float)
    y[:2] = [0.0, 1.0]
    w = rng.integers(1, 4, n).astype(float) if weighted else None
    cal = registry.create("venn-abers", {"variant": variant, "loss": loss, "folds": folds}).fit(s, y, sample_weight=w)
    q = np.concatenate([s, rng.random(200) * 1.4 - 0.2, [np.nan]])
    p = cal.predict(q)
    low, high = cal.predict_interval(q)
    ok = ~np.isnan(q)
    assert np.all((low[ok] <= p[ok]) & (p[ok] <= high[ok]))
    assert np.all((0 <= low[ok]) & (high[ok] <= 1))
    assert np.isnan(low[-1]) and np.isnan(high[-1]) and np.isnan(p[-1])


def test_cvap_interval_is_the_folds_pairs_merged_as_the_point():
    """log: the two geometric-mean ends, in order; brier: the means of p0 and of p1 (by hand
    from each fold's IVAP pair)."""
    rng = np.random.default_rng(7)
    s = rng.random(400)
    y = (rng.random(400) < s ** 2).astype(float)
    q = np.linspace(0, 1, 301)
    for loss in ("log", "brier"):
        cal = registry.create("venn-abers", {"variant": "cvap", "loss": loss, "folds": 4}).fit(s, y)
        lows, highs = (np.array(v) for v in cal._pairs(q))
        low, high = cal.predict_interval(q)
        if loss == "log":
            a, b = 1 - _geo(1 - lows), _geo(highs)
            want_low, want_high = np.minimum(a, b), np.maximum(a, b)
        else:
            want_low, want_high = lows.mean(axis=0), highs.mean(axis=0)
        np.testing.assert_allclose(low, want_low, atol=1e-15, rtol=0)
        np.testing.assert_allclose(high, want_high, atol=1e-15, rtol=0)


def test_folds_that_disagree_give_the_log_interval_in_order():
    """Two folds with far-apart pairs: GM(p1) falls below 1 - GM(1 - p0), and the interval is
    the two numbers in order, the point between them (it used to come out inverted)."""
    cal = registry.create("venn-abers", {"variant": "cvap", "folds": 2})
    cal.fit(np.array([0.1, 0.2, 0.8, 0.9]), np.array([0.0, 1.0, 0.0, 1.0]))
    cal._set_folds(([np.array([0.5])] * 2, [np.array([0.0, 0.0]), np.array([0.9, 0.9])],
                    [np.array([0.01, 0.01]), np.array([0.95, 0.95])]))
    low, high = cal.predict_interval(np.array([0.3]))
    p = cal.predict(np.array([0.3]))
    gm_p1, one_minus_gm = np.sqrt(0.01 * 0.95), 1 - np.sqrt(1.0 * 0.1)
    assert gm_p1 < one_minus_gm
    np.testing.assert_allclose([low[0], high[0]], [gm_p1, one_minus_gm], rtol=1e-15)
    assert low[0] < p[0] < high[0]


def test_apply_interval_columns_hold_the_calibrated_column(tmp_path):
    rng = np.random.default_rng(3)
    s = rng.random(500)
    y = (rng.random(500) < s ** 3).astype(int)
    cal = tmp_path / "cal.csv"
    cal.write_text("score,label\n" + "".join(f"{float(a)!r},{b}\n" for a, b in zip(s, y)))
    test = tmp_path / "test.csv"
    test.write_text("score\n" + "".join(f"{float(a)!r}\n" for a in rng.random(2000)))
    for loss in ("log", "brier"):
        m = tmp_path / f"cvap_{loss}.json"
        res = runner.invoke(app, ["fit", str(cal), "-m", "venn-abers", "-p", "variant=cvap", "-p", f"loss={loss}",
                                  "-o", str(m)])
        assert res.exit_code == 0, res.stderr
        out = tmp_path / f"out_{loss}.csv"
        res = runner.invoke(app, ["apply", str(m), str(test), "--interval", "-o", str(out)])
        assert res.exit_code == 0, res.stderr
        t = pacsv.read_csv(out)
        p, lo, hi = (t[c].to_numpy() for c in ("calibrated", "calibrated_low", "calibrated_high"))
        assert np.all((lo <= p) & (p <= hi))
