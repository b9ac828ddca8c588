"""Benchmark the metrics beyond the first set (`calib evaluate --metrics`), against the first set
and beside the peer packages, in one run.

1. Cost of every metric: `calib evaluate FILE --field-col field --json` on the file of
   `bench_evaluate.py` (score uniform float64, so nearly every row has its own p: the worst
   case for the distribution; 1 000 field values), each in a fresh process, alternating
   `--metrics <the first set>` and `--metrics all --bands 0`, best of --repeats. Target: the
   second within 1.3x of the first.
2. Consistency bands and corp-p: `--metrics default,corp-p --bands 100` against
   `--metrics default --bands 0` on --band-rows rows. Target: the run with bands within 20 s.
3. Peers on the same rows (in this process, read once): model-diagnostics' `decompose`
   (Brier and log-loss), relplot's `smECE`, uncertainty-calibration's debiased CE and MAPIE's
   KS and Kuiper statistics, with the largest difference from calib's numbers.

    python benchmarks/bench_eval_metrics.py --out benchmarks/results_eval_metrics.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_evaluate import run, write_data  # noqa: E402

FIRST_SET = ("log-loss,brier,auc,ece,mce,calbin,cal-slope,cal-intercept,spiegelhalter-z,spiegelhalter-p,"
             "field-ece,field-rce")
CALIB = [sys.executable, "-m", "calibcli", "evaluate"]


def timed_pair(path: Path, a: list[str], b: list[str], repeats: int) -> tuple[dict, dict]:
    """Best wall time (and its peak RSS, output) of two commands, run alternately."""
    best: list[dict] = [{}, {}]
    for _ in range(repeats):
        for i, extra in enumerate((a, b)):
            wall, rss, out = run([*CALIB, str(path), "--field-col", "field", "--json", *extra])
            if not best[i] or wall < best[i]["seconds"]:
                best[i] = {"args": extra, "seconds": round(wall, 3), "peak_rss_mb": round(rss), "out": out}
    return best[0], best[1]


def peers(path: Path, report: dict) -> dict:
    """Each peer on the rows of `path`: seconds, and the largest |difference| from `report`."""
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=["score", "label"])
    p, y = t["score"].to_numpy(), t["label"].to_numpy().astype(np.int64)
    ours = report["results"][0]["metrics"]
    out = {}

    def clock(name, fn, compare):
        t0 = time.perf_counter()
        values = fn()
        seconds = time.perf_counter() - t0
        out[name] = {"seconds": round(seconds, 3),
                     "max_abs_difference": max(abs(float(v) - ours[k]) for k, v in compare(values).items())}

    from model_diagnostics.scoring import LogLoss, SquaredError, decompose

    def md(fn, prefix):
        d = decompose(y, p, scoring_function=fn)
        return {f"{prefix}_mcb": d["miscalibration"][0], f"{prefix}_dsc": d["discrimination"][0],
                f"{prefix}_unc": d["uncertainty"][0]}

    clock("model_diagnostics.decompose (Brier)", lambda: md(SquaredError(), "brier"), lambda v: v)
    clock("model_diagnostics.decompose (log-loss)", lambda: md(LogLoss(), "log_loss"), lambda v: v)
    import relplot

    clock("relplot.smECE", lambda: relplot.smECE(p, y), lambda v: {"smece": v})
    import calibration

    clock("calibration.lower_bound_scaling_ce", lambda: calibration.lower_bound_scaling_ce(
        p, y, p=2, debias=True, num_bins=10), lambda v: {"ece_debiased": v})
    from mapie.metrics.calibration import kolmogorov_smirnov_statistic, kuiper_statistic

    clock("mapie KS + Kuiper", lambda: (kolmogorov_smirnov_statistic(y, p), kuiper_statistic(y, p)),
          lambda v: {"ks": v[0], "kuiper": v[1]})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--band-rows", type=float, default=1e6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows, band_rows = int(args.rows), int(args.band_rows)
    result: dict = {"rows": rows, "band_rows": band_rows, "field_values": 1000, "repeats": args.repeats}
    with tempfile.TemporaryDirectory() as tmp:
        big, small = Path(tmp) / "big.parquet", Path(tmp) / "small.parquet"
        write_data(big, rows)
        first, every = timed_pair(big, ["--metrics", FIRST_SET], ["--metrics", "all", "--bands", "0"], args.repeats)
        ratio = every["seconds"] / first["seconds"]
        result["metrics"] = {"first_set": _strip(first), "all": _strip(every), "ratio": round(ratio, 3),
                             "target_ratio": 1.3, "passed": ratio <= 1.3}
        print(f"{rows:.0e} rows: first set {first['seconds']:.2f} s, all {every['seconds']:.2f} s, "
              f"ratio {ratio:.2f} (target 1.3)")
        write_data(small, band_rows)
        plain, bands = timed_pair(small, ["--metrics", "default", "--bands", "0"],
                                  ["--metrics", "default,corp-p", "--bands", "100"], args.repeats)
        result["bands"] = {"without": _strip(plain), "with_100_rounds": _strip(bands), "target_seconds": 20,
                           "passed": bands["seconds"] <= 20,
                           "corp_p": json.loads(bands["out"])["results"][0]["metrics"]["corp_p"]}
        print(f"{band_rows:.0e} rows: default {plain['seconds']:.2f} s, with 100 band rounds and corp-p "
              f"{bands['seconds']:.2f} s (target 20 s)")
        wall, _, text = run([*CALIB, str(small), "--metrics", "all", "--json"])
        result["calib_all_metrics_seconds"] = round(wall, 3)  # a whole run: read, state, every metric
        result["peers"] = peers(small, json.loads(text))
        print(f"  calib evaluate --metrics all: {wall:.2f} s (the whole run)")
        for name, r in result["peers"].items():
            print(f"  {name}: {r['seconds']:.2f} s, max |difference| {r['max_abs_difference']:.2e}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


def _strip(r: dict) -> dict:
    return {k: v for k, v in r.items() if k != "out"}


if __name__ == "__main__":
    main()
