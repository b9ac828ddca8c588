"""calibcli inside Spark and Dask jobs: `calibcli.engines.spark` and `calibcli.engines.dask`.

Both modules offer the same four functions on their engine's DataFrames:

- `summarize(df, ...)`: the score summary (`calib summarize`) as one engine aggregation;
- `fit(df, method, ...)`: a map fitted on that summary, for every method that fits from a
  summary (bit-identical to `calib summarize` + `calib fit --from-summary` on the same rows);
- `apply(df, map, score_col, out_col)`: a new DataFrame with the calibrated column;
- `evaluate(df, ...)`: the metrics of `calib evaluate`, from per-partition states merged.

This package imports no engine: `import calibcli.engines.spark` needs pyspark
(`pip install calibcli[spark]`), `calibcli.engines.dask` needs dask (`calibcli[dask]`).
What the engines share (checks, summary assembly, fitting, per-batch prediction) is here.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from calibcli import kinds
from calibcli.calibrators import Calibrator
from calibcli.errors import InputError, UsageError
from calibcli.requests import EvaluateOptions, FitRequest, step_option


def check_columns(columns: list[str], source: str, **named: str | None) -> None:
    """Every given column (flag -> name) exists; a missing one raises InputError naming the option."""
    for flag, name in named.items():
        if name is not None and name not in columns:
            raise InputError(f"{source}: no column {name!r} ({flag})",
                             hint="columns: " + ", ".join(columns[:20]))


def check_bad_rows(source: str, counts: Mapping[str, tuple[str, int]]) -> None:
    """Raise InputError for the first column with invalid rows: counts maps column -> (what, n)."""
    for column, (what, n) in counts.items():
        if n:
            raise InputError(f"{source}: column {column!r}: {n} row{'s' if n != 1 else ''} with {what}",
                             hint="filter or repair those rows before calling calibcli")


def build_summary(keys: np.ndarray, n0: np.ndarray, n1: np.ndarray, rows: int, positives: int,
                  score_range: tuple[float, float], weighted: bool, step: float | None,
                  meta: Mapping[str, Any]):
    """A ScoreSummary from per-key sums collected from an engine (any order, keys distinct)."""
    from calibcli.fitting import summary

    if rows == 0:
        raise InputError(f"{meta.get('input', 'DataFrame')}: no data rows")
    order = np.argsort(keys, kind="stable")
    return summary.ScoreSummary(
        np.ascontiguousarray(keys[order], dtype=np.float64), np.asarray(n0[order], dtype=np.float64),
        np.asarray(n1[order], dtype=np.float64), int(rows), int(positives),
        (float(score_range[0]), float(score_range[1])), weighted=weighted, step=step, meta=dict(meta))


def fit_summary(summarize: Any, method: str, params: Mapping[str, Any] | None, seed: int | None,
                output: str | None, strict: bool):
    """Both engines' `fit`: the request checked before `summarize()` reads any row, then
    `fitting.fit_summary` on its summary (a FitResult, the map saved when `output`)."""
    from calibcli.fitting import pipeline as fitting

    request = FitRequest.build(method, params, seed=seed, from_summary=True)
    summ = summarize()
    return fitting.fit_summary(summ, request, str(summ.meta.get("input", "DataFrame")), out=output, strict=strict)


def resolve_map(map: Any) -> tuple[Any, dict[str, Any]]:
    """(fitted map, envelope) from a map path, a fitted map (a Calibrator or a ClassMap), a
    FitResult or an envelope dict."""
    from calibcli.maps import envelope as maps

    if isinstance(map, str):
        return maps.load_map(map)
    if isinstance(map, Mapping):
        envelope = dict(map)
        return maps.envelope_to_calibrator(envelope, "map"), envelope
    if hasattr(map, "calibrator") and hasattr(map, "training"):  # a FitResult
        return map.calibrator, maps.make_envelope(map.calibrator, map.training)
    if hasattr(map, "envelope_fields"):
        return map, maps.make_envelope(map)
    raise UsageError(f"map must be a path, a fitted calibrator or a map envelope, got {type(map).__name__}")


def predict_array(cal: Calibrator, s: np.ndarray, features: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """`calib apply` on finite scores; NaN (and null, read as NaN), infinite and refused
    (`io.refused_scores`) scores give NaN: no value where `calib apply` would stop."""
    from calibcli import io

    s = np.asarray(s, dtype=np.float64)
    ok = np.isfinite(s) & ~io.refused_scores(cal, s)
    if ok.all():
        return cal.predict(s, features)
    p = np.full(s.shape, np.nan)
    if ok.any():
        p[ok] = cal.predict(s[ok], {k: v[ok] for k, v in features.items()} if features else None)
    return p


def predict_arrow_batch(cal: Calibrator, batch, score_col: str, out_col: str):
    """`batch` with the column `out_col` added (null where the score is null or refused)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from calibcli import io

    col = batch.column(score_col).cast(pa.float64())
    s = col.fill_null(float("nan")).to_numpy(zero_copy_only=False)
    categorical, numeric = cal.input_features()
    features = {c: io.field_values(batch, c, "DataFrame") for c in categorical}
    features.update({c: batch.column(c).cast(pa.float64()).fill_null(float("nan")).to_numpy(zero_copy_only=False)
                     for c in numeric})
    p = predict_array(cal, s, features or None)
    missing = io.refused_scores(cal, s)
    if col.null_count:
        missing |= np.asarray(pc.is_null(col))
    out = pa.array(p, mask=missing if missing.any() else None)
    return pa.RecordBatch.from_arrays([*batch.columns, out], names=[*batch.schema.names, out_col])


# ---------------------------------------------------------------------------- evaluation


def floats(series) -> np.ndarray:
    """A pandas column (numbers, booleans, numeric text) as float64; missing or unparseable -> NaN."""
    import pandas as pd

    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def labels(series) -> np.ndarray:
    """0.0/1.0 from a pandas column of binary labels, read as the CLI reads them
    (`kinds.labels`); NaN where a label is missing or not 0/1."""
    from calibcli.kinds.labels import BinaryLabels

    return BinaryLabels().values(series)


def field_values(series) -> np.ndarray:
    """A categorical pandas column as strings, missing values as '' (as `calib evaluate` reads
    them); booleans as Arrow casts them (true, false), as `calib apply` reads a Parquet boolean."""
    import pandas as pd

    if series.dtype.kind in "bO" or str(series.dtype) in ("boolean", "bool[pyarrow]"):
        if pd.api.types.infer_dtype(series, skipna=True) == "boolean":  # also an object column of bools and None
            series = series.map({True: "true", False: "false"}, na_action="ignore")
    return series.astype("string").fillna("").to_numpy(dtype=object)


def partition_states(pdf, columns: list[str], options: EvaluateOptions):
    """One evaluation state per probability column of a pandas partition, and bad-row counts.

    Counts: [labels not 0/1, weights invalid, then per column p null/NaN/outside [0, 1]];
    invalid rows are left out of the states (the caller raises when any count is not 0).
    """
    from calibcli.evaluation.state.binary import EvalState

    weight_col, field_col = options.weight_col, options.field_col
    y = labels(pdf[options.label_col])
    w = floats(pdf[weight_col]) if weight_col else None
    bad_w = (~np.isfinite(w) | (w < 0)) if w is not None else np.zeros(y.size, dtype=bool)
    fields = field_values(pdf[field_col]) if field_col else None
    bad = [int(np.isnan(y).sum()), int(bad_w.sum())]
    states = []
    for column in columns:
        p = floats(pdf[column])
        invalid = ~np.isfinite(p) | (p < 0) | (p > 1)
        bad.append(int(invalid.sum()))
        ok = ~(invalid | np.isnan(y) | bad_w)
        states.append(EvalState.from_arrays(y[ok], p[ok], None if fields is None else fields[ok],
                                            None if w is None else w[ok], options.step))
    return states, np.array(bad, dtype=np.int64)


def segment_kinds(cols, is_numeric) -> dict[str, str]:
    """Each segment column's kind (`evaluation.multical`): numeric where `is_numeric(col)` (the
    engine's float or decimal types), else categorical; decided once, on the driver."""
    from calibcli.evaluation.metrics.segments import CATEGORICAL, NUMERIC

    return {c: NUMERIC if is_numeric(c) else CATEGORICAL for c in cols}


def partition_segments(pdf, columns: list[str], options: EvaluateOptions, kinds: Mapping[str, str],
                       values: Mapping[str, Any] | None = None):
    """The multicalibration state of a pandas partition (`--segment-col`), one prediction per
    probability column, over its rows that every column reads as valid (a partition with invalid
    rows makes `evaluation` refuse the input anyway); None without segments. `values`: the
    segment columns as the engine holds them (Arrow arrays for Spark), else from `pdf`."""
    from calibcli.evaluation.metrics.segment_states import SegmentStates

    if options.segments is None:
        return None
    y = labels(pdf[options.label_col])
    w = floats(pdf[options.weight_col]) if options.weight_col else None
    ps = [floats(pdf[c]) for c in columns]
    ok = ~np.isnan(y) if w is None else ~np.isnan(y) & np.isfinite(w) & (w >= 0)
    for p in ps:
        ok &= np.isfinite(p) & (p >= 0) & (p <= 1)
    values = values if values is not None else {c: pdf[c] for c in options.segments.cols}
    keep = None if ok.all() else ok
    states = SegmentStates(len(columns), kinds)
    states.add([y if keep is None else y[keep]] * len(columns), [p if keep is None else p[keep] for p in ps],
               {c: rows_of(v, keep) for c, v in values.items()},
               None if w is None else w if keep is None else w[keep])
    return states


def rows_of(values: Any, keep: np.ndarray | None) -> Any:
    """The kept rows of a pandas or Arrow column (all of them when `keep` is None)."""
    if keep is None:
        return values
    if hasattr(values, "filter") and hasattr(values, "type"):  # pyarrow
        import pyarrow as pa

        return values.filter(pa.array(keep))
    return values[keep]


def evaluation(source: str, columns: list[tuple[str, str, str]], states: list, bad: np.ndarray,
               options: EvaluateOptions, segments: Any = None):
    """The `calib evaluate` report (`Evaluation`; `.to_json()` is --json) from merged states.

    `columns` are (name, kind, column) as evaluated; `bad` the summed `partition_states` counts;
    `options.choice` the metrics (`--metrics`); `segments` the merged `partition_segments`
    (with `--segment-col`).
    """
    from calibcli.evaluation.results import EvalRow, Evaluation

    label_col, score_col, weight_col = options.label_col, options.score_col, options.weight_col
    calbin_window = options.calbin_window
    check_bad_rows(source, {
        label_col: ("a label that is not 0 or 1", int(bad[0])),
        **({weight_col: ("a null, negative or non-finite weight", int(bad[1]))} if weight_col else {}),
    })
    check_bad_rows(source, {
        (column if kind == "column" else score_col): (
            "a probability that is null, NaN or outside [0, 1]" if kind == "column"
            else "a null, NaN or infinite score", int(n))
        for (_, kind, column), n in zip(columns, bad[2:])})
    if not states or states[0].rows == 0:
        raise InputError(f"{source}: no data rows")
    results = []
    for (name, kind, _), state in zip(columns, states):
        choice = options.choice
        row = EvalRow(name, kind, state.metrics(calbin_window, choice=choice))
        row.mce_count = state.mce_count()
        row.step_bounds = state.step_bounds(calbin_window, choice)
        results.append(row)
    add_segments(results, segments, options)
    return Evaluation(source, states[0].rows, states[0].positives, options.field_col, calbin_window, results,
                      weight_col=weight_col, step=options.step, label_col=label_col,
                      score_col=score_col if any(kind == "map" for _, kind, _ in columns) else None,
                      hl_groups=options.choice.hl_groups, **segment_settings(options))


def add_segments(results: list, segments: Any, options: EvaluateOptions, prefix: str = "") -> None:
    """Each result row's multicalibration error and worst segments, from the merged state."""
    if options.segments is None or segments is None:
        return
    from calibcli.evaluation import multical

    for row, result in zip(results, segments.results(multical.options_of(options.segments))):
        multical.fill_row(row, result, options.segments, prefix)


def segment_settings(options: EvaluateOptions) -> dict[str, Any]:
    """The segment options a report records (`requests.segments`)."""
    from calibcli.requests.segments import NO_SEGMENTS

    return options.segments.settings() if options.segments else NO_SEGMENTS


def evaluate_columns(prob_cols, maps_, score_col: str) -> list[str]:
    """The probability columns to evaluate: the score itself when neither columns nor maps are given."""
    if isinstance(prob_cols, str) or isinstance(maps_, (str, Calibrator)):
        raise UsageError("prob_cols and maps are lists (of column names, of maps)")
    return list(prob_cols) if (prob_cols or maps_) else [score_col]


def map_name(map: Any, cal: Calibrator) -> str:
    """The name `calib evaluate` gives a map: its file name, else the method."""
    from calibcli import io

    return io.display_name(map) if isinstance(map, str) else cal.name


def plan_evaluation(df: Any, apply: Any, source: str, prob_cols: Any, maps_: Any,
                    options: EvaluateOptions) -> tuple[Any, list[tuple[str, str, str]], list[str]]:
    """What both engines' `evaluate` do first, once the options are checked: check the columns,
    add one column per map (the engine's own `apply`), and name the columns to keep. Returns
    (df, [(name, kind, column)], columns to keep)."""
    names = evaluate_columns(prob_cols, maps_, options.score_col)
    label_col, field_col, weight_col = options.label_col, options.field_col, options.weight_col
    segment_cols = options.segments.cols if options.segments else ()
    check_columns(list(df.columns), source, label_col=label_col, field_col=field_col,
                  weight_col=weight_col, **{f"prob_col {c!r}": c for c in names},
                  **{f"segment_col {c!r}": c for c in segment_cols})
    columns = [(c, "column", c) for c in names]
    for i, m in enumerate(maps_):
        cal, envelope = resolve_map(m)
        kinds.require(cal, kinds.BINARY, f"the map {map_name(m, cal)}", hint="evaluate it with evaluate_kclass")
        df = apply(df, envelope, options.score_col, f"__calibcli_map_{i}")
        columns.append((map_name(m, cal), "map", f"__calibcli_map_{i}"))
    keep = list(dict.fromkeys([label_col, *(c for _, _, c in columns),
                               *(c for c in (field_col, weight_col) if c), *segment_cols]))
    return df, columns, keep
