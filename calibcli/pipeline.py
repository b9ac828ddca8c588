"""What each command does, as library functions: read files, fit/apply/evaluate, write results.

No printing here: functions return data (and raise CalibError subclasses); `cli.py` decides
what to show. Warnings from calibrators are collected and returned for the CLI to print.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from calibcli import io, maps, output, summary
from calibcli.calibrators import Calibrator, registry
from calibcli.calibrators.base import WEIGHT_KINDS
from calibcli.evaluation import metrics
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


def check_weight_kind(kind: str) -> None:
    """Refuse an unknown --weight-kind before any input is read."""
    if kind not in WEIGHT_KINDS:
        raise UsageError(f"--weight-kind must be one of {', '.join(WEIGHT_KINDS)}, got {kind!r}")


def fit_file(
    path: str,
    method: str,
    params: dict[str, str],
    cols: Columns,
    fmt: str | None = None,
    seed: int | None = None,
    out: str | None = None,
    strict: bool = False,
    weight_kind: str = "frequency",
    out_format: str | None = None,
) -> FitResult:
    """Fit `method` on a score/label file and, when `out` is given, save the map there.

    Warnings (CalibWarnings from the fit, all-equal scores) are returned for the CLI to show;
    with `strict` the first one is a FitError instead and no map is written. `weight_kind`
    says what the --weight-col weights mean (`Calibrator.fit`).
    """
    _claim_map_output(out, out_format, [path])
    cls = registry.get(method)
    if (cols.fields or cols.features) and not cls.uses_features:
        raise UsageError(
            f"method {method!r} uses only the score; --field-col/--feature-col are for field-aware methods",
            hint="use `calib evaluate --field-col` to measure field-level calibration",
        )
    calibrator = _calibrator(cls, params, seed)
    source = io.display_name(path)
    table = io.read_table(path, fmt, string_columns=cols.fields)
    if table.num_rows == 0:
        raise InputError(f"{source}: no data rows")
    s = io.scores_from(table, cols.score, source)
    y = io.labels_from(table, cols.label, source)
    w = io.weights_from(table, cols.weight, source) if cols.weight else None
    _check_map_scores(calibrator, s, cols.score, source, None)
    feats = _read_features(table, cols, source)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibWarning)
        try:
            calibrator.fit(s, y, weights=w, features=feats, weight_kind=weight_kind)
        except FitError as exc:
            raise FitError(f"{source}: cannot fit {method}: {exc.message}", hint=exc.hint) from None
    messages = [str(c.message) for c in caught if issubclass(c.category, CalibWarning)]
    if cls.uses_features and not (cols.fields or cols.features):
        messages.append(f"{method} without --field-col or --feature-col is ilps with extra steps: "
                        "fit --method ilps, or name the feature columns")
    if s.size > 1 and s.min() == s.max():
        messages.append(f"all {s.size} scores equal {float(s[0]):g}: the map is a constant")
    if strict and messages:
        raise FitError(f"{source}: {method}: {messages[0]} (an error with --strict)")
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
        training["weight_kind"] = weight_kind
    if s.min() >= 0 and s.max() <= 1:
        training["before"] = _quality(y, s)
    training["after"] = _quality(y, predict_quietly(calibrator, s, feats))
    result = FitResult(calibrator, training, warnings=messages)
    if out is not None:
        result.envelope = maps.save_map(calibrator, out, training, out_format)
    return result


def _calibrator(cls: type[Calibrator], params: dict[str, str], seed: int | None) -> Calibrator:
    """An unfitted calibrator from `--param` strings and `--seed` (which must not contradict)."""
    if seed is not None:
        if "seed" not in {p.name for p in cls.params}:
            raise UsageError(f"method {cls.name!r} is deterministic and takes no --seed")
        if "seed" in params:
            raise UsageError(f"--seed {seed} and --param seed={params['seed']} both set the seed",
                             hint="give only one of them")
        params = {**params, "seed": str(seed)}
    return cls.from_cli(params)


def _claim_map_output(out: str | None, out_format: str | None, reads: Sequence[str]) -> None:
    """Check a map output against the output policy and its format before any work."""
    if out is not None:
        output.check_output(out, reads)
        maps.map_format(out, out_format)


def apply_file(
    map_path: str,
    path: str,
    out: str,
    score_col: str = "score",
    output_col: str = "calibrated",
    input_format: str | None = None,
    output_format: str | None = None,
    on_batch: Callable[[int], None] | None = None,
    force: bool = False,
) -> int:
    """Stream `path` through a saved map, writing every input column plus `output_col`.

    Returns the number of rows written. Memory stays at a few record batches. A directory
    or glob of Parquet parts is applied part by part into the directory `out` (with
    `force`, an existing one is replaced once the new one is complete).
    """
    if map_path == "-" and path == "-":
        raise UsageError("the map and the input cannot both come from stdin")
    parts = io.is_parts(path)
    output.check_output(out, [map_path, path], directory=parts)
    if parts:
        return _apply_parts(map_path, path, out, score_col, output_col, input_format, output_format, on_batch,
                            force)
    if out != "-" and not output.is_special(out):
        output.output_format(out, output_format, "csv")  # an unknown extension fails before any work
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
    out_fmt, gz = output.output_format(out, output_format, source.format)
    output.refuse_binary_tty(out, out_fmt)
    out_schema = output.writable_schema(schema.append(pa.field(output_col, pa.float64())), out_fmt)
    rows = 0
    with output.atomic_output(out) as fh:
        writer = None  # created after the first batch checks out, so a bad first batch prints nothing
        for batch in batches:
            s = io.scores_from(batch, score_col, name, offset=rows)
            _check_map_scores(calibrator, s, score_col, name, map_path, rows)
            feats = None
            if categorical or numeric:
                feats = {c: io.field_values(batch, c, name) for c in categorical}
                feats.update({c: io.scores_from(batch, c, name, offset=rows, flag="--feature-col")
                              for c in numeric})
            p = predict_quietly(calibrator, s, feats)
            batch = pa.RecordBatch.from_arrays([*batch.columns, pa.array(p)], schema=out_schema)
            writer = writer or output.BatchWriter(fh, out_fmt, out_schema, gzip=gz)
            writer.write(batch)
            rows += batch.num_rows
            if on_batch is not None:
                on_batch(batch.num_rows)
        (writer or output.BatchWriter(fh, out_fmt, out_schema, gzip=gz)).close()
    return rows


def _apply_parts(map_path: str, path: str, out: str, score_col: str, output_col: str,
                 input_format: str | None, output_format: str | None,
                 on_batch: Callable[[int], None] | None, force: bool = False) -> int:
    """Apply a map to every Parquet part of a directory or glob, mirroring the parts under `out`.

    The output directory appears only when every part succeeded.
    """
    if out == "-":
        raise UsageError(f"{path}: a directory or glob of parts needs -o DIR (the parts are mirrored there)")
    if map_path == "-":
        raise UsageError("with a directory or glob of parts the map must be a file, not stdin")
    parts = io.list_parts(path)
    io.check_format(output_format)
    rows = 0
    with output.atomic_output_dir(out, force=force) as tmp:
        for part, relative in parts:
            target = tmp / relative
            fmt = output_format or input_format or io.format_from_path(part) or "parquet"
            if fmt != io.format_from_path(part):
                target = target.with_suffix("." + fmt)
            target.parent.mkdir(parents=True, exist_ok=True)
            rows += apply_file(map_path, part, str(target), score_col, output_col, input_format, fmt, on_batch)
    return rows


def summarize_file(path: str, cols: Columns, fmt: str | None = None, step: float | None = None,
                   on_batch: Callable[[int], None] | None = None) -> summary.ScoreSummary:
    """Stream a score/label file (or directory/glob of Parquet parts) into a mergeable summary."""
    def chunks():
        source, _, batches = io.iter_batches(path, fmt)  # a directory, glob or URI of parts is one dataset
        rows = 0
        for batch in batches:
            s = io.scores_from(batch, cols.score, source.name, offset=rows)
            y = io.labels_from(batch, cols.label, source.name, offset=rows)
            w = io.weights_from(batch, cols.weight, source.name, offset=rows) if cols.weight else None
            rows += batch.num_rows
            if on_batch is not None:
                on_batch(batch.num_rows)
            yield s, y, w

    result = summary.summarize_batches(chunks(), step=step)
    if result.rows == 0:
        raise InputError(f"{io.display_name(path)}: no data rows")
    result.meta.update({"input": io.display_name(path), "score_col": cols.score, "label_col": cols.label,
                        **({"weight_col": cols.weight} if cols.weight else {})})
    return result


def fit_summary_file(
    summary_path: str,
    method: str,
    params: dict[str, str],
    seed: int | None = None,
    out: str | None = None,
    strict: bool = False,
    weight_kind: str = "frequency",
    out_format: str | None = None,
) -> FitResult:
    """Fit a score-only method on a summary (`calib summarize`, or Spark/Dask) instead of rows.

    The summary's n0/n1 are the weights of each score's rows, of kind `weight_kind`.
    """
    _claim_map_output(out, out_format, [summary_path])
    cls = registry.get(method)
    if cls.uses_features:
        raise UsageError(f"method {method!r} uses feature columns, which a score summary does not have")
    return fit_summary(summary.load(summary_path), _calibrator(cls, params, seed),
                       io.display_name(summary_path), out, strict, weight_kind, out_format)


def fit_summary(summ: summary.ScoreSummary, calibrator: Calibrator, source: str, out: str | None = None,
                strict: bool = False, weight_kind: str = "frequency", out_format: str | None = None
                ) -> FitResult:
    """Fit an unfitted score-only calibrator on a summary (from a file, or built by an engine)."""
    method = calibrator.name
    if summ.size == 0:
        raise InputError(f"{source}: the summary holds no scores")
    s, y, w = summary.fit_rows(summ)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibWarning)
        try:
            calibrator.fit(s, y, weights=w, weight_kind=weight_kind)
        except FitError as exc:
            raise FitError(f"{source}: cannot fit {method}: {exc.message}", hint=exc.hint) from None
    messages = [str(c.message) for c in caught if issubclass(c.category, CalibWarning)]
    if strict and messages:
        raise FitError(f"{source}: {method}: {messages[0]} (an error with --strict)")
    n0, n1 = summ.n0, summ.n1
    training: dict[str, Any] = {
        "input": source,
        "from_summary": {"entries": summ.size, "step": summ.step, "weighted": summ.weighted},
        "weight_kind": weight_kind,
        "rows": summ.rows,
        "positives": summ.positives,
        "negatives": summ.rows - summ.positives,
        "score_range": list(summ.score_range),
        "seed": calibrator.params.get("seed"),
        "fit": calibrator.summary(),
    }
    if summ.score[0] >= 0 and summ.score[-1] <= 1:
        training["before"] = {"log_loss": metrics.log_loss_counts(summ.score, n0, n1),
                              "brier": metrics.brier_counts(summ.score, n0, n1)}
    p = predict_quietly(calibrator, summ.score)
    training["after"] = {"log_loss": metrics.log_loss_counts(p, n0, n1), "brier": metrics.brier_counts(p, n0, n1)}
    result = FitResult(calibrator, training, warnings=messages)
    if out is not None:
        result.envelope = maps.save_map(calibrator, out, training, out_format)
    return result


def predict_quietly(cal: Calibrator, s: np.ndarray, features=None) -> np.ndarray:
    """`cal.predict` without numpy's overflow/underflow warnings: a huge score times a slope is
    inf and its sigmoid exactly 0 or 1, which is right, but the warning would print a
    two-line Python warning on stderr."""
    with np.errstate(over="ignore", under="ignore"):
        return cal.predict(s, features=features)


def _check_map_scores(cal: Calibrator, s: np.ndarray, col: str, source: str, map_path: str | None,
                      offset: int = 0) -> None:
    """A method/map for probabilities refuses scores outside [0, 1] (naming the row) instead of clipping."""
    if not cal.needs_probabilities:
        return
    bad = (s < 0) | (s > 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            f"{source}: column {col!r}, row {i + 1 + offset}: score {float(s[i])!r} is outside [0, 1], "
            + (f"but method {cal.name!r} needs probabilities" if map_path is None else
               f"but the {cal.name} map {io.display_name(map_path)} was fitted on probabilities"),
            hint="pass the probability column with --score-col"
            + (", or for log-odds scores fit with --param score_kind=logit" if "score_kind" in cal.params else ""),
        )


__all__ = ["CalibError", "Columns", "FitResult", "apply_file", "fit_file", "fit_summary"]
