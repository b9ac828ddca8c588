"""What each command does, as library functions: read files, fit/apply/evaluate, write results.

No printing here: functions return data (and raise CalibError subclasses); `cli.py` decides
what to show. Warnings from calibrators are collected and returned for the CLI to print.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from calibcli import io, maps, metrics
from calibcli.calibrators import Calibrator, registry
from calibcli.errors import CalibError, CalibWarning, FitError, InputError, UsageError


@dataclass
class Columns:
    """Which input columns hold what (the --*-col options)."""

    score: str = "score"
    label: str = "label"
    weight: str | None = None
    fields: tuple[str, ...] = ()
    features: tuple[str, ...] = ()


@dataclass
class FitResult:
    calibrator: Calibrator
    training: dict[str, Any]
    envelope: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


def _read_features(table, cols: Columns, source: str) -> dict[str, np.ndarray] | None:
    feats: dict[str, np.ndarray] = {}
    for name in cols.fields:
        feats[name] = io.field_values(table, name, source)
    for name in cols.features:
        feats[name] = io.scores_from(table, name, source, flag="--feature-col")
    return feats or None


def _quality(y: np.ndarray, p: np.ndarray) -> dict[str, float]:
    return {"log_loss": metrics.log_loss(y, p), "brier": metrics.brier(y, p)}


def fit_file(
    path: str,
    method: str,
    params: dict[str, str],
    cols: Columns,
    fmt: str | None = None,
    seed: int | None = None,
    out: str | None = None,
) -> FitResult:
    """Fit `method` on a score/label file and, when `out` is given, save the map there."""
    cls = registry.get(method)
    if seed is not None:
        if "seed" not in {p.name for p in cls.params}:
            raise UsageError(f"method {method!r} is deterministic and takes no --seed")
        params = {**params, "seed": str(seed)}
    if (cols.fields or cols.features) and not cls.uses_features:
        raise UsageError(
            f"method {method!r} uses only the score; --field-col/--feature-col are for field-aware methods",
            hint="use `calib evaluate --field-col` to measure field-level calibration",
        )
    calibrator = cls.from_cli(params)
    source = io.display_name(path)
    table = io.read_table(path, fmt, string_columns=cols.fields)
    if table.num_rows == 0:
        raise InputError(f"{source}: no data rows")
    s = io.scores_from(table, cols.score, source)
    y = io.labels_from(table, cols.label, source)
    w = io.weights_from(table, cols.weight, source) if cols.weight else None
    feats = _read_features(table, cols, source)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibWarning)
        try:
            calibrator.fit(s, y, weights=w, features=feats)
        except FitError as exc:
            raise FitError(f"{source}: cannot fit {method}: {exc.message}", hint=exc.hint) from None
    messages = [str(c.message) for c in caught if issubclass(c.category, CalibWarning)]
    training: dict[str, Any] = {
        "input": source,
        "rows": int(s.size),
        "positives": int(np.sum(y == 1)),
        "negatives": int(np.sum(y == 0)),
        "score_col": cols.score,
        "label_col": cols.label,
        "score_range": [float(s.min()), float(s.max())],
        "seed": calibrator.params.get("seed"),
        "fit": calibrator.summary(),
    }
    if cols.weight:
        training["weight_col"] = cols.weight
    if s.min() >= 0 and s.max() <= 1:
        training["before"] = _quality(y, s)
    training["after"] = _quality(y, calibrator.predict(s, features=feats))
    result = FitResult(calibrator, training, warnings=messages)
    if out is not None:
        result.envelope = maps.save_map(calibrator, out, training)
    return result


def apply_file(
    map_path: str,
    path: str,
    out: str,
    score_col: str = "score",
    output_col: str = "calibrated",
    input_format: str | None = None,
    output_format: str | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """Stream `path` through a saved map, writing every input column plus `output_col`.

    Returns the number of rows written. Memory stays at a few record batches.
    """
    if map_path == "-" and path == "-":
        raise UsageError("the map and the input cannot both come from stdin")
    calibrator, _ = maps.load_map(map_path)
    categorical, numeric = calibrator.input_features()
    source, schema, batches = io.iter_batches(path, input_format, string_columns=tuple(categorical))
    name = source.name
    if score_col not in schema.names:
        raise io.missing_column(score_col, schema.names, name, "--score-col")
    missing = [c for c in (*categorical, *numeric) if c not in schema.names]
    if missing:
        raise InputError(f"{name}: the map needs feature column(s) {', '.join(map(repr, missing))}, "
                         f"which the input does not have")
    if output_col in schema.names:
        raise UsageError(f"{name}: input already has a column {output_col!r}",
                         hint="choose another name with --output-col")
    out_fmt = output_format or (io.format_from_path(out) if out != "-" else None) or source.format
    io.check_format(out_fmt)
    io.refuse_binary_tty(out, out_fmt)
    out_schema = schema.append(pa.field(output_col, pa.float64()))
    rows = 0
    with io.atomic_output(out) as fh:
        writer = io.BatchWriter(fh, out_fmt, out_schema)
        for batch in batches:
            s = io.scores_from(batch, score_col, name, offset=rows)
            feats = None
            if categorical or numeric:
                feats = {c: io.field_values(batch, c, name) for c in categorical}
                feats.update({c: io.scores_from(batch, c, name, offset=rows, flag="--feature-col")
                              for c in numeric})
            p = calibrator.predict(s, features=feats)
            batch = pa.RecordBatch.from_arrays([*batch.columns, pa.array(p)], schema=out_schema)
            writer.write(batch)
            rows += batch.num_rows
            if on_batch is not None:
                on_batch(batch.num_rows)
        writer.close()
    return rows


@dataclass
class EvalRow:
    name: str
    kind: str  # "column" or "map"
    metrics: dict[str, float]


@dataclass
class Evaluation:
    input: str
    rows: int
    positives: int
    field_col: str | None
    calbin_window: int
    results: list[EvalRow]

    def to_json(self) -> dict[str, Any]:
        """The machine-readable report (`calib evaluate --json`); NaN becomes null."""
        def clean(v: float) -> float | None:
            return None if v != v else v

        return {
            "schema_version": 1,
            "input": self.input,
            "rows": self.rows,
            "positives": self.positives,
            "field_col": self.field_col,
            "calbin_window": self.calbin_window,
            "results": [
                {"name": r.name, "kind": r.kind, "metrics": {k: clean(v) for k, v in r.metrics.items()}}
                for r in self.results
            ],
        }


def evaluate_file(
    path: str,
    prob_cols: Sequence[str],
    map_paths: Sequence[str],
    label_col: str = "label",
    score_col: str = "score",
    field_col: str | None = None,
    calbin_window: int = metrics.CALBIN_WINDOW,
    fmt: str | None = None,
) -> Evaluation:
    """Metrics for each probability column and each map applied to the score column."""
    if calbin_window < 1:
        raise UsageError("--calbin-window must be at least 1")
    if path == "-" and "-" in map_paths:
        raise UsageError("the input and a map cannot both come from stdin")
    loaded = [(m, maps.load_map(m)[0]) for m in map_paths]
    if not prob_cols and not loaded:
        prob_cols = [score_col]
    needed_strings: tuple[str, ...] = (field_col,) if field_col else ()
    for _, cal in loaded:
        needed_strings += tuple(cal.input_features()[0])
    table = io.read_table(path, fmt, string_columns=needed_strings)
    source = io.display_name(path)
    if table.num_rows == 0:
        raise InputError(f"{source}: no data rows")
    y = io.labels_from(table, label_col, source)
    groups = io.field_codes(table, field_col, source)[0] if field_col else None
    results = []
    for col in prob_cols:
        p = io.scores_from(table, col, source, flag="--prob-col")
        _check_probabilities(p, col, source)
        results.append(EvalRow(col, "column", metrics.compute_all(y, p, groups, calbin_window)))
    if loaded:
        s = io.scores_from(table, score_col, source)
        for map_path, cal in loaded:
            categorical, numeric = cal.input_features()
            feats = {c: io.field_values(table, c, source) for c in categorical}
            feats.update({c: io.scores_from(table, c, source, flag="--feature-col") for c in numeric})
            p = cal.predict(s, features=feats or None)
            results.append(EvalRow(io.display_name(map_path), "map",
                                   metrics.compute_all(y, p, groups, calbin_window)))
    return Evaluation(source, int(y.size), int(np.sum(y == 1)), field_col, calbin_window, results)


def _check_probabilities(p: np.ndarray, col: str, source: str) -> None:
    bad = (p < 0) | (p > 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            f"{source}: column {col!r}, row {i + 1}: {p[i]!r} is not a probability in [0, 1]",
            hint="evaluate raw scores through a map with --map, or pick the probability column with --prob-col",
        )


def method_catalogue() -> list[tuple[str, str, list[str]]]:
    """(name, description, parameter lines) for every registered method."""
    return [
        (name, registry.get(name).description, [p.describe() for p in registry.get(name).params])
        for name in registry.available()
    ]


__all__ = ["CalibError", "Columns", "Evaluation", "FitResult", "apply_file", "evaluate_file",
           "fit_file", "method_catalogue"]
