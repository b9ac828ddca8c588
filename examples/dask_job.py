"""A batch job on Dask, end to end: score, summarize, fit, apply and evaluate generated data.

    pip install calibcli[dask]
    python examples/dask_job.py --rows 1000000 --out /tmp/calib-dask

The same data as examples/spark_job.py: an over-confident logistic score of one feature,
labels from the true probability, which also depends on a field. Partitions are generated
in parallel, written as Parquet, summarised per partition and merged, and the fitted map
is applied with `map_partitions`; the `calib evaluate --json` report of the test split is
printed. Runs on the threaded scheduler unless `--scheduler` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd


def score_partition(seed: int, rows: int) -> pd.DataFrame:
    """One partition of scored rows: feature, field, model score, label, train/test split."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(rows)
    field = rng.integers(0, 12, rows)
    truth = 1 / (1 + np.exp(-(1.2 * x - 1.0 + 0.15 * (field - 6))))
    return pd.DataFrame({
        "field": np.char.add("f", field.astype(str)),
        "score": 1 / (1 + np.exp(-(3.0 * x - 1.5))),
        "label": (rng.random(rows) < truth).astype(np.int64),
        "split": np.where(rng.random(rows) < 0.2, "test", "train"),
    })


MARKER = ".calibcli-example"


def claim_output(parser: argparse.ArgumentParser, out: Path) -> Path:
    """--out must be new, empty or an earlier run's (it holds MARKER): the job replaces its
    own `scored/`, `calibrated/` and `map.json` there, never a folder of someone else's files."""
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        parser.error(f"--out {out}: holds files this example did not write; give a new or empty directory")
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by examples/" + Path(__file__).name + "\n")
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--method", default="isotonic")
    parser.add_argument("--out", default=None, help="output directory (default: a new temporary one)")
    parser.add_argument("--scheduler", default="threads")
    args = parser.parse_args(argv)
    out = claim_output(parser, Path(args.out or tempfile.mkdtemp(prefix="calib-dask-")))

    import dask
    import dask.dataframe as dd

    from calibcli.engines import dask as cd

    with dask.config.set(scheduler=args.scheduler):
        # 1. Score, partition by partition, and write the scored rows.
        sizes = [len(c) for c in np.array_split(np.arange(args.rows), args.partitions)]
        meta = score_partition(0, 0)
        rows = dd.from_delayed([dask.delayed(score_partition)(i + 1, n) for i, n in enumerate(sizes)], meta=meta)
        rows.to_parquet(str(out / "scored"), write_index=False, overwrite=True)
        scored = dd.read_parquet(str(out / "scored"))
        train = scored[scored["split"] == "train"]
        test = scored[scored["split"] == "test"]

        # 2. Summarize and fit: per-partition summaries merged, then the CLI's own fit.
        summary = cd.summarize(train)
        print(f"summary: {summary.rows} rows, {summary.size} distinct scores", file=sys.stderr)
        fitted = cd.fit(train, args.method, output=str(out / "map.json"))
        print(f"fitted {args.method}: {fitted.calibrator.summary()}", file=sys.stderr)

        # 3. Apply with map_partitions and write.
        calibrated = cd.apply(test, str(out / "map.json"), score_col="score", out_col="calibrated")
        calibrated.to_parquet(str(out / "calibrated"), write_index=False, overwrite=True)

        # 4. Evaluate the raw and the calibrated probabilities, overall and per field.
        report = cd.evaluate(dd.read_parquet(str(out / "calibrated")), ["score", "calibrated"],
                             field_col="field").to_json()
    print(json.dumps({r["name"]: r["metrics"] for r in report["results"]}, indent=2))
    return report


if __name__ == "__main__":
    main()
