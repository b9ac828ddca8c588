"""Every method's default map against its classical fit (platt_correction=false) at small N.

Issue 14: with 100 calibration rows from the Bayes-Iso paper's Table 1 generator (section
5.1), the classical isotonic, binning and ENIR maps put 0 or 1 on score ranges where the
calibration set had one class, and the test log-loss explodes. This prints, per method,
the mean test Brier score and log-loss (with standard errors over replicates) of the
default map and, where the default is Platt-corrected, of the classical fit, plus the
share of test rows that got exactly 0 or 1. Log-loss clips p to [1e-15, 1 - 1e-15] as
`calib evaluate` does, so a certain mistake costs 34.5.

    python benchmarks/defaults_extremes.py [--replicates 20] [--rows 100] [--seed 0]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from _common import brier_logloss, section51, true_map

SAMPLING = {"bayes-iso": {"samples": 2000}, "field-aware": {"epochs": 3}}  # no effect on the ends


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--rows", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from calibcli.calibrators import available, get

    rng = np.random.default_rng(args.seed)
    st, yt = section51(20_000, rng)
    sets = [section51(args.rows, rng) for _ in range(args.replicates)]
    ideal = brier_logloss(yt, true_map(st))
    print(f"{args.replicates} replicates of {args.rows} rows; test set 20000 rows; "
          f"ideal Brier {ideal[0]:.4f}, log-loss {ideal[1]:.4f}")
    print(f"{'method':15s} {'fit':9s} {'Brier':>15s} {'log-loss':>17s} {'0/1 rows':>9s}")
    for name in available():
        cls = get(name)
        variants = [("default", {})]
        if cls().params.get("platt_correction"):
            variants.append(("classical", {"platt_correction": False}))
        for label, extra in variants:
            bs, ll, ends = [], [], []
            for s, y in sets:
                p = cls(**SAMPLING.get(name, {}), **extra).fit(s, y).predict(st)
                b, l = brier_logloss(yt, p)
                bs.append(b)
                ll.append(l)
                ends.append(np.mean((p == 0) | (p == 1)))
            se = lambda v: np.std(v, ddof=1) / np.sqrt(len(v))  # noqa: E731
            print(f"{name:15s} {label:9s} {np.mean(bs):.4f} ± {se(bs):.4f} {np.mean(ll):8.4f} ± {se(ll):.4f}"
                  f" {100 * np.mean(ends):8.2f}%")


if __name__ == "__main__":
    main()
