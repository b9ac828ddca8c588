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

import numpy as np

from calibcli.calibrators import create
from calibcli.numeric.pooling import unique_with_sums
from calibcli.calibrators.enir import near_isotonic_path

from _common import TABLE1, best, brier_logloss, section51_by_class, true_map

NETCAL_ENIR = {10**3: "0.06 s", 10**4: "4.6 s", 3 * 10**4: "52 s", 10**5: "> 200 s", 10**6: "(not run)"}


def timing(sizes) -> None:
    from sklearn.isotonic import IsotonicRegression

    print("## Fit time (seconds, best of runs; Bayes-Iso generator, all scores distinct)")
    print(f"{'rows':>9} {'enir':>8} {'path':>8} {'events':>8} {'sklearn iso':>12} {'enir/iso':>9} {'netcal ENIR (PERFORMANCE.md)':>30}")
    rng = np.random.default_rng(0)
    for n in sizes:
        s, y = section51_by_class(n, rng)
        repeats = 3 if n <= 10**5 else 1
        t_enir = best(lambda: create("enir").fit(s, y), repeats)[0]
        xs, sw, swy = unique_with_sums(s, y, np.ones_like(s))
        t_path, path = best(lambda: near_isotonic_path(swy / sw, sw), repeats)
        t_iso = best(lambda: IsotonicRegression(out_of_bounds="clip").fit(s, y), repeats)[0]
        print(
            f"{n:>9} {t_enir:>8.3f} {t_path:>8.3f} {path.events:>8} {t_iso:>12.3f} "
            f"{t_enir / t_iso:>9.1f} {NETCAL_ENIR.get(n, ''):>30}"
        )


def study(replicates: int, test_rows: int) -> None:
    print(f"\n## Bayes-Iso synthetic study ({replicates} replicates, {test_rows} test rows)")
    rng = np.random.default_rng(2019)
    st, yt = section51_by_class(test_rows, rng)
    ideal = brier_logloss(yt, true_map(st))
    methods = {
        "enir-platt": ("enir", {"platt_correction": True}),
        "enir-platt smoothing=true": ("enir", {"platt_correction": True, "smoothing": True}),
        "iso-platt": ("isotonic", {"platt_correction": True}),
    }
    print(f"{'method':<26} {'N':>5} {'Brier':>7} {'paper':>7} {'logloss':>8} {'paper':>7} {'fit ms':>7}")
    for k, n in enumerate((100, 3000)):
        pb, pl = TABLE1["ideal"][2 * k:2 * k + 2]
        print(f"{'ideal (true map)':<26} {n:>5} {ideal[0]:>7.4f} {pb:>7.4f} {ideal[1]:>8.4f} {pl:>7.4f} {'':>7}")
        data = [section51_by_class(n, rng) for _ in range(replicates)]
        for label, (method, params) in methods.items():
            scores, fit_time = [], 0.0
            for s, y in data:
                seconds, cal = best(lambda: create(method, params).fit(s, y))
                fit_time += seconds
                scores.append(brier_logloss(yt, cal.predict(st)))
            b, l = np.mean(scores, axis=0)
            pb, pl = TABLE1.get(label, (np.nan,) * 4)[2 * k:2 * k + 2]
            print(f"{label:<26} {n:>5} {b:>7.4f} {pb:>7.4f} {l:>8.4f} {pl:>7.4f} {1e3 * fit_time / replicates:>7.1f}")


def main() -> None:
    quick = "--quick" in sys.argv
    timing((10**4, 10**5) if quick else (10**4, 10**5, 10**6))
    study(3 if quick else 10, 20000 if quick else 100000)


if __name__ == "__main__":
    main()
