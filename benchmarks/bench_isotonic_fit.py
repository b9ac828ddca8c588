"""Benchmark the isotonic fit: calibcli vs scikit-learn's IsotonicRegression, same data, same run.

Data: n uniform scores (all distinct, the hardest case for tie pooling), labels drawn with
P(y=1) = score. Rows: calibcli's fit (exact), calibcli via a bucketed summary (step 1e-6,
error bound in calibcli/summary.py), and scikit-learn; predict on a fresh n. "speed-up" is
scikit-learn's time over the row's time. Minimum of --repeat runs.

    python benchmarks/bench_isotonic_fit.py                # 1e6 and 1e7 rows
    python benchmarks/bench_isotonic_fit.py --sizes 1e5 1e6 --repeat 5
"""

from __future__ import annotations


import numpy as np

from _common import best, sizes_parser


def main() -> None:
    args = sizes_parser(__doc__, [1e6, 1e7]).parse_args()

    from sklearn.isotonic import IsotonicRegression

    from calibcli import summary
    from calibcli.calibrators import create

    print(f"{'rows':>11} {'tool':<26} {'fit s':>7} {'Mrows/s':>8} {'speed-up':>8} {'predict s':>9} {'max |diff|':>10}")
    for n in (int(x) for x in args.sizes):
        rng = np.random.default_rng(0)
        s = rng.random(n)
        y = (rng.random(n) < s).astype(np.float64)
        q = rng.random(n)
        t_sk, sk = best(lambda: IsotonicRegression(out_of_bounds="clip").fit(s, y), args.repeat)
        t_cc, cc = best(lambda: create("isotonic").fit(s, y), args.repeat)

        def bucketed():
            return create("isotonic").fit(*summary.fit_rows(summary.summarize(s, y, step=1e-6)))

        t_bk, bk = best(bucketed, args.repeat)
        p_sk_t, p_sk = best(lambda: sk.predict(q), args.repeat)
        rows = [("scikit-learn", t_sk, sk, p_sk_t, p_sk)]
        for name, t, model in (("calibcli (exact)", t_cc, cc), ("calibcli (summary step 1e-6)", t_bk, bk)):
            pt, p = best(lambda: model.predict(q), args.repeat)
            rows.append((name, t, model, pt, p))
        for name, t, _, pt, p in rows:
            diff = float(np.max(np.abs(p - p_sk)))
            print(f"{n:>11,} {name:<26} {t:>7.3f} {n / t / 1e6:>8.2f} {t_sk / t:>8.2f} {pt:>9.3f} {diff:>10.2e}")


if __name__ == "__main__":
    main()
