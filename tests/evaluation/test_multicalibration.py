"""The multicalibration error (calibcli/evaluation/metrics/multicalibration.py) against MCGrad
0.1.5's `MulticalibrationError` (values in tests/fixtures/mcgrad/, made by
benchmarks/mcgrad_reference.py on the data sets of tests/mcgrad_cases.py), against a naive
row-by-row reference, and for its invariants, streaming merge and degenerate inputs."""

from __future__ import annotations

import json
import math
import warnings
from itertools import combinations, product
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibcli.evaluation.metrics import segment_paths, segment_plan, segments as seg
from calibcli.evaluation.metrics.multicalibration import (
    EPS, MulticalOptions, MulticalState, ecce_pvalue, multicalibration)
from mcgrad_cases import CASES
from repo import FIXTURES

FIXTURES = FIXTURES / "mcgrad"


def _close(a: float, b: float, tol: float = 1e-9) -> bool:
    if math.isinf(b) or math.isinf(a):
        return a == b
    return abs(a - b) <= tol * max(1.0, abs(b))


def _columns_of(definition: str) -> set[str]:
    if definition == "all rows":
        return set()
    names = set()
    for part in definition.split(" & "):
        for sep in (" not in ", " in ", " is missing", "="):
            if sep in part:
                names.add(part.split(sep)[0])
                break
    return names


def _by_index(result):
    return sorted(result.segments, key=lambda s: s.index)


# --- MCGrad ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CASES))
def test_equals_mcgrad(name):
    """Every number MCGrad reports, and every segment it checks (same order, same rows, same
    ECCE, sigma, ratio and p-value), to 1e-9; its default float32 arithmetic to 1e-5."""
    ref = json.loads((FIXTURES / f"{name}.json").read_text())
    case = CASES[name]()
    r = multicalibration(case["y"], case["p"], case["columns"], case["w"])
    exact = ref["float64"]
    assert _close(r.multical, exact["mce"]) and _close(r.multical_sigma, exact["mce_sigma"])
    assert abs(r.multical_p - exact["mce_pvalue"]) <= 1e-9
    assert _close(r.ecce, exact["global_ecce"]) and _close(r.sigma, exact["global_sigma"])
    segs, theirs = _by_index(r), exact["segments"]
    assert len(segs) == len(theirs["rows"])
    assert r.capped == (name == "many")
    for s in segs:
        i = s.index
        assert s.rows == theirs["rows"][i], s.definition
        assert _columns_of(s.definition) == {c for c, _ in theirs["definition"][i]}, s.definition
        assert _close(s.ecce, theirs["ecce"][i]) and _close(s.sigma, theirs["sigma"][i]), s.definition
        assert _close(s.ecce_sigma, theirs["ecce_sigma"][i]), s.definition
        assert abs(s.p - theirs["p"][i]) <= 1e-9, s.definition
    loose = ref["float32"]
    assert _close(r.multical_sigma, loose["mce_sigma"], 1e-5) and _close(r.multical, loose["mce"], 1e-5)


def test_mcgrad_level_rules():
    """The rules the fixtures pin, in words: top-2 by count with equal counts decided by first
    appearance in p, missing competing like a value, empty intersections and rare ones skipped."""
    case = CASES["mixed"]()
    r = multicalibration(case["y"], case["p"], case["columns"], case["w"])
    defs = {s.definition for s in r.segments}
    assert "region not in {south, north}" in defs  # east (10 rows) and west (9) collapsed
    assert "plan is missing" in defs and "tenure is missing" in defs
    case = CASES["categorical"]()
    r = multicalibration(case["y"], case["p"], case["columns"], case["w"])
    assert sum(s.definition.startswith("even") and s.depth == 1 for s in r.segments) == 3


# --- a naive reference -------------------------------------------------------------------


def naive(y, p, w, columns, opts=MulticalOptions()):
    """Segments by boolean masks and itertools, each path walked row by row in Python
    (a run of equal p is one step). Levels come from `segments.levels_of` (tested against
    MCGrad above); everything after them is independent of the vectorised code."""
    n = len(p)
    w = np.ones(n) if w is None else np.asarray(w, float)
    stores = {}
    for k, v in columns.items():
        stores[k] = seg.new_column(seg.kind_of(v))
        stores[k].add(v)
    names = [k for k in stores if stores[k].kind == seg.CATEGORICAL] + \
            [k for k in stores if stores[k].kind == seg.NUMERIC]
    p = np.asarray(p, float)
    levels = [seg.levels_of(k, stores[k], p, opts.bins, opts.top) for k in names]
    levels = segment_plan.cells(levels, p)[0]  # numbered in MCGrad's order
    masks = [np.ones(n, bool)]
    for d in range(1, min(opts.depth, len(levels)) + 1):
        for cols in combinations(range(len(levels)), d):
            for pick in product(*[range(len(levels[c].labels)) for c in cols]):
                m = np.ones(n, bool)
                for c, lv in zip(cols, pick):
                    m &= levels[c].codes == lv
                if m.sum() >= opts.min_rows:
                    masks.append(m)
    masks = masks[:opts.max_segments]
    out = []
    for m in masks:
        rows = sorted(np.flatnonzero(m), key=lambda i: p[i])
        total = sum(w[i] for i in rows)
        c = hi = lo = 0.0
        for j, i in enumerate(rows):
            c += w[i] * (y[i] - p[i])
            if j == len(rows) - 1 or p[rows[j + 1]] != p[i]:
                hi, lo = max(hi, c), min(lo, c)
        var = sum(w[i] ** 2 * p[i] * (1 - p[i]) for i in rows)
        ecce = (hi - lo) / total if total > 0 else 0.0
        sigma = math.sqrt(var) / total if total > 0 else 0.0
        out.append((len(rows), ecce, sigma))
    return out


def _random_case(rng, n, ties=False, weights=False, missing=False):
    """ties: False (none), True (p on a 0.1 grid: runs of ties summed per cell before the
    paths) or "few" (5% of rows copy another row's p: ties left to the kernel)."""
    p = rng.random(n)
    if ties == "few":
        k = max(1, n // 20)
        p[rng.integers(0, n, k)] = p[rng.integers(0, n, k)]
    elif ties:
        p = np.round(p, 1)
    y = (rng.random(n) < p).astype(int)
    cat = rng.choice(np.array(["a", "b", "c", "d"], dtype=object), n)
    if missing:
        cat[rng.random(n) < 0.2] = None
    x = rng.normal(size=n)
    if missing:
        x[rng.random(n) < 0.2] = np.nan
    cols = {"cat": cat, "k": rng.integers(0, 3, n), "x": x}
    w = rng.gamma(1.0, 1.0, n) * (rng.random(n) < 0.9) if weights else None
    return y, p, w, cols


@pytest.mark.parametrize("ties,weights,missing", [(False, False, False), (True, True, False), (True, False, True),
                                                  ("few", True, True)])
def test_equals_naive_across_blocks(monkeypatch, ties, weights, missing):
    """Blocks of 16 rows (so segments and tie runs cross many block boundaries)."""
    monkeypatch.setattr(segment_paths, "BLOCK", 16)
    rng = np.random.default_rng(3)
    y, p, w, cols = _random_case(rng, 700, ties, weights, missing)
    r = multicalibration(y, p, cols, w)
    ref = naive(y, p, w, cols)
    segs = _by_index(r)
    assert len(segs) == len(ref)
    for s, (rows, ecce, sigma) in zip(segs, ref):
        assert s.rows == rows
        assert _close(s.ecce, ecce, 1e-12) and _close(s.sigma, sigma, 1e-12), s.definition


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 120), ties=st.sampled_from([False, True, "few"]),
       weights=st.booleans(),
       block=st.sampled_from([2, 5, 64]))
def test_property_equals_naive(seed, n, ties, weights, block):
    rng = np.random.default_rng(seed)
    y, p, w, cols = _random_case(rng, n, ties, weights, missing=True)
    opts = MulticalOptions(min_rows=3, max_segments=40)
    old = segment_paths.BLOCK
    segment_paths.BLOCK = block
    try:
        r = multicalibration(y, p, cols, w, opts)
    finally:
        segment_paths.BLOCK = old
    ref = naive(y, p, w, cols, opts)
    assert [s.rows for s in _by_index(r)] == [x[0] for x in ref]
    for s, (_, ecce, sigma) in zip(_by_index(r), ref):
        assert _close(s.ecce, ecce, 1e-12) and _close(s.sigma, sigma, 1e-12)


def test_summing_tied_rows_changes_nothing(monkeypatch):
    """Three routes to the same numbers: rows summed per (distinct p, cell) by hashing, rows
    sorted with runs of ties summed per cell, and every row walked."""
    rng = np.random.default_rng(4)
    y, p, w, cols = _random_case(rng, 3000, ties=True, weights=True, missing=True)
    assert segment_plan.few_distinct(p, 5) is not None
    assert segment_plan.collapse_ties(np.zeros(3000), np.sort(p), np.zeros(3000, np.uint16), 5)[0].size < 100
    results = [multicalibration(y, p, cols, w)]
    monkeypatch.setattr(segment_plan, "few_distinct", lambda p, ncell: None)
    results.append(multicalibration(y, p, cols, w))
    monkeypatch.setattr(segment_plan, "collapse_ties", lambda d, ps, cells, ncell: (d, ps, cells))
    results.append(multicalibration(y, p, cols, w))
    for other in results[1:]:
        assert _metrics_close(results[0], other)
        for a, b in zip(results[0].segments, other.segments):
            assert a.definition == b.definition and a.rows == b.rows
            assert all(_close(getattr(a, k), getattr(b, k), 1e-12) for k in ("weight", "ecce", "sigma", "predicted"))


def test_sparse_cells_and_split_keys_change_nothing(monkeypatch):
    """Cells from np.unique instead of a dense table, and combinations sent to the kernel in
    several groups (as when the columns' bit fields do not fit one 64-bit key)."""
    case = CASES["mixed"]()
    one = multicalibration(case["y"], case["p"], case["columns"], case["w"])
    monkeypatch.setattr(segment_plan, "DENSE", 1)
    monkeypatch.setattr(segment_plan, "position_bits", lambda bounds: 64 - 6)
    other = multicalibration(case["y"], case["p"], case["columns"], case["w"])
    assert _metrics_close(one, other)
    assert [(s.definition, s.rows) for s in one.segments] == [(s.definition, s.rows) for s in other.segments]
    assert all(_close(a.ecce, b.ecce, 1e-12) for a, b in zip(one.segments, other.segments))


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 400), q=st.integers(1, 8), kind=st.sampled_from("cdi"))
def test_linear_quantiles_are_numpys(seed, n, q, kind):
    rng = np.random.default_rng(seed)
    x = {"c": rng.normal(size=n), "d": np.round(rng.normal(size=n), 1), "i": rng.integers(0, 5, n).astype(float)}[kind]
    qs = np.linspace(0.0, 1.0, q + 1)
    assert np.array_equal(seg.linear_quantiles(x.copy(), qs), np.quantile(x, qs))


@pytest.mark.parametrize("make", [
    lambda rng: 0.5 + rng.integers(0, 1000, 5000) * 2.0 ** -52,  # equal top bits: the fix-up sorts them
    lambda rng: np.round(rng.random(5000), 2),
    lambda rng: np.concatenate([np.zeros(100), np.ones(100), rng.random(300), [5e-324, 1e-300]]),
])
def test_order_by_p(make):
    p = make(np.random.default_rng(1))
    order, ps = segment_paths.order_by_p(p)
    assert np.array_equal(np.sort(order), np.arange(p.size)) and np.array_equal(ps, p[order])
    assert np.array_equal(ps, np.sort(p))


def test_ties_are_one_step():
    """Four rows at p = 0.5 with labels 1, 1, 0, 0: one step of 0, whatever their order."""
    r = multicalibration([1, 1, 0, 0], [0.5] * 4)
    assert r.ecce == 0.0 and r.multical_sigma == 0.0 and r.multical_p == 1.0


# --- invariants --------------------------------------------------------------------------


def _metrics_close(a, b, tol=1e-12):
    return all(_close(a.metrics()[k], b.metrics()[k], tol) for k in a.metrics())


def test_row_order_changes_nothing():
    case = CASES["mixed"]()
    r = multicalibration(case["y"], case["p"], case["columns"], case["w"])
    perm = np.random.default_rng(0).permutation(case["p"].size)
    q = multicalibration(case["y"][perm], case["p"][perm], {k: v[perm] for k, v in case["columns"].items()},
                         case["w"][perm])
    assert _metrics_close(r, q)
    assert [s.definition for s in r.segments] == [s.definition for s in q.segments]
    assert all(_close(a.ecce, b.ecce, 1e-12) for a, b in zip(r.segments, q.segments))


@pytest.mark.parametrize("c", [1e-3, 7.0, 1e200, 2.0 ** -900])
def test_scaling_weights_changes_nothing(c):
    case = CASES["numeric"]()
    r = multicalibration(case["y"], case["p"], case["columns"], case["w"])
    q = multicalibration(case["y"], case["p"], case["columns"], case["w"] * c)
    assert _metrics_close(r, q)
    assert _close(q.segments[0].weight, r.segments[0].weight * c, 1e-12)


def test_calibrated_data_gives_small_sigma():
    rng = np.random.default_rng(5)
    n = 50_000
    p = rng.beta(2, 5, n)
    y = (rng.random(n) < p).astype(int)
    cols = {"a": rng.choice(["x", "y", "z", "w"], n), "b": rng.integers(0, 5, n), "c": rng.normal(size=n)}
    r = multicalibration(y, p, cols)
    assert r.multical_sigma < 4.5 and r.multical_p > 1e-4


def test_a_distorted_segment_is_found():
    rng = np.random.default_rng(6)
    n = 40_000
    p = rng.uniform(0.05, 0.95, n)
    country = rng.choice(np.array(["US", "DE", "FR"]), n)
    age = rng.uniform(18, 80, n)
    y = (rng.random(n) < np.where((country == "DE") & (age > 60), np.clip(p + 0.15, 0, 1), p)).astype(int)
    r = multicalibration(y, p, {"country": country, "age": age, "noise": rng.normal(size=n)})
    worst = r.segments[0]
    assert worst.definition.startswith("country=DE & age in (") and worst.depth == 2
    assert worst.observed > worst.predicted and r.multical_sigma > 10


# --- streaming ---------------------------------------------------------------------------


def test_merge_equals_one_shot():
    """Batches of different sizes, numpy in some and pyarrow (plain, dictionary) in others, in
    several states merged: the categorical dictionaries differ state to state."""
    case = CASES["mixed"]()
    y, p, cols, w = case["y"], case["p"], case["columns"], case["w"]
    one = multicalibration(y, p, cols, w)
    cuts = [0, 7, 1000, 1001, 3500, p.size]
    states = []
    for i, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
        s = MulticalState()
        part = {k: v[lo:hi] for k, v in cols.items()}
        if i % 2:
            part = {k: pa.array(v, from_pandas=True) for k, v in part.items()}
            part["region"] = part["region"].dictionary_encode()
        s.add(y[lo:hi], p[lo:hi], part, w[lo:hi])
        states.append(s)
    merged = MulticalState.merge([MulticalState.merge(states[:2]), MulticalState.merge(states[2:])])
    assert merged.rows == p.size
    r = merged.result()
    assert _metrics_close(one, r)
    assert [(s.definition, s.rows) for s in one.segments] == [(s.definition, s.rows) for s in r.segments]


def test_state_keeps_what_it_says():
    s = MulticalState()
    n = 1000
    s.add(np.zeros(n), np.full(n, 0.5), {"c": np.array(["a", "b"] * 500), "x": np.arange(n, dtype=float)})
    assert s.nbytes == n * (8 + 1 + 1 + 8)
    assert s.result().rows == n and s.result().rows == n  # result() can be called again


def test_kinds_and_arrow_inputs():
    rng = np.random.default_rng(8)
    n = 300
    p = rng.random(n)
    y = (rng.random(n) < p).astype(int)
    ints = rng.integers(0, 4, n)
    a = multicalibration(y, p, {"k": ints}, kinds={"k": "numeric"})
    b = multicalibration(y, p, {"k": ints.astype(float)})
    assert [s.definition for s in a.segments] == [s.definition for s in b.segments]
    nullable = pa.array([None if i % 7 == 0 else int(v) % 2 for i, v in enumerate(ints)], pa.int64())
    r = multicalibration(y, p, {"k": nullable})  # 0, 1 and missing: three values, each a level
    assert {"k=0", "k=1", "k is missing"} <= {s.definition for s in r.segments}
    floats = pa.array([None if i % 5 == 0 else float(v) for i, v in enumerate(p)], pa.float64())
    r = multicalibration(y, p, {"x": floats})
    assert "x is missing" in {s.definition for s in r.segments}


# --- degenerate inputs and errors --------------------------------------------------------


def _finite_or_inf(r):
    values = [r.multical, r.multical_sigma, r.multical_p, r.ecce, r.sigma]
    for s in r.segments:
        values += [s.weight, s.ecce, s.sigma, s.ecce_sigma, s.p]
        values += [v for v in (s.predicted, s.observed) if v is not None]
    return not any(math.isnan(v) for v in values)


@pytest.mark.parametrize("y,p,w,expect", [
    ([], [], None, (0.0, 0.0, 1.0)),
    ([1], [0.25], None, (0.75, 0.75 / math.sqrt(0.25 * 0.75), None)),
    ([1, 0, 1], [0.2, 0.4, 0.9], [0.0, 0.0, 0.0], (0.0, 0.0, 1.0)),
    ([1, 0, 1, 0], [1.0, 0.0, 1.0, 0.0], None, (0.0, 0.0, 1.0)),
    ([1, 0, 0, 0], [0.0, 0.0, 1.0, 1.0], None, (0.5, math.inf, EPS)),
])
def test_degenerate(y, p, w, expect):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = multicalibration(y, p, {"c": np.array(["a", "b", "a", "b"][:len(p)], dtype=object)}, w)
    multical, sigma, pval = expect
    assert _close(r.multical, multical, 1e-12) and _close(r.multical_sigma, sigma, 1e-12)
    if pval is not None:
        assert r.multical_p == pval
    assert _finite_or_inf(r)


def test_inf_ratio_and_zero_weight_segments():
    case = CASES["degenerate"]()
    w = np.where(case["columns"]["group"] == "usual", 0.0, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = multicalibration(case["y"], case["p"], case["columns"], w)
    assert r.multical_sigma == math.inf and r.multical_p == EPS and _finite_or_inf(r)
    zero = [s for s in r.segments if s.definition == "group=usual"][0]
    assert zero.weight == 0 and zero.predicted is None and zero.ecce == 0 and zero.p == 1.0


def test_extreme_column_values():
    rng = np.random.default_rng(9)
    n = 200
    p = rng.random(n)
    y = (rng.random(n) < p).astype(int)
    x = rng.normal(size=n)
    x[:80] = np.inf
    x[80:90] = -np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = multicalibration(y, p, {"x": x, "id": np.arange(n)})
    assert _finite_or_inf(r) and not any("nan" in s.definition for s in r.segments)


@pytest.mark.parametrize("bad,message", [
    (dict(p=[0.5, 1.5]), "p must be a probability"),
    (dict(p=[0.5, float("nan")]), "p must be a probability"),
    (dict(y=[0, 2]), "labels must be 0 or 1"),
    (dict(w=[1.0, -1.0]), "weights must be finite"),
    (dict(w=[1.0, float("inf")]), "weights must be finite"),
    (dict(y=[0, 1, 1]), "3 labels but 2"),
    (dict(columns={"c": ["a"]}), "column 'c' has 1 rows"),
    (dict(columns={"c": np.array([1, "a"], dtype=object)}), "column 'c' \\(categorical\\)"),
    (dict(y=["0", "1"]), "labels must be the numbers 0 and 1"),
])
def test_bad_input(bad, message):
    args = dict(y=[0, 1], p=[0.2, 0.6], w=None, columns=None) | bad
    with pytest.raises(ValueError, match=message):
        multicalibration(args["y"], args["p"], args["columns"], args["w"])


def test_bad_options_and_mismatched_batches():
    with pytest.raises(ValueError, match="min_rows must be an integer >= 1"):
        multicalibration([0, 1], [0.2, 0.6], options=MulticalOptions(min_rows=0))
    with pytest.raises(ValueError, match="kind must be"):
        MulticalState(kinds={"c": "text"})
    s = MulticalState()
    s.add([0], [0.1], {"c": ["a"]})
    with pytest.raises(ValueError, match="columns"):
        s.add([0], [0.1], {"d": ["a"]})
    t = MulticalState(kinds={"c": "numeric"})
    t.add([0], [0.1], {"c": [1.0]})
    with pytest.raises(ValueError, match="numeric in one state, categorical in another"):
        MulticalState.merge([s, t])


def test_whole_set_is_kept_below_min_rows_and_depth_zero():
    r = multicalibration([1, 0, 1], [0.3, 0.6, 0.2], {"c": ["a", "b", "a"]})
    assert [s.definition for s in r.segments] == ["all rows"]
    r = multicalibration([1, 0, 1] * 10, [0.3, 0.6, 0.2] * 10, {"c": ["a", "b", "a"] * 10},
                         options=MulticalOptions(depth=0))
    assert [s.definition for s in r.segments] == ["all rows"]


def test_max_segments_keeps_the_first_in_order():
    case = CASES["many"]()
    full = multicalibration(case["y"], case["p"], case["columns"], options=MulticalOptions(max_segments=None))
    cut = multicalibration(case["y"], case["p"], case["columns"], options=MulticalOptions(max_segments=123))
    assert not full.capped and cut.capped and len(cut.segments) == 123 and len(full.segments) > 1000
    first = {s.definition for s in _by_index(full)[:123]}
    assert {s.definition for s in cut.segments} == first


# --- the p-value -------------------------------------------------------------------------


def test_pvalue_edges_and_monotone():
    x = np.array([0.0, 1e-21, 0.1, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 8.26732673, 50.0, np.inf])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pv = ecce_pvalue(x)
    assert pv[0] == pv[1] == 1.0 and pv[-3] == pv[-2] == pv[-1] == EPS
    assert np.all(np.diff(pv) <= 0) and np.all((pv > 0) & (pv <= 1))


def test_pvalue_is_the_range_of_brownian_motion():
    """Monte Carlo: P(max - min of a 4000-step Gaussian random walk, scaled to [0, 1], >= x)."""
    rng = np.random.default_rng(10)
    walks = np.cumsum(rng.normal(size=(4000, 4000)) / np.sqrt(4000), axis=1)
    walks = np.concatenate([np.zeros((4000, 1)), walks], axis=1)
    ranges = np.ptp(walks, axis=1) * (1 + 0.5826 * 2 / np.sqrt(4000))  # the discrete walk misses ~0.58/sqrt(n) at each end
    for x in (1.0, 1.5, 2.0, 2.5, 3.0):
        assert abs(np.mean(ranges >= x) - ecce_pvalue(x)[0]) < 0.02
