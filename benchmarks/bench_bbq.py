"""BBQ against netcal 1.4's `BBQ()` on the same seeded data: predictions and fit time.

netcal needs torch, so it runs in a separate interpreter given by `--netcal-python` (or
the NETCAL_PYTHON environment variable), in a subprocess. Writes
tests/fixtures/peers/bbq_netcal.npz (data, query scores, netcal's predictions) that
tests/calibrators/test_bbq.py checks calibcli's `variant=netcal` against, and prints both fit times.

    NETCAL_PYTHON=/path/to/venv/bin/python python benchmarks/bench_bbq.py --rows 3000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "peers" / "bbq_netcal.npz"
PEER = """
import sys, time, numpy as np
from netcal.binning import BBQ
d = np.load(sys.argv[1])
t = time.perf_counter(); m = BBQ(); m.fit(d["s"], d["y"]); t = time.perf_counter() - t
np.savez(sys.argv[2], pred=m.transform(d["q"]), seconds=t)
"""


def data(rows: int, seed: int):
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 3, rows)
    y = (rng.random(rows) < s**1.5).astype(np.float64)
    q = np.concatenate([np.linspace(0, 1, 2001), s])
    return s, y, q


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--netcal-python", default=os.environ.get("NETCAL_PYTHON"))
    ap.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from calibcli.calibrators import get

    s, y, q = data(args.rows, args.seed)
    t = time.perf_counter()
    cal = get("bbq")(variant="netcal").fit(s, y)
    ours = time.perf_counter() - t
    pred = cal.predict(q)
    print(f"calibcli bbq variant=netcal fit: {ours:.3f} s on {args.rows} rows")
    if not args.netcal_python:
        return
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(Path(tmp) / "in.npz", s=s, y=y, q=q)
        subprocess.run([args.netcal_python, "-c", PEER, str(Path(tmp) / "in.npz"), str(Path(tmp) / "out.npz")],
                       check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        peer = np.load(Path(tmp) / "out.npz")
        theirs, seconds = peer["pred"], float(peer["seconds"])
    print(f"netcal BBQ() fit: {seconds:.3f} s; max |difference| of predictions {np.abs(pred - theirs).max():.3g}")
    if args.write:
        np.savez_compressed(OUT, rows=args.rows, seed=args.seed, q=q, pred=theirs, seconds=seconds)


if __name__ == "__main__":
    main()
