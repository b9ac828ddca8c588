"""Benchmark Platt scaling: calibcli's logistic fit vs scikit-learn's LogisticRegression, same data.

scikit-learn runs unpenalised (`C=np.inf`, lbfgs), which is the same maximum-likelihood
problem. Also calibcli fitting from a summary of the scores rounded to 1e-6 (one
aggregation pass, then a fit on ~1e6 weighted rows), and, when betacal is installed and
calibcli has the `beta` method, beta calibration against betacal. Minimum of --repeat runs.

    python benchmarks/bench_logistic_fit.py              # 1e6 and 1e7 rows
"""

from __future__ import annotations

import warnings

import numpy as np

from _common import best, sizes_parser


def main() -> None:
    args = sizes_parser(__doc__, [1e6, 1e7]).parse_args()

    from sklearn.linear_model import LogisticRegression

    from calibcli import summary
    from calibcli.calibrators import available, create

    print(f"{'rows':>11} {'tool':<30} {'fit s':>7} {'Mrows/s':>8} {'speed-up':>8} {'max |diff| of p':>15}")
    for n in (int(x) for x in args.sizes):
        rng = np.random.default_rng(0)
        s = rng.random(n)
        y = (rng.random(n) < 1 / (1 + np.exp(-(4 * s - 2)))).astype(np.float64)
        grid = np.linspace(0, 1, 1001)
        t_sk, sk = best(lambda: LogisticRegression(C=np.inf).fit(s[:, None], y), args.repeat)
        p_ref = sk.predict_proba(grid[:, None])[:, 1]
        t_cc, cc = best(lambda: create("logistic").fit(s, y), args.repeat)
        t_bk, bk = best(lambda: create("logistic").fit(*summary.fit_rows(summary.summarize(s, y, step=1e-6))),
                        args.repeat)
        for name, t, p in (("scikit-learn LogisticRegression", t_sk, p_ref),
                           ("calibcli logistic", t_cc, cc.predict(grid)),
                           ("calibcli logistic (step 1e-6)", t_bk, bk.predict(grid))):
            print(f"{n:>11,} {name:<30} {t:>7.3f} {n / t / 1e6:>8.2f} {t_sk / t:>8.2f} "
                  f"{float(np.max(np.abs(p - p_ref))):>15.2e}")
        try:
            from betacal import BetaCalibration
        except ImportError:
            continue
        if "beta" not in available():
            continue
        sc = np.clip(s, 1e-6, 1 - 1e-6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_bc, bc = best(lambda: BetaCalibration("abm").fit(sc, y), args.repeat)
        t_cb, cb = best(lambda: create("beta").fit(sc, y), args.repeat)
        g = np.clip(grid, 1e-6, 1 - 1e-6)
        p_bc = bc.predict(g)
        for name, t, p in (("betacal BetaCalibration(abm)", t_bc, p_bc), ("calibcli beta", t_cb, cb.predict(g))):
            print(f"{n:>11,} {name:<30} {t:>7.3f} {n / t / 1e6:>8.2f} {t_bc / t:>8.2f} "
                  f"{float(np.max(np.abs(p - p_bc))):>15.2e}")


if __name__ == "__main__":
    main()
