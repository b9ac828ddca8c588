"""Spline calibration against ml-insights' SplineCalib: fit time and held-out log-loss.

Same seeded data for both; calibcli alone also at 1e6 rows (SplineCalib takes minutes
there). Results: benchmarks/results_bench_spline.txt.

    python benchmarks/bench_spline.py
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n) * 1.5
    truth = 1 / (1 + np.exp(-(0.3 + 1.8 * z - 0.25 * z**2 + 0.15 * np.sin(2 * z))))
    return 1 / (1 + np.exp(-z)), (rng.random(n) < truth).astype(float)


def logloss(y, p):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def main() -> None:
    from calibcli.calibrators import get

    st, yt = data(200_000, 99)
    for n, peer in ((100_000, True), (1_000_000, False)):
        s, y = data(n, 1)
        t = time.perf_counter()
        cal = get("spline")().fit(s, y)
        ours = time.perf_counter() - t
        print(f"{n} rows: calibcli spline fit {ours:.2f} s, held-out log-loss {logloss(yt, cal.predict(st)):.6f}")
        if peer:
            from splinecalib import SplineCalib

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t = time.perf_counter()
                sc = SplineCalib()
                sc.fit(s, y)
                theirs = time.perf_counter() - t
            print(f"{n} rows: SplineCalib fit {theirs:.2f} s, held-out log-loss {logloss(yt, sc.calibrate(st)):.6f}")


if __name__ == "__main__":
    main()
