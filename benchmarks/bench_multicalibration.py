"""Benchmark the multicalibration error: `calib evaluate` with `--segment-col` against `calib
evaluate` without it, end to end; the metric's state (`MulticalState`) beside the binary
evaluation state on the same p and labels; and MCGrad's own metric.

Data (seeded, in 1e6-row batches): p ~ Beta(2, 5) as float64 (nearly every p distinct), or with
--ties rounded to 0.001 (the output of a step-function calibrator); labels drawn from p, 5
points too high where country = DE and member; five segment columns: country (text, 6 values),
device (integer, 5 values), member (boolean), age (float) and income (float, 5% missing).

Runs, each a fresh process with OPENBLAS_NUM_THREADS=1, as `calib` runs:
  - `calib evaluate` and `calib evaluate +segments` (the target, always run): the command
    `calib evaluate FILE --json` on a Parquet file of the rows (score, label and the five
    columns), without and with `--segment-col` for the five columns, alternated,
    --cli-repeat times each, started by a launcher that reads each command's own wall time, CPU time
    (user + system) and peak RSS (`_common.measured`). The target: the best time with the
    metric within twice the best time without it, `(+segments) / (without)` <= 2.
  - `state`: `StateBuilder.add` per batch, then `.result().metrics()` (the exact, unweighted
    path of `calib evaluate` without fields), data generated in the process (not timed);
  - `multical`: `MulticalState.add` per batch (the five columns), then `.result()`, likewise;
  - `mcgrad`: `mcgrad.metrics.MulticalibrationError` on a pandas frame of the same rows
    (defaults, float64 arithmetic), when --mcgrad-python names a Python that has mcgrad
    (see benchmarks/mcgrad_reference.py), at sizes up to --mcgrad-max.

    python benchmarks/bench_multicalibration.py --sizes 1e6 1e7 --tie-variants --repeat 2 --cli-repeat 3 \\
        --mcgrad-python /tmp/mcgvenv/bin/python --out benchmarks/results_multicalibration.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

import numpy as np

CHUNK = 1_000_000
COUNTRIES = np.array(["US", "DE", "FR", "IN", "BR", "JP"])


def batches(n: int, ties: bool):
    """(y, p, columns) record batches: numpy y and p, pyarrow columns."""
    import pyarrow as pa

    rng = np.random.default_rng(0)
    countries = pa.array(COUNTRIES)
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        p = rng.beta(2.0, 5.0, m)
        if ties:
            p = np.round(p, 3)
        code = rng.choice(COUNTRIES.size, m, p=[0.4, 0.2, 0.15, 0.12, 0.08, 0.05])
        member = rng.random(m) < 0.3
        income = rng.lognormal(10.0, 1.0, m)
        income[rng.random(m) < 0.05] = np.nan
        shift = np.where((code == 1) & member, 0.05, 0.0)
        y = (rng.random(m) < np.clip(p + shift, 0, 1)).astype(np.int8)
        cols = {"country": countries.take(pa.array(code)), "device": pa.array(rng.integers(0, 5, m)),
                "member": pa.array(member), "age": pa.array(rng.normal(45.0, 15.0, m)),
                "income": pa.array(income, from_pandas=True)}
        yield y, p, cols


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2 ** 20


def child(run: str, n: int, ties: bool) -> dict:
    data = list(batches(n, ties))
    out: dict = {}
    if run == "mcgrad":
        import pandas as pd
        from mcgrad.metrics import MulticalibrationError

        frame = pd.DataFrame({"y": np.concatenate([b[0] for b in data]), "p": np.concatenate([b[1] for b in data]),
                              **{k: pd.concat([b[2][k].to_pandas() for b in data], ignore_index=True)
                                 for k in data[0][2]}})
        del data
        ready = _rss_mb()
        t0 = time.perf_counter()
        m = MulticalibrationError(frame, "y", "p", categorical_segment_columns=["country", "device", "member"],
                                  numerical_segment_columns=["age", "income"], precision_dtype="float64")
        out = {"multical": float(m.mce), "multical_sigma": float(m.mce_sigma), "multical_p": float(m.mce_pvalue),
               "segments": int(m.total_number_segments)}
    elif run == "state":
        from calibcli.evaluation.state.builder import StateBuilder

        ready = _rss_mb()
        t0 = time.perf_counter()
        builder = StateBuilder(rows=n)
        for y, p, _ in data:
            builder.add(y, p)
        out = {k: float(v) for k, v in builder.result().metrics().items()}
    else:
        from calibcli.evaluation.metrics.multicalibration import MulticalState

        ready = _rss_mb()
        t0 = time.perf_counter()
        state = MulticalState()
        for y, p, cols in data:
            state.add(y, p, cols)
        out["state_mb"] = state.nbytes / 2 ** 20
        r = state.result()
        out.update(r.metrics())
        out["segments"] = len(r.segments)
        out["worst"] = r.segments[0].definition
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "rss_at_start_mb": ready, "peak_rss_mb": peak, "result": out}


def measure(python: str, run: str, n: int, ties: bool) -> dict:
    cmd = [python, __file__, "--child", run, str(n)] + (["--ties"] if ties else [])
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}  # as `calib` sets it (calibcli/cli/app.py)
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


SEGMENT_FLAGS = [flag for col in ("country", "device", "member", "age", "income") for flag in ("--segment-col", col)]


def evaluate_cli(n: int, ties: bool, repeat: int) -> list[dict]:
    """`calib evaluate FILE --json` without and with the five segment columns, alternated,
    `repeat` times each, on a Parquet file of the rows: every run's wall, CPU and peak RSS, and
    the multicalibration error the command reported."""
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    from _common import measured

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/rows.parquet"
        writer = None
        for y, p, cols in batches(n, ties):
            table = pa.table({"score": p, "label": y, **cols})
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
        writer.close()
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
        calib = os.path.join(os.path.dirname(sys.executable), "calib")
        runs = {"calib evaluate": [calib, "evaluate", path, "--json"],
                "calib evaluate +segments": [calib, "evaluate", path, "--json", *SEGMENT_FLAGS]}
        for _ in range(repeat):
            for run, cmd in runs.items():
                r = measured(cmd, env)
                if r["code"] != 0:
                    raise SystemExit(f"{' '.join(cmd)} failed: {r['stderr']}")
                rows.append({"run": run, "seconds": r["seconds"], "cpu_seconds": r["user"] + r["sys"],
                             "system_seconds": r["sys"], "peak_rss_mb": r["rss_mb"]})
        done = subprocess.run(runs["calib evaluate +segments"], capture_output=True, check=True, env=env)
        result = json.loads(done.stdout)["results"][0]
        rows[-1]["result"] = {**{k: result["metrics"][k] for k in ("multical", "multical_sigma", "multical_p")},
                              "segments": result["segments_checked"], "worst": result["segments"][0]["segment"]}
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e6])
    ap.add_argument("--repeat", type=int, default=2, help="runs of state and multical each (alternated); best time kept")
    ap.add_argument("--mcgrad-python", default=None)
    ap.add_argument("--mcgrad-max", type=float, default=1e6)
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ties", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tie-variants", action="store_true", help="also run every size with p rounded to 0.001")
    ap.add_argument("--cli-repeat", type=int, default=3, help="runs of `calib evaluate` with and without segments")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(float(args.child[1])), args.ties)))
        return
    rows = []
    for size in args.sizes:
        n = int(size)
        for ties in ([False, True] if args.tie_variants else [False]):
            best: dict[str, dict] = {}
            for _ in range(args.repeat):
                for run in ("state", "multical"):
                    r = measure(sys.executable, run, n, ties)
                    if run not in best or r["seconds"] < best[run]["seconds"]:
                        best[run] = r
            if args.mcgrad_python and n <= args.mcgrad_max:
                best["mcgrad"] = measure(args.mcgrad_python, "mcgrad", n, ties)
            for run, r in best.items():
                rows.append({"rows": n, "ties": ties, "run": run, **r})
                print(f"{n:>10.0e} {'ties' if ties else 'distinct':8s} {run:9s} {r['seconds']:7.2f} s "
                      f"peak {r['peak_rss_mb']:7.0f} MB (data {r['rss_at_start_mb']:5.0f} MB)", flush=True)
            ratio = best["multical"]["seconds"] / best["state"]["seconds"]
            rows.append({"rows": n, "ties": ties, "run": "multical / state", "ratio": ratio})
            print(f"{'':10s} {'':8s} multical / state = {ratio:.2f}")
            cli = evaluate_cli(n, ties, args.cli_repeat)
            for name in ("calib evaluate", "calib evaluate +segments"):
                mine = [r for r in cli if r["run"] == name]
                top = min(mine, key=lambda r: r["seconds"])
                rows.append({"rows": n, "ties": ties, **top, "runs": [round(r["seconds"], 3) for r in mine],
                             "cpu_runs": [round(r["cpu_seconds"], 3) for r in mine],
                             **({"result": mine[-1]["result"]} if "result" in mine[-1] else {})})
                print(f"{n:>10.0e} {'ties' if ties else 'distinct':8s} {name:25s} best {top['seconds']:6.2f} s, "
                      f"CPU {min(r['cpu_seconds'] for r in mine):6.2f} s, peak {top['peak_rss_mb']:6.0f} MB; "
                      f"runs {[round(r['seconds'], 2) for r in mine]}", flush=True)
            best_of = {name: min(r["seconds"] for r in cli if r["run"] == name) for name in ("calib evaluate",
                                                                                           "calib evaluate +segments")}
            cpu_of = {name: min(r["cpu_seconds"] for r in cli if r["run"] == name) for name in best_of}
            ratio = best_of["calib evaluate +segments"] / best_of["calib evaluate"]
            cpu_ratio = cpu_of["calib evaluate +segments"] / cpu_of["calib evaluate"]
            rows.append({"rows": n, "ties": ties, "run": "(calib evaluate +segments) / (calib evaluate)",
                         "ratio": ratio, "cpu_ratio": cpu_ratio, "met": ratio <= 2.0})
            print(f"{'':10s} {'':8s} with / without segments: {ratio:.2f} wall, {cpu_ratio:.2f} CPU (target <= 2)",
                  flush=True)
    if args.out:
        import numpy
        import pyarrow

        with open(args.out, "w") as f:
            json.dump({"command": "python " + " ".join(sys.argv), "machine": {
                "cpus": os.cpu_count(), "python": platform.python_version(), "numpy": numpy.__version__,
                "pyarrow": pyarrow.__version__, "load_average_at_end": list(os.getloadavg())},
                "results": rows}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
