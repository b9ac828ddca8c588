"""Benchmark: Bayes-Iso speed and memory at N = 3000, blocks against one block, 1e5 and 1e6 rows.

1. Speed: N distinct scores (default 3000), 10 000 samples. calibcli's `bayes-iso` fit against
   a plain vectorised reference written here (one independent pivot tree per map, the
   random-pivot recursion run level by level over 1000 maps at a time, float64, two logs per
   cell: the sampler timed in PERFORMANCE.md, 2.55 s there), on the same data and bounds in
   this process. Best of --repeats; peak traced memory (tracemalloc sees numpy's buffers) of
   one more run each. On a loaded machine read the speed-up, not the seconds.
   calibcli runs with target_ess=0 (exactly the samples asked for, the reference's work),
   then once more with the default target_ess (extra samples for blocks below it).
2. Blocked against one block (`blocked_vs_one`): where both run, at --blocked sizes.
3. Large N: the synthetic data of the paper's section 5.1 at --large sizes, test log-loss on
   a 200 000-row test set against isotonic regression with Platt correction, the ideal
   (true map) log-loss, the effective number of pivot trees (smallest over blocks; the
   default target_ess asks for 100) and the dominance flag.

    python benchmarks/bench_bayes_iso.py [--n 3000] [--samples 10000] [--repeats 3]
        [--blocked 3000 10000] [--blocked-replicates 3] [--large 1e5 1e6]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
import warnings

import numpy as np

from calibcli.evaluation.metrics.binary import log_loss

from _common import best, section51, true_map


def plain_reference(s, y, samples, seed, bin_size, margin, chunk=1000):
    """Posterior mean with independent trees per map (no shared pivots), unique scores."""
    from calibcli.calibrators.bayes_iso_bounds import sample_bounds
    from calibcli.calibrators.isotonic import pav

    xs, inv = np.unique(s, return_inverse=True)
    sw = np.bincount(inv, minlength=xs.size).astype(float)
    n1 = np.bincount(inv, weights=y, minlength=xs.size)
    n0 = sw - n1
    lower, upper = sample_bounds(sw, n1, pav(n1 / sw, sw), bin_size, margin)
    n = xs.size
    rng = np.random.default_rng(seed)
    top, total, acc = -np.inf, 0.0, np.zeros(n)
    for first in range(0, samples, chunk):
        m = min(chunk, samples - first)
        out = np.empty(m * n)
        sid = np.arange(m)
        lo, hi = np.zeros(m, dtype=np.int64), np.full(m, n, dtype=np.int64)
        vlo, vhi = np.zeros(m), np.ones(m)
        while sid.size:
            k = lo + (rng.random(sid.size) * (hi - lo)).astype(np.int64)
            a = np.maximum(lower[k], vlo)
            b = np.minimum(upper[k], vhi)
            v = a + rng.random(sid.size) * (b - a)
            out[sid * n + k] = v
            left, right = k > lo, hi > k + 1
            sid = np.concatenate([sid[left], sid[right]])
            lo, hi, vlo, vhi = (
                np.concatenate([lo[left], k[right] + 1]),
                np.concatenate([k[left], hi[right]]),
                np.concatenate([vlo[left], v[right]]),
                np.concatenate([v[left], vhi[right]]),
            )
        maps = np.clip(out.reshape(m, n), 1e-300, 1 - 2**-53)
        ll = np.log(maps) @ n1 + np.log1p(-maps) @ n0
        new_top = max(top, ll.max())
        total *= np.exp(top - new_top)
        acc *= np.exp(top - new_top)
        top = new_top
        w = np.exp(ll - top)
        total += w.sum()
        acc += w @ maps
    return xs, acc / total


def make_distinct(n, seed):
    rng = np.random.default_rng(seed)
    s = np.sort(rng.random(n))
    return s, (rng.random(n) < 0.1 + 0.8 * s**2).astype(np.float64)


def peak_bytes(fn) -> int:
    """Peak memory traced by tracemalloc (numpy's buffers included) during one call of fn()."""
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def timed(fn, repeats):
    """(best of `repeats` seconds, peak bytes of one more call, the last timed result)."""
    seconds, out = best(fn, repeats)
    return seconds, peak_bytes(fn), out


def speed(n, samples, repeats):
    from calibcli.calibrators import create

    s, y = make_distinct(n, 0)
    cal = create("bayes-iso", {"samples": samples, "target_ess": 0})  # exactly `samples` maps
    cal.fit(s[:50], y[:50])  # warm-up: imports scipy.optimize once, outside the timing
    t_ours, m_ours, _ = timed(lambda: cal.fit(s, y), repeats)
    adaptive = create("bayes-iso", {"samples": samples})
    t_adapt, _ = best(lambda: adaptive.fit(s, y), repeats)
    bin_size, margin = cal.bin_size_, 1 / np.sqrt(n)
    t_ref, m_ref, (xs, ref) = timed(lambda: plain_reference(s, y, samples, 0, bin_size, margin), repeats)
    diff = np.max(np.abs(cal.predict(xs) - ref))
    print(f"Speed: N = {n} distinct scores, {samples} samples, best of {repeats}")
    print(f"{'':<28}{'fit s':>8}{'peak MB':>10}{'ESS':>8}  (ESS: effective number of pivot trees)")
    print(f"{'calibcli bayes-iso':<28}{t_ours:>8.3f}{m_ours / 2**20:>10.1f}{cal.summary()['effective_sample_size']:>8.1f}")
    print(f"{'  default (target_ess=100)':<28}{t_adapt:>8.3f}{'':>10}{adaptive.summary()['effective_sample_size']:>8.1f}")
    print(f"{'plain vectorised reference':<28}{t_ref:>8.3f}{m_ref / 2**20:>10.1f}")
    print(
        f"speed-up {t_ref / t_ours:.1f}x; max |ours - reference| {diff:.3f} (two Monte-Carlo "
        f"estimates; ours samples {cal.summary()['blocks']} blocks, the reference one)"
    )


def large(sizes, samples):
    from calibcli.calibrators import create

    rng = np.random.default_rng(1)
    s_test, y_test = section51(200_000, rng)
    print()
    print(f"Large N: section 5.1 data, test log-loss on 200 000 rows (ideal {log_loss(y_test, true_map(s_test)):.5f})")
    print(
        f"{'rows':>9}{'bayes-iso LL':>14}{'iso-Platt LL':>14}{'diff':>10}{'ESS min':>9}{'dominated':>11}"
        f"{'blocks':>8}{'knots':>7}{'fit s':>8}{'iso s':>7}{'peak MB':>9}"
    )
    for n in sizes:
        s, y = section51(int(n), rng)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cal = create("bayes-iso", {"samples": samples}).fit(s, y)
        t_fit = time.perf_counter() - start
        peak = peak_bytes(lambda: create("bayes-iso", {"samples": samples}).fit(s, y))
        t_iso, iso = best(lambda: create("isotonic", {"platt_correction": True}).fit(s, y))
        ours, ref = log_loss(y_test, cal.predict(s_test)), log_loss(y_test, iso.predict(s_test))
        info = cal.summary()
        flag = f"{info['dominated_blocks']}/{info['blocks']}" + (" (warned)" if caught else "")
        print(
            f"{int(n):>9}{ours:>14.5f}{ref:>14.5f}{ours - ref:>+10.5f}{info['effective_sample_size']:>9.1f}"
            f"{flag:>11}{info['blocks']:>8}{info['knots']:>7}{t_fit:>8.2f}{t_iso:>7.2f}{peak / 2**20:>9.1f}"
        )


def blocked_vs_one(sizes, replicates, grid=300):
    """The blocked estimator against one block where both run: section 5.1 data pooled into
    `grid` cells, one block of all rows against the default blocks (with and without overlap).

    Per fit: the largest and mean |difference| of the two maps over the cells, the largest
    difference in units of its Monte Carlo sd bound (hi - lo) / 2 * sqrt(1/ESS1 + 1/ESS2),
    and the test log-loss and Brier differences (blocked - one block) on 200 000 rows.
    """
    from calibcli.calibrators import create
    from calibcli.calibrators.bayes_iso_bounds import pool_cells, sample_bounds
    from calibcli.calibrators.isotonic import pav
    from calibcli.evaluation.metrics.binary import brier

    rng = np.random.default_rng(2)
    s_test, y_test = section51(200_000, rng)
    print()
    print(f"Blocked against one block: section 5.1 data pooled into {grid} cells, {replicates} replicates")
    print(f"{'rows':>6}{'variant':>16}{'blocks':>7}{'ESS 1 blk':>10}{'ESS blkd':>9}{'max|d|':>8}{'mean|d|':>9}"
          f"{'max d/sd':>9}{'dLL':>10}{'dBS':>10}")
    params = {"samples": 20_000, "grid": grid, "target_ess": 400}
    for n in sizes:
        rows = {}
        for rep in range(replicates):
            s, y = section51(int(n), rng)
            one = create("bayes-iso", dict(params, block_size=n, seed=rep)).fit(s, y)
            order = np.argsort(s)
            xs, sw, swy = pool_cells(s[order], np.ones(s.size), y[order], grid)
            lo, hi = sample_bounds(sw, swy, pav(swy / sw, sw), one.bin_size_, 1 / np.sqrt(n))
            for name, extra in (("overlap auto", {}), ("no overlap", {"overlap": 0})):
                cal = create("bayes-iso", dict(params, seed=rep, **extra)).fit(s, y)
                d = np.abs(cal.predict(xs) - one.predict(xs))
                sd = (hi - lo) / 2 * np.sqrt(1 / one.ess_ + 1 / cal.ess_)
                p1, p2 = one.predict(s_test), cal.predict(s_test)
                rows.setdefault(name, []).append((
                    cal.blocks_, one.ess_, cal.ess_, d.max(), d.mean(), (d / sd).max(),
                    log_loss(y_test, p2) - log_loss(y_test, p1), brier(y_test, p2) - brier(y_test, p1),
                ))
        for name, vals in rows.items():
            v = np.array(vals)
            print(f"{int(n):>6}{name:>16}{v[:, 0].mean():>7.0f}{v[:, 1].min():>10.0f}{v[:, 2].min():>9.0f}"
                  f"{v[:, 3].max():>8.4f}{v[:, 4].mean():>9.5f}{v[:, 5].max():>9.2f}"
                  f"{v[:, 6].mean():>+10.6f}{v[:, 7].mean():>+10.6f}")
    print("ESS columns: smallest over replicates; max over replicates of max|d| and max d/sd; means of the rest")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--samples", type=int, default=10000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--large", type=float, nargs="*", default=[1e5, 1e6])
    ap.add_argument("--blocked", type=float, nargs="*", default=[3000, 10000], help="sizes for blocked vs one block")
    ap.add_argument("--blocked-replicates", type=int, default=3)
    args = ap.parse_args()
    speed(args.n, args.samples, args.repeats)
    if args.blocked:
        blocked_vs_one(args.blocked, args.blocked_replicates)
    if args.large:
        large(args.large, args.samples)


if __name__ == "__main__":
    main()
