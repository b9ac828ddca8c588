"""Field-aware calibration: quality against the one-hot logistic baseline, and fit time.

Part 1 (quality): CTR-like data with a Zipf-distributed field of 50, 500 and 5000 levels (level
v drawn with probability proportional to 1/v^1.1, so most levels are rare) and a base model
whose logit l is miscalibrated: the truth is sigmoid(m(l) + delta_z), delta_z ~ N(0, 1), with
m(l) = 0.7 l - 0.5 ("linear") or 0.7 l - 0.5 + 0.4 sin(1.5 l) ("curved"). Calibration on
--rows rows, test on --test-rows fresh rows; test log-loss and Field-ECE (eq. 5) for the true
probabilities, `ilps` (score only), the one-hot-field logistic regression (scikit-learn,
logit of the score plus one coefficient per level, L2 with C = 1) and `field-aware`.

Part 2 (time): --time-rows rows (default 1e6), a 1000-level Zipf field and 5 numeric features,
truth sigmoid(0.7 l - 0.5 + delta_z + x . beta); `field-aware` fit time (default parameters)
and test log-loss, beside scikit-learn's LogisticRegression on [logit, one-hot, numeric].

    python benchmarks/bench_field_aware.py [--rows 100000] [--time-rows 1000000] [--out FILE]

Results go to --out (JSON, default benchmarks/bench_field_aware.json). To compare with another
version of the library, run the script with that version first on PYTHONPATH; the numbers
recorded in the committed results file say which ones came from which version.
OpenBLAS threads contend on a busy 2-core machine: run with OPENBLAS_NUM_THREADS=1, as `calib` sets.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import warnings

import numpy as np

import calibcli
from calibcli.calibrators import create
from calibcli.evaluation.metrics.binary import field_ece, log_loss

from _common import best


def make_data(n, seed, levels, n_num=0, shape="linear"):
    """(scores, labels, feature columns, level codes, true probabilities); level effects fixed by levels."""
    rng = np.random.default_rng(seed)
    fixed = np.random.default_rng(1234 + levels)
    delta = fixed.normal(0.0, 1.0, levels)
    beta = fixed.normal(0.0, 0.3, n_num)
    pz = 1.0 / np.arange(1, levels + 1) ** 1.1
    zi = rng.choice(levels, size=n, p=pz / pz.sum())
    l0 = rng.normal(-1.5, 1.2, n)
    x = rng.normal(0.0, 1.0, (n, n_num))
    m = 0.7 * l0 - 0.5 + (0.4 * np.sin(1.5 * l0) if shape == "curved" else 0.0)
    truth = 1 / (1 + np.exp(-(m + delta[zi] + x @ beta)))
    y = (rng.random(n) < truth).astype(float)
    names = np.array([f"lv{i}" for i in range(levels)], dtype=object)
    feats = {"z": names[zi]}
    feats.update({f"x{j}": x[:, j].copy() for j in range(n_num)})
    return 1 / (1 + np.exp(-l0)), y, feats, zi, truth


def one_hot_logistic(s, zi, levels, xnum=None):
    """scikit-learn LogisticRegression (L2, C = 1) on [logit(s), numeric columns, one-hot(level)]."""
    from scipy import sparse
    from sklearn.linear_model import LogisticRegression

    def design(scores, codes, x):
        onehot = sparse.csr_matrix((np.ones(codes.size), (np.arange(codes.size), codes)), shape=(codes.size, levels))
        dense = np.column_stack([np.log(scores) - np.log1p(-scores)] + ([] if x is None else [x]))
        return sparse.hstack([sparse.csr_matrix(dense), onehot]).tocsr()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = LogisticRegression(max_iter=1000).fit(design(s, zi, xnum), _labels[0])
    return lambda st, zt, xt=None: model.predict_proba(design(st, zt, xt))[:, 1]


_labels: list[np.ndarray] = []  # the labels one_hot_logistic fits on (set by the caller)


def part_quality(rows, test_rows, seed):
    out = []
    print(f"\nPart 1: quality, calibration {rows:,} rows, test {test_rows:,} rows, Zipf field")
    print(f"  {'shape':<7s} {'levels':>6s} {'method':<14s} {'log-loss':>9s} {'Field-ECE':>10s} {'fit s':>7s}")
    for shape in ("linear", "curved"):
        for levels in (50, 500, 5000):
            s, y, feats, zi, _ = make_data(rows, seed, levels, shape=shape)
            st, yt, ft, zt, pt = make_data(test_rows, seed + 1, levels, shape=shape)
            _labels[:] = [y]
            res = {"true probabilities": (pt, 0.0)}
            sec, cal = best(lambda: create("ilps").fit(s, y))
            res["ilps"] = (cal.predict(st), sec)
            sec, predict = best(lambda: one_hot_logistic(s, zi, levels))
            res["one-hot logistic"] = (predict(st, zt), sec)
            sec, cal = best(lambda: create("field-aware").fit(s, y, features=feats))
            res["field-aware"] = (cal.predict(st, features=ft), sec)
            eta = cal.summary().get("stage1", {}).get("eta")
            for name, (p, sec) in res.items():
                row = {"shape": shape, "levels": levels, "method": name, "log_loss": log_loss(yt, p),
                       "field_ece": field_ece(yt, p, zt), "fit_seconds": sec}
                if name == "field-aware":
                    row["eta"] = eta
                out.append(row)
                print(f"  {shape:<7s} {levels:6d} {name:<14s} {row['log_loss']:9.5f} {row['field_ece']:10.5f} {sec:7.2f}")
    return out


def part_time(rows, seed):
    s, y, feats, zi, _ = make_data(rows, seed, 1000, 5)
    st, yt, ft, zt, pt = make_data(200_000, seed + 1, 1000, 5)
    xnum = np.column_stack([feats[f"x{j}"] for j in range(5)])
    xt = np.column_stack([ft[f"x{j}"] for j in range(5)])
    _labels[:] = [y]
    print(f"\nPart 2: time, {rows:,} rows, 1000-level Zipf field, 5 numeric features, test 200,000 rows "
          f"(OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')})")
    fa = create("field-aware")
    t_fa, _ = best(lambda: fa.fit(s, y, features=feats))
    t_lr, predict = best(lambda: one_hot_logistic(s, zi, 1000, xnum))
    info = fa.summary()
    res = {
        "rows": rows,
        "field_aware_fit_seconds": t_fa,
        "sklearn_logistic_fit_seconds": t_lr,
        "ratio_field_aware_over_sklearn": t_fa / t_lr,
        "field_aware_test_log_loss": log_loss(yt, fa.predict(st, features=ft)),
        "sklearn_logistic_test_log_loss": log_loss(yt, predict(st, zt, xt)),
        "true_test_log_loss": log_loss(yt, pt),
        "field_aware_summary": {k: info.get(k) for k in ("epochs_run", "best_epoch", "best_check", "stage1")},
    }
    for key, value in res.items():
        print(f"  {key:<34s} {value}")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000, help="calibration rows of part 1")
    ap.add_argument("--test-rows", type=int, default=200_000)
    ap.add_argument("--time-rows", type=int, default=1_000_000, help="rows of part 2 (0 = skip)")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "bench_field_aware.json"))
    args = ap.parse_args()
    results = {
        "command": " ".join(["python"] + sys.argv),
        "calibcli_version": calibcli.__version__,
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count()},
    }
    if not args.skip_quality:
        results["quality"] = part_quality(args.rows, args.test_rows, args.seed)
    if args.time_rows:
        results["time"] = part_time(args.time_rows, args.seed)
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=1)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
