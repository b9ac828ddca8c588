"""ILPS and field-aware Neural Calibration (Pan et al. 2020): worked cases, gradients, studies."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import log_loss, roc_auc_score

import contract
from synthetic import logit, section51, sigmoid
from calibcli.calibrators import create
from calibcli.calibrators.field_aware import FieldAwareCalibrator, encode
from calibcli.calibrators.field_network import Network, loss_and_grads
from calibcli.calibrators.ilps import ILPSCalibrator, ilps_eta, ilps_splits, knot_penalty
from calibcli.errors import FitError, InputError
from calibcli.evaluation.metrics.binary import field_ece, field_rce


def ctr_data(n, seed, levels=500):
    """CTR-like rows: Zipf field z, base model logit l0, truth sigmoid(0.7 l0 - 0.5 + delta_z)."""
    rng = np.random.default_rng(seed)
    delta = np.random.default_rng(123).normal(0.0, 1.0, levels)
    pz = 1.0 / np.arange(1, levels + 1) ** 1.1
    zi = rng.choice(levels, size=n, p=pz / pz.sum())
    l0 = rng.normal(-1.5, 1.2, n)
    y = (rng.random(n) < sigmoid(0.7 * l0 - 0.5 + delta[zi])).astype(float)
    z = np.array([f"site{i}" for i in range(levels)], dtype=object)[zi]
    return sigmoid(l0), y, z


def mixed_features(n, seed):
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 2, n)
    a = np.array(["x", "y", "z", "w"], dtype=object)[rng.integers(0, 4, n)]
    c = np.array([f"c{i}" for i in range(12)], dtype=object)[rng.integers(0, 12, n)]
    u = rng.normal(3.0, 2.0, n)
    shift = np.where(a == "x", 1.0, 0.0) - 0.3 * (u - 3.0)
    y = (rng.random(n) < sigmoid(3 * (s - 0.5) + shift)).astype(float)
    return s, y, {"a": a, "c": c, "u": u}


# ---- ILPS ------------------------------------------------------------------------------


def test_splits_follow_k_over_k_plus_2():
    a = ilps_splits(2)
    np.testing.assert_allclose(a, [-np.log(3), 0.0, np.log(3)], rtol=0, atol=1e-15)
    np.testing.assert_allclose(1 / (1 + np.exp(-ilps_splits(100))), np.arange(1, 102) / 102, atol=1e-15)


def test_eta_is_line_plot_with_linear_end_segments():
    a = np.array([-1.0, 0.0, 2.0])
    b = np.array([-3.0, 1.0, 2.0])
    l = np.array([-2.0, -1.0, -0.5, 0.0, 1.0, 2.0, 4.0])
    # slopes 4 on [-1, 0], 0.5 on [0, 2], continued outside
    np.testing.assert_allclose(ilps_eta(l, a, b), [-7.0, -3.0, -1.0, 1.0, 1.5, 2.0, 3.0])


def _rows_at_splits(K, counts, pos):
    """(probabilities at the K + 2 splits, scores, labels): counts[k] rows at split k, pos[k] positive."""
    p_knots = sigmoid(ilps_splits(K))
    s = np.repeat(p_knots, counts)
    y = np.concatenate([np.r_[np.ones(k), np.zeros(n - k)] for n, k in zip(counts, pos)])
    return p_knots, s, y


def test_points_on_knots_give_logit_of_rates():
    """Data only at the splits: the fit puts b_k = logit(positive rate at split k)."""
    counts, pos = np.array([10, 20, 10]), np.array([2, 10, 7])
    p_knots, s, y = _rows_at_splits(2, counts, pos)
    cal = ILPSCalibrator(K=2, ridge=0.0).fit(s, y)
    np.testing.assert_allclose(cal.b_, logit(pos / counts), atol=1e-7)
    np.testing.assert_allclose(cal.predict(p_knots), pos / counts, atol=1e-8)


def test_exact_penalty_pools_violators_like_isotonic():
    """Decreasing rates at the splits: lam = 1 gives the pooled (PAV) rates, no projection."""
    counts, pos = np.array([10, 20, 10, 10]), np.array([2, 12, 5, 8])
    p_knots, s, y = _rows_at_splits(3, counts, pos)
    iso = IsotonicRegression().fit(p_knots, pos / counts, sample_weight=counts).predict(p_knots)
    cal = ILPSCalibrator(K=3, ridge=0.0, lam=1.0).fit(s, y)
    np.testing.assert_allclose(cal.predict(p_knots), iso, atol=1e-7)
    assert cal.summary()["projection_changed"] is False


def test_weak_penalty_leaves_violations_that_projection_removes():
    counts, pos = np.array([10, 20, 10, 10]), np.array([2, 12, 5, 8])
    _, s, y = _rows_at_splits(3, counts, pos)
    cal = ILPSCalibrator(K=3, ridge=0.0, lam=0.0).fit(s, y)
    summary = cal.summary()
    assert summary["projection_changed"] is True
    # unconstrained optimum b = logit(rates): violation logit(12/20) - logit(5/10)
    assert summary["max_violation"] == pytest.approx(logit(0.6) - logit(0.5), abs=1e-6)
    assert np.all(np.diff(cal.b_) >= 0)


def test_ilps_weights_equal_duplicates_exactly():
    s, y = contract.synthetic(300)
    contract.check_weights_as_duplicates(ILPSCalibrator, {}, s, y, atol=1e-9)


def test_logit_scores_match_probability_scores():
    s, y = contract.synthetic(400, seed=3)
    a = ILPSCalibrator().fit(s, y).predict(s)
    b = ILPSCalibrator(score_kind="logit").fit(logit(s), y).predict(logit(s))
    np.testing.assert_allclose(a, b, atol=1e-12)


def test_probability_scores_outside_unit_interval_are_rejected():
    s, y = np.array([-1.0, 0.5, 2.0, 0.3]), np.array([0, 1, 1, 0.0])
    for cls, extra in ((ILPSCalibrator, {}), (FieldAwareCalibrator, {"epochs": 1})):
        with pytest.raises(FitError, match=r"needs scores in \[0, 1\]"):
            cls(**extra).fit(s, y)
        as_logits = cls(score_kind="logit", **extra)
        assert as_logits.needs_probabilities is False
        assert np.all(np.isfinite(as_logits.fit(s, y).predict(s)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ilps_at_least_as_good_as_platt_on_bayes_iso_setup(seed):
    s, y = section51(1000, seed)
    st, yt = section51(20000, 100 + seed)
    ll_ilps = log_loss(yt, create("ilps").fit(s, y).predict(st))
    ll_platt = log_loss(yt, create("logistic").fit(s, y).predict(st))
    assert ll_ilps <= ll_platt


# ---- gradients -------------------------------------------------------------------------


def _random_problem(layers):
    """A random Network (two categorical columns, two numeric ones) and one batch."""
    rng = np.random.default_rng(7)
    n, vocab_sizes, dim, n_num, hidden = 40, (4, 6), 3, 2, 5
    width = dim * len(vocab_sizes) + n_num
    weights, biases = [], []
    for _ in range(layers):
        weights.append(rng.normal(0, 0.7, (width, hidden)))
        biases.append(rng.normal(0, 0.3, hidden))
        width = hidden
    net = Network(
        b=np.sort(rng.normal(0, 2, 7)),
        shifts=[rng.normal(0, 0.5, v) for v in vocab_sizes],
        linear=rng.normal(0, 0.5, n_num),
        embeddings=[rng.normal(0, 0.5, (v, dim)) for v in vocab_sizes],
        weights=weights,
        biases=biases,
        out_w=rng.normal(0, 0.7, width),
        out_b=rng.normal(0, 0.3, 1),
    )
    codes = np.column_stack([rng.integers(0, v, n) for v in vocab_sizes])
    batch = dict(base=rng.normal(0, 2, n), codes=codes, xnum=rng.normal(size=(n, n_num)),
                 y=rng.integers(0, 2, n).astype(float), w=rng.uniform(0.5, 2.0, n))
    return net, batch


@pytest.mark.parametrize("layers", [0, 2])
def test_gradients_match_finite_differences(layers):
    net, batch = _random_problem(layers)
    _, grads = loss_and_grads(net, **batch)
    params = net.trainable()
    assert len(grads) == len(params) == 2 + 2 + 2 * layers
    h = 1e-6
    for block, (p, g) in enumerate(zip(params, grads)):
        assert g.shape == p.shape
        for idx in np.ndindex(p.shape):
            keep = p[idx]
            p[idx] = keep + h
            up = loss_and_grads(net, **batch)[0]
            p[idx] = keep - h
            down = loss_and_grads(net, **batch)[0]
            p[idx] = keep
            assert g[idx] == pytest.approx((up - down) / (2 * h), rel=1e-5, abs=1e-8), (block, idx)


def test_knot_penalty_value():
    a = np.array([0.0, 1.0, 3.0])
    b = np.array([0.0, -1.0, 3.0])
    value, _ = knot_penalty(a, b, lam=2.0, ridge=0.5)
    # hinge: 2 * 1; ridge: 0.5/2 * ((-1 - 1)^2 / 1 + (4 - 2)^2 / 2)
    assert value == pytest.approx(2.0 + 0.25 * (4.0 + 2.0))


# ---- field-aware -----------------------------------------------------------------------


@pytest.mark.parametrize("params", [{}, {"K": 5, "lam": 0.3, "ridge": 0.0}])
def test_without_features_is_ilps_through_the_public_fit(params):
    """No feature columns: `field-aware` fits and saves the same map as `ilps` (same params)."""
    s, y = contract.synthetic(400, seed=5)
    g = contract.grid(s)
    fa = create("field-aware", dict(params, epochs=3)).fit(s, y)
    il = create("ilps", params).fit(s, y)
    np.testing.assert_array_equal(fa.predict(g), il.predict(g))
    np.testing.assert_array_equal(contract.json_round_trip(fa).predict(g), il.predict(g))
    assert fa.input_features() == ([], [])


def test_round_trip_with_features_is_bit_exact():
    s, y, feats = mixed_features(600, 0)
    contract.check_round_trip(FieldAwareCalibrator, {"epochs": 3}, s, y, features=feats)
    contract.check_fit_predict(FieldAwareCalibrator, {"epochs": 3}, s, y, features=feats)


def test_input_features_and_missing_columns():
    s, y, feats = mixed_features(600, 1)
    cal = FieldAwareCalibrator(epochs=2).fit(s, y, features=feats)
    assert cal.input_features() == (["a", "c"], ["u"])
    with pytest.raises(InputError, match="'c', 'u'"):
        cal.predict(s, features={"a": feats["a"]})
    with pytest.raises(InputError):
        cal.predict(s)


def test_rare_levels_share_the_unknown_embedding_but_keep_their_shift():
    s, y, feats = mixed_features(800, 2)
    feats["c"] = feats["c"].copy()
    feats["c"][:3] = "rare"  # 3 rows < min_count=5: the unknown embedding, its own shift
    cal = FieldAwareCalibrator(epochs=3).fit(s, y, features=feats)
    net, f = cal.net_, 1
    code = cal.vocab_[f].tolist().index("rare") + 1
    np.testing.assert_array_equal(net.embeddings[f][code], net.embeddings[f][0])
    assert np.all(np.isfinite(net.embeddings[f][0])) and np.any(net.embeddings[f][0] != 0)
    assert net.shifts[f][0] == 0.0 and net.shifts[f][code] != 0.0
    probe = {k: v[:1].copy() for k, v in feats.items()}
    probe["c"][0] = "rare"
    p_rare = cal.predict(s[:1], features=probe)
    probe["c"][0] = "never-seen"
    p_unseen = cal.predict(s[:1], features=probe)
    assert logit(p_rare)[0] - logit(p_unseen)[0] == pytest.approx(net.shifts[f][code], abs=1e-9)


def test_shrinkage_once_seen_level_near_zero_frequent_level_at_its_logit_shift():
    """Posterior modes: s_v / tau^2 = sum_v w (y - p) exactly; a big level is the MLE up to 1/(tau^2 H)."""
    rng = np.random.default_rng(3)
    sizes = np.r_[10_000, 1, np.full(60, 150)]
    true = np.r_[1.0, 0.0, rng.normal(0.0, 0.5, 60)]
    z = np.repeat(np.arange(sizes.size), sizes)
    l0 = rng.normal(0.0, 1.0, z.size)
    y = (rng.random(z.size) < sigmoid(l0 + true[z])).astype(float)
    y[z == 1] = 1.0  # the once-seen level: one positive, so its unshrunk logit shift is +inf
    names = np.array([f"v{i:03d}" for i in range(sizes.size)], dtype=object)
    cal = create("field-aware", {"epochs": 1}).fit(sigmoid(l0), y, features={"z": names[z]})
    tau2 = cal.summary()["stage1"]["shift_sd"][0] ** 2
    shift = cal.net_.shifts[0][encode(names.astype(str), cal.vocab_[0])]
    eta = ilps_eta(l0, cal.a_, cal.net_.b)
    # once seen: s = tau^2 (1 - sigmoid(eta + s)), so 0 < s < tau^2 (and tau^2 is about 0.5^2)
    once = z == 1
    assert 0.0 < shift[1] < tau2 < 0.5
    assert shift[1] == pytest.approx(tau2 * (1.0 - sigmoid(eta[once] + shift[1]))[0], abs=1e-4)
    # 10 000 rows: the MLE of the level's shift (bisection), within s_mle / (tau^2 H) of it
    big = z == 0
    lo, hi = -5.0, 5.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.sum(sigmoid(eta[big] + mid) - y[big]) < 0 else (lo, mid)
    s_mle = 0.5 * (lo + hi)
    p_big = sigmoid(eta[big] + shift[0])
    curvature = float(np.sum(p_big * (1 - p_big)))
    assert abs(shift[0] - s_mle) <= 1.5 * abs(s_mle) / (tau2 * curvature) + 1e-4
    assert abs(shift[0] - s_mle) > 0  # shrunk, not the MLE itself
    assert shift[0] == pytest.approx(1.0, abs=4.0 / np.sqrt(curvature))


def _poisson_bootstrap_se(diff_fn, n, reps=200, seed=0):
    rng = np.random.default_rng(seed)
    return float(np.std([diff_fn(rng.poisson(1.0, n).astype(float)) for _ in range(reps)]))


@pytest.mark.parametrize("seed", [0, 1])
def test_no_worse_than_one_hot_logistic_on_held_out_rows(seed):
    """The one-hot-field logistic regression is a special case of stage 1: on held-out rows
    field-aware's log-loss and Field-ECE are no worse than its, within two standard errors of
    the paired difference (test-set noise) plus, for log-loss, a tenth of the baseline's own
    expected excess over the truth, (levels + 2) / (2 n) (Akaike's estimate for a maximum-
    likelihood fit of levels + 2 parameters): the two estimators see the same rows but shrink
    differently, so they cannot agree more closely than a fraction of their excess risk."""
    from scipy import sparse
    from sklearn.linear_model import LogisticRegression

    s, y, z = ctr_data(30_000, seed, levels=50)
    st, yt, zt = ctr_data(60_000, 10 + seed, levels=50)
    levels, codes = np.unique(np.r_[z, zt], return_inverse=True)
    c, ct = codes[: z.size], codes[z.size :]

    def design(scores, cc):
        onehot = sparse.csr_matrix((np.ones(cc.size), (np.arange(cc.size), cc)), shape=(cc.size, levels.size))
        return sparse.hstack([sparse.csr_matrix(logit(scores)[:, None]), onehot]).tocsr()

    lr = LogisticRegression(max_iter=1000).fit(design(s, c), y)
    p_lr = lr.predict_proba(design(st, ct))[:, 1]
    p_fa = create("field-aware").fit(s, y, features={"z": z}).predict(st, features={"z": zt})

    def row_losses(p):
        p = np.clip(p, 1e-15, 1 - 1e-15)
        return -(yt * np.log(p) + (1 - yt) * np.log1p(-p))

    d = row_losses(p_fa) - row_losses(p_lr)
    assert d.mean() <= 2.0 * d.std() / np.sqrt(d.size) + 0.1 * (levels.size + 2) / (2 * s.size)

    def fece_diff(wt):
        def fece(p):
            return np.sum(np.abs(np.bincount(ct, weights=wt * (yt - p)))) / wt.sum()
        return fece(p_fa) - fece(p_lr)

    assert fece_diff(np.ones(yt.size)) <= 2.0 * _poisson_bootstrap_se(fece_diff, yt.size)
    assert field_ece(yt, p_fa, ct) == pytest.approx(fece_diff(np.ones(yt.size)) + field_ece(yt, p_lr, ct))


def test_row_order_and_seed():
    s, y, feats = mixed_features(700, 3)
    order = np.random.default_rng(9).permutation(s.size)
    g = contract.grid(s)
    gf = {k: np.resize(v, g.size) for k, v in feats.items()}
    a = FieldAwareCalibrator(epochs=3).fit(s, y, features=feats)
    b = FieldAwareCalibrator(epochs=3).fit(s[order], y[order], features={k: v[order] for k, v in feats.items()})
    np.testing.assert_array_equal(a.predict(g, gf), b.predict(g, gf))  # canonical order: bit-identical
    c = FieldAwareCalibrator(epochs=3, seed=1).fit(s, y, features=feats)
    assert not np.array_equal(a.predict(g, gf), c.predict(g, gf))


def test_monotone_in_score_for_fixed_features():
    s, y, feats = mixed_features(700, 4)
    cal = FieldAwareCalibrator(epochs=3).fit(s, y, features=feats)
    g = np.linspace(-0.1, 1.1, 200)
    fixed = {k: np.repeat(v[:1], g.size) for k, v in feats.items()}
    assert np.all(np.diff(cal.predict(g, fixed)) >= 0)


def test_progress_callback_reaches_total():
    s, y, feats = mixed_features(500, 6)
    cal = FieldAwareCalibrator(epochs=2, batch_size=100)
    calls = []
    cal.progress = lambda done, total: calls.append((done, total))
    cal.fit(s, y, features=feats)
    steps = [c[0] for c in calls]
    assert steps == sorted(steps) and calls[-1][0] == calls[-1][1] == 2 * 5


def test_ctr_like_study_field_rce_halved_and_auc_kept():
    s, y, z = ctr_data(20000, 1)
    st, yt, zt = ctr_data(100000, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p_iso = create("isotonic").fit(s, y).predict(st)
        p_platt = create("logistic").fit(s, y).predict(st)
    p_fa = create("field-aware").fit(s, y, features={"z": z}).predict(st, features={"z": zt})
    codes = np.unique(zt, return_inverse=True)[1]
    rce_fa = field_rce(yt, p_fa, codes)
    assert rce_fa <= 0.5 * field_rce(yt, p_iso, codes)
    assert rce_fa <= 0.5 * field_rce(yt, p_platt, codes)
    auc_fa = roc_auc_score(yt, p_fa)
    assert auc_fa >= roc_auc_score(yt, st)
    assert auc_fa >= max(roc_auc_score(yt, p_iso), roc_auc_score(yt, p_platt))
