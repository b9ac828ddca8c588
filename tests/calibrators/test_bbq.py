"""BBQ: netcal 1.4's numbers (committed peer predictions) and the paper's formulas by brute force."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from repo import REPO
import numpy as np
import pytest

from calibcli.calibrators import get
from calibcli.calibrators.bbq import bin_range

ROOT = REPO
PEER = ROOT / "tests" / "fixtures" / "peers" / "bbq_netcal.npz"


def test_netcal_variant_matches_netcal_bbq_predictions():
    """benchmarks/bench_bbq.py --write ran netcal.binning.BBQ() 1.4 on this seeded data."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_bbq import data

    peer = np.load(PEER)
    s, y, q = data(int(peer["rows"]), int(peer["seed"]))
    assert np.array_equal(q, peer["q"])
    got = get("bbq")(variant="netcal").fit(s, y).predict(q)
    np.testing.assert_allclose(got, peer["pred"], atol=1e-6, rtol=0)


def brute_force_paper(s, y, queries, ess=2.0):
    """The paper's estimator written out with loops: every equal-frequency binning with
    B in [N^(1/3)/10, 10 N^(1/3)] (inverted-CDF quantile edges, ties merged, a score on an
    edge in the bin below), BDeu score, posterior-weighted average of bin posterior means."""
    n = s.size
    root = next((float(r) for r in range(n + 1) if r ** 3 == n), n ** (1 / 3))
    order = np.sort(s)
    models, seen = [], set()
    for b in range(max(1, math.floor(root / 10)), math.ceil(10 * root) + 1):
        edges = sorted({float(np.quantile(order, k / b, method="inverted_cdf")) for k in range(1, b)})
        edges = [e for e in edges if order[0] <= e < order[-1]]
        if tuple(edges) in seen:
            continue
        seen.add(tuple(edges))
        bounds = [0.0, *edges, 1.0]
        k = len(bounds) - 1
        log_ml, values = 0.0, []
        for j in range(k):
            inside = [i for i in range(n) if (j == 0 or s[i] > bounds[j]) and (j == k - 1 or s[i] <= bounds[j + 1])]
            nb = len(inside)
            m = sum(y[i] for i in inside)
            mid = min(max((bounds[j] + bounds[j + 1]) / 2, 1e-12), 1 - 1e-12)
            a, bb = ess / k * mid, ess / k * (1 - mid)
            log_ml += (math.lgamma(ess / k) - math.lgamma(nb + ess / k) + math.lgamma(m + a) - math.lgamma(a)
                       + math.lgamma(nb - m + bb) - math.lgamma(bb))
            values.append((m + a) / (nb + ess / k))
        models.append((edges, values, log_ml))
    top = max(m[2] for m in models)
    weights = [math.exp(m[2] - top) for m in models]
    total = sum(weights)
    out = []
    for x in queries:
        acc = 0.0
        for (edges, values, _), wt in zip(models, weights):
            acc += wt / total * values[sum(1 for e in edges if e < x)]
        out.append(acc)
    return np.array(out)


@pytest.mark.parametrize("seed", range(4))
def test_paper_variant_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 120))
    s = rng.random(n)
    if seed % 2:
        s = np.round(s, 1)  # heavy ties: merged edges
    y = (rng.random(n) < s).astype(float)
    y[:2] = [0, 1]
    q = np.concatenate([np.linspace(-0.1, 1.1, 57), s])
    got = get("bbq")().fit(s, y).predict(q)
    np.testing.assert_allclose(got, brute_force_paper(s, y, q), atol=1e-12, rtol=0)


def test_bin_range_follows_the_papers_rule_and_netcals_cap():
    assert bin_range(1000, netcal=False) == range(1, 101)
    assert bin_range(20, netcal=True) == range(1, 5)
    assert bin_range(1e6, netcal=False) == range(10, 1001)
    assert bin_range(1e6, netcal=True) == range(9, 1001)  # netcal's rounded cube root
    assert bin_range(64, netcal=False) == range(1, 41)


def test_paper_variant_is_strictly_inside_the_unit_interval_at_the_ends():
    s = np.array([0.0, 0.0, 1.0, 1.0, 0.5])
    y = np.array([0.0, 0.0, 1.0, 1.0, 1.0])
    p = get("bbq")().fit(s, y).predict(np.array([0.0, 5e-324, 1.0]))
    assert np.all((p > 0) & (p < 1))


def test_weighted_fit_equals_duplicated_rows_exactly_in_netcal_variant():
    rng = np.random.default_rng(5)
    s = rng.random(300)
    y = (rng.random(300) < s).astype(float)
    w = rng.integers(1, 4, 300).astype(float)
    a = get("bbq")(variant="netcal").fit(s, y, sample_weight=w)
    b = get("bbq")(variant="netcal").fit(np.repeat(s, w.astype(int)), np.repeat(y, w.astype(int)))
    np.testing.assert_allclose(a.values_, b.values_, atol=1e-12)
    np.testing.assert_array_equal(a.edges_, b.edges_)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(["paper", "netcal"]))
def test_extreme_probabilities_give_probabilities(seed, variant):
    """Subnormal, 0 and 1 scores among ordinary ones: finite outputs in [0, 1], and strictly
    inside for the paper's variant (every bin has a proper Beta prior)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 300))
    pool = np.array([0.0, 5e-324, 1e-300, 1e-12, 0.5, 1 - 1e-12, 1.0])
    s = np.where(rng.random(n) < 0.4, rng.choice(pool, n), rng.random(n))
    y = (rng.random(n) < 0.5).astype(float)
    y[:2] = [0, 1]
    p = get("bbq")(variant=variant).fit(s, y).predict(np.concatenate([pool, s]))
    assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))
    if variant == "paper":
        assert np.all((p > 0) & (p < 1))
