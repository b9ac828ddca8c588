"""calibcli on Dask DataFrames (`pip install calibcli[dask]`).

    import dask.dataframe as dd
    from calibcli.engines import dask as cd
    df = dd.read_parquet("scores/")
    summary = cd.summarize(df)                                    # per-partition summaries, merged
    fitted = cd.fit(df, "isotonic", output="map.json")            # FitResult
    scored = cd.apply(df, "map.json", out_col="p")                # lazy, map_partitions
    report = cd.evaluate(scored, prob_cols=["p"], field_col="field")
    kreport = cd.evaluate_kclass(df, ["p_*"], label_col="label")   # K-class predictions

Every partition is summarised with `calibcli.fitting.summary.summarize` (the CLI's own code) and
the partial summaries are merged pairwise in a tree of delayed tasks, so maps are
bit-identical to `calib summarize` + `calib fit --from-summary` (for fractional weights
when the per-score sums are exact in any order, e.g. whole-number or dyadic weights).
`apply` runs the map's `predict` on each partition (`map_partitions`). Works with any
scheduler; the tests use the threaded one.

Invalid rows (missing, NaN or infinite scores, labels other than 0/1, negative or
non-finite weights) make `summarize`, `fit` and `evaluate` raise InputError with their
count; `apply` gives NaN for missing or non-finite scores.
"""

from __future__ import annotations

from typing import Any, Mapping

import dask
import numpy as np
import pandas as pd

from calibcli import engines
from calibcli.errors import UsageError
from calibcli.requests import EvaluateOptions, step_option

SOURCE = "Dask DataFrame"


floats, labels = engines.floats, engines.labels


def _partial_summary(pdf: pd.DataFrame, score_col: str, label_col: str, weight_col: str | None,
                     step: float | None):
    """(summary of the valid rows, bad-row counts) of one partition."""
    from calibcli.fitting import summary

    s, y = floats(pdf[score_col]), labels(pdf[label_col])
    w = floats(pdf[weight_col]) if weight_col else None
    bad_s, bad_y = ~np.isfinite(s), np.isnan(y)
    bad_w = ~np.isfinite(w) | (w < 0) if w is not None else np.zeros(s.size, dtype=bool)
    ok = ~(bad_s | bad_y | bad_w)
    part = summary.summarize(s[ok], y[ok], None if w is None else w[ok], step=step)
    return part, np.array([bad_s.sum(), bad_y.sum(), bad_w.sum()], dtype=np.int64)


def _merge_pair(a, b):
    from calibcli.fitting import summary

    return summary.merge([a[0], b[0]]), a[1] + b[1]


def tree_reduce(parts: list, combine) -> Any:
    """Combine delayed values pairwise, level by level (depth log2 of the partitions)."""
    while len(parts) > 1:
        pairs = [dask.delayed(combine)(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        parts = pairs + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


def summarize(df, score_col: str = "score", label_col: str = "label", weight_col: str | None = None,
              step: float | None = None):
    """The ScoreSummary of `calib summarize` (optionally bucketed to multiples of `step`)."""
    step = step_option(step)
    engines.check_columns(list(df.columns), SOURCE, score_col=score_col, label_col=label_col,
                          weight_col=weight_col)
    columns = [c for c in dict.fromkeys((score_col, label_col, weight_col)) if c is not None]
    parts = [dask.delayed(_partial_summary)(p, score_col, label_col, weight_col, step)
             for p in df[columns].to_delayed()]
    merged, bad = dask.compute(tree_reduce(parts, _merge_pair))[0]
    engines.check_bad_rows(SOURCE, {
        score_col: ("a null, NaN or infinite score", int(bad[0])),
        label_col: ("a label that is not 0 or 1", int(bad[1])),
        **({weight_col: ("a null, negative or non-finite weight", int(bad[2]))} if weight_col else {}),
    })
    meta = {"input": SOURCE, "score_col": score_col, "label_col": label_col,
            **({"weight_col": weight_col} if weight_col else {})}
    merged.weighted = weight_col is not None
    return engines.build_summary(merged.score, merged.n0, merged.n1, merged.rows, merged.positives,
                                 merged.score_range, merged.weighted, step, meta)


def fit(df, method: str = "isotonic", params: Mapping[str, Any] | None = None, *,
        score_col: str = "score", label_col: str = "label", weight_col: str | None = None,
        step: float | None = None, seed: int | None = None, output: str | None = None,
        strict: bool = False):
    """Fit `method` on the summary of `df`; returns a `fitting.FitResult` (map saved to `output`)."""
    return engines.fit_summary(lambda: summarize(df, score_col, label_col, weight_col, step), method, params,
                               seed, output, strict)


def _apply_partition(pdf: pd.DataFrame, cal, score_col: str, out_col: str) -> pd.DataFrame:
    categorical, numeric = cal.input_features()
    features = {c: engines.field_values(pdf[c]) for c in categorical}
    features.update({c: floats(pdf[c]) for c in numeric})
    p = engines.predict_array(cal, floats(pdf[score_col]), features or None)
    return pdf.assign(**{out_col: p})


def apply(df, map: Any, score_col: str = "score", out_col: str = "calibrated"):
    """`df` with `out_col` added, partition by partition (`map_partitions`)."""
    cal, _ = engines.resolve_map(map)
    categorical, numeric = cal.input_features()
    engines.check_columns(list(df.columns), SOURCE, score_col=score_col,
                          **{f"feature {c!r}": c for c in (*categorical, *numeric)})
    if out_col in df.columns:
        raise UsageError(f"{SOURCE}: already has a column {out_col!r}", hint="choose another out_col")
    meta = df._meta.assign(**{out_col: pd.Series(dtype="float64")})
    return df.map_partitions(_apply_partition, cal, score_col, out_col, meta=meta)


def _merge_evaluations(a, b):
    from calibcli.evaluation.state.binary import merge_states

    return [merge_states([u, v]) for u, v in zip(a[0], b[0])], a[1] + b[1]


def evaluate(df, prob_cols=(), maps=(), *, label_col: str = "label", score_col: str = "score",
             field_col: str | None = None, weight_col: str | None = None, step: float | None = None,
             calbin_window: int = 100, metrics: str = "default", bands: int | None = None,
             seed: int = 0, hl_groups: int = 10, segment_cols=(), segment_bins: int | None = None,
             segment_top: int | None = None, segment_depth: int | None = None,
             segment_min_rows: int | None = None, segment_max: int | None = None, segments: int | None = None):
    """The report of `calib evaluate` (an `Evaluation`; `.to_json()` is its --json);
    `metrics`, `bands`, `seed`, `hl_groups` as `calib evaluate --metrics ...`, `segment_cols`
    and the other `segment_*` options and `segments` as `--segment-col ...` (the
    multicalibration error; a float column is numeric, any other dtype categorical).

    Each partition becomes one `EvalState` per probability column (and per map applied to
    `score_col`); the states merge pairwise in a tree of delayed tasks. With `segment_cols`,
    each partition's rows (p, labels and segment columns, `engines.partition_segments`) are
    merged in partition order into one state, which holds every row.
    """
    options = EvaluateOptions.build(label_col=label_col, score_col=score_col, field_col=field_col,
                                    weight_col=weight_col, step=step, calbin_window=calbin_window, metrics=metrics,
                                    bands=bands, seed=seed, hl_groups=hl_groups, segment_cols=segment_cols,
                                    segment_bins=segment_bins, segment_top=segment_top, segment_depth=segment_depth,
                                    segment_min_rows=segment_min_rows, segment_max=segment_max, segments=segments)
    df, columns, keep = engines.plan_evaluation(df, apply, SOURCE, prob_cols, maps, options)
    probs = [c for _, _, c in columns]
    frames = df[keep].to_delayed()
    parts = [dask.delayed(engines.partition_states)(p, probs, options) for p in frames]
    segmented = None
    if options.segments:
        from calibcli.evaluation.metrics.segment_states import SegmentStates

        kinds = engines.segment_kinds(options.segments.cols, lambda c: pd.api.types.is_float_dtype(df.dtypes[c]))
        segmented = dask.delayed(SegmentStates.merge)(
            [dask.delayed(engines.partition_segments)(p, probs, options, kinds) for p in frames])
    (states, bad), segments_state = dask.compute(tree_reduce(parts, _merge_evaluations), segmented)
    return engines.evaluation(SOURCE, columns, states, bad, options, segments_state)


def _merge_kclass(a, b):
    from calibcli.engines.kclass import joint_how
    from calibcli.evaluation.state.kclass import merge_kclass_states

    return ([merge_kclass_states([u, v]) for u, v in zip(a[0], b[0])],
            [joint_how([u, v]) for u, v in zip(a[1], b[1])], a[2] + b[2])


def evaluate_kclass(df, kclass_cols=(), maps=(), *, label_col: str = "label", weight_col: str | None = None,
                    classes=None, score_cols: str | None = None, ece_bins: int = 10, ece_strategy: str = "uniform",
                    metrics: str = "default", bands: int | None = None, seed: int = 0, hl_groups: int = 10,
                    segment_cols=(), segment_bins: int | None = None, segment_top: int | None = None,
                    segment_depth: int | None = None, segment_min_rows: int | None = None,
                    segment_max: int | None = None, segments: int | None = None):
    """`calib evaluate --prob-cols SPEC ... --map M ...` on a Dask frame (an `Evaluation`):
    the arguments as `engines.kclass.plan` reads them; `metrics`, `bands`, `seed`, `hl_groups`
    as `calib evaluate --metrics ...` (the top-label metrics), the `segment_*` options as
    `--segment-col ...` (the top-label multicalibration error). Each partition becomes one
    `KClassState` per prediction; the states merge in a tree of delayed tasks."""
    from calibcli.engines import kclass

    preds, options = kclass.plan(list(df.columns), SOURCE, kclass_cols, maps, classes=classes,
                                 score_cols_spec=score_cols, label_col=label_col, weight_col=weight_col,
                                 ece_bins=ece_bins, ece_strategy=ece_strategy, metrics=metrics, bands=bands, seed=seed,
                                 hl_groups=hl_groups,
                                 segment_options=dict(segment_cols=segment_cols, segment_bins=segment_bins,
                                                      segment_top=segment_top, segment_depth=segment_depth,
                                                      segment_min_rows=segment_min_rows, segment_max=segment_max,
                                                      segments=segments))
    keep, segment_cols = kclass.read_columns(preds, options, label_col, weight_col)
    frames = df[keep].to_delayed()
    parts = [dask.delayed(kclass.partition_states)(p, preds, label_col, weight_col) for p in frames]
    segmented = None
    if segment_cols:
        from calibcli.evaluation.metrics.segment_states import SegmentStates

        kinds = engines.segment_kinds(segment_cols, lambda c: pd.api.types.is_float_dtype(df.dtypes[c]))
        segmented = dask.delayed(SegmentStates.merge)(
            [dask.delayed(kclass.partition_segments)(p, preds, label_col, weight_col, kinds, segment_cols)
             for p in frames])
    (states, hows, bad), segments_state = dask.compute(tree_reduce(parts, _merge_kclass), segmented)
    return kclass.evaluation(SOURCE, preds, states, hows, bad, label_col=label_col, weight_col=weight_col,
                             ece_bins=ece_bins, ece_strategy=ece_strategy, score_cols_spec=score_cols,
                             choice=options.choice, options=options, segments=segments_state)
