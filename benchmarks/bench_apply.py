"""Benchmark `calib apply` Parquet -> Parquet against the IO floor, with peak memory.

For each size the same Parquet file (score, label: float64) is
  - read and written back by pyarrow alone, whole table (`read_table` + `write_table`);
  - read and written back by pyarrow alone, streamed in calibcli's batch size;
  - run through `calibcli.pipeline.apply_file` with an isotonic map (adds `calibrated`).
Each runs in a fresh subprocess that reports its wall time (imports excluded) and peak RSS
(`resource.getrusage(RUSAGE_SELF).ru_maxrss`). The ratio "of floor" is the faster floor's
time over apply's time (1.0 = apply costs no more than moving the bytes).

    python benchmarks/bench_apply.py                 # 1e6 and 1e7 rows
    python benchmarks/bench_apply.py --with-1e8      # also 1e8 rows (1.6 GB input, ~3 min)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from _common import sizes_parser

CHUNK = 1_000_000

_RUNNERS = {
    "floor_table": """
import pyarrow.parquet as pq
t0 = time.perf_counter()
pq.write_table(pq.read_table(SRC), DST)
""",
    "floor_stream": """
import pyarrow.parquet as pq
from calibcli import io
t0 = time.perf_counter()
pf = pq.ParquetFile(SRC)
with pq.ParquetWriter(DST, pf.schema_arrow) as w:
    for i in range(pf.num_row_groups):  # per row group, as calibcli reads (flat memory)
        for b in pf.iter_batches(batch_size=io.PARQUET_BATCH_ROWS, row_groups=[i]):
            w.write_batch(b)
""",
    "calibcli": """
from calibcli import pipeline
t0 = time.perf_counter()
pipeline.apply_file(MAP, SRC, DST)
""",
}


def run(kind: str, src: Path, dst: Path, map_path: Path) -> dict:
    code = ("import resource, time, json\n"
            f"SRC, DST, MAP = {str(src)!r}, {str(dst)!r}, {str(map_path)!r}\n"
            + _RUNNERS[kind]
            + "print(json.dumps({'seconds': time.perf_counter() - t0, "
              "'rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    dst.unlink(missing_ok=True)
    return json.loads(out.stdout)


def make_file(path: Path, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    schema = pa.schema([("score", pa.float64()), ("label", pa.float64())])
    with pq.ParquetWriter(path, schema) as w:
        for start in range(0, n, CHUNK):
            m = min(CHUNK, n - start)
            s = rng.random(m)
            w.write_table(pa.table({"score": s, "label": (rng.random(m) < s).astype(np.float64)},
                                   schema=schema))


def make_map(path: Path) -> int:
    from calibcli import maps
    from calibcli.calibrators import create

    rng = np.random.default_rng(1)
    s = rng.random(1_000_000)
    cal = create("isotonic").fit(s, (rng.random(s.size) < s).astype(float))
    maps.save_map(cal, str(path))
    return int(cal.x_.size)


def main() -> None:
    ap = sizes_parser(__doc__, [1e6, 1e7])
    ap.add_argument("--with-1e8", action="store_true", help="also run 1e8 rows (needs ~5 GB of disk)")
    ap.add_argument("--dir", default=None, help="where to write the data files (default: a temp dir)")
    args = ap.parse_args()
    sizes = [int(n) for n in args.sizes] + ([100_000_000] if args.with_1e8 else [])
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        tmpdir = Path(tmp)
        map_path = tmpdir / "map.json"
        knots = make_map(map_path)
        print(f"isotonic map with {knots} knots; min of {args.repeat} runs; peak RSS is the max")
        print(f"{'rows':>11} {'tool':<13} {'seconds':>8} {'Mrows/s':>8} {'peak RSS MB':>11} {'of floor':>8}")
        for n in sizes:
            src = tmpdir / f"in_{n}.parquet"
            make_file(src, n)
            repeat = 1 if n >= 100_000_000 else args.repeat
            kinds = ["floor_stream", "calibcli"] + (["floor_table"] if n <= 10_000_000 else [])
            results = {}
            for kind in kinds:
                runs = [run(kind, src, tmpdir / "out.parquet", map_path) for _ in range(repeat)]
                results[kind] = (min(r["seconds"] for r in runs), max(r["rss_mb"] for r in runs))
            floor = min(results[k][0] for k in kinds if k.startswith("floor"))
            for kind in kinds:
                sec, rss = results[kind]
                print(f"{n:>11,} {kind:<13} {sec:>8.3f} {n / sec / 1e6:>8.2f} {rss:>11.0f} {floor / sec:>8.2f}")
            src.unlink()


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"total {time.perf_counter() - t0:.1f} s")
