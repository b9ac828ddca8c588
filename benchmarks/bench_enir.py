"""ENIR: fit time at 1e4, 1e5, 1e6 rows, and the Bayes-Iso synthetic study (Table 1).

Run: /work/venv/bin/python benchmarks/bench_enir.py [--quick]

1. Timing. Data from the Bayes-Iso synthetic generator (continuous scores, so every score is
   distinct). calibcli `enir` (whole path + 99 models), the path alone, and scikit-learn's
   IsotonicRegression on the same data in the same run (netcal is not installed; its ENIR
   times from PERFORMANCE.md are printed beside: about n^2.2, > 200 s at 1e5).
2. Synthetic study (Allikivi & Kull 2019, section 5.1): balanced classes, negatives'
   scores Beta(1, 3), positives' a 50/50 mixture of Beta(1.5, 3) and Beta(30, 3).
   Calibration sizes 100 and 3000, 10 replicates, one 100 000-row test set; mean Brier and
   log-loss beside the paper's Table 1 (IDEAL, ENIR-PLATT, ISO-PLATT).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from calibcli.calibrators import create
from calibcli.calibrators.base import unique_with_sums
from calibcli.calibrators.enir import near_isotonic_path

NETCAL_ENIR = {10**3: "0.06 s", 10**4: "4.6 s", 3 * 10**4: "52 s", 10**5: "> 200 s", 10**6: "(not run)"}
PAPER = {  # Table 1: (Brier, log-loss) at N = 100 and N = 3000
    "ideal": ((0.1621, 0.4741), (0.1621, 0.4741)),
    "enir-platt": ((0.1683, 0.5029), (0.1627, 0.4778)),
    "iso-platt": ((0.1685, 0.5036), (0.1627, 0.4779)),
}


def generate(n: int, rng: np.random.Generator):
    y = (rng.random(n) < 0.5).astype(np.float64)
    s = rng.beta(1.0, 3.0, n)
    pos = y == 1
    k = int(pos.sum())
    s[pos] = np.where(rng.random(k) < 0.5, rng.beta(1.5, 3.0, k), rng.beta(30.0, 3.0, k))
    return s, y


def true_map(s: np.ndarray) -> np.ndarray:
    from scipy.stats import beta

    f1 = 0.5 * beta.pdf(s, 1.5, 3.0) + 0.5 * beta.pdf(s, 30.0, 3.0)
    f0 = beta.pdf(s, 1.0, 3.0)
    return f1 / (f0 + f1)


def brier_logloss(p: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    q = np.clip(p, 1e-15, 1 - 1e-15)
    return float(np.mean((p - y) ** 2)), float(-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q)))


def best_of(fn, repeats: int) -> float:
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def timing(sizes) -> None:
    from sklearn.isotonic import IsotonicRegression

    print("## Fit time (seconds, best of runs; Bayes-Iso generator, all scores distinct)")
    print(f"{'rows':>9} {'enir':>8} {'path':>8} {'events':>8} {'sklearn iso':>12} {'enir/iso':>9} {'netcal ENIR (PERFORMANCE.md)':>30}")
    rng = np.random.default_rng(0)
    for n in sizes:
        s, y = generate(n, rng)
        repeats = 3 if n <= 10**5 else 1
        t_enir = best_of(lambda: create("enir").fit(s, y), repeats)
        xs, sw, swy = unique_with_sums(s, y, np.ones_like(s))
        holder = {}
        t_path = best_of(lambda: holder.update(p=near_isotonic_path(swy / sw, sw)), repeats)
        t_iso = best_of(lambda: IsotonicRegression(out_of_bounds="clip").fit(s, y), repeats)
        print(
            f"{n:>9} {t_enir:>8.3f} {t_path:>8.3f} {holder['p'].events:>8} {t_iso:>12.3f} "
            f"{t_enir / t_iso:>9.1f} {NETCAL_ENIR.get(n, ''):>30}"
        )


def study(replicates: int, test_rows: int) -> None:
    print(f"\n## Bayes-Iso synthetic study ({replicates} replicates, {test_rows} test rows)")
    rng = np.random.default_rng(2019)
    st, yt = generate(test_rows, rng)
    ideal = brier_logloss(true_map(st), yt)
    methods = {
        "enir-platt": ("enir", {"platt_correction": True}),
        "enir-platt smoothing=true": ("enir", {"platt_correction": True, "smoothing": True}),
        "iso-platt": ("isotonic", {"platt_correction": True}),
    }
    print(f"{'method':<26} {'N':>5} {'Brier':>7} {'paper':>7} {'logloss':>8} {'paper':>7} {'fit ms':>7}")
    for k, n in enumerate((100, 3000)):
        pb, pl = PAPER["ideal"][k]
        print(f"{'ideal (true map)':<26} {n:>5} {ideal[0]:>7.4f} {pb:>7.4f} {ideal[1]:>8.4f} {pl:>7.4f} {'':>7}")
        data = [generate(n, rng) for _ in range(replicates)]
        for label, (method, params) in methods.items():
            scores, fit_time = [], 0.0
            for s, y in data:
                t = time.perf_counter()
                cal = create(method, params).fit(s, y)
                fit_time += time.perf_counter() - t
                scores.append(brier_logloss(cal.predict(st), yt))
            b, l = np.mean(scores, axis=0)
            pb, pl = PAPER.get(label, ((np.nan, np.nan), (np.nan, np.nan)))[k]
            print(f"{label:<26} {n:>5} {b:>7.4f} {pb:>7.4f} {l:>8.4f} {pl:>7.4f} {1e3 * fit_time / replicates:>7.1f}")


def main() -> None:
    quick = "--quick" in sys.argv
    timing((10**4, 10**5) if quick else (10**4, 10**5, 10**6))
    study(3 if quick else 10, 20000 if quick else 100000)


if __name__ == "__main__":
    main()
