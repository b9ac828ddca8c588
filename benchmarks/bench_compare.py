"""Run time of `calib compare`: each method's 5 folds at 1e5 rows, the presets' totals.

Binary: the bundled example's setup (examples/data/make_examples.py: Allikivi & Kull's
section 5.1 scores with a field bias) at ROWS rows. K classes: ROWS rows of 10 classes, logits
z ~ N(0, 2^2), labels drawn from softmax(z), the scores softmax(2.5 z) (overconfident).
Each method is timed alone through `fitting.compare.compare` (5 folds: fits, predictions and
the fold metrics; the `none` row costs nothing), seed 0. The presets' totals are the sums,
what `calib compare -m fast|default|all` spends in fits (the file read and the refit of `-o`
come on top). Peer: scikit-learn's 5-fold `cross_val_predict` of CalibratedClassifierCV-style
isotonic and sigmoid fits on the same binary rows (IsotonicRegression, LogisticRegression on
the score), beside calibcli's isotonic and logistic.

    python benchmarks/bench_compare.py --out benchmarks/results_compare.json

What `results_compare.json` shows (2-core machine shared with other jobs, so +-20 %): binary,
every method but bayes-iso (about 30 s alone) takes under 10 s, spline the most; the
`default` preset (all but bayes-iso) about 28 s, `fast` about 3 s, `all` about 57 s. K
classes: temperature 1.4 s, vector 14 s, dirichlet 25 s, one-vs-rest K times a binary
fit; `default` (temperature, dirichlet, logistic, beta, isotonic) about 30 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROWS = 100_000
K = 10


def binary_rows(rows: int) -> tuple[np.ndarray, np.ndarray]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "data"))
    from make_examples import sample

    table = sample(rows, np.random.default_rng(1), 0)
    return table.column("score").to_numpy(), table.column("label").to_numpy().astype(np.float64)


def kclass_rows(rows: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    z = rng.normal(0, 2, (rows, K))
    true = np.exp(z - z.max(axis=1, keepdims=True))
    true /= true.sum(axis=1, keepdims=True)
    y = np.minimum((true.cumsum(axis=1) < rng.random(rows)[:, None]).sum(axis=1), K - 1)
    P = np.exp(2.5 * (z - z.max(axis=1, keepdims=True)))
    return P / P.sum(axis=1, keepdims=True), y


def timed(run) -> float:
    start = time.perf_counter()
    run()
    return round(time.perf_counter() - start, 2)


def sklearn_peer(s: np.ndarray, y: np.ndarray) -> dict[str, float]:
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import KFold, cross_val_predict

    folds = KFold(5, shuffle=True, random_state=0)
    iso = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1)
    return {"isotonic": timed(lambda: cross_val_predict(iso, s, y, cv=folds)),
            "sigmoid": timed(lambda: cross_val_predict(LogisticRegression(C=np.inf), s[:, None], y, cv=folds,
                                                       method="predict_proba"))}


def main() -> None:
    from calibcli.calibrators import registry
    from calibcli.fitting import compare, kclass_compare

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--out")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    s, y = binary_rows(args.rows)
    binary = {m: timed(lambda m=m: compare.compare(s, y, [m], 5, 0)) for m in compare.preset("all")}
    print(json.dumps(binary), flush=True)
    P, codes = kclass_rows(args.rows)
    make = compare.unfitted(lambda m: registry.kclass(m, {"score_kind": "probability"}), 0)
    kmethods = [*registry.kclass_native(), *(m for m in compare.FAST)]
    kclass = {m: timed(lambda m=m: compare.compare(P, codes, [m], 5, 0, make=make,
                                                   fold_metrics=kclass_compare.fold_metrics)) for m in kmethods}
    print(json.dumps(kclass), flush=True)
    doc = {
        "rows": args.rows, "folds": 5, "classes": K,
        "binary": {"seconds": binary, "presets": {p: round(sum(binary[m] for m in compare.preset(p)), 1)
                                                  for p in compare.PRESETS}},
        "kclass": {"seconds": kclass, "presets": {p: round(sum(kclass[m] for m in compare.preset(p, kclass=True)
                                                               if m in kclass), 1) for p in ("fast", "default")}},
        "peer_scikit_learn_binary": sklearn_peer(s, y),
    }
    text = json.dumps(doc, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
