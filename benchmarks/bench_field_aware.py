"""Field-aware calibration (Pan et al. 2020): training time at scale and a CTR-like study.

Part 1 (time): --rows rows (default 1e6) with a Zipf-distributed 1000-level field and 5
numeric features; the truth is sigmoid(0.7 l - 0.5 + delta_z + x . beta) for the base model's
logit l. Times `ilps` and `field-aware` (default parameters, a text progress bar fed by the
`progress` callback) against scikit-learn's LogisticRegression on [logit, one-hot(field),
numeric features] (a field-aware linear reference) and IsotonicRegression (score only).

Part 2 (quality): the CTR-like study of the issue: 500-level Zipf field, per-level logit bias,
calibration on --study-rows rows, test on 100 000 rows; Field-RCE (eq. 6, eps 0.01), AUC and
log-loss for the base scores, isotonic, Platt (`logistic`), `ilps` and `field-aware`.

    python benchmarks/bench_field_aware.py [--rows 1000000] [--study-rows 20000] [--seed 0]

OpenBLAS multithreading on a busy 2-core machine can slow the small matrix products of
training 10x; set OPENBLAS_NUM_THREADS=1 in the environment to compare.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

from calibcli.calibrators import create
from calibcli.evaluation.metrics import auc, field_rce, log_loss

from _common import best


def make_data(n, seed, levels, n_num, bias_sd=1.0):
    rng = np.random.default_rng(seed)
    fixed = np.random.default_rng(1234)
    delta = fixed.normal(0.0, bias_sd, levels)
    beta = fixed.normal(0.0, 0.3, n_num)
    pz = 1.0 / np.arange(1, levels + 1) ** 1.1
    zi = rng.choice(levels, size=n, p=pz / pz.sum())
    l0 = rng.normal(-1.5, 1.2, n)
    x = rng.normal(0.0, 1.0, (n, n_num))
    truth = 0.7 * l0 - 0.5 + delta[zi] + x @ beta
    y = (rng.random(n) < 1 / (1 + np.exp(-truth))).astype(float)
    names = np.array([f"lv{i}" for i in range(levels)], dtype=object)
    feats = {"z": names[zi]}
    feats.update({f"x{j}": x[:, j].copy() for j in range(n_num)})
    return 1 / (1 + np.exp(-l0)), y, feats, zi


class Bar:
    """A one-line text progress bar for the `progress(done, total)` callback."""

    def __init__(self):
        self.last = -1

    def __call__(self, done, total):
        pct = int(100 * done / max(total, 1))
        if pct != self.last and (pct % 5 == 0 or done == total):
            self.last = pct
            sys.stderr.write(f"\r  field-aware training [{'#' * (pct // 5):<20}] {pct:3d}%")
            if done == total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def part_time(rows, seed):
    from scipy import sparse
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LogisticRegression

    s, y, feats, zi = make_data(rows, seed, 1000, 5)
    l = np.log(s) - np.log1p(-s)
    print(f"\nPart 1: {rows:,} rows, 1000-level field, 5 numeric features "
          f"(OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')})")

    def sklearn_lr():
        onehot = sparse.csr_matrix((np.ones(rows), (np.arange(rows), zi)), shape=(rows, 1000))
        dense = np.column_stack([l] + [feats[f"x{j}"] for j in range(5)])
        design = sparse.hstack([sparse.csr_matrix(dense), onehot]).tocsr()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            LogisticRegression(max_iter=200).fit(design, y)

    times = {"calibcli ilps": best(lambda: create("ilps").fit(s, y))[0]}
    fa = create("field-aware")
    fa.progress = Bar()
    times["calibcli field-aware"] = best(lambda: fa.fit(s, y, features=feats))[0]
    times["calibcli field-aware predict"] = best(lambda: fa.predict(s, features=feats))[0]
    times["sklearn IsotonicRegression"] = best(lambda: IsotonicRegression(out_of_bounds="clip").fit(s, y))[0]
    times["sklearn LogisticRegression(logit, one-hot, numeric)"] = best(sklearn_lr)[0]
    ref = times["sklearn LogisticRegression(logit, one-hot, numeric)"]
    print(f"  {'fit':<52s} {'seconds':>9s} {'/ sklearn LR':>13s}")
    for name, sec in times.items():
        print(f"  {name:<52s} {sec:9.2f} {sec / ref:13.2f}")
    info = fa.summary()
    print(f"  field-aware: epochs run {info['epochs_run']}, best epoch {info['best_epoch']}, "
          f"train/valid rows {info['train_rows']:,}/{info['valid_rows']:,}, vocabulary {info['vocabulary_sizes']}")


def part_study(rows, seed):
    s, y, feats, _ = make_data(rows, seed + 1, 500, 0)
    st, yt, ft, codes = make_data(100_000, seed + 2, 500, 0)
    z, zt = feats["z"], ft["z"]
    create("isotonic").fit(s[:100], y[:100])  # imports scipy once, outside the timings
    print(f"\nPart 2: CTR-like study, 500-level Zipf field, calibration {rows:,} rows, test 100,000 rows")
    print(f"  {'method':<13s} {'Field-RCE':>10s} {'AUC':>8s} {'log-loss':>9s} {'fit s':>7s}")
    print(f"  {'base scores':<13s} {field_rce(yt, st, codes):10.4f} {auc(yt, st):8.4f} {log_loss(yt, st):9.4f} {'':>7s}")
    for name in ("isotonic", "logistic", "ilps", "field-aware"):
        cal = create(name)
        use = {"z": z} if name == "field-aware" else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sec = best(lambda: cal.fit(s, y, features=use))[0]
        p = cal.predict(st, features={"z": zt} if use else None)
        print(f"  {name:<13s} {field_rce(yt, p, codes):10.4f} {auc(yt, p):8.4f} {log_loss(yt, p):9.4f} {sec:7.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--study-rows", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-time", action="store_true", help="run only the CTR-like study")
    args = ap.parse_args()
    part_study(args.study_rows, args.seed)
    if not args.skip_time:
        part_time(args.rows, args.seed)


if __name__ == "__main__":
    main()
