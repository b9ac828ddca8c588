"""`multicalibration`: intersections, unbiasedness on the fit rows, the k-fold choice of rounds,
seeds, reload, unseen levels, weights, and the trees against a brute-force split search."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import contract
from calibcli import fit
from calibcli.calibrators import get
from calibcli.calibrators.mc_trees import Forest, TreeParams, bin_edges, to_bins
from calibcli.errors import InputError, MapError
from calibcli.maps import envelope as maps


def sigmoid(t):
    return 1.0 / (1.0 + np.exp(-t))


def crossed(n, seed, bump=1.2):
    """Fields a (4 levels) and b (4 levels), a numeric u; the score is calibrated except in the
    one cell a = a0 & b = b0, whose logit is `bump` higher (additive shifts cannot fit it)."""
    rng = np.random.default_rng(seed)
    a = np.array(["a0", "a1", "a2", "a3"], dtype=object)[rng.integers(0, 4, n)]
    b = np.array(["b0", "b1", "b2", "b3"], dtype=object)[rng.integers(0, 4, n)]
    u = rng.normal(0.0, 1.0, n)
    l0 = rng.normal(-0.5, 1.0, n)
    cell = (a == "a0") & (b == "b0")
    y = (rng.random(n) < sigmoid(l0 + bump * cell)).astype(float)
    return sigmoid(l0), y, {"a": a, "b": b, "u": u}, cell


def cell_bias(cal, s, y, feats, cell):
    p = cal.predict(s, features=feats)
    return float(np.mean(p[cell]) - np.mean(y[cell]))


def test_an_intersection_is_recovered_that_level_shifts_cannot_fit():
    s, y, feats, _ = crossed(30_000, 0)
    st, yt, ft, cell = crossed(200_000, 1)
    full = fit(s, y, method="multicalibration", features=feats, seed=0)
    shifts_only = fit(s, y, method="multicalibration", features=feats, seed=0, rounds=0)
    assert full.summary()["rounds"] >= 1
    assert full.summary()["columns"]["a"]["tree_splits"] > 0 and full.summary()["columns"]["b"]["tree_splits"] > 0
    # the cell holds 1/16 of the rows at a logit 1.2 above the rest: shifts alone miss most of it
    assert cell_bias(shifts_only, st, yt, ft, cell) < -0.05
    assert abs(cell_bias(full, st, yt, ft, cell)) < 0.015
    from calibcli.evaluation.metrics.binary import log_loss

    assert log_loss(yt, full.predict(st, features=ft)) < log_loss(yt, shifts_only.predict(st, features=ft)) - 0.003


def total_shifts(cal):
    """Per shift table, the additive stage's shift plus every round's correction."""
    state = cal.get_state()
    tables = len(state["shifts"])
    out = [np.array(v, dtype=float) for v in state["shifts"]]
    for i, corr in enumerate(state["round_shifts"]):
        out[i % tables] = out[i % tables] + np.array(corr, dtype=float)
    return out


def fit_codes(cal, s, feats):
    """The shift-table codes of the rows (levels, then numeric and logit bands), as the map sees them."""
    from calibcli.calibrators.multicalibration import LOGIT_CAP, with_bands
    from calibcli.calibrators.ilps import to_logit

    codes, raw, _ = cal._inputs(s, feats)
    logit = np.clip(to_logit(s, cal.params["score_kind"]), -LOGIT_CAP, LOGIT_CAP)
    return with_bands(codes, raw, logit, cal.bands_)


@pytest.mark.parametrize("weighted", [False, True])
def test_unbiased_on_the_fit_rows_overall_and_per_level(weighted):
    """Overall: sum w (y - p) = 0. Per level v of every shift table: sum_v w (y - p) equals the
    level's total shift / tau^2 (the prior's pull), so a level with many rows is unbiased."""
    s, y, feats, _ = crossed(20_000, 2)
    w = np.random.default_rng(3).uniform(0.2, 3.0, s.size) if weighted else np.ones(s.size)
    cal = fit(s, y, method="multicalibration", features=feats, seed=0, sample_weight=w if weighted else None)
    assert cal.summary()["rounds"] >= 1
    p = cal.predict(s, features=feats)
    assert abs(np.sum(w * (y - p))) < 1e-8 * np.sum(w)
    tau2 = np.array(cal.info_["shift_sd"]) ** 2
    codes = fit_codes(cal, s, feats)
    for f, shift in enumerate(total_shifts(cal)):
        resid = np.bincount(codes[:, f], w * (y - p), shift.size)
        np.testing.assert_allclose(resid[1:], shift[1:] / tau2[f], rtol=0, atol=1e-7)
        count = np.bincount(codes[:, f], w, shift.size)[1:]
        rel = np.abs(resid[1:]) / count
        assert np.all(rel[count > 1000] < 0.01)  # a level's bias is its shrinkage: small with many rows


def test_zero_rounds_on_data_that_is_already_multicalibrated():
    for seed in range(3):
        rng = np.random.default_rng(seed)
        n = 8000
        feats = {"a": rng.choice(np.array(["x", "y", "z"], dtype=object), n), "u": rng.normal(size=n)}
        s = rng.uniform(0.05, 0.95, n)
        y = (rng.random(n) < s).astype(float)
        cal = fit(s, y, method="multicalibration", features=feats, seed=seed)
        assert cal.summary()["rounds"] == 0, cal.summary()["selection"]


def test_same_seed_same_map_and_the_seed_only_moves_the_folds():
    s, y, feats, _ = crossed(6000, 4)
    a = fit(s, y, method="multicalibration", features=feats, seed=7).get_state()
    b = fit(s, y, method="multicalibration", features=feats, seed=7).get_state()
    assert json.dumps(maps.to_plain(a), sort_keys=True) == json.dumps(maps.to_plain(b), sort_keys=True)
    c = fit(s, y, method="multicalibration", features=feats, seed=8)
    assert c.summary()["selection"]["heldout_logloss"] != fit(s, y, method="multicalibration", features=feats,
                                                               seed=7).summary()["selection"]["heldout_logloss"]


def test_row_order_does_not_change_the_map():
    s, y, feats, _ = crossed(5000, 5)
    order = np.random.default_rng(0).permutation(s.size)
    a = fit(s, y, method="multicalibration", features=feats).get_state()
    b = fit(s[order], y[order], method="multicalibration", features={k: v[order] for k, v in feats.items()}).get_state()
    assert json.dumps(maps.to_plain(a), sort_keys=True) == json.dumps(maps.to_plain(b), sort_keys=True)


def test_reloaded_map_predicts_bit_for_bit_with_unseen_levels_and_far_values():
    s, y, feats, _ = crossed(20_000, 6)
    cal = fit(s, y, method="multicalibration", features=feats, seed=0)
    assert cal.summary()["trees"] > 0
    rng = np.random.default_rng(1)
    n = 3000
    q = np.concatenate([rng.random(n - 4), [0.0, 1.0, 1e-300, 1 - 1e-16]])
    qf = {"a": rng.choice(np.array(["a0", "a1", "new", ""], dtype=object), n),
          "b": rng.choice(np.array(["b0", "b3", "other"], dtype=object), n),
          "u": np.concatenate([rng.normal(size=n - 2), [1e300, -1e300]])}
    expected = cal.predict(q, features=qf)
    assert np.all(np.isfinite(expected)) and np.all((expected > 0) & (expected < 1))
    for again in (contract.json_round_trip(cal), contract.parquet_round_trip(cal)):
        assert np.array_equal(again.predict(q, features=qf), expected)


def test_an_unseen_level_gets_no_shift_and_no_left_branch():
    """Documented behaviour: an unseen level's shift is 0 in every table and it takes the right
    side of every categorical split, so any two unseen strings predict the same, and with
    no rounds the logit is the additive stage's without that column's shift."""
    s, y, feats, _ = crossed(20_000, 7)
    cal = fit(s, y, method="multicalibration", features=feats, seed=0)
    n = 50
    q = np.linspace(0.05, 0.95, n)
    base = {"b": np.full(n, "b1", dtype=object), "u": np.zeros(n)}
    p1 = cal.predict(q, features={"a": np.full(n, "zz", dtype=object), **base})
    p2 = cal.predict(q, features={"a": np.full(n, "never seen", dtype=object), **base})
    assert np.array_equal(p1, p2)
    additive = fit(s, y, method="multicalibration", features=feats, seed=0, rounds=0)
    st = additive.get_state()
    from calibcli.calibrators.ilps import to_logit

    l = to_logit(q, "probability")
    b_code = st["vocab"][1].index("b1") + 1
    u_band = int(np.searchsorted(st["bands"][0], 0.0)) + 1
    l_band = np.searchsorted(st["bands"][1], l) + 1
    x = (0.0 / st["std"][0]) - st["mean"][0] / st["std"][0]
    z = (st["intercept"] + st["slope"] * l) + st["shifts"][1][b_code] + st["shifts"][2][u_band] \
        + np.array(st["shifts"][3])[l_band] + st["linear"][0] * x
    np.testing.assert_allclose(additive.predict(q, features={"a": np.full(n, "zz", dtype=object), **base}),
                               sigmoid(z), rtol=1e-13)


def test_integer_weights_equal_repeated_rows_exactly():
    s, y, feats, _ = crossed(3000, 8)
    w = np.random.default_rng(0).integers(1, 4, s.size).astype(float)
    a = fit(s, y, method="multicalibration", features=feats, sample_weight=w)
    rep = w.astype(int)
    b = fit(np.repeat(s, rep), np.repeat(y, rep), method="multicalibration",
            features={k: np.repeat(v, rep) for k, v in feats.items()})
    assert np.array_equal(a.predict(s, features=feats), b.predict(s, features=feats))


def test_text_columns_are_categorical_and_the_summary_says_how_each_column_was_used():
    s, y, feats, _ = crossed(20_000, 9)
    feats["country"] = np.where(feats["u"] > 0, "DE", "FR")  # a numpy str array, not object
    cal = fit(s, y, method="multicalibration", features=feats, seed=0)
    cols = cal.summary()["columns"]
    assert cols["country"]["kind"] == "categorical" and cols["country"]["levels"] == 2
    assert cols["u"]["kind"] == "numeric" and cols["u"]["bands"] >= 2
    assert all("use" in c for c in cols.values())
    assert cal.input_features() == (["a", "b", "country"], ["u"])


def test_missing_and_non_numeric_feature_columns_are_refused_in_one_line():
    s, y, feats, _ = crossed(2000, 10)
    cal = fit(s, y, method="multicalibration", features=feats)
    with pytest.raises(InputError, match="missing feature column 'u'"):
        cal.predict(s, features={"a": feats["a"], "b": feats["b"]})
    with pytest.raises(InputError, match="numeric feature column 'u' must hold"):
        cal.predict(s, features={**feats, "u": np.full(s.size, np.nan)})


def test_sql_export_is_refused_clearly():
    from calibcli.export.sql import sql_expression

    s, y, feats, _ = crossed(2000, 11)
    with pytest.raises(MapError, match="multicalibration map cannot be exported as SQL"):
        sql_expression(fit(s, y, method="multicalibration", features=feats))


def test_a_damaged_tree_is_refused_on_load():
    s, y, feats, _ = crossed(20_000, 12)
    env = json.loads(maps.envelope_to_json(maps.make_envelope(fit(s, y, method="multicalibration", features=feats))))
    assert env["state"]["node_left"]
    env["state"]["node_left"][0] = 0  # the root its own child: not a tree
    with pytest.raises(MapError, match="node_left"):
        maps.envelope_to_calibrator(env, "m.json")


# ---- the trees against a brute-force search --------------------------------------------


def brute_force_root(x_cat, x_num, g, h, l2, min_weight):
    """The best root split by trying every threshold and every subset of levels."""
    best = (-np.inf, None)
    parent = g.sum() ** 2 / (h.sum() + l2)

    def gain(left):
        if left.sum() < min_weight or (~left).sum() < min_weight:
            return -np.inf
        return g[left].sum() ** 2 / (h[left].sum() + l2) + g[~left].sum() ** 2 / (h[~left].sum() + l2) - parent

    for v in np.unique(x_num)[:-1]:
        cand = gain(x_num <= v)
        if cand > best[0]:
            best = (cand, ("num", v))
    levels = np.unique(x_cat)
    for k in range(1, levels.size):
        for subset in itertools.combinations(levels, k):
            cand = gain(np.isin(x_cat, subset))
            if cand > best[0]:
                best = (cand, ("cat", frozenset(subset)))
    return best


@pytest.mark.parametrize("seed", range(5))
def test_root_split_equals_the_exhaustive_best(seed):
    """With no smoothing of the level order (cat_smooth = cat_l2 = 0), sorting levels by G/H and
    cutting the order finds the best partition of the levels (Fisher 1958), and every threshold
    of a numeric column is a candidate when it has fewer than 255 values."""
    rng = np.random.default_rng(seed)
    n = 600
    x_cat = rng.integers(1, 6, n)
    x_num = np.round(rng.normal(size=n), 1)
    z = 0.8 * np.isin(x_cat, [2, 4]) + 0.5 * (x_num > 0.3) + rng.normal(0, 0.3, n)
    y = (rng.random(n) < sigmoid(z - 0.5)).astype(float)
    p = np.full(n, y.mean())
    g, h = p - y, p * (1 - p)
    edges = [None, bin_edges(x_num)]
    bins = np.column_stack([x_cat, to_bins(x_num, edges[1])]).astype(np.int32)
    params = TreeParams(leaves=2, min_weight=20, l2=0.5, min_gain=0.0, rate=1.0, cat_l2=0.0, cat_smooth=0.0,
                        min_cat_weight=1.0)
    trees, values = Forest([bins], np.array([6, edges[1].size + 1]), [edges], params).grow(g, h, np.ones(n))
    tree = trees[0]
    gain, (kind, where) = brute_force_root(x_cat, x_num, g, h, 0.5, 20)
    if kind == "num":
        assert tree.feature[0] == 1
        left = x_num <= tree.threshold[0]
        assert np.array_equal(left, x_num <= where)
    else:
        assert tree.feature[0] == 0
        left = np.isin(x_cat, tree.sets[0])
        assert left.all() == False and (np.array_equal(left, np.isin(x_cat, list(where)))
                                        or np.array_equal(~left, np.isin(x_cat, list(where))))
    np.testing.assert_allclose(values[left], -g[left].sum() / (h[left].sum() + 0.5))
    np.testing.assert_allclose(values[~left], -g[~left].sum() / (h[~left].sum() + 0.5))


def test_bin_edges_separate_every_value_and_sit_between_neighbours():
    x = np.array([3.0, 1.0, 2.0, 2.0, 5e-324, -1.7976931348623157e308, 1.7976931348623157e308])
    e = bin_edges(x)
    u = np.unique(x)
    assert e.size == u.size - 1 and np.all(np.isfinite(e))
    assert np.all((e >= u[:-1]) & (e < u[1:]))
    assert np.array_equal(np.unique(to_bins(x, e)), np.arange(u.size))
    many = np.random.default_rng(0).normal(size=10_000)
    assert bin_edges(many).size <= 254


def test_registered_as_a_feature_method_that_is_not_monotone():
    cls = get("multicalibration")
    assert cls.uses_features and not cls.monotone
