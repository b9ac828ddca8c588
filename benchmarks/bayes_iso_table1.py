"""Reproduce Table 1 of Allikivi & Kull (2019), section 5.1: Bayes-Iso on synthetic data.

Balanced classes; negatives' scores ~ Beta(1, 3), positives' a 50/50 mixture of Beta(1.5, 3)
and Beta(30, 3). Calibration sets of 100 and 3000 rows, --replicates replicates (paper: 10),
one 100 000-row test set. Reference methods use Platt correction, except beta calibration
for the Brier score (as in the paper). The test sets differ from the paper's, so the table
compares the excess over the ideal (true map) loss on each side: ours as mean +/- standard
error over the replicates, the paper's with the standard error its 10 replicates would
have at our replicate spread. Bayes-Iso's gain over Iso-Platt on the same replicates
(paired) is given beside the paper's, and each method's excess minus the paper's: an
offset shared by every method, parametric ones included, comes from the data sets, not
from a method.

--ablations runs Bayes-Iso variants on the same 100-row replicates and prints each one's
paired difference from the default: the paper's bounds (N/10, 1/sqrt(B)), the released
code's bins (the w instances after, not from, each rank), no bounds, 10x samples, and
independent pivot trees (one map per tree).

    python benchmarks/bayes_iso_table1.py [--replicates 30] [--seed 0] [--samples 10000] [--ablations]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from _common import TABLE1, brier_logloss, section51, true_map

def fitters(samples: int, seed: int, diagnostics: list):
    """name -> (fit for BS, fit for LL); each fit(s, y) returns a predict function.

    Bayes-Iso's fit summaries (effective sample size, dominance) are appended to `diagnostics`.
    """
    from calibcli.calibrators import available, create

    def ours(name, **params):
        return lambda s, y: create(name, params).fit(s, y).predict

    def betacal(platt):
        from betacal import BetaCalibration

        def fit(s, y):
            t = y
            if platt:
                n1, n0 = y.sum(), (1 - y).sum()
                t = np.where(y == 1, (n1 + 1) / (n1 + 2), 1 / (n0 + 2))
            # betacal wants 0/1 labels; fractional Platt targets go in as sample weights
            if platt:
                ss = np.concatenate([s, s])
                yy = np.concatenate([np.ones_like(s), np.zeros_like(s)])
                ww = np.concatenate([t, 1 - t])
                cal = BetaCalibration("abm").fit(ss[:, None], yy, sample_weight=ww)
            else:
                cal = BetaCalibration("abm").fit(s[:, None], y)
            return lambda x: cal.predict(x[:, None])

        return fit

    def bayes(s, y):
        cal = create("bayes-iso", {"samples": samples, "seed": seed}).fit(s, y)
        diagnostics.append((s.size, cal.summary()))
        return cal.predict

    out = {"bayes-iso": (bayes, bayes)}
    if "enir" in available():
        out["enir-platt"] = (ours("enir", platt_correction=True),) * 2
    out["iso-platt"] = (ours("isotonic", platt_correction=True),) * 2
    if "beta" in available():
        out["beta(-platt)"] = (ours("beta"), ours("beta", platt_correction=True))
    else:
        out["beta(-platt)"] = (betacal(False), betacal(True))
    out["log-platt"] = (ours("logistic", platt_correction=True),) * 2
    return out


def excess_table(results, ideal, replicates):
    """Lines: per method and column, our mean excess +/- SE, the paper's excess +/- its SE."""
    cols = [(100, 0), (100, 1), (3000, 0), (3000, 1)]
    pideal = TABLE1["ideal"]
    lines = [f"{'method':<13}" + "".join(f"{c:>31}" for c in ("BS100", "LL100", "BS3000", "LL3000")),
             f"{'':<13}" + "".join(f"{'ours+-se     paper+-se':>31}" for _ in cols)]
    for name in results:
        cells = ""
        for j, (n, k) in enumerate(cols):
            ex = np.array(results[name][n])[:, k] - ideal[k]
            sd = ex.std(ddof=1)
            paper = TABLE1[name][j] - pideal[j]
            cells += f"  {ex.mean():.4f}+-{sd / np.sqrt(replicates):.4f} {paper:.4f}+-{sd / np.sqrt(10):.4f}"
        lines.append(f"{name:<13}{cells}")
    lines.append("")
    for n in (100, 3000):
        ours = np.array(results["bayes-iso"][n]) - ideal
        iso = np.array(results["iso-platt"][n]) - ideal
        for k, loss in enumerate(("BS", "LL")):
            j = (0 if n == 100 else 2) + k
            ratio = (TABLE1["bayes-iso"][j] - pideal[j]) / (TABLE1["iso-platt"][j] - pideal[j])
            d = ours[:, k] - iso[:, k]
            lines.append(
                f"bayes-iso - iso-platt {loss}{n}: {d.mean():+.4f} +/- {d.std(ddof=1) / np.sqrt(replicates):.4f} "
                f"(paper {TABLE1['bayes-iso'][j] - TABLE1['iso-platt'][j]:+.4f}); excess ratio "
                f"{ours[:, k].mean() / iso[:, k].mean():.2f} (paper {ratio:.2f})"
            )
    lines.append("")
    for j, (n, k) in enumerate(cols):
        offset = [np.mean(np.array(results[m][n])[:, k]) - ideal[k] - (TABLE1[m][j] - pideal[j]) for m in results]
        lines.append(
            f"our excess - the paper's, {('BS', 'LL')[k]}{n}: "
            + ", ".join(f"{m} {o:+.4f}" for m, o in zip(results, offset))
        )
    return lines


def code_bins(sample_bounds):
    """Bounds with the released code's bins: the w labels after rank i (upper), before it (lower)."""

    def bounds(sw, n1, iso, bin_size, margin):
        rate = n1 / sw  # one row per rank here (distinct scores, unit weights)
        lower, _ = sample_bounds(sw, np.append(0.0, rate[:-1]), iso, bin_size, margin)  # first: 0
        _, upper = sample_bounds(sw, np.append(rate[1:], 1.0), iso, bin_size, margin)  # last: 1
        return lower, upper

    return bounds


def ablations(replicates, samples, rng, s_test, y_test, ideal):
    """Paired differences of Bayes-Iso variants from the default on 100-row replicates."""
    from calibcli.calibrators import bayes_iso, bayes_iso_sampler, create

    def fit(params, share=None, bounds=None):
        def run(s, y, seed):
            saved = bayes_iso_sampler.SHARE, bayes_iso.sample_bounds
            bayes_iso_sampler.SHARE = share or saved[0]
            bayes_iso.sample_bounds = bounds or saved[1]
            try:
                return create("bayes-iso", dict(params, seed=seed)).fit(s, y).predict
            finally:
                bayes_iso_sampler.SHARE, bayes_iso.sample_bounds = saved

        return run

    variants = {
        "default": fit({"samples": samples}),
        "paper's bounds N/10, 1/sqrt(B)": fit({"samples": samples, "bin_size": 10, "margin": 10**-0.5}),
        "released code's bins": fit({"samples": samples, "bin_size": 5}, bounds=code_bins(bayes_iso.sample_bounds)),
        "no bounds, 10x samples": fit({"samples": 10 * samples, "margin": 1.0}),
        "10x samples": fit({"samples": 10 * samples}),
        "independent trees (SHARE=1)": fit({"samples": samples}, share=1),
        "fixed samples (target_ess=0)": fit({"samples": samples, "target_ess": 0}),
    }
    out = {name: [] for name in variants}
    for r in range(replicates):
        s, y = section51(100, rng)
        for name, run in variants.items():
            out[name].append(np.array(brier_logloss(y_test, run(s, y, r)(s_test))) - ideal)
    base = np.array(out["default"])
    lines = [f"Ablations at 100 rows, {replicates} replicates: excess over ideal and paired difference from default"]
    for name, values in out.items():
        v = np.array(values)
        d = v - base
        se = lambda x: x.std(ddof=1) / np.sqrt(replicates)  # noqa: E731
        lines.append(
            f"{name:<32} BS {v[:, 0].mean():.4f} ({d[:, 0].mean():+.5f} +/- {se(d[:, 0]):.5f})  "
            f"LL {v[:, 1].mean():.4f} ({d[:, 1].mean():+.5f} +/- {se(d[:, 1]):.5f})"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--samples", type=int, default=10000)
    ap.add_argument("--ablations", action="store_true", help="also run the Bayes-Iso variants at 100 rows")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(args.seed)
    s_test, y_test = section51(100_000, rng)
    ideal = brier_logloss(y_test, true_map(s_test))
    diagnostics: list = []
    methods = fitters(args.samples, args.seed, diagnostics)
    results = {name: {100: [], 3000: []} for name in methods}
    seconds = {name: 0.0 for name in methods}
    for n in (100, 3000):
        for _ in range(args.replicates):
            s, y = section51(n, rng)
            for name, (fit_bs, fit_ll) in methods.items():
                start = time.perf_counter()
                predict = fit_bs(s, y)
                bs = brier_logloss(y_test, predict(s_test))[0]
                predict = predict if fit_ll is fit_bs else fit_ll(s, y)
                ll = brier_logloss(y_test, predict(s_test))[1]
                seconds[name] += time.perf_counter() - start
                results[name][n].append((bs, ll))
    print(f"Table 1 (Allikivi & Kull 2019), {args.replicates} replicates, 100 000 test rows, seed {args.seed}")
    print(f"ideal on our test set: BS {ideal[0]:.4f}  LL {ideal[1]:.4f}  (paper's test set: BS .1621  LL .4741)")
    print("excess over the ideal loss (mean over replicates; se = standard error of the mean)")
    print()
    print("\n".join(excess_table(results, ideal, args.replicates)))
    print()
    print("fit + predict seconds per replicate: " + ", ".join(f"{k} {v / (2 * args.replicates):.3f}" for k, v in seconds.items()))
    for n in (100, 3000):
        fits = [d for size, d in diagnostics if size == n]
        e = np.array([d["effective_sample_size"] for d in fits])
        dom = sum(d["dominated"] for d in fits)
        print(
            f"bayes-iso n={n}: effective number of pivot trees median {np.median(e):.1f} (min {e.min():.1f}), "
            f"one tree dominates in {dom}/{len(fits)} fits"
        )
    if args.ablations:
        print()
        print("\n".join(ablations(args.replicates, args.samples, rng, s_test, y_test, np.array(ideal))))


if __name__ == "__main__":
    main()
