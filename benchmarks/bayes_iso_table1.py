"""Reproduce Table 1 of Allikivi & Kull (2019), section 5.1: Bayes-Iso on synthetic data.

Balanced classes; negatives' scores ~ Beta(1, 3), positives' a 50/50 mixture of Beta(1.5, 3)
and Beta(30, 3). Calibration sets of 100 and 3000 rows, --replicates replicates (paper: 10),
one 100 000-row test set. Reference methods use Platt correction, except beta calibration
for the Brier score (as in the paper). Prints our mean Brier score (BS) and log-loss (LL)
beside the paper's, and the gap to the ideal (true calibration map) on our test set, since
the test sets differ: compare gaps, not raw numbers.

    python benchmarks/bayes_iso_table1.py [--replicates 10] [--seed 0] [--samples 10000]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--samples", type=int, default=10000)
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
    print()
    head = f"{'method':<13}" + "".join(f"{c:>19}" for c in ("BS100", "LL100", "BS3000", "LL3000")) + f"{'fit s':>8}"
    print(head)
    print(f"{'':<13}" + "".join(f"{'ours  paper  gap/p':>19}" for _ in range(4)))
    ideal4 = (ideal[0], ideal[1], ideal[0], ideal[1])
    pideal = TABLE1["ideal"]
    print(f"{'ideal':<13}" + "".join(f"{o:>7.4f}{p:>7.4f}{'':>5}" for o, p in zip(ideal4, pideal)))
    for name in methods:
        m100 = np.mean(results[name][100], axis=0)
        m3000 = np.mean(results[name][3000], axis=0)
        ours4 = (m100[0], m100[1], m3000[0], m3000[1])
        cells = ""
        for o, p, io, ip in zip(ours4, TABLE1[name], ideal4, pideal):
            # our gap to ideal / the paper's gap to ideal
            ratio = (o - io) / (p - ip) if p != ip else float("nan")
            cells += f"{o:>7.4f}{p:>7.4f}{ratio:>5.1f}"
        print(f"{name:<13}{cells}{seconds[name] / (2 * args.replicates):>8.3f}")
    print()
    for n in (100, 3000):
        fits = [d for size, d in diagnostics if size == n]
        e = np.array([d["effective_sample_size"] for d in fits])
        dom = sum(d["dominated"] for d in fits)
        print(
            f"bayes-iso n={n}: effective sample size median {np.median(e):.1f} (min {e.min():.1f}), "
            f"one map dominates in {dom}/{len(fits)} fits"
        )
    print("gap/p: (ours - ideal on our test set) / (paper - paper's ideal); 1.0 = the paper's excess loss")


if __name__ == "__main__":
    main()
