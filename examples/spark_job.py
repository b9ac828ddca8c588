"""A batch job on Spark, end to end: score, summarize, fit, apply and evaluate generated data.

    pip install calibcli[spark]          # pyspark 4; needs Java 17
    python examples/spark_job.py --rows 1000000 --out /tmp/calib-spark

The "model" is an over-confident logistic score of one feature; labels follow the true
probability, which also depends on a field (a categorical column), so the raw scores are
miscalibrated overall and per field. The job writes the scored rows as a Hive-partitioned
Parquet tree, fits a map on the training split from one Spark aggregation, applies it as a
native column expression and prints the `calib evaluate --json` report of the test split.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path


def run(spark, rows: int, method: str, out: Path) -> dict:
    """The job on an existing SparkSession; returns the evaluation report (JSON-ready)."""
    from pyspark.sql import functions as F

    from calibcli.engines import spark as cs

    # 1. Score: a feature, a field, the model's (over-confident) score and the true label.
    x = F.randn(seed=1)
    field = (F.col("id") % 12).cast("int")
    truth = 1 / (1 + F.exp(-(1.2 * x - 1.0 + 0.15 * (field - 6))))
    scored = (spark.range(rows)
              .withColumn("field", F.concat(F.lit("f"), field.cast("string")))
              .withColumn("score", 1 / (1 + F.exp(-(3.0 * x - 1.5))))
              .withColumn("label", (F.rand(seed=2) < truth).cast("int"))
              .withColumn("split", F.when(F.col("id") % 5 == 0, "test").otherwise("train")))
    scored.write.mode("overwrite").partitionBy("split").parquet(str(out / "scored"))
    train = spark.read.parquet(str(out / "scored" / "split=train"))
    test = spark.read.parquet(str(out / "scored" / "split=test"))

    # 2. Summarize and fit: one groupBy, then the CLI's own fit on the driver.
    summary = cs.summarize(train)
    print(f"summary: {summary.rows} rows, {summary.size} distinct scores", file=sys.stderr)
    fitted = cs.fit(train, method, output=str(out / "map.json"))
    print(f"fitted {method}: {fitted.calibrator.summary()}", file=sys.stderr)

    # 3. Apply (a native expression for isotonic, binning, logistic, beta, ilps) and write.
    calibrated = cs.apply(test, str(out / "map.json"), score_col="score", out_col="calibrated")
    calibrated.write.mode("overwrite").partitionBy("field").parquet(str(out / "calibrated"))

    # 4. Evaluate the raw and the calibrated probabilities, overall and per field.
    return cs.evaluate(spark.read.parquet(str(out / "calibrated")), ["score", "calibrated"],
                       field_col="field").to_json()


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
    parser.add_argument("--method", default="isotonic")
    parser.add_argument("--out", default=None, help="output directory (default: a new temporary one)")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    out = claim_output(parser, Path(args.out or tempfile.mkdtemp(prefix="calib-spark-")))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers need calibcli too

    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(args.master).appName("calibcli-example")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "8").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        report = run(spark, args.rows, args.method, out)
    finally:
        spark.stop()
    print(json.dumps({r["name"]: r["metrics"] for r in report["results"]}, indent=2))
    return report


if __name__ == "__main__":
    main()
