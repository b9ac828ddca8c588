"""Benchmark `calib evaluate`: every metric on 1e7 rows, against scikit-learn's metrics.

Data: a Parquet file with a probability column `p`, labels drawn from a slightly
miscalibrated p, and a `field` column with 1 000 values. Rows:
  - each calibcli metric on in-memory arrays, and scikit-learn's log_loss,
    brier_score_loss and roc_auc_score on the same arrays ("ratio" = sklearn / calibcli);
  - the whole `evaluate_file` (read + every metric incl. Field-ECE/RCE) in a fresh
    subprocess, with its peak RSS (`resource.getrusage`).

    python benchmarks/bench_evaluate.py              # 1e7 rows
    python benchmarks/bench_evaluate.py --rows 1e6
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from _common import best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=1e7)
    args = ap.parse_args()
    n = int(args.rows)

    from sklearn import metrics as skm

    from calibcli import io
    from calibcli.evaluation import metrics

    rng = np.random.default_rng(0)
    p = rng.random(n)
    y = (rng.random(n) < np.clip(p * 1.1 - 0.03, 0, 1)).astype(np.float64)
    field = rng.integers(0, 1000, n)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "eval.parquet"
        pq.write_table(pa.table({"p": p, "label": y, "field": pa.array(field.astype(str))}), path)
        groups = io.field_codes(pq.read_table(path, columns=["field"]), "field", str(path))[0]
        sk = {"log_loss": lambda: skm.log_loss(y, p), "brier": lambda: skm.brier_score_loss(y, p),
              "auc": lambda: skm.roc_auc_score(y, p)}
        ours = {"log_loss": lambda: metrics.log_loss(y, p), "brier": lambda: metrics.brier(y, p),
                "auc": lambda: metrics.auc(y, p), "ece": lambda: metrics.prob_ece(y, p),
                "calbin": lambda: metrics.calbin(y, p), "field_ece": lambda: metrics.field_ece(y, p, groups),
                "field_rce": lambda: metrics.field_rce(y, p, groups)}
        print(f"{n:,} rows, 1 000 fields")
        print(f"{'metric':<10} {'calibcli s':>10} {'sklearn s':>9} {'ratio':>6} {'value':>12} {'|diff|':>9}")
        total = 0.0
        for name, fn in ours.items():
            t, v = best(fn)
            total += t
            if name in sk:
                ts, vs = best(sk[name])
                print(f"{name:<10} {t:>10.3f} {ts:>9.3f} {ts / t:>6.2f} {v:>12.6f} {abs(v - vs):>9.1e}")
            else:
                print(f"{name:<10} {t:>10.3f} {'':>9} {'':>6} {v:>12.6f}")
        print(f"{'all':<10} {total:>10.3f}")
        code = ("import resource, time, json\nfrom calibcli.evaluation import evaluate\nt0 = time.perf_counter()\n"
                f"evaluate.evaluate_file({str(path)!r}, ['p'], [], field_col='field')\n"
                "print(json.dumps({'s': time.perf_counter() - t0, "
                "'rss': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))\n")
        out = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                        text=True).stdout)
        print(f"evaluate_file (read + all metrics, subprocess): {out['s']:.2f} s, peak RSS {out['rss']:.0f} MB "
              f"({out['rss'] * 2**20 / n:.0f} bytes/row)")


if __name__ == "__main__":
    main()
