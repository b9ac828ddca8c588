"""Every method at the ends of float64: scores with subnormal gaps (0, 5e-324, 1e-322, ...),
scores spanning +-1e308, both at once, and weights from 5e-324 to 1e308.

A fit either succeeds or raises FitError with a message (no NaN/inf state, no constant map
where the data separate); predictions are finite, in [0, 1], monotone where promised, equal
(to a few roundings) to the exact interpolation for piecewise-linear maps; the map saves and
loads (its probe accepts it) and predicts the same bytes after JSON and Parquet.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import contract
import extremes
from contract import FAST, make, takes_probabilities
from calibcli.numeric import lookup as _lookup
from calibcli.calibrators import available, get
from calibcli.calibrators.piecewise import KnotMap
from calibcli.errors import CalibWarning, FitError

METHODS = available()
SETTINGS = settings(max_examples=8, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
EPS = 2.0 ** -52


def features(cal, n):
    return {"field": np.array(["a", "b"] * (n // 2) + ["a"] * (n % 2), dtype=object)} if cal.uses_features else None


def queries(cal, s):
    """Training scores, their float neighbours, the ends of float64 and a few subnormals."""
    with np.errstate(over="ignore"):
        q = np.concatenate([s, np.nextafter(s, -np.inf), np.nextafter(s, np.inf), extremes.SUBNORMALS,
                            [-extremes.HUGE, extremes.HUGE, -1e308, 1e308, 0.5, 1.0]])
    q = q[np.isfinite(q)]
    if takes_probabilities(cal):
        q = q[(q >= 0) & (q <= 1)]
    return np.unique(q)


def fit_or_refuse(cal, s, y, w=None, weight_kind="frequency"):
    """The fitted map, or None after a clear FitError."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibWarning)
            with np.errstate(over="raise", invalid="raise"):  # silent overflow or NaN in a fit: a bug
                cal.fit(s, y, w, features=features(cal, s.size), weight_kind=weight_kind)
    except FitError as err:
        assert err.message and "\n" not in err.message
        return None
    return cal


def exact_interpolation(x, y, q):
    """y0 + (y1 - y0) (q - x0) / (x1 - x0) in rational arithmetic, constant outside the knots."""
    out = []
    for v in q.tolist():
        j = int(np.searchsorted(x, v, side="right")) - 1
        if j < 0:
            out.append(Fraction(float(y[0])))
        elif j >= x.size - 1:
            out.append(Fraction(float(y[-1])))
        else:
            x0, x1, y0, y1 = (Fraction(float(a)) for a in (x[j], x[j + 1], y[j], y[j + 1]))
            out.append(y0 + (y1 - y0) * (Fraction(v) - x0) / (x1 - x0))
    return out


def knots_of(cal):
    if isinstance(cal, KnotMap) or cal.name == "bayes-iso":
        return cal.x_, cal.y_
    return None


def check_map(cal, s):
    """Predictions finite, in [0, 1], monotone where promised, exact for knot maps; the map
    saves, loads (probe included) and predicts the same bytes."""
    q = queries(cal, s)
    f = features(cal, q.size)
    p = cal.predict(q, f)
    assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))
    if cal.monotone and not cal.uses_features:
        assert np.all(np.diff(p) >= 0), f"{cal.name} decreases at {q[np.argmax(np.diff(p) < 0)]!r}"
    knots = knots_of(cal)
    if knots is not None:
        x, yk = knots
        assert np.all(np.isfinite(x)) and np.all(x[1:] > x[:-1])
        exact = exact_interpolation(x, yk, q)
        for v, got, want in zip(q, p, exact):
            err = abs(Fraction(float(got)) - want)
            assert err <= Fraction(4 * EPS) * max(abs(Fraction(float(yk.max()))), Fraction(EPS)), (
                f"{cal.name} at {v!r}: {got!r} vs exact {float(want)!r}")
    for reloaded in (contract.json_round_trip(cal), contract.parquet_round_trip(cal)):
        assert np.array_equal(reloaded.predict(q, f), p), "reloaded map predicts other bytes"


def scores_for(name, kind):
    if takes_probabilities(make(name)) and kind != "subnormal":
        return None
    return kind


@pytest.mark.parametrize("kind", sorted(extremes.KINDS))
@pytest.mark.parametrize("name", METHODS)
def test_fit_predict_save_load_at_extreme_scores(name, kind):
    if scores_for(name, kind) is None:
        pytest.skip("the method takes probabilities: scores beyond [0, 1] are refused (tested below)")

    @SETTINGS
    @given(data=extremes.score_sets(kind))
    def inner(data):
        s, y = data
        cal = fit_or_refuse(make(name), s, y)
        if cal is not None:
            check_map(cal, s)

    inner()


@pytest.mark.parametrize("kind", sorted(extremes.KINDS))
@pytest.mark.parametrize("name", METHODS)
def test_separated_classes_give_a_rising_map_or_a_clear_refusal(name, kind):
    """Negatives below positives: the map rises from the lowest to the highest score (never a
    constant map with only a warning), or the fit says why it cannot."""
    if scores_for(name, kind) is None:
        pytest.skip("scores beyond [0, 1] are refused for this method")

    @SETTINGS
    @given(data=extremes.separated_sets(kind, max_size=30))
    def inner(data):
        s, y = data
        s, y = np.repeat(s, 6), np.repeat(y, 6)  # enough rows for the bootstrap's t_count
        cal = fit_or_refuse(make(name), s, y)
        if cal is None:
            return
        check_map(cal, s)
        lo, hi = s[y == 0].max(), s[y == 1].min()
        f = features(cal, 2)
        p = cal.predict(np.array([s.min(), s.max()]), f)
        if distinguishable(cal, lo, hi):
            assert p[1] > p[0], f"{cal.name}: constant map {p[0]!r} on separated classes"

    inner()


def distinguishable(cal, lo, hi):
    """False where the method's documented input clip maps both scores to one value."""
    kind = cal.params.get("score_kind")
    if kind == "probability":
        clip = lambda v: min(max(v, 1e-12), 1 - 1e-12)  # noqa: E731
        return clip(lo) != clip(hi)
    if kind == "logit" and cal.name.startswith("beta"):
        bound = math.log1p(-1e-12) - math.log(1e-12)
        return min(max(lo, -bound), bound) != min(max(hi, -bound), bound)
    return True


@pytest.mark.parametrize("name", [m for m in METHODS if takes_probabilities(make(m))])
def test_probability_methods_refuse_huge_scores_in_one_line(name):
    s = np.array([-1e308, 0.2, 0.7, 1e308])
    with pytest.raises(FitError, match=r"needs (probability )?scores in \[0, 1\]"):
        make(name).fit(s, np.array([0.0, 1.0, 0.0, 1.0]), features=features(make(name), 4))


def test_gaussian_nb_subnormal_scores_bayes_iso_map_loads():
    """The reported case: a bayes-iso map on scores down to 5e-324 was refused by its own probe."""
    s, y = extremes.gaussian_nb_scores(600, seed=3)
    cal = make("bayes-iso").fit(s, y)
    check_map(cal, s)
    assert contract.json_round_trip(cal).predict(np.array([extremes.TINY]))[0] <= cal.predict(np.array([1.0]))[0]


def test_interpolation_over_a_subnormal_gap_and_an_overflowing_gap_is_exact():
    x = np.array([-extremes.HUGE, 0.0, 7.4e-322, 1e308])
    y = np.array([0.0, 0.2, 0.9, 1.0])
    q = np.array([-1e308, -extremes.HUGE / 2, 0.0, 5e-324, 3.7e-322, 7.4e-322, 5e307, 1e308])
    got = _lookup.interp(q, x, y)
    want = [float(v) for v in exact_interpolation(x, y, q)]
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * EPS)
    assert 0.2 < got[3] < 0.21  # not 1 (an overflowing slope)
    assert got[1] == pytest.approx(0.1, abs=1e-15)  # not 0.2 or 0 (an overflowing gap)


# --------------------------------------------------------------------------- weights


def moderate_data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    s = np.sort(rng.random(n))
    y = (rng.random(n) < s).astype(np.float64)
    y[0], y[-1] = 1.0, 0.0
    return s, y


@pytest.mark.parametrize("weight_kind", ["frequency", "importance"])
@pytest.mark.parametrize("name", METHODS)
def test_weights_from_subnormal_to_1e308(name, weight_kind):
    s, y = moderate_data()

    @SETTINGS
    @given(w=extremes.weights(s.size))
    def inner(w):
        cal = fit_or_refuse(make(name), s, y, w, weight_kind)
        if cal is not None:
            check_map(cal, s)
            assert not np.all(cal.predict(s, features(cal, s.size)) == 0)

    inner()


@pytest.mark.parametrize("name", METHODS)
def test_importance_weights_are_scale_free_bit_for_bit(name):
    """w and 2**k * w give the same map wherever both are normal floats (any k)."""
    s, y = moderate_data()

    @SETTINGS
    @given(base=st.lists(st.floats(0.25, 4.0), min_size=s.size, max_size=s.size),
           k=st.sampled_from([-1000, -600, -401, -60, 0, 7, 401, 600, 1000]))
    def inner(base, k):
        w = np.array(base)
        a = fit_or_refuse(make(name), s, y, w, "importance")
        b = fit_or_refuse(make(name), s, y, np.ldexp(w, k), "importance")
        assert (a is None) == (b is None)
        if a is not None:
            q = queries(a, s)
            assert np.array_equal(a.predict(q, features(a, q.size)), b.predict(q, features(b, q.size)))

    inner()


SCALE_FREE = ["isotonic", "binning", "logistic", "beta", "beta-am", "beta-ab"]  # near-isotonic: lam is absolute


@pytest.mark.parametrize("scale", [extremes.TINY, 1e-320, 1e-300, 1e300, 1e308, extremes.HUGE])
@pytest.mark.parametrize("name", SCALE_FREE)
def test_equal_frequency_weights_at_any_scale_fit_like_unit_weights(name, scale):
    """Without Platt's targets these fits depend on weights through ratios only: all weights
    5e-324 (or 1e308) give the unweighted map, not all zeros, NaN or a constant."""
    s, y = moderate_data()
    plain = make(name, platt_correction=False).fit(s, y)
    weighted = fit_or_refuse(make(name, platt_correction=False), s, y, np.full(s.size, scale))
    assert weighted is not None
    q = queries(plain, s)
    np.testing.assert_allclose(weighted.predict(q), plain.predict(q), rtol=0, atol=1e-9)


@pytest.mark.parametrize("scale", [extremes.TINY, 1e-300])
def test_tiny_frequency_counts_with_platt_targets_mean_no_evidence(scale):
    """Platt's targets from a total count of ~1e-300 rows are 0.5 for both classes (documented)."""
    s, y = moderate_data()
    cal = make("isotonic").fit(s, y, np.full(s.size, scale))
    assert np.all(cal.predict(queries(cal, s)) == 0.5)


@pytest.mark.parametrize("scale", [1e300, extremes.HUGE])
def test_huge_frequency_counts_with_platt_targets_are_the_classical_fit(scale):
    s, y = moderate_data()
    classical = make("isotonic", platt_correction=False).fit(s, y)
    cal = make("isotonic").fit(s, y, np.full(s.size, scale))
    q = queries(cal, s)
    np.testing.assert_allclose(cal.predict(q), classical.predict(q), rtol=0, atol=1e-12)


def test_one_class_whose_weights_vanish_beside_the_other_is_refused():
    s, y = moderate_data()
    w = np.where(y == 1, extremes.TINY, 1e308)
    with pytest.raises(FitError, match="too small to fit beside it"):
        make("isotonic").fit(s, y, w, weight_kind="importance")


# --------------------------------------------------------------------------- logistic, binning


def test_logistic_on_scores_near_the_float64_limit_finds_the_slope():
    s = np.array([-1e308, -5e307, 5e307, 1e308] * 3)
    y = np.array([0, 1, 0, 1, 0, 0, 1, 1, 0, 0, 1, 1], dtype=np.float64)
    cal = make("logistic").fit(s, y)
    ref = make("logistic").fit(s / 1e308, y)
    assert cal.a_ > 0
    assert cal.a_ == pytest.approx(ref.a_ / 1e308, rel=1e-9) and cal.b_ == pytest.approx(ref.b_, rel=1e-9, abs=1e-12)


def test_logistic_refuses_a_slope_beyond_float64():
    s = np.array([0.0, extremes.TINY, 2 * extremes.TINY, 3 * extremes.TINY] * 3)
    y = np.array([0, 0, 1, 1] * 3, dtype=np.float64)
    with pytest.raises(FitError, match="not representable"):
        make("logistic").fit(s, y)


@pytest.mark.parametrize("n_bins", [2, 3, 10, 1000])
def test_equal_width_bins_over_the_whole_float64_range_keep_their_width(n_bins):
    s = np.linspace(-1.0, 1.0, 200) * 1e308
    s[0], s[-1] = -extremes.HUGE, extremes.HUGE
    y = (np.arange(200) % 3 == 0).astype(np.float64)
    cal = make("binning", strategy="width", n_bins=n_bins, platt_correction=False).fit(s, y)
    step = Fraction(extremes.HUGE) * 2 / n_bins
    want = [float(-Fraction(extremes.HUGE) + step * k) for k in range(1, n_bins)]
    assert cal.edges_.size == n_bins - 1
    np.testing.assert_allclose(cal.edges_, want, rtol=0, atol=4 * EPS * extremes.HUGE)  # the range's rounding


# --------------------------------------------------------------------------- the CLI end


def gaussian_nb_file(tmp_path):
    """A score file from scikit-learn's GaussianNB on well separated classes: exact 0s, subnormal
    scores down to 5e-324 and 1s (written with repr, so every float reads back exactly)."""
    from sklearn.naive_bayes import GaussianNB

    rng = np.random.default_rng(7)
    n = 400
    label = (rng.random(n) < 0.5).astype(int)
    x = rng.normal(size=(n, 2)) + np.where(label[:, None] == 1, 19.0, -19.0)
    model = GaussianNB().fit(x[: n // 2], label[: n // 2])
    xs = np.vstack([x[n // 2:], rng.normal(size=(n // 2, 2)) * 19.0])  # the second half spreads between
    score = model.predict_proba(xs)[:, 1]
    y = np.concatenate([label[n // 2:], (rng.random(n // 2) < score[n // 2:]).astype(int)])
    y[np.argmin(score)], y[np.argmax(score)] = 1, 0  # both classes at both ends
    subnormal = score[(score > 0) & (score < 2.2250738585072014e-308)]
    assert subnormal.size and (score == 0).any()
    path = tmp_path / "gnb.csv"
    fields = np.array(["a", "b"])[rng.integers(0, 2, y.size)]
    path.write_text("score,label,field\n" + "".join(f"{float(v)!r},{int(t)},{f}\n" for v, t, f in zip(score, y, fields)))
    return path


@pytest.mark.parametrize("name", METHODS)
def test_cli_apply_accepts_every_map_fit_writes_on_gaussian_nb_scores(tmp_path, name):
    import subprocess
    import sys

    import pyarrow.csv as pacsv

    data = gaussian_nb_file(tmp_path)
    params = [arg for k, v in FAST.get(name, {}).items() for arg in ("--param", f"{k}={v}")]
    fields = ["--field-col", "field"] if get(name).uses_features else []
    for fmt in ("json", "parquet"):
        out_map, out = tmp_path / f"{name}.{fmt}", tmp_path / f"{name}-{fmt}.csv"
        fit = subprocess.run([sys.executable, "-m", "calibcli", "fit", "--method", name, str(data), "-o",
                              str(out_map), *params, *fields], capture_output=True, text=True, timeout=300)
        assert fit.returncode == 0, fit.stderr
        applied = subprocess.run([sys.executable, "-m", "calibcli", "apply", str(out_map), str(data), "-o", str(out)],
                                 capture_output=True, text=True, timeout=300)
        assert applied.returncode == 0, applied.stderr
        p = pacsv.read_csv(out).column("calibrated").to_numpy()
        assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))


@pytest.mark.parametrize("name", ["beta", "beta-am", "beta-ab", "ilps"])
def test_scores_that_all_clip_to_one_value_are_refused_not_fitted_constant(name):
    s = np.array([0.0, extremes.TINY, 1e-322, 1e-300, 1e-13] * 4)
    y = np.array([0, 0, 1, 1, 1] * 4, dtype=np.float64)
    with pytest.raises(FitError, match="cannot tell them apart"):
        make(name).fit(s, y)
    if name == "ilps":
        return  # ilps clips logits at +-1e300 only
    with pytest.raises(FitError, match="cannot tell them apart"):
        make(name, score_kind="logit").fit(np.array([-1e308, -1e300, -50.0, -40.0] * 3), np.array([0.0, 1.0, 0.0, 1.0] * 3))


LOGIT_METHODS = [m for m in METHODS if any(p.name == "score_kind" for p in get(m).params)]


@pytest.mark.parametrize("kind", ["huge", "mixed"])
@pytest.mark.parametrize("name", LOGIT_METHODS)
def test_logit_scores_spanning_the_float64_range(name, kind):
    """The methods that take probabilities by default, with score_kind=logit on +-1e308."""

    @SETTINGS
    @given(data=extremes.score_sets(kind))
    def inner(data):
        s, y = data
        cal = fit_or_refuse(make(name, score_kind="logit"), s, y)
        if cal is not None:
            check_map(cal, s)

    inner()
