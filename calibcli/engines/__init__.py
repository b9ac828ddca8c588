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

from calibcli.calibrators import Calibrator, registry
from calibcli.errors import InputError, UsageError


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
    from calibcli import summary

    if rows == 0:
        raise InputError(f"{meta.get('input', 'DataFrame')}: no data rows")
    order = np.argsort(keys, kind="stable")
    return summary.ScoreSummary(
        np.ascontiguousarray(keys[order], dtype=np.float64), np.asarray(n0[order], dtype=np.float64),
        np.asarray(n1[order], dtype=np.float64), int(rows), int(positives),
        (float(score_range[0]), float(score_range[1])), weighted=weighted, step=step, meta=dict(meta))


def check_step(step: float | None) -> float | None:
    if step is not None and not (np.isfinite(step) and step > 0):
        raise UsageError(f"step must be a positive number, got {step!r}")
    return None if step is None else float(step)


def make_calibrator(method: str, params: Mapping[str, Any] | None, seed: int | None) -> Calibrator:
    """An unfitted score-only calibrator from Python parameter values."""
    cls = registry.get(method)
    if cls.uses_features:
        raise UsageError(f"method {method!r} uses feature columns, which a score summary does not have",
                         hint="fit it with `calib fit --field-col ...` on the rows")
    params = dict(params or {})
    if seed is not None:
        if "seed" not in {p.name for p in cls.params}:
            raise UsageError(f"method {method!r} is deterministic and takes no seed")
        params["seed"] = seed
    return cls(**params)


def fit_summary(summ, method: str, params: Mapping[str, Any] | None, seed: int | None,
                output: str | None, strict: bool):
    """`pipeline.fit_summary` for an engine's summary: a FitResult, the map saved when `output`."""
    from calibcli import pipeline

    calibrator = make_calibrator(method, params, seed)
    return pipeline.fit_summary(summ, calibrator, str(summ.meta.get("input", "DataFrame")), output, strict)


def resolve_map(map: Any) -> tuple[Calibrator, dict[str, Any]]:
    """(calibrator, envelope) from a map path, a fitted Calibrator, a FitResult or an envelope dict."""
    from calibcli import maps

    if isinstance(map, Calibrator):
        return map, maps.make_envelope(map)
    if hasattr(map, "calibrator") and isinstance(map.calibrator, Calibrator):
        return map.calibrator, maps.make_envelope(map.calibrator, map.training)
    if isinstance(map, Mapping):
        envelope = dict(map)
        return maps.envelope_to_calibrator(envelope, "map"), envelope
    if isinstance(map, str):
        return maps.load_map(map)
    raise UsageError(f"map must be a path, a fitted calibrator or a map envelope, got {type(map).__name__}")


def predict_array(cal: Calibrator, s: np.ndarray, features: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """`calib apply` on finite scores; NaN (and null, read as NaN) and infinite scores give NaN."""
    from calibcli import pipeline

    s = np.asarray(s, dtype=np.float64)
    ok = np.isfinite(s)
    if ok.all():
        return pipeline.predict_quietly(cal, s, features)
    p = np.full(s.shape, np.nan)
    if ok.any():
        p[ok] = pipeline.predict_quietly(cal, s[ok], {k: v[ok] for k, v in features.items()} if features else None)
    return p


def predict_arrow_batch(cal: Calibrator, batch, score_col: str, out_col: str):
    """`batch` with the column `out_col` added (null where the score is null)."""
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
    out = pa.array(p, mask=np.asarray(pc.is_null(col)) if col.null_count else None)
    return pa.RecordBatch.from_arrays([*batch.columns, out], names=[*batch.schema.names, out_col])


# ---------------------------------------------------------------------------- evaluation


class EvalParts:
    """What `calib evaluate`'s metrics need for one probability column, merged over partitions.

    `dist` is the distribution of distinct p (a ScoreSummary of p: n0 negatives and n1
    positives per p, sorted); `fields` maps a field name to (rows, sum of y - p, positives).
    Log-loss, Brier, AUC, ECE and CalBin are functions of `dist` (tied p are pooled, so the
    row order never matters); Field-ECE and Field-RCE of `fields`.
    """

    def __init__(self, dist, fields: dict[str, np.ndarray] | None = None):
        self.dist = dist
        self.fields = fields

    def metrics(self, calbin_window: int) -> dict[str, float]:
        """The metrics of `metrics.compute_all`, computed from the merged state."""
        from calibcli.evaluation import metrics

        p, n0, n1 = self.dist.score, self.dist.n0, self.dist.n1
        count = n0 + n1
        rows = float(count.sum())
        k = np.minimum((p * metrics.ECE_BINS).astype(np.int64), metrics.ECE_BINS - 1)
        gap = np.abs(np.bincount(k, weights=count * p, minlength=metrics.ECE_BINS)
                     - np.bincount(k, weights=n1, minlength=metrics.ECE_BINS))
        reps = count.astype(np.int64)
        out = {
            "log_loss": metrics.log_loss_counts(p, n0, n1),
            "brier": metrics.brier_counts(p, n0, n1),
            "auc": metrics.auc_from_ties(n1, n0),
            "ece": float(np.sum(gap) / rows),
            "calbin": metrics.calbin_sorted(np.repeat(p, reps), np.repeat(n1 / count, reps), calbin_window),
            **metrics.distribution_metrics(p, n0, n1),
        }
        if self.fields is not None:
            n, resid, pos = self.fields["rows"], self.fields["resid"], self.fields["positives"]
            out["field_ece"] = float(np.sum(np.abs(resid)) / rows)
            out["field_rce"] = float(np.sum(n * np.abs(resid) / (pos + metrics.FIELD_RCE_EPS * n)) / rows)
        return out


def field_table(names: np.ndarray, rows: np.ndarray, resid: np.ndarray, positives: np.ndarray) -> dict[str, np.ndarray]:
    """Per-field sums keyed by column, merged over duplicate names (partials from partitions)."""
    keys, inverse = np.unique(np.asarray(names, dtype=object).astype(str), return_inverse=True)
    return {"names": keys,
            "rows": np.bincount(inverse, weights=rows, minlength=keys.size),
            "resid": np.bincount(inverse, weights=resid, minlength=keys.size),
            "positives": np.bincount(inverse, weights=positives, minlength=keys.size)}


def evaluation(source: str, parts: list[tuple[str, str, EvalParts]], field_col: str | None,
               calbin_window: int):
    """An `Evaluation` (the `calib evaluate --json` report) from merged states."""
    from calibcli.evaluation.baseline import EvalRow, Evaluation

    if calbin_window < 1:
        raise UsageError("calbin_window must be at least 1")
    first = parts[0][2].dist
    results = [EvalRow(name, kind, state.metrics(calbin_window)) for name, kind, state in parts]
    report = Evaluation(source, int(first.rows), int(first.positives), field_col, calbin_window, results)
    return report


def check_evaluate_args(prob_cols, maps_, score_col: str) -> list[str]:
    """The probability columns to evaluate: the score itself when neither columns nor maps are given."""
    if isinstance(prob_cols, str) or isinstance(maps_, (str, Calibrator)):
        raise UsageError("prob_cols and maps are lists (of column names, of maps)")
    return list(prob_cols) if (prob_cols or maps_) else [score_col]
