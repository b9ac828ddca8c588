"""Benchmark: calibcli `beta` against betacal's BetaCalibration('abm'), fit + predict.

Both fit on the same n rows and predict a fresh n rows, in this process, minimum over
--repeats runs. Two score sets: continuous Naive-Bayes-like scores (every score distinct)
and the same scores rounded to 4 decimals, as a CSV score file often holds them (calibcli
pools tied scores, betacal does not). The last column checks that both reach the same fit.

    python benchmarks/bench_beta.py [--sizes 1e5 1e6] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def make_data(n: int, seed: int, decimals: int | None):
    """Overconfident scores: the log-odds of a calibrated x tripled; labels ~ Bernoulli(x)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.005, 0.995, n)
    s = 1 / (1 + ((1 - x) / x) ** 3)
    if decimals is not None:
        s = np.clip(np.round(s, decimals), 10.0**-decimals, 1 - 10.0**-decimals)
    return s, (rng.random(n) < x).astype(np.float64)


def best_time(fn, repeats: int) -> tuple[float, float, np.ndarray]:
    """(best fit seconds, best predict seconds, predictions) of fn() -> (fit_s, predict_s, p)."""
    fits, preds, p = [], [], None
    for _ in range(repeats):
        f, q, p = fn()
        fits.append(f)
        preds.append(q)
    return min(fits), min(preds), p


def run_calibcli(s, y, s_new):
    from calibcli.calibrators import get

    t0 = time.perf_counter()
    cal = get("beta")().fit(s, y)
    t1 = time.perf_counter()
    p = cal.predict(s_new)
    return t1 - t0, time.perf_counter() - t1, p


def run_betacal(s, y, s_new):
    from betacal import BetaCalibration

    t0 = time.perf_counter()
    cal = BetaCalibration("abm").fit(s, y)
    t1 = time.perf_counter()
    p = cal.predict(s_new)
    return t1 - t0, time.perf_counter() - t1, p


def log_loss(y, p):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e5, 1e6])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    run_calibcli(*make_data(1000, 0, None), np.array([0.5]))  # imports and scipy warm-up
    run_betacal(*make_data(1000, 0, None), np.array([0.5]))

    header = f"{'data':<11}{'n':>9}  {'calibcli fit':>12} {'betacal fit':>11} {'ratio':>6}  " \
             f"{'calibcli pred':>13} {'betacal pred':>12} {'ratio':>6}  {'total ratio':>11}  {'dLL test':>9}"
    print(header)
    print("-" * len(header))
    for size in args.sizes:
        n = int(size)
        for label, decimals in (("continuous", None), ("4 decimals", 4)):
            s, y = make_data(n, 1, decimals)
            s_new, y_new = make_data(n, 2, decimals)
            cf, cp, p = best_time(lambda: run_calibcli(s, y, s_new), args.repeats)
            bf, bp, q = best_time(lambda: run_betacal(s, y, s_new), args.repeats)
            print(
                f"{label:<11}{n:>9}  {cf:>11.3f}s {bf:>10.3f}s {bf / cf:>5.2f}x  "
                f"{cp:>12.3f}s {bp:>11.3f}s {bp / cp:>5.2f}x  {(bf + bp) / (cf + cp):>10.2f}x  "
                f"{log_loss(y_new, p) - log_loss(y_new, q):>+9.1e}"
            )
    print("ratio = betacal time / calibcli time (> 1: calibcli faster); "
          "dLL test = calibcli minus betacal log-loss on the fresh rows")


if __name__ == "__main__":
    main()
