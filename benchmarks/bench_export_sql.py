"""Benchmark the SQL of `calib export --sql` in DuckDB against calibcli's own predict.

For isotonic maps of growing knot counts (random increasing knots) the same random scores
(10% outside the knot range) are calibrated by `Calibrator.predict` (numpy) and by DuckDB
running the exported expression over an Arrow table; both results are checked to be
bit-identical. The ratio is DuckDB's time over numpy's: the nested CASE costs per row
about log2(knots) comparisons plus the engine's per-expression overhead, which grows with
the size of the expression.

    python benchmarks/bench_export_sql.py                  # 1e6 scores
    python benchmarks/bench_export_sql.py --sizes 1e5

Measured (DuckDB 2.0, shared 2-core machine under load, 1e5 scores; all bit-identical):
10 knots 0.22 s (9.6x numpy), 100 knots 0.50 s (5.5x), 1 000 knots 9.6 s (229x), 10 000
knots 80 s (235x). With 1e6 scores 1 000 knots took 10.6 s, about the same as 1e5: beyond
a few hundred knots the cost is DuckDB planning the large expression, once per query.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from _common import sizes_parser
from calibcli.export import sql as export
from calibcli.calibrators import registry

KNOTS = (10, 100, 1000, 10000)


def main() -> None:
    args = sizes_parser(__doc__, [1e6]).parse_args()
    import duckdb

    rng = np.random.default_rng(0)
    print(f"{'scores':>9} {'knots':>6} {'SQL chars':>10} {'numpy s':>8} {'duckdb s':>9} {'ratio':>7}  equal")
    for n in (int(v) for v in args.sizes):
        s = rng.uniform(-0.05, 1.05, n)
        con = duckdb.connect()
        con.register("q", pa.table({"score": s}))
        for k in KNOTS:
            x = np.unique(rng.uniform(0.0, 1.0, k))
            cal = registry.get("isotonic").from_state({}, {"x": x, "y": np.sort(rng.uniform(0.0, 1.0, x.size))})
            sql = export.sql_expression(cal)
            t0 = time.perf_counter()
            want = cal.predict(s)
            t_numpy = time.perf_counter() - t0
            t0 = time.perf_counter()
            got = con.sql(f"SELECT {sql} AS p FROM q").to_arrow_table().column("p").to_numpy()
            t_duck = time.perf_counter() - t0
            print(f"{n:>9.0e} {x.size:>6} {len(sql):>10} {t_numpy:>8.3f} {t_duck:>9.3f} "
                  f"{t_duck / t_numpy:>6.1f}x  {np.array_equal(got, want)}")


if __name__ == "__main__":
    main()
