"""Venn-Abers (IVAP, CVAP) against the reference package `venn-abers` and a brute-force PAV oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import isotonic_regression

import contract
from calibcli.maps import envelope as maps
from calibcli.calibrators import get
from calibcli.calibrators import venn_abers as va
from calibcli.errors import MapError

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the package's all-NaN slices
package = pytest.importorskip("venn_abers.venn_abers")

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def calibration_sets(draw):
    """Scores on a coarse grid (many ties) or continuous, 0/1 labels, both classes."""
    n = draw(st.integers(2, 40))
    decimals = draw(st.sampled_from([1, 2, 6]))
    s = np.round(np.array(draw(st.lists(st.floats(0, 1), min_size=n, max_size=n))), decimals)
    y = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), dtype=np.float64)
    y[0], y[-1] = 0.0, 1.0
    return s, y


def queries(s: np.ndarray) -> np.ndarray:
    """Every calibration score (ties), points between and outside them."""
    u = np.unique(s)
    mids = (u[1:] + u[:-1]) / 2
    return np.concatenate([u, mids, [u[0] - 0.5, u[-1] + 0.5, -np.inf, np.inf]])


def brute_force(s, y, t, label, w=None):
    """Isotonic value at t of the calibration set plus (t, label), tied scores pooled."""
    w = np.ones_like(s) if w is None else w
    ss, yy, ww = np.append(s, t), np.append(y, label), np.append(w, 1.0)
    u, inv = np.unique(ss, return_inverse=True)
    sw, swy = np.bincount(inv, weights=ww), np.bincount(inv, weights=ww * yy)
    return isotonic_regression(swy / sw, weights=sw).x[np.searchsorted(u, t)]


@SETTINGS
@given(calibration_sets())
def test_ivap_equals_the_package(data):
    """p0, p1 and the point prediction equal `calc_p0p1`/`calc_probs` to 1e-12, ties included
    (p0 takes the right-hand step, p1 the left-hand one). Above the largest calibration score the
    package keeps p1 of the position before (its all-NaN slice); there p1 is the definition's 1."""
    s, y = data
    q = queries(s)
    p0, p1, c = package.calc_p0p1(np.c_[1 - s, s], y)
    ref_point, ref = package.calc_probs(p0, p1, c, np.c_[1 - q, q])
    cal = get("venn-abers")().fit(s, y)
    low, high = cal.predict_interval(q)
    point = cal.predict(q)
    top = q > s.max()
    np.testing.assert_allclose(low, ref[:, 0], atol=1e-12, rtol=0)
    np.testing.assert_allclose(high[~top], ref[~top, 1], atol=1e-12, rtol=0)
    np.testing.assert_allclose(point[~top], ref_point[~top, 1], atol=1e-12, rtol=0)
    assert np.all(high[top] == 1.0)
    np.testing.assert_array_equal(point, high / (1 - low + high))


@SETTINGS
@given(calibration_sets(), st.lists(st.integers(1, 3), min_size=42, max_size=42))
def test_ivap_equals_pav_with_the_test_point(data, counts):
    """Away from ties, p0(t) and p1(t) are the isotonic fits at t of the (weighted) calibration
    set plus (t, 0) and (t, 1): scipy's PAV, one fit per query. Integer weights count as rows."""
    s, y = data
    w = np.array(counts[: s.size], dtype=np.float64)
    u = np.unique(s)
    q = np.concatenate([(u[1:] + u[:-1]) / 2, [u[0] - 1, u[-1] + 1]])
    low, high = get("venn-abers")().fit(s, y, sample_weight=w).predict_interval(q)
    np.testing.assert_allclose(low, [brute_force(s, y, t, 0, w) for t in q], atol=1e-12, rtol=0)
    np.testing.assert_allclose(high, [brute_force(s, y, t, 1, w) for t in q], atol=1e-12, rtol=0)
    assert np.all(low <= high)


def test_tie_rules_on_a_hand_example():
    """Calibration (0.1, 0), (0.2, 1): at the tie t = 0.2, p1 has the 1 placed before the tied
    row (0, [1], 1: p1 = 1) and p0 the 0 after it (0, 1, [0]: p0 = 1/2)."""
    cal = get("venn-abers")().fit(np.array([0.1, 0.2]), np.array([0.0, 1.0]))
    low, high = cal.predict_interval(np.array([0.2, 0.15, 0.05, 0.3]))
    np.testing.assert_array_equal(low, [0.5, 0.0, 0.0, 0.5])
    np.testing.assert_array_equal(high, [1.0, 1.0, 0.5, 1.0])


def _identity():
    from sklearn.base import BaseEstimator, ClassifierMixin

    class Identity(ClassifierMixin, BaseEstimator):
        """A 'classifier' whose probability is the feature itself: CVAP calibrates the scores."""

        def fit(self, X, y):
            self.classes_ = np.array([0, 1])
            return self

        def predict_proba(self, X):
            x = np.asarray(X, dtype=np.float64)[:, 0]
            return np.c_[1 - x, x]

    return Identity()


@pytest.mark.parametrize("loss", ["log", "brier"])
@pytest.mark.parametrize("seed", [0, 3])
def test_cvap_equals_the_package_on_the_same_folds(monkeypatch, loss, seed):
    """CVAP on StratifiedKFold(shuffle=True, random_state=seed)'s folds equals the package's
    VennAbersCalibrator(inductive=False) on the same folds: the folds' pairs merged as
    GM(p1) / (GM(1 - p0) + GM(p1)), or the mean Brier rule."""
    from sklearn.model_selection import StratifiedKFold

    s, y = contract.synthetic(300, seed=seed)
    k = 5
    ids = np.empty(s.size, dtype=np.int64)
    for fold, (_, test) in enumerate(StratifiedKFold(k, shuffle=True, random_state=seed).split(s[:, None], y)):
        ids[test] = fold
    monkeypatch.setattr(va, "fold_ids", lambda s_, y_, folds, seed_: ids)
    cal = get("venn-abers")(variant="cvap", folds=k, loss=loss).fit(s, y)
    ref = package.VennAbersCalibrator(estimator=_identity(), inductive=False, n_splits=k, shuffle=True,
                                      random_state=seed)
    ref.fit(s[:, None], y)
    q = np.concatenate([contract.grid(s)])
    q = q[(q >= s.min()) & (q <= s.max())]  # the package's top-end p1 differs (see the IVAP test)
    q = q[q <= min(s[ids == f].max() for f in range(k))]
    p, (pairs,) = ref.predict_proba(q[:, None], loss=loss, p0_p1_output=True)
    np.testing.assert_allclose(cal.predict(q), p[:, 1], atol=1e-12, rtol=0)
    if loss == "log":
        low, high = cal.predict_interval(q)
        gm = lambda a: a.prod(axis=1) ** (1 / k)  # noqa: E731
        np.testing.assert_allclose(high, gm(pairs[:, k:]), atol=1e-12, rtol=0)
        np.testing.assert_allclose(1 - low, gm(1 - pairs[:, :k]), atol=1e-12, rtol=0)


def test_cvap_folds_are_stratified_and_order_free():
    s, y = contract.synthetic(403)
    ids = va.fold_ids(s, y, 5, 7)
    for cls in (0, 1):
        counts = np.bincount(ids[y == cls], minlength=5)
        assert counts.max() - counts.min() <= 1
    order = np.random.default_rng(1).permutation(s.size)
    a = get("venn-abers")(variant="cvap", seed=7).fit(s, y)
    b = get("venn-abers")(variant="cvap", seed=7).fit(s[order], y[order])
    g = contract.grid(s)
    np.testing.assert_array_equal(a.predict(g), b.predict(g))
    assert not np.array_equal(a.predict(g), get("venn-abers")(variant="cvap", seed=8).fit(s, y).predict(g))


def test_cvap_with_fewer_rows_than_folds():
    cal = get("venn-abers")(variant="cvap", folds=10).fit(np.array([0.1, 0.5, 0.9]), np.array([0.0, 1.0, 1.0]))
    assert cal.summary()["folds"] == 3
    p = cal.predict(np.linspace(0, 1, 11))
    assert np.all((p > 0) & (p < 1)) and np.all(np.diff(p) >= 0)


def test_brier_rule_ivap():
    s, y = contract.synthetic(200)
    q = contract.grid(s)
    low, high = get("venn-abers")().fit(s, y).predict_interval(q)
    got = get("venn-abers")(loss="brier").fit(s, y).predict(q)
    np.testing.assert_allclose(got, high + (low ** 2 - high ** 2) / 2, atol=1e-15, rtol=0)


def test_nan_scores_predict_nan_and_large_inputs_use_the_grid():
    s, y = contract.synthetic(2000)
    cal = get("venn-abers")().fit(s, y)
    q = np.random.default_rng(5).random(50_000)
    q[::7] = np.round(q[::7], 2)  # many ties with calibration scores
    q[3] = np.nan
    c, p0, p1 = cal.c_[0], cal.p0_[0], cal.p1_[0]
    right = np.searchsorted(c, q, "right")
    left = np.searchsorted(c, q, "left")
    expected_low, expected_high = p0[right], p1[left]
    low, high = cal.predict_interval(q)
    ok = ~np.isnan(q)
    np.testing.assert_array_equal(low[ok], expected_low[ok])
    np.testing.assert_array_equal(high[ok], expected_high[ok])
    assert np.isnan(low[3]) and np.isnan(high[3]) and np.isnan(cal.predict(q)[3])
    np.testing.assert_array_equal(cal.predict(q)[ok], (expected_high / (1 - expected_low + expected_high))[ok])


def test_saved_map_keeps_only_the_steps_and_reloads_bit_for_bit():
    s, y = contract.synthetic(500)
    cal = get("venn-abers")(variant="cvap", folds=3).fit(s, y)
    env = maps.make_envelope(cal)
    assert sorted(env["state"]) == ["c", "p0", "p1", "sizes"] and len(env["state"]["sizes"]) == 3
    for reloaded in (contract.json_round_trip(cal), contract.parquet_round_trip(cal)):
        g = contract.grid(s)
        assert np.array_equal(reloaded.predict(g), cal.predict(g))
        for a, b in zip(reloaded.predict_interval(g), cal.predict_interval(g)):
            assert np.array_equal(a, b)


def _state(**changes):
    s, y = contract.synthetic(100)
    state = maps.to_plain(get("venn-abers")().fit(s, y).get_state())
    state.update(changes)
    return state


@pytest.mark.parametrize("change, message", [
    ({"c": []}, "at least 1"),
    ({"p0": [0.5]}, "at least 2"),
    ({"c": [0.2, 0.1], "p0": [0.0, 0.1, 0.2], "p1": [0.5, 0.6, 0.7], "sizes": [2]}, "strictly increasing"),
    ({"c": [0.1, 0.2], "p0": [0.0, 0.3, 0.2], "p1": [0.5, 0.6, 0.7], "sizes": [2]}, "non-decreasing"),
    ({"c": [0.1, 0.2], "p0": [0.0, 0.1, 0.2], "p1": [0.5, 0.6, 1.5], "sizes": [2]}, "probability"),
    ({"c": [0.1, 0.2], "p0": [0.0, 0.7, 0.8], "p1": [0.5, 0.6, 0.9], "sizes": [2]}, "above p1"),
    ({"c": [0.1, 0.2], "p0": [0.0, 0.1, 0.0, 0.1], "p1": [0.5, 0.6, 0.5, 0.6], "sizes": [1, 1]},
     "ivap map has one"),
    ({"c": [0.1, 0.2], "p0": [0.0, 0.1, 0.2], "p1": [0.5, 0.6, 0.7], "sizes": [3]}, "sums to 3"),
    ({"c": [0.1, 0.2], "p0": [0.0, 0.1, 0.2], "p1": [0.5, 0.6, 0.7], "sizes": [1.5]}, "whole number"),
    ({"c": [0.1, 0.2], "p0": [0.0, 0.1], "p1": [0.5, 0.6], "sizes": [2]}, "expected 3"),
    ({"c": [0.1, "x"]}, "not a"),
])
def test_damaged_states_are_refused(change, message):
    with pytest.raises(MapError, match=message):
        get("venn-abers").from_state({"variant": "ivap", "folds": 5, "loss": "log", "seed": 0}, _state(**change))


def test_cvap_state_fold_order_is_checked_per_fold():
    """Two folds: thresholds increase within each fold; the second may restart below the first."""
    params = {"variant": "cvap", "folds": 2, "loss": "log", "seed": 0}
    good = {"c": [0.5, 0.6, 0.1], "p0": [0.0, 0.1, 0.2, 0.0, 0.3], "p1": [0.5, 0.6, 1.0, 0.5, 1.0], "sizes": [2, 1]}
    cal = get("venn-abers").from_state(params, good)
    assert [c.tolist() for c in cal.c_] == [[0.5, 0.6], [0.1]]
    with pytest.raises(MapError, match="fold 0"):
        get("venn-abers").from_state(params, {**good, "c": [0.6, 0.5, 0.1]})


CVAP = {"variant": "cvap", "folds": 3}


@pytest.mark.parametrize("check", [contract.check_fit_predict, contract.check_monotone, contract.check_round_trip,
                                   contract.check_seed_reproducible, contract.check_permutation_invariant,
                                   contract.check_importance_scale_invariant])
def test_cvap_passes_the_contract(check):
    s, y = contract.synthetic(300)
    check(get("venn-abers"), CVAP, s, y)


def test_cvap_whole_number_weights_are_duplicated_rows():
    s, y = contract.synthetic(300)
    contract.check_weights_as_duplicates(get("venn-abers"), CVAP, s, y, atol=0.0)


def test_apply_interval_columns_stream_beside_the_point(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from calibcli.cli.app import app

    runner = CliRunner()
    s, y = contract.synthetic(500)
    pq.write_table(pa.table({"score": s, "label": y.astype(np.int64)}), tmp_path / "cal.parquet")
    q = contract.grid(s)
    pq.write_table(pa.table({"score": q}), tmp_path / "q.parquet")
    m = tmp_path / "va.json"
    assert runner.invoke(app, ["-q", "fit", str(tmp_path / "cal.parquet"), "-m", "venn-abers", "-o", str(m)]).exit_code == 0
    out = tmp_path / "out.parquet"
    result = runner.invoke(app, ["apply", str(m), str(tmp_path / "q.parquet"), "-o", str(out), "--interval",
                                 "--output-col", "p"])
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert table.column_names == ["score", "p", "p_low", "p_high"]
    cal = get("venn-abers")().fit(s, y)
    low, high = cal.predict_interval(q)
    np.testing.assert_array_equal(table.column("p").to_numpy(), cal.predict(q))
    np.testing.assert_array_equal(table.column("p_low").to_numpy(), low)
    np.testing.assert_array_equal(table.column("p_high").to_numpy(), high)
    iso = tmp_path / "iso.json"
    assert runner.invoke(app, ["-q", "fit", str(tmp_path / "cal.parquet"), "-o", str(iso)]).exit_code == 0
    refused = runner.invoke(app, ["apply", str(iso), str(tmp_path / "q.parquet"), "-o", str(tmp_path / "x.parquet"),
                                  "--interval"])
    assert refused.exit_code == 2 and "--interval needs a map with a probability interval" in refused.stderr
    assert not (tmp_path / "x.parquet").exists()


def test_evaluate_interval_width_and_coverage_by_hand(tmp_path):
    """Two uniform bins (--ece-bins 2). Bin [0, 0.5): p = 0.2, 0.3, labels 0, 1 -> rate 0.5;
    intervals [0.1, 0.6] covers, [0.2, 0.4] does not. Bin [0.5, 1]: p = 0.8, 0.9, labels 1, 1
    -> rate 1; [0.7, 1.0] covers, [0.8, 0.95] does not. Width = mean(0.5, 0.2, 0.3, 0.15)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from calibcli.cli.app import app

    path = tmp_path / "e.parquet"
    pq.write_table(pa.table({"label": [0, 1, 1, 1], "c": [0.2, 0.3, 0.8, 0.9], "c_low": [0.1, 0.2, 0.7, 0.8],
                             "c_high": [0.6, 0.4, 1.0, 0.95], "other": [0.5, 0.5, 0.5, 0.5]}), path)
    runner = CliRunner()
    result = runner.invoke(app, ["evaluate", str(path), "--prob-col", "c", "--prob-col", "other", "--ece-bins", "2",
                                 "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r["metrics"] for r in json.loads(result.stdout)["results"]}
    assert rows["c"]["interval_width"] == pytest.approx((0.5 + 0.2 + 0.3 + 0.15) / 4, abs=1e-15)
    assert rows["c"]["interval_coverage"] == 0.5
    assert rows["other"]["interval_width"] is None and rows["other"]["interval_coverage"] is None
    explicit = runner.invoke(app, ["evaluate", str(path), "--prob-col", "other", "--interval-cols", "c_low,c_high",
                                   "--ece-bins", "2", "--json"])
    metrics = json.loads(explicit.stdout)["results"][0]["metrics"]
    assert metrics["interval_width"] == pytest.approx(0.2875, abs=1e-15) and metrics["interval_coverage"] == 0.25
    plain = runner.invoke(app, ["evaluate", str(path), "--prob-col", "other", "--json"])
    assert "interval_width" not in json.loads(plain.stdout)["results"][0]["metrics"]
    bad = runner.invoke(app, ["evaluate", str(path), "--prob-col", "c", "--interval-cols", "c_low"])
    assert bad.exit_code == 2
    gate = runner.invoke(app, ["evaluate", str(path), "--prob-col", "c", "--ece-bins", "2",
                               "--fail-below", "interval-coverage=0.9"])
    assert gate.exit_code == 1


def test_api_evaluate_takes_the_interval():
    import calibcli

    y, p = np.array([0.0, 1.0, 1.0, 1.0]), np.array([0.2, 0.3, 0.8, 0.9])
    low, high = np.array([0.1, 0.2, 0.7, 0.8]), np.array([0.6, 0.4, 1.0, 0.95])
    got = calibcli.evaluate(y, p, interval=(low, high))
    assert got["interval_width"] == pytest.approx(0.2875, abs=1e-15)
    assert got["interval_coverage"] == 0.25  # 10 bins: rates 0, 1, 1, 1; only [0.7, 1.0] holds its rate
    assert np.isnan(calibcli.evaluate(y, p)["interval_width"])


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.floats(-1e300, 1e300), st.floats(-1e-300, 1e-300), st.floats(0, 1),
                          st.sampled_from([0.0, 5e-324, 1.0, 1 - 2**-53])), min_size=1, max_size=60),
       st.integers(0, 2**32 - 1))
def test_grid_lookup_equals_searchsorted_on_any_thresholds(values, seed):
    """The grid lookup behind predict gives np.searchsorted's positions and ties exactly, for
    thresholds spread over any range (subnormal to 1e300, clustered) and queries on, beside and
    between them; the IVAP point prediction equals its definition from p0/p1 there."""
    c = np.unique(np.array(values, dtype=np.float64))
    rng = np.random.default_rng(seed)
    q = np.concatenate([c, np.nextafter(c, -np.inf), np.nextafter(c, np.inf), [-np.inf, np.inf, np.nan],
                        rng.uniform(c[0], c[-1], 5000) if np.isfinite(c[-1] - c[0]) else c,
                        rng.choice(c, 5000)])
    right, tie = va.step_positions(c, q)
    ok = ~np.isnan(q)
    np.testing.assert_array_equal(right[ok], np.searchsorted(c, q[ok], "right"))
    expected_tie = np.flatnonzero(ok & np.isin(q, c))
    np.testing.assert_array_equal(np.sort(tie), expected_tie)
    k = c.size
    p0 = np.sort(rng.uniform(0, 0.5, k + 1))
    p1 = np.maximum(np.sort(rng.uniform(0.3, 1, k + 1)), p0)
    cal = get("venn-abers").from_state({"variant": "ivap", "folds": 5, "loss": "log", "seed": 0},
                                       {"c": c, "p0": p0, "p1": p1, "sizes": [k]})
    lo, hi = p0[np.searchsorted(c, q[ok], "right")], p1[np.searchsorted(c, q[ok], "left")]
    np.testing.assert_array_equal(cal.predict(q)[ok], hi / (1 - lo + hi))
    assert np.isnan(cal.predict(q)[~ok]).all()
