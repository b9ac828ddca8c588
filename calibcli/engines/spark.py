"""calibcli on Spark DataFrames (`pip install calibcli[spark]`, pyspark 4).

    from calibcli.engines import spark as cs
    summary = cs.summarize(df, score_col="score", label_col="label")       # one aggregation
    fitted = cs.fit(df, "isotonic", output="map.json")                     # FitResult
    scored = cs.apply(df, "map.json", score_col="score", out_col="p")      # lazy DataFrame
    report = cs.evaluate(scored, prob_cols=["p"], field_col="field")       # Evaluation (.to_json())
    kreport = cs.evaluate_kclass(df, ["p_*"], label_col="label")           # K-class predictions

`summarize` and `fit` run one `groupBy` on the (optionally bucketed) score and collect one
row per distinct key to the driver, where the same code as `calib fit --from-summary` fits:
maps are bit-identical to the single-process CLI on the same rows (with fractional weights
the per-score sums are added in Spark's order, so they match exactly when those sums are
exact, e.g. for whole-number or dyadic weights). `apply` is a native column expression
(the SQL of `calib export --sql`, no Python worker) for isotonic, enir, near-isotonic,
binning, logistic, beta and ilps maps, and `mapInArrow` with the map's own `predict` for
the others. Executors then need calibcli installed, and Python workers the same
interpreter as the driver (`PYSPARK_PYTHON`): on a local master, `apply` (with
`mapInArrow`) and `evaluate` first check that the workers' interpreter imports pyarrow and
calibcli (`check_python_workers`), instead of failing deep in a worker.

Invalid rows (null, NaN or infinite scores, labels other than 0/1, negative or non-finite
weights) make `summarize`, `fit` and `evaluate` raise InputError with their count, as the
CLI refuses them; `apply` passes them through: a null score gives null, NaN gives NaN.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any, Mapping, Sequence

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from calibcli import engines
from calibcli.errors import UsageError
from calibcli.requests import EvaluateOptions, step_option

SOURCE = "Spark DataFrame"
_INF = float("inf")


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def _score(name: str) -> Column:
    return F.col(quote(name)).cast("double")


def _label(df: DataFrame, name: str) -> Column:
    """0.0/1.0 from numbers, booleans or the texts 0/1/true/false; anything else is null."""
    col = F.col(quote(name))
    if isinstance(df.schema[name].dataType, T.StringType):
        text = F.lower(F.trim(col))
        return F.when(text.isin("1", "1.0", "true"), 1.0).when(text.isin("0", "0.0", "false"), 0.0)
    y = col.cast("double")
    return F.when(y.isin(0.0, 1.0), y)


def _not_finite(c: Column) -> Column:
    return c.isNull() | F.isnan(c) | (F.abs(c) == _INF)


def _count(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0))


def summarize(df: DataFrame, score_col: str = "score", label_col: str = "label",
              weight_col: str | None = None, step: float | None = None):
    """The ScoreSummary of `calib summarize` (optionally bucketed to multiples of `step`)."""
    step = step_option(step)
    engines.check_columns(df.columns, SOURCE, score_col=score_col, label_col=label_col, weight_col=weight_col)
    s, y = _score(score_col), _label(df, label_col)
    w = _score(weight_col) if weight_col else F.lit(1.0)
    key = s if step is None else F.rint(s / F.lit(step)) * F.lit(step)
    rows = df.select(key.alias("k"), s.alias("s"), y.alias("y"), w.alias("w"))
    k, s, y, w = (F.col(c) for c in ("k", "s", "y", "w"))
    table = rows.groupBy("k").agg(
        F.sum(F.when(y == 0.0, w).otherwise(0.0)).alias("n0"),
        F.sum(F.when(y == 1.0, w).otherwise(0.0)).alias("n1"),
        F.count(F.lit(1)).alias("rows"), _count(y == 1.0).alias("positives"),
        _count(_not_finite(s)).alias("bad_score"), _count(y.isNull()).alias("bad_label"),
        _count(_not_finite(w) | (w < 0)).alias("bad_weight"),
        F.min("s").alias("lo"), F.max("s").alias("hi"),
    ).toArrow()
    col = {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}
    engines.check_bad_rows(SOURCE, {
        score_col: ("a null, NaN or infinite score", int(col["bad_score"].sum())),
        label_col: ("a label that is not 0 or 1", int(col["bad_label"].sum())),
        **({weight_col: ("a null, negative or non-finite weight", int(col["bad_weight"].sum()))}
           if weight_col else {}),
    })
    meta = {"input": SOURCE, "score_col": score_col, "label_col": label_col,
            **({"weight_col": weight_col} if weight_col else {})}
    rng = (float(col["lo"].min()), float(col["hi"].max())) if table.num_rows else (0.0, 0.0)
    return engines.build_summary(col["k"].astype(np.float64), col["n0"], col["n1"], int(col["rows"].sum()),
                                 int(col["positives"].sum()), rng, weight_col is not None, step, meta)


def fit(df: DataFrame, method: str = "isotonic", params: Mapping[str, Any] | None = None, *,
        score_col: str = "score", label_col: str = "label", weight_col: str | None = None,
        step: float | None = None, seed: int | None = None, output: str | None = None,
        strict: bool = False):
    """Fit `method` on the summary of `df`; returns a `fitting.FitResult` (map saved to `output`)."""
    return engines.fit_summary(lambda: summarize(df, score_col, label_col, weight_col, step), method, params,
                               seed, output, strict)


_WORKER_CHECKS: dict[str, str | None] = {}


def worker_python_problem(python: str) -> str | None:
    """Why the interpreter `python` cannot run calibcli's Spark workers, or None when it can:
    it must exist and import pyarrow and calibcli (checked once per interpreter)."""
    if python in _WORKER_CHECKS:
        return _WORKER_CHECKS[python]
    found = shutil.which(python)
    if found is None:
        problem: str | None = "which does not exist"
    elif os.path.abspath(found) == os.path.abspath(sys.executable):
        problem = None
    else:
        try:
            proc = subprocess.run([found, "-c", "import pyarrow, calibcli"], capture_output=True, text=True,
                                  timeout=120, stdin=subprocess.DEVNULL)
            lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
            problem = None if proc.returncode == 0 else \
                "which cannot import pyarrow and calibcli (" + (lines[-1].strip() if lines else
                                                               f"exit {proc.returncode}") + ")"
        except (OSError, subprocess.TimeoutExpired) as exc:
            problem = f"which cannot be run ({exc})"
    _WORKER_CHECKS[python] = problem
    return problem


def worker_python(session: Any) -> str:
    """The interpreter Spark starts Python workers with: spark.pyspark.python, else
    PYSPARK_PYTHON as the session read it, else python3."""
    sc = session.sparkContext
    return sc.getConf().get("spark.pyspark.python") or getattr(sc, "pythonExec", None) or "python3"


def check_python_workers(df: DataFrame) -> None:
    """On a local master, refuse (one line) a session whose Python workers could not import
    pyarrow and calibcli, which `mapInArrow` needs; a cluster's executors are not visible here."""
    session = df.sparkSession
    try:
        local = str(session.sparkContext.master).startswith("local")
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: nothing to check here
        return
    if not local:
        return
    python = worker_python(session)
    problem = worker_python_problem(python)
    if problem is not None:
        raise UsageError(f"{SOURCE}: Spark's Python workers run {python!r}, {problem}",
                         hint=f"set PYSPARK_PYTHON={sys.executable} (or spark.pyspark.python) "
                         "before the Spark session starts")


def map_column(cal, score_col: str) -> Column:
    """The calibrated probability of `score_col` as a native Spark expression (SQL-exportable maps)."""
    from calibcli.export import sql as export

    sql = export.sql_expression(cal, f"CAST({quote(score_col)} AS DOUBLE)")
    return F.when(F.isnan(_score(score_col)), F.lit(float("nan"))).otherwise(F.expr(sql))


def apply(df: DataFrame, map: Any, score_col: str = "score", out_col: str = "calibrated", *,
          native: bool | None = None) -> DataFrame:
    """`df` with `out_col` added: a native expression where the map allows, else `mapInArrow`.

    `native=False` forces `mapInArrow`: Spark plans a long expression slowly, so for maps
    with thousands of knots the Python path can be faster (see docs/algorithms.md).
    """
    from calibcli.export import sql as export

    if native and not export.supports_sql(engines.resolve_map(map)[0]):
        raise UsageError("native=True needs a map `calib export --sql` can write",
                         hint="supported: " + ", ".join(export.SQL_METHODS))

    cal, envelope = engines.resolve_map(map)
    categorical, numeric = cal.input_features()
    engines.check_columns(df.columns, SOURCE, score_col=score_col,
                          **{f"feature {c!r}": c for c in (*categorical, *numeric)})
    if out_col in df.columns:
        raise UsageError(f"{SOURCE}: already has a column {out_col!r}", hint="choose another out_col")
    if export.supports_sql(cal) and native is not False:
        return df.withColumn(out_col, map_column(cal, score_col))
    check_python_workers(df)
    schema = T.StructType([*df.schema.fields, T.StructField(out_col, T.DoubleType())])

    def predict_partition(batches):
        from calibcli import engines as shared
        from calibcli.maps import envelope as maps

        calibrator = maps.envelope_to_calibrator(envelope, "map")
        for batch in batches:
            yield shared.predict_arrow_batch(calibrator, batch, score_col, out_col)

    return df.mapInArrow(predict_partition, schema)


_EVAL_STATE = ("header string, p array<double>, n0 array<double>, n1 array<double>, "
               "cell_field array<bigint>, ece_p array<double>, ece_y array<double>, "
               "field_names array<string>, field_w array<double>, field_y array<double>, "
               "field_p array<double>, ece_w array<double>, spiegel array<double>")  # EvalState.to_arrow's columns
_STATE_SCHEMA = _EVAL_STATE + ", column int, bad array<bigint>, part int, segments binary"  # then ours
_KCLASS_SCHEMA = _EVAL_STATE + (", kclass_part bigint, kclass_header string, column int, bad array<bigint>, how string, "
                                 "part int, segments binary")


def evaluate(df: DataFrame, prob_cols: Sequence[str] = (), maps: Sequence[Any] = (), *,
             label_col: str = "label", score_col: str = "score", field_col: str | None = None,
             weight_col: str | None = None, step: float | None = None, calbin_window: int = 100,
             metrics: str = "default", bands: int | None = None, seed: int = 0, hl_groups: int = 10,
             segment_cols: Sequence[str] = (), segment_bins: int | None = None, segment_top: int | None = None,
             segment_depth: int | None = None, segment_min_rows: int | None = None, segment_max: int | None = None,
             segments: int | None = None):
    """The report of `calib evaluate` (an `Evaluation`; `.to_json()` is its --json);
    `metrics`, `bands`, `seed`, `hl_groups` as `calib evaluate --metrics ...`, `segment_cols`
    and the other `segment_*` options and `segments` as `--segment-col ...` (the
    multicalibration error; a float, double or decimal column is numeric, any other categorical).

    Each partition (`mapInArrow`) builds one `EvalState` per probability column (and per map,
    applied to `score_col` first) from its record batches and ships it as one Arrow row; the
    driver merges the rows (`EvalState.from_arrow`) and reads the metrics off the result. With
    `segment_cols`, each partition also ships its rows' p, labels and segment columns (a
    pickled `SegmentStates`), merged on the driver in partition order: the driver holds every
    row (docs/multicalibration.md, "Cost").
    """
    check_python_workers(df)
    options = EvaluateOptions.build(label_col=label_col, score_col=score_col, field_col=field_col,
                                    weight_col=weight_col, step=step, calbin_window=calbin_window, metrics=metrics,
                                    bands=bands, seed=seed, hl_groups=hl_groups, segment_cols=segment_cols,
                                    segment_bins=segment_bins, segment_top=segment_top, segment_depth=segment_depth,
                                    segment_min_rows=segment_min_rows, segment_max=segment_max, segments=segments)
    df, columns, keep = engines.plan_evaluation(df, apply, SOURCE, prob_cols, maps, options)
    probs = [c for _, _, c in columns]
    numeric = (T.FloatType, T.DoubleType, T.DecimalType)
    kinds = engines.segment_kinds(options.segments.cols if options.segments else (),
                                  lambda c: isinstance(df.schema[c].dataType, numeric))

    def partition_state(batches):
        import pickle

        import pyarrow as pa
        from pyspark import TaskContext

        from calibcli import engines as shared
        from calibcli.evaluation.metrics.segment_states import SegmentStates
        from calibcli.evaluation.state.binary import merge_states

        parts, segmented = [], []
        for b in batches:
            if b.num_rows:
                pdf = b.to_pandas()
                parts.append(shared.partition_states(pdf, probs, options))
                if options.segments:
                    segmented.append(shared.partition_segments(
                        pdf, probs, options, kinds, {c: b.column(c) for c in options.segments.cols}))
        if not parts:
            return
        bad = sum(b for _, b in parts)
        part = TaskContext.get().partitionId()
        blob = pickle.dumps(SegmentStates.merge(segmented), protocol=5) if segmented else None
        for i in range(len(probs)):
            table = merge_states([states[i] for states, _ in parts]).to_arrow()
            table = table.append_column("column", pa.array([i], pa.int32()))
            table = table.append_column("bad", pa.array([bad.tolist()], pa.list_(pa.int64())))
            table = table.append_column("part", pa.array([part], pa.int32()))
            yield table.append_column("segments", pa.array([blob if i == 0 else None], pa.binary())).to_batches()[0]

    shipped = df.select(*(quote(c) for c in keep)).mapInArrow(partition_state, _STATE_SCHEMA).toArrow()
    from calibcli.evaluation.state.binary import EvalState

    column = shipped.column("column").to_numpy()
    segments_state = _segments(shipped.filter(column == 0)) if options.segments else None
    shipped = shipped.drop_columns(["part", "segments"])
    states = [EvalState.from_arrow(shipped.filter(column == i).drop_columns(["column", "bad"]))
              if (column == i).any() else None for i in range(len(probs))]
    bad = np.sum(np.array(shipped.column("bad").to_pylist(), dtype=np.int64).reshape(-1, 2 + len(probs))
                 [column == 0], axis=0) if shipped.num_rows else np.zeros(2 + len(probs), dtype=np.int64)
    if any(s is None for s in states):
        states = []
    return engines.evaluation(SOURCE, columns, states, bad, options, segments_state)


def _segments(first):
    """The partitions' multicalibration states (pickled by our own workers; `first`: one row a
    partition), merged in partition order: the rows one after the other as the input holds them."""
    import pickle

    from calibcli.evaluation.metrics.segment_states import SegmentStates

    order = np.argsort(first.column("part").to_numpy(), kind="stable")
    blobs = first.column("segments").to_pylist()
    return SegmentStates.merge([pickle.loads(blobs[i]) for i in order if blobs[i] is not None])


def evaluate_kclass(df: DataFrame, kclass_cols: Sequence[str] = (), maps: Sequence[Any] = (), *,
                    label_col: str = "label", weight_col: str | None = None, classes: Sequence[str] | None = None,
                    score_cols: str | None = None, ece_bins: int = 10, ece_strategy: str = "uniform",
                    metrics: str = "default", bands: int | None = None, seed: int = 0, hl_groups: int = 10,
                    segment_cols: Sequence[str] = (), segment_bins: int | None = None, segment_top: int | None = None,
                    segment_depth: int | None = None, segment_min_rows: int | None = None,
                    segment_max: int | None = None, segments: int | None = None):
    """`calib evaluate --prob-cols SPEC ... --map M ...` on a Spark DataFrame (an
    `Evaluation`), the arguments as `engines.kclass.plan` reads them and `metrics`, `bands`,
    `seed`, `hl_groups` as `calib evaluate --metrics ...`, the `segment_*` options as
    `--segment-col ...` (the top-label multicalibration error). Each partition (`mapInArrow`) ships
    one `KClassState` per prediction (`KClassState.to_arrow` rows); the driver merges them."""
    from calibcli.engines import kclass

    check_python_workers(df)
    cols, options = kclass.plan(df.columns, SOURCE, kclass_cols, maps, classes=classes, score_cols_spec=score_cols,
                                label_col=label_col, weight_col=weight_col, ece_bins=ece_bins,
                                ece_strategy=ece_strategy, metrics=metrics, bands=bands, seed=seed, hl_groups=hl_groups,
                                segment_options=dict(segment_cols=segment_cols, segment_bins=segment_bins,
                                                     segment_top=segment_top, segment_depth=segment_depth,
                                                     segment_min_rows=segment_min_rows, segment_max=segment_max,
                                                     segments=segments))
    keep, segment_cols = kclass.read_columns(cols, options, label_col, weight_col)
    numeric = (T.FloatType, T.DoubleType, T.DecimalType)
    kinds = engines.segment_kinds(segment_cols, lambda c: isinstance(df.schema[c].dataType, numeric))

    def partition_state(batches):
        import pickle

        import pyarrow as pa
        from pyspark import TaskContext

        from calibcli.engines import kclass as shared
        from calibcli.evaluation.metrics.segment_states import SegmentStates
        from calibcli.evaluation.state.kclass import merge_kclass_states

        parts, segmented = [], []
        for b in batches:
            if b.num_rows:
                pdf = b.to_pandas()
                parts.append(shared.partition_states(pdf, cols, label_col, weight_col))
                if segment_cols:
                    segmented.append(shared.partition_segments(pdf, cols, label_col, weight_col, kinds, segment_cols,
                                                               {c: b.column(c) for c in segment_cols}))
        if not parts:
            return
        bad = sum(b for _, _, b in parts)
        blob = pickle.dumps(SegmentStates.merge(segmented), protocol=5) if segmented else None
        part = TaskContext.get().partitionId()
        for i in range(len(cols)):
            table = merge_kclass_states([states[i] for states, _, _ in parts]).to_arrow()
            n = table.num_rows
            how = shared.joint_how([hows[i] for _, hows, _ in parts])
            yield from pa.table({**{c: table.column(c) for c in table.column_names},
                                 "column": pa.array([i] * n, pa.int32()),
                                 "bad": pa.array([bad.tolist()] * n, pa.list_(pa.int64())),
                                 "how": pa.array([how] * n, pa.string()),
                                 "part": pa.array([part] * n, pa.int32()),
                                 "segments": pa.array([blob if i == 0 and j == 0 else None for j in range(n)],
                                                      pa.binary())}).to_batches()

    shipped = df.select(*(quote(c) for c in keep)).mapInArrow(partition_state, _KCLASS_SCHEMA).toArrow()
    from calibcli.evaluation.state.kclass import KClassState

    column, part = shipped.column("column").to_numpy(), shipped.column("kclass_part").to_numpy()
    first = part == 0  # one row per partition and prediction
    segments_state = _segments(shipped.filter(first & (column == 0))) if segment_cols else None
    shipped = shipped.drop_columns(["part", "segments"])
    hows = [kclass.joint_how(shipped.filter(first & (column == i)).column("how").to_pylist()) for i in range(len(cols))]
    states = [KClassState.from_arrow(shipped.filter(column == i).drop_columns(["column", "bad", "how"]))
              for i in range(len(cols))] if shipped.num_rows else []
    width = 1 + 2 * len(cols)
    bad = np.sum(np.array(shipped.filter(first & (column == 0)).column("bad").to_pylist(), dtype=np.int64)
                 .reshape(-1, width), axis=0) if shipped.num_rows else np.zeros(width, dtype=np.int64)
    return kclass.evaluation(SOURCE, cols, states, hows, bad, label_col=label_col, weight_col=weight_col,
                             ece_bins=ece_bins, ece_strategy=ece_strategy, score_cols_spec=score_cols,
                             choice=options.choice, options=options, segments=segments_state)
