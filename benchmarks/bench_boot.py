"""Benchmark boot-isotonic / boot-binning (r = 20) against plain isotonic and a naive
bootstrap-averaged scikit-learn IsotonicRegression (r fits on resamples, mean prediction,
as tidymodels/probably and Trinli/calibration do).

Prints fit time, the ratio to the naive reference, and the Brier score on a fresh test set
from the same distribution (true P(y=1|s) = sigmoid(4(s - 0.5) + 0.3), scores ~ Beta(2, 2)).

    /work/venv/bin/python benchmarks/bench_boot.py [n ...]
"""

from __future__ import annotations

import sys

import numpy as np
from sklearn.isotonic import IsotonicRegression

from calibcli.calibrators import create
from calibcli.evaluation.metrics.binary import brier

from _common import best

R = 20


def data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 2, n)
    p = 1 / (1 + np.exp(-(4 * (s - 0.5) + 0.3)))
    return s, (rng.random(n) < p).astype(np.float64)


class NaiveBootIsotonic:
    """r scikit-learn isotonic fits on bootstrap resamples; prediction is their mean."""

    def __init__(self, r: int, seed: int = 0):
        self.r, self.seed = r, seed

    def fit(self, s, y):
        rng = np.random.default_rng(self.seed)
        self.models = []
        for _ in range(self.r):
            idx = rng.integers(0, s.size, s.size)
            self.models.append(
                IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(s[idx], y[idx])
            )
        return self

    def predict(self, s):
        return np.mean([m.predict(s) for m in self.models], axis=0)


def main(sizes):
    create("boot-isotonic", {"r": 2}).fit(*data(200, 9))  # import scipy once, outside the timings
    print(f"r = {R}; fit time = best of 3 runs; Brier on a fresh test set of the same size")
    print(f"{'n':>8} {'method':<28} {'fit s':>8} {'vs naive':>9} {'Brier':>8}")
    for n in sizes:
        s, y = data(n, 0)
        st, yt = data(n, 1)
        rows = [
            ("naive sklearn boot-isotonic", lambda: NaiveBootIsotonic(R)),
            ("calib isotonic", lambda: create("isotonic")),
            ("calib boot-isotonic", lambda: create("boot-isotonic", {"r": R})),
            ("calib boot-binning", lambda: create("boot-binning", {"r": R})),
            ("calib binning", lambda: create("binning")),
        ]
        results = [(name, *best(lambda: make().fit(s, y), 3)) for name, make in rows]
        ref = results[0][1]
        for name, t, model in results:
            print(f"{n:>8} {name:<28} {t:>8.3f} {t / ref:>8.2f}x {brier(yt, model.predict(st)):>8.5f}")


if __name__ == "__main__":
    main([int(float(a)) for a in sys.argv[1:]] or [10_000, 100_000])
