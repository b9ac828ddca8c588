"""Benchmark the strict map loader against an unchecked load of the same map file.

For each size an isotonic map with that many knots is saved as JSON and as Parquet. Timed on
the same bytes, best of --repeat:
  - unchecked: `json.loads` (JSON) or `pyarrow` read + `to_pylist` (Parquet), then the
    calibrator's `_set_state` directly (what loading cost before the strict loader);
  - strict: `maps.parse_map_bytes` + `maps.envelope_to_calibrator` (strictjson limits,
    Parquet footer checks, the state spec, the prediction probe).
The ratio is strict time / unchecked time.

    python benchmarks/bench_map_loader.py --sizes 1e4 1e5 1e6

Measured on the shared 2-core machine under load (best of 3, seconds):

        knots   format       bytes  unchecked s  strict s  ratio
        10000     json      525536        0.054     0.084   1.55
        10000  parquet      196720        0.002     0.001   0.53
       100000     json     5254666        0.387     0.717   1.85
       100000  parquet     2027161        0.070     0.026   0.36
      1000000     json    52540489        4.845     8.733   1.80
      1000000  parquet    21005758        1.340     0.306   0.23

JSON: the limit scans (string blanking, bracket depth, number literals) cost about half
of `json.loads` itself. Parquet: faster than before, as numeric state columns go straight
to numpy instead of through `to_pylist`.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from _common import best, sizes_parser
from calibcli.maps import envelope as maps
from calibcli.calibrators import create


def isotonic_map(n: int) -> object:
    rng = np.random.default_rng(0)
    cal = create("isotonic")
    cal.x_ = np.unique(rng.random(n))
    cal.y_ = np.sort(rng.random(cal.x_.size))
    cal._fitted = True
    return cal


def unchecked_json(data: bytes) -> object:
    env = json.loads(data)
    cal = create(env["method"], env["params"])
    cal._set_state(env["state"])
    return cal


def unchecked_parquet(data: bytes) -> object:
    table = pq.read_table(pa.BufferReader(data))
    env = json.loads(table.schema.metadata[maps.PARQUET_KEY])
    for key in env.pop("state_columns"):
        env["state"][key] = table.column(key).to_pylist()[0]
    cal = create(env["method"], env["params"])
    cal._set_state(env["state"])
    return cal


def strict(data: bytes) -> object:
    return maps.envelope_to_calibrator(maps.parse_map_bytes(data, "map"), "map")


def main() -> None:
    args = sizes_parser(__doc__, [1e4, 1e5, 1e6]).parse_args()
    print(f"{'knots':>9} {'format':>8} {'bytes':>11} {'unchecked s':>12} {'strict s':>9} {'ratio':>6}")
    for size in args.sizes:
        cal = isotonic_map(int(size))
        envelope = maps.make_envelope(cal)
        for fmt, data, plain in (
            ("json", maps.envelope_to_json(envelope).encode(), unchecked_json),
            ("parquet", maps.envelope_to_parquet_bytes(envelope), unchecked_parquet),
        ):
            t_plain, _ = best(lambda: plain(data), args.repeat)
            t_strict, loaded = best(lambda: strict(data), args.repeat)
            assert np.array_equal(loaded.x_, cal.x_) and np.array_equal(loaded.y_, cal.y_)
            print(f"{int(size):>9} {fmt:>8} {len(data):>11} {t_plain:>12.3f} {t_strict:>9.3f} "
                  f"{t_strict / t_plain:>6.2f}")


if __name__ == "__main__":
    main()
