"""Run time of `calib compare`: each method's 5 folds at 1e5 rows, the presets' totals.

Binary: the bundled example's setup (examples/data/make_examples.py: Allikivi & Kull's
section 5.1 scores with a field bias) at ROWS rows. K classes: ROWS rows of 10 classes, logits
z ~ N(0, 2^2), labels drawn from softmax(z), the scores softmax(2.5 z) (overconfident).
Each method is timed alone through `fitting.compare.compare` (5 folds: fits, predictions and
the fold metrics; the `none` row costs nothing), seed 0. The presets' totals are the sums,
what `calib compare -m fast|default|all` spends in fits (the file read and the refit of `-o`
come on top). Peer: scikit-learn's 5-fold `cross_val_predict` of CalibratedClassifierCV-style
isotonic and sigmoid fits on the same binary rows (IsotonicRegression, LogisticRegression on
the score), beside calibcli's isotonic and logistic. `cli_binary`: `calib compare` on a CSV of
the binary rows, end to end, with `-m fast` and the default methods.

    python benchmarks/bench_compare.py --out benchmarks/results_compare.json

What `results_compare.json` shows (CPU seconds, which on a quiet core are the wall time; this
2-core machine ran it beside other jobs at a load of 7-10, so its wall times are 2-3x those):
binary, 5 folds at 1e5 rows, every method but bayes-iso (20 s) under 8 s, spline the most
(7.4 s); the presets `fast` 2.7 s, `default` 20.1 s, `all` 40.2 s; `calib compare` end to
end on a CSV of those rows 3.9 s with `-m fast`, 18.9 s by default. K classes (10): temperature
1.4 s, vector 15.5 s, dirichlet 25.7 s, one-vs-rest 1.5-9.5 s; `fast` 4.7 s, `default` 32.9 s.
Peer: scikit-learn's 5-fold isotonic 0.11 s and sigmoid 0.75 s against calibcli's isotonic
0.10 s and logistic 0.12 s (its fold metrics included).
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


def timed(run) -> dict[str, float]:
    """Wall and CPU seconds of `run()` (the CPU time of this process and of the children it
    waited for: on a shared machine the wall time swings with the other jobs, the CPU time
    much less)."""
    import resource

    def cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    wall, used = time.perf_counter(), cpu()
    run()
    return {"wall": round(time.perf_counter() - wall, 2), "cpu": round(cpu() - used, 2)}


def totals(seconds: dict[str, dict[str, float]], methods: list[str]) -> dict[str, float]:
    return {k: round(sum(seconds[m][k] for m in methods if m in seconds), 1) for k in ("wall", "cpu")}


def cli_runs(s: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """`calib compare FILE [-m PRESET]` end to end on a CSV of the rows (read, none, fits, table)."""
    import os
    import subprocess
    import tempfile

    import pyarrow as pa
    import pyarrow.csv as pacsv

    exe = str(Path(sys.executable).parent / "calib")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "scores.csv")
        pacsv.write_csv(pa.table({"score": s, "label": y.astype(np.int64)}), path)
        return {preset: timed(lambda preset=preset: subprocess.run([exe, "compare", path, "-m", preset], check=True,
                                                                  capture_output=True))
                for preset in ("fast", "default")}


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
    from calibcli.fitting import compare
    from calibcli.kinds import KCLASS

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
                                                   fold_metrics=lambda y, p: compare._kclass_fold(y, p, 100)))
              for m in kmethods}
    print(json.dumps(kclass), flush=True)
    doc = {
        "rows": args.rows, "folds": 5, "classes": K,
        "binary": {"seconds": binary, "presets": {p: totals(binary, compare.preset(p)) for p in compare.PRESETS}},
        "kclass": {"seconds": kclass, "presets": {p: totals(kclass, compare.preset(p, KCLASS))
                                                  for p in ("fast", "default")}},
        "cli_binary": cli_runs(s, y),
        "peer_scikit_learn_binary": sklearn_peer(s, y),
    }
    text = json.dumps(doc, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
