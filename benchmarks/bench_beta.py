"""Benchmark: calibcli `beta` against betacal's BetaCalibration('abm'), fit + predict.

Both fit on the same n rows and predict a fresh n rows, in this process, minimum over
--repeats runs. Two score sets: continuous Naive-Bayes-like scores (every score distinct)
and the same scores rounded to 4 decimals, as a CSV score file often holds them (calibcli
pools tied scores, betacal does not). The last column checks that both reach the same fit.

    python benchmarks/bench_beta.py [--sizes 1e5 1e6] [--repeats 3]
"""

from __future__ import annotations

import warnings

import numpy as np

from calibcli.evaluation.metrics import log_loss

from _common import best, sizes_parser


def make_data(n: int, seed: int, decimals: int | None):
    """Overconfident scores: the log-odds of a calibrated x tripled; labels ~ Bernoulli(x)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.005, 0.995, n)
    s = 1 / (1 + ((1 - x) / x) ** 3)
    if decimals is not None:
        s = np.clip(np.round(s, decimals), 10.0**-decimals, 1 - 10.0**-decimals)
    return s, (rng.random(n) < x).astype(np.float64)


def fit_calibcli(s, y):
    from calibcli.calibrators import get

    return get("beta")().fit(s, y)


def fit_betacal(s, y):
    from betacal import BetaCalibration

    return BetaCalibration("abm").fit(s, y)


def fit_and_predict(fit, s, y, s_new, repeats: int) -> tuple[float, float, np.ndarray]:
    """(best fit seconds, best predict seconds, predictions) over `repeats` runs of each."""
    t_fit, cal = best(lambda: fit(s, y), repeats)
    t_pred, p = best(lambda: cal.predict(s_new), repeats)
    return t_fit, t_pred, p


def main() -> None:
    args = sizes_parser(__doc__, [1e5, 1e6], "--repeats").parse_args()
    warnings.simplefilter("ignore")
    fit_calibcli(*make_data(1000, 0, None)).predict(np.array([0.5]))  # imports and scipy warm-up
    fit_betacal(*make_data(1000, 0, None)).predict(np.array([0.5]))

    header = f"{'data':<11}{'n':>9}  {'calibcli fit':>12} {'betacal fit':>11} {'ratio':>6}  " \
             f"{'calibcli pred':>13} {'betacal pred':>12} {'ratio':>6}  {'total ratio':>11}  {'dLL test':>9}"
    print(header)
    print("-" * len(header))
    for size in args.sizes:
        n = int(size)
        for label, decimals in (("continuous", None), ("4 decimals", 4)):
            s, y = make_data(n, 1, decimals)
            s_new, y_new = make_data(n, 2, decimals)
            cf, cp, p = fit_and_predict(fit_calibcli, s, y, s_new, args.repeats)
            bf, bp, q = fit_and_predict(fit_betacal, s, y, s_new, args.repeats)
            print(
                f"{label:<11}{n:>9}  {cf:>11.3f}s {bf:>10.3f}s {bf / cf:>5.2f}x  "
                f"{cp:>12.3f}s {bp:>11.3f}s {bp / cp:>5.2f}x  {(bf + bp) / (cf + cp):>10.2f}x  "
                f"{log_loss(y_new, p) - log_loss(y_new, q):>+9.1e}"
            )
    print("ratio = betacal time / calibcli time (> 1: calibcli faster); "
          "dLL test = calibcli minus betacal log-loss on the fresh rows")


if __name__ == "__main__":
    main()
