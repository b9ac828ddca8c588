"""Benchmark `calib evaluate`: the streamed evaluation state against the in-memory metrics.

Data: a Parquet file `score,label,field` written in 1e6-row chunks (seeded): score uniform
on [0, 1] as float64 (so nearly every row has its own distinct p: the worst case for the
exact distribution), labels drawn from a slightly miscalibrated score, `field` a string
column with 1 000 values. For each size:

  - `calib evaluate FILE --field-col field --json` (every metric incl. Field-ECE/RCE), in
    a fresh process: wall time, rows/s and peak RSS (`os.wait4`), exact and with
    `--step 1e-6`;
  - the peer, at sizes up to --in-memory-max: the same file read whole with pyarrow and
    `state.compute_all` on the arrays (what `evaluate` did before the state), in a fresh
    process, with the largest |difference| of any metric from the streamed exact run.

At 1e8 rows it checks the targets: the exact run under 2 GB peak RSS, the `--step 1e-6` run
under 600 MB.

    python benchmarks/bench_evaluate.py                       # 1e7 rows
    python benchmarks/bench_evaluate.py --rows 1e7 1e8 --out benchmarks/results_evaluate.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

CHUNK = 1_000_000
# The targets at 1e8 rows: peak RSS (MB) of the exact run and of the --step 1e-6 run.
TARGETS = {"calib evaluate": 2048, "calib evaluate --step 1e-06": 600}
TARGET_ROWS = 100_000_000
PEER = """
import json, sys
import pyarrow.parquet as pq
from calibcli.kinds import labels
from calibcli import io
from calibcli.evaluation.state.binary import compute_all
t = pq.read_table(sys.argv[1])
y = labels.from_file(t, "label", "x"); p = io.scores_from(t, "score", "x")
g = io.field_codes(t, "field", "x")[0]
del t
print(json.dumps(compute_all(y, p, g, 100)))
"""


def write_data(path: Path, n: int) -> None:
    rng = np.random.default_rng(0)
    names = np.array([f"f{i:03d}" for i in range(1000)])
    schema = pa.schema([("score", pa.float64()), ("label", pa.int8()), ("field", pa.string())])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, n, CHUNK):
            m = min(CHUNK, n - start)
            p = rng.random(m)
            y = (rng.random(m) < np.clip(p * 1.1 - 0.03, 0, 1)).astype(np.int8)
            f = names[rng.integers(0, 1000, m)]
            writer.write_table(pa.table({"score": p, "label": y, "field": f}, schema=schema))


def run(cmd: list[str]) -> tuple[float, float, str]:
    """Run `cmd` in a fresh process; wall time, its own peak RSS (MB) and its stdout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err.decode()}")
    return wall, usage.ru_maxrss / 1024, out.decode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, nargs="+", default=[1e7])
    ap.add_argument("--steps", type=float, nargs="*", default=[1e-6], help="--step values besides exact")
    ap.add_argument("--in-memory-max", type=float, default=1e7, help="largest size for the in-memory peer")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args()
    results = []
    print(f"{'rows':>12} {'run':<22} {'seconds':>8} {'rows/s':>12} {'peak RSS MB':>11} {'max |diff|':>10}")
    for rows in args.rows:
        n = int(rows)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "eval.parquet"
            write_data(path, n)
            base = [sys.executable, "-m", "calibcli", "evaluate", str(path), "--field-col", "field", "--json"]
            exact = None
            for step in [None, *args.steps]:
                wall, rss, out = run(base + ([] if step is None else ["--step", repr(step)]))
                report = json.loads(out)["results"][0]
                metrics = report["metrics"]
                name = "calib evaluate" + ("" if step is None else f" --step {step:g}")
                diff = None
                if step is None:
                    exact = metrics
                else:
                    diff = max(abs(metrics[k] - exact[k]) for k in metrics)
                results.append({"rows": n, "run": name, "seconds": wall, "rows_per_s": n / wall,
                                "peak_rss_mb": rss, "max_abs_diff_vs_exact": diff,
                                "diff_vs_exact": None if step is None else
                                {k: abs(metrics[k] - exact[k]) for k in ("auc", "calbin")},
                                "step_bounds": report["step_bounds"]})
                print(f"{n:>12,} {name:<22} {wall:>8.2f} {n / wall:>12,.0f} {rss:>11.0f} "
                      f"{'' if diff is None else f'{diff:.1e}':>10}")
            if n <= args.in_memory_max:
                wall, rss, out = run([sys.executable, "-c", PEER, str(path)])
                peer = json.loads(out)
                diff = max(abs(peer[k] - exact[k]) for k in peer)
                results.append({"rows": n, "run": "in-memory compute_all", "seconds": wall, "rows_per_s": n / wall,
                                "peak_rss_mb": rss, "max_abs_diff_vs_exact": diff})
                print(f"{n:>12,} {'in-memory compute_all':<22} {wall:>8.2f} {n / wall:>12,.0f} {rss:>11.0f} "
                      f"{diff:>10.1e}")
    checks = [{"rows": r["rows"], "run": r["run"], "peak_rss_mb": r["peak_rss_mb"],
               "target_mb": TARGETS[r["run"]], "met": r["peak_rss_mb"] < TARGETS[r["run"]]}
              for r in results if r["rows"] == TARGET_ROWS and r["run"] in TARGETS]
    for c in checks:
        print(f"target at {c['rows']:,} rows: {c['run']} peak RSS {c['peak_rss_mb']:.0f} MB "
              f"< {c['target_mb']} MB: {'met' if c['met'] else 'NOT met'}")
    if args.out:
        import platform

        doc = {"command": " ".join(["python", "benchmarks/bench_evaluate.py", *sys.argv[1:]]),
               "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                           "numpy": np.__version__, "pyarrow": pa.__version__,
                           "load_average_at_end": os.getloadavg()},
               "targets": checks, "results": results}
        Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
