"""Venn-Abers: IVAP fit beside the `venn-abers` package, and apply beside the isotonic map.

Run: python benchmarks/bench_venn_abers.py [--sizes 1e5 1e6] [--apply-rows 1e7] [--peer-cap 900]

1. Fit (in process, best of runs; each peer run in a fresh process with a time cap): calibcli
   `venn-abers` (variant=ivap) against `venn_abers.calc_p0p1` (package 1.5) on the same rows
   of the Bayes-Iso section 5.1 generator (continuous scores: every score distinct). Both
   compute p0 and p1 at every calibration score.
2. Apply at `--apply-rows`: in-memory predict of the 1e6-row IVAP map against the isotonic
   map fitted on the same rows, then `calib apply`
   Parquet -> Parquet for both maps, each a fresh process (best of 3).
Writes benchmarks/results_bench_venn_abers.json beside this file.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import best, section51, sizes_parser

HERE = Path(__file__).resolve().parent
PEER = """
import sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
from venn_abers.venn_abers import calc_p0p1
d = np.load(sys.argv[1])
s, y = d["s"], d["y"]
t = time.perf_counter()
calc_p0p1(np.c_[1 - s, s], y)
print(time.perf_counter() - t)
"""


def peer_fit(s: np.ndarray, y: np.ndarray, cap: float, tmp: Path) -> float | None:
    """Seconds the package takes to fit, in a fresh process; None past `cap` seconds."""
    data = tmp / "rows.npz"
    np.savez(data, s=s, y=y)
    try:
        out = subprocess.run([sys.executable, "-c", PEER, str(data)], capture_output=True, text=True,
                             timeout=cap, check=True)
    except subprocess.TimeoutExpired:
        return None
    return float(out.stdout.strip().splitlines()[-1])


def fit_rows(sizes, cap: float, tmp: Path) -> list[dict]:
    from calibcli.calibrators import create

    rows = []
    for n in sizes:
        s, y = section51(int(n), np.random.default_rng(int(n)))
        repeats = 3 if n <= 1e5 else 1
        ours, cal = best(lambda: create("venn-abers").fit(s, y), repeats)
        peer = peer_fit(s, y, cap, tmp)
        rows.append({"rows": int(n), "calibcli_s": ours, "peer_s": peer, "peer_cap_s": cap,
                     "ratio": None if peer is None else peer / ours, "thresholds": cal.summary()["thresholds"]})
        shown = "over the cap" if peer is None else f"{peer:.3f} s"
        print(f"fit {int(n):>9} rows: calibcli {ours:.3f} s, venn-abers {shown}"
              + ("" if peer is None else f", {peer / ours:.1f}x"), flush=True)
    return rows


def apply_rows(n_apply: int, tmp: Path) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import calibcli
    from calibcli.calibrators import create

    s, y = section51(10**6, np.random.default_rng(10**6))
    va = create("venn-abers").fit(s, y)
    iso = create("isotonic", {"platt_correction": False}).fit(s, y)
    q, _ = section51(n_apply, np.random.default_rng(7))
    out = {"rows": n_apply, "calibration_rows": 10**6, "venn_abers_thresholds": va.summary()["thresholds"],
           "isotonic_knots": int(iso.x_.size)}
    va.predict(q[:10_000]), iso.predict(q[:10_000])  # build the lookup tables once
    out["predict_venn_abers_s"] = best(lambda: va.predict(q), 3)[0]
    out["predict_interval_venn_abers_s"] = best(lambda: va.predict_interval(q), 3)[0]
    out["predict_isotonic_s"] = best(lambda: iso.predict(q), 3)[0]
    print(f"predict {n_apply} rows: venn-abers {out['predict_venn_abers_s']:.3f} s (interval "
          f"{out['predict_interval_venn_abers_s']:.3f} s), isotonic {out['predict_isotonic_s']:.3f} s", flush=True)
    data = tmp / "apply.parquet"
    pq.write_table(pa.table({"score": q}), data)
    calib = str(Path(sys.executable).parent / "calib")
    for name, cal in (("venn_abers", va), ("isotonic", iso)):
        path = tmp / f"{name}.json"
        calibcli.save_map(cal, str(path))

        def run():
            subprocess.run([calib, "-q", "apply", str(path), str(data), "-o", str(tmp / f"{name}-out.parquet")],
                           check=True)
            os.remove(tmp / f"{name}-out.parquet")
        out[f"calib_apply_{name}_s"] = best(run, 3)[0]
    out["apply_ratio_venn_abers_to_isotonic"] = out["calib_apply_venn_abers_s"] / out["calib_apply_isotonic_s"]
    print(f"calib apply {n_apply} rows Parquet -> Parquet: venn-abers {out['calib_apply_venn_abers_s']:.3f} s, "
          f"isotonic {out['calib_apply_isotonic_s']:.3f} s ({out['apply_ratio_venn_abers_to_isotonic']:.2f}x)")
    return out


def main() -> None:
    ap = sizes_parser(__doc__, [1e5, 1e6])
    ap.add_argument("--apply-rows", type=float, default=1e7)
    ap.add_argument("--peer-cap", type=float, default=900.0, help="seconds before a peer fit is abandoned")
    args = ap.parse_args()
    import venn_abers  # noqa: F401  (fail early without the peer)
    from importlib.metadata import version

    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        fits = fit_rows(args.sizes, args.peer_cap, Path(d))
        applied = apply_rows(int(args.apply_rows), Path(d))
    result = {
        "started": started, "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "load_average": [load, os.getloadavg()[0]],
        "versions": {"numpy": np.__version__, "venn-abers": version("venn-abers")},
        "fit": fits, "apply": applied,
        "targets": {"fit_1e6_at_least_10x_faster": next(((r["peer_s"] or r["peer_cap_s"]) / r["calibcli_s"] >= 10
                                                         for r in fits if r["rows"] == 10**6), None),
                    "apply_at_isotonic_speed (<= 1.2x)": applied["apply_ratio_venn_abers_to_isotonic"] <= 1.2},
    }
    (HERE / "results_bench_venn_abers.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["targets"]))


if __name__ == "__main__":
    main()
