"""Mergeable evaluation state: equal to the in-memory metrics for any split, Arrow round
trips, and the stated error bounds of --step bucketing."""

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibcli.numeric import pooling
from calibcli.errors import UsageError
from calibcli.evaluation.metrics import diagnostics, kernels, binary as metrics
from calibcli.evaluation.state.builder import StateBuilder
from calibcli.evaluation.state.binary import EvalState, compute_all, merge_states


def _data(seed, n, ties, weighted, fields=7):
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    if ties:
        p = np.round(p, 2)
    y = (rng.random(n) < p).astype(np.float64)
    g = rng.integers(0, fields, n)
    w = rng.integers(0, 4, n).astype(np.float64) * rng.choice([1.0, 0.5], n) if weighted else None
    return y, p, g, w


def _close(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if math.isnan(b[k]):
            assert math.isnan(a[k]), k
        else:
            assert a[k] == pytest.approx(b[k], rel=1e-12, abs=1e-12), k


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 300), st.booleans(), st.booleans(),
       st.lists(st.integers(0, 300), max_size=6), st.integers(1, 50), st.randoms())
def test_merged_batches_equal_the_in_memory_metrics(seed, n, ties, weighted, cuts, window, rnd):
    y, p, g, w = _data(seed, n, ties, weighted)
    if w is not None and w.sum() == 0:
        w[0] = 1.0
    names = [f"f{i}" for i in range(7)]
    expected = compute_all(y, p, g, window, sample_weight=w)
    edges = sorted({0, n, *(c % (n + 1) for c in cuts)})
    parts = [EvalState.from_arrays(y[a:b], p[a:b], fields=np.array(names)[g[a:b]],
                                   sample_weight=None if w is None else w[a:b]) for a, b in zip(edges, edges[1:])]
    rnd.shuffle(parts)
    merged = parts[0].merge(*parts[1:])
    _close(merged.metrics(window), expected)
    pairwise = parts[0]
    for part in parts[1:]:  # merging one at a time gives the same state
        pairwise = pairwise.merge(part)
    _close(pairwise.metrics(window), expected)
    assert merged.rows == n and merged.positives == int(y.sum())


def test_weighted_metrics_equal_the_expanded_rows():
    y, p, g, _ = _data(3, 400, True, False)
    w = np.random.default_rng(4).integers(0, 5, y.size).astype(np.float64)
    idx = np.repeat(np.arange(y.size), w.astype(np.int64))
    expanded = compute_all(y[idx], p[idx], g[idx], 30)
    _close(EvalState.from_arrays(y, p, fields=g, sample_weight=w).metrics(30), expanded)


def test_distribution_pools_ties_and_is_sorted():
    st_ = EvalState.from_arrays([0, 1, 1, 0, 1], [0.4, 0.4, 0.9, 0.1, 0.4])
    assert st_.p.tolist() == [0.1, 0.4, 0.9]
    assert st_.n0.tolist() == [1, 1, 0] and st_.n1.tolist() == [0, 2, 1]


def test_hand_computed_case_through_two_partitions():
    # The metrics module's worked example, split in two partitions with string fields.
    y = np.array([0, 1, 1, 0, 1], dtype=float)
    p = np.array([0.1, 0.8, 0.6, 0.4, 0.4])
    f = np.array(["a", "a", "b", "b", "b"])
    a = EvalState.from_arrays(y[:3], p[:3], fields=f[:3])
    b = EvalState.from_arrays(y[3:], p[3:], fields=f[3:])
    out = b.merge(a).metrics(2)
    assert out["auc"] == pytest.approx(5.5 / 6)
    assert out["ece"] == pytest.approx(0.9 / 5)
    assert out["field_ece"] == pytest.approx(0.7 / 5)
    assert out["field_rce"] == pytest.approx((2 * 0.1 / 1.02 + 3 * 0.6 / 2.03) / 5)
    assert out["calbin"] == pytest.approx((0.15 + 0.1 + 0.25) / 3)


@pytest.mark.parametrize("cells", [False, True])
@pytest.mark.parametrize("step", [None, 0.01])
def test_arrow_round_trip_and_table_of_states(cells, step):
    y, p, g, _ = _data(5, 500, False, False)
    parts = [EvalState.from_arrays(y[a:a + 100], p[a:a + 100], fields=g[a:a + 100], step=step,
                                   field_cells=cells) for a in range(0, 500, 100)]
    one = parts[0]
    back = EvalState.from_arrow(one.to_arrow())
    for attr in ("p", "n0", "n1", "ece_p", "ece_y", "field_w", "field_y", "field_p"):
        np.testing.assert_array_equal(getattr(back, attr), getattr(one, attr))
    assert back.field_names == one.field_names and back.step == step
    assert (back.cell_field is None) == (not cells)
    table = pa.concat_tables([s.to_arrow() for s in parts])
    got, want = EvalState.from_arrow(table).metrics(50), merge_states(parts).metrics(50)
    assert got.keys() == want.keys()
    for k in got:
        assert got[k] == want[k] or (math.isnan(got[k]) and math.isnan(want[k])), k


def test_merge_refuses_mixed_states():
    y, p, g, _ = _data(6, 50, False, False)
    with pytest.raises(UsageError, match="different steps"):
        EvalState.from_arrays(y, p, step=0.1).merge(EvalState.from_arrays(y, p))
    with pytest.raises(UsageError, match="with and without fields"):
        EvalState.from_arrays(y, p, fields=g).merge(EvalState.from_arrays(y, p))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("step", [None, 0.01])
def test_builder_equals_one_state(weighted, step):
    y, p, g, w = _data(7, 3000, True, weighted)
    builder = StateBuilder(step)
    for a in range(0, 3000, 250):
        builder.add(y[a:a + 250], p[a:a + 250], fields=g[a:a + 250], sample_weight=None if w is None else w[a:a + 250])
    got = builder.result()
    if step is None and not weighted:
        assert got.n0.dtype == got.n1.dtype == np.uint8  # the compact exact path
    whole = EvalState.from_arrays(y, p, fields=g, sample_weight=w, step=step)
    np.testing.assert_array_equal(got.p, whole.p)
    _close(got.metrics(40), whole.metrics(40))
    if step is None:
        _close(got.metrics(40), compute_all(y, p, g, 40, sample_weight=w))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("step", [1e-3, 1e-2, 0.1])
@pytest.mark.parametrize("window", [5, 100])
def test_step_error_stays_within_the_stated_bounds(seed, step, window):
    rng = np.random.default_rng(seed)
    n = 4000
    p = rng.random(n) ** (1 + seed % 3)
    y = (rng.random(n) < np.sort(p)[np.argsort(np.argsort(p))] ** 0.8).astype(np.float64)
    if seed % 2:  # adversarial inside buckets: labels sorted by p
        y = (p > np.median(p)).astype(np.float64)
    exact = EvalState.from_arrays(y, p).metrics(window)
    bucketed = EvalState.from_arrays(y, p, step=step)
    approx = bucketed.metrics(window)
    bounds = bucketed.step_bounds(window)
    for key in ("auc", "calbin"):
        assert abs(approx[key] - exact[key]) <= bounds[key], key
    _check_every_bound(exact, approx, bounds)
    assert bucketed.p.size <= 1 / step + 1
    assert EvalState.from_arrays(y, p).step_bounds() is None


def _check_every_bound(exact, approx, bounds):
    """Every metric within its stated bound (0: exact to rounding; None: n/a under step)."""
    assert bounds.keys() == exact.keys() == approx.keys()
    for key, bound in bounds.items():
        if bound is None:
            assert math.isnan(approx[key]), key
        elif math.isnan(exact[key]):
            assert math.isnan(approx[key]), key
        elif bound == 0:
            assert approx[key] == pytest.approx(exact[key], rel=1e-9, abs=1e-12), key
        else:
            assert abs(approx[key] - exact[key]) <= bound, key


@given(st.integers(0, 2**32 - 1), st.integers(2, 3000), st.sampled_from([1e-6, 1e-3, 0.01, 0.1, 0.37, 1.0]),
       st.sampled_from([1, 3, 10, 100]), st.integers(1, 40), st.booleans(), st.booleans(), st.booleans())
@settings(max_examples=60, deadline=None)
def test_every_metric_under_step_is_exact_or_within_its_bound(seed, n, step, window, bins, weighted, near_ends,
                                                               streamed):
    """Generated data: ECE/MCE (equal-width bins), Spiegelhalter, log-loss, Brier and the field
    metrics equal the exact ones under --step; AUC and CalBin stay within step_bounds; slope and
    intercept are n/a. Streamed (StateBuilder, batches) or in one piece."""
    rng = np.random.default_rng(seed)
    p = rng.random(n) ** (4 if near_ends else 1)
    if near_ends:
        p = np.where(rng.random(n) < 0.5, p, 1 - p)
    y = (rng.random(n) < p).astype(np.float64)
    g = rng.integers(0, 5, n)
    w = rng.integers(0, 4, n).astype(np.float64) if weighted else None
    exact = EvalState.from_arrays(y, p, fields=g, sample_weight=w).metrics(window, ece_bins=bins)
    if streamed:
        builder = StateBuilder(step, ece_bins=bins)
        for a in range(0, n, 700):
            builder.add(y[a:a + 700], p[a:a + 700], g[a:a + 700], None if w is None else w[a:a + 700])
        state = builder.result()
    else:
        state = EvalState.from_arrays(y, p, fields=g, sample_weight=w, step=step, ece_bins=bins)
    _check_every_bound(exact, state.metrics(window, ece_bins=bins), state.step_bounds(window))


def test_step_refuses_other_bin_counts():
    """(--ece-strategy quantile with --step is refused once, by `EvaluateOptions.build`: test_requests.)"""
    y, p, _, _ = _data(3, 200, False, False)
    state = EvalState.from_arrays(y, p, step=0.01, ece_bins=20)
    with pytest.raises(UsageError, match="20 equal-width bins, not 10"):
        state.metrics()


def test_auc_bound_is_reached_when_labels_split_inside_one_bucket():
    # All rows in one bucket, perfectly separated: exact AUC 1, bucketed 1/2, bound 1/2.
    p = np.array([0.401, 0.402, 0.403, 0.404])
    y = np.array([0.0, 0.0, 1.0, 1.0])
    b = EvalState.from_arrays(y, p, step=0.1)
    assert EvalState.from_arrays(y, p).metrics()["auc"] == 1.0
    assert b.metrics()["auc"] == 0.5 and b.step_bounds()["auc"] == pytest.approx(0.5, rel=1e-8)


def test_reliability_from_the_distribution_matches_the_rows():
    # Distinct p: bin b holds rows 100 b .. 100 b + 99 of the sorted rows, computed directly.
    p = np.random.default_rng(2).permutation(np.linspace(0, 1, 1000))
    y = (p > 0.5).astype(np.float64)
    st_ = EvalState.from_arrays(y, p)
    bins = diagnostics.reliability_from_distribution(st_.p, st_.n0, st_.n1, 10)
    ps = np.sort(p)
    for b, got in enumerate(bins):
        rows = ps[100 * b:100 * b + 100]
        assert got["rows"] == 100 and got["p_min"] == rows[0] and got["p_max"] == rows[-1]
        assert got["mean_p"] == pytest.approx(rows.mean(), rel=1e-12)
        assert got["positive_rate"] == pytest.approx(np.mean(rows > 0.5), abs=1e-12)
    # With ties a bin edge may cut a tie group: its rows carry the group's pooled rate.
    tied = diagnostics.reliability_bins(np.array([0.0, 1.0, 1.0, 0.0]), np.array([0.2, 0.2, 0.2, 0.2]), 2)
    assert [b["positive_rate"] for b in tied] == [0.5, 0.5]


def test_empty_state_reports_nan():
    out = EvalState.from_arrays([], []).metrics()
    assert all(math.isnan(v) for v in out.values()) and "field_rce" not in out


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_calbin_window_chunks_do_not_change_the_result(monkeypatch, chunk):
    y, p, _, _ = _data(9, 700, True, False)
    w = np.random.default_rng(1).integers(1, 4, y.size).astype(np.float64)
    k = w.astype(int)
    sizes = (1, 30, 5000)
    plain = {s: metrics.calbin(y, p, s) for s in sizes}
    whole = {s: metrics.calbin(np.repeat(y, k), np.repeat(p, k), s) for s in sizes}
    half = {s: kernels.calbin_counts(*metrics.distribution(y, p, w / 2), s) for s in sizes}  # fractional path
    monkeypatch.setattr(pooling, "CHUNK", chunk)
    for s in sizes:
        assert metrics.calbin(y, p, s) == pytest.approx(plain[s], abs=1e-13)
        assert kernels.calbin_counts(*metrics.distribution(y, p, w), s) == pytest.approx(whole[s], abs=1e-13)
        assert kernels.calbin_counts(*metrics.distribution(y, p, w / 2), s) == pytest.approx(half[s], abs=1e-13)


def _same(a, b):
    """Equal floats, NaN equal to NaN, recursively through dicts, lists and tuples."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, z in zip(a, b):
            _same(x, z)
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b)
    else:
        assert a == b


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 400), st.sampled_from([1, 255, 300, 70_000]),
       st.sampled_from([np.uint8, np.uint16, np.uint32, np.uint64]), st.sampled_from([97, 1 << 16]))
def test_compact_integer_counts_read_as_their_float_values(seed, m, top, dtype, chunk):
    """A state whose n0/n1 are unsigned integer counts (what the exact streamed path keeps)
    gives every metric, view and Arrow row bit for bit as the same counts in float64 would:
    no reader adds them in their own dtype (uint8 200 + 100 would wrap to 44)."""
    rng = np.random.default_rng(seed)
    top = min(top, int(np.iinfo(dtype).max))
    v = np.unique(rng.random(m))
    n0 = rng.integers(0, min(top, 300) + 1, v.size)
    n1 = rng.integers(0, min(top, 300) + 1, v.size)
    n0[rng.integers(0, v.size, 2)] = top  # a few counts up to the dtype's range, rows stay few
    n1[(n0 == 0) & (n1 == 0)] = 1
    if seed % 3 == 0:  # one row per p: the unit paths
        n1 = (rng.random(v.size) < v).astype(np.int64)
        n0 = 1 - n1

    def state(counts_dtype):
        w0, w1 = n0.astype(counts_dtype), n1.astype(counts_dtype)
        total = float(n0.sum() + n1.sum())
        sp, sy = np.zeros(10), np.zeros(10)
        return EvalState(v, w0, w1, int(total), int(n1.sum()), total, 0.0, 0.0, sp, sy)

    compact, plain = state(dtype), state(np.float64)
    views = (lambda s: s.metrics(7), lambda s: s.metrics(100, ece_bins=4, ece_strategy="quantile"),
             lambda s: diagnostics.reliability_from_distribution(*s.pooled(), 6),
             lambda s: diagnostics.histogram_of_distribution(*s.pooled()),
             lambda s: EvalState.from_arrow(s.to_arrow()).metrics(7),
             lambda s: merge_states([s, s]).metrics(7))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pooling, "CHUNK", chunk)
        for view in views:
            _same(view(compact), view(plain))
