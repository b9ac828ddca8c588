"""What each command does, as library functions: read files, fit/apply/evaluate, write results.

No printing here: functions return data (and raise CalibError subclasses); `cli.py` decides
what to show. Warnings from calibrators are collected and returned for the CLI to print.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from calibcli import diagnostics, gates, io, maps, metrics, output, summary
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
    strict: bool = False,
    out_format: str | None = None,
) -> FitResult:
    """Fit `method` on a score/label file and, when `out` is given, save the map there.

    Warnings (CalibWarnings from the fit, all-equal scores) are returned for the CLI to show;
    with `strict` the first one is a FitError instead and no map is written.
    """
    _claim_map_output(out, out_format, [path])
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
    _check_map_scores(calibrator, s, cols.score, source, None)
    feats = _read_features(table, cols, source)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibWarning)
        try:
            calibrator.fit(s, y, weights=w, features=feats)
        except FitError as exc:
            raise FitError(f"{source}: cannot fit {method}: {exc.message}", hint=exc.hint) from None
    messages = [str(c.message) for c in caught if issubclass(c.category, CalibWarning)]
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
    if s.min() >= 0 and s.max() <= 1:
        training["before"] = _quality(y, s)
    training["after"] = _quality(y, predict_quietly(calibrator, s, feats))
    result = FitResult(calibrator, training, warnings=messages)
    if out is not None:
        result.envelope = maps.save_map(calibrator, out, training, out_format)
    return result


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
    parts = io.is_parts(path)
    paths = [p for p, _ in io.list_parts(path)] if parts else [path]

    def chunks():
        for part in paths:
            source, _, batches = io.iter_batches(part, fmt or ("parquet" if parts else None))
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
    out_format: str | None = None,
) -> FitResult:
    """Fit a score-only method on a summary (`calib summarize`, or Spark/Dask) instead of rows."""
    _claim_map_output(out, out_format, [summary_path])
    cls = registry.get(method)
    if cls.uses_features:
        raise UsageError(f"method {method!r} uses feature columns, which a score summary does not have")
    if seed is not None:
        if "seed" not in {p.name for p in cls.params}:
            raise UsageError(f"method {method!r} is deterministic and takes no --seed")
        params = {**params, "seed": str(seed)}
    calibrator = cls.from_cli(params)
    source = io.display_name(summary_path)
    summ = summary.load(summary_path)
    if summ.size == 0:
        raise InputError(f"{source}: the summary holds no scores")
    s, y, w = summary.fit_rows(summ)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibWarning)
        try:
            calibrator.fit(s, y, weights=w)
        except FitError as exc:
            raise FitError(f"{source}: cannot fit {method}: {exc.message}", hint=exc.hint) from None
    messages = [str(c.message) for c in caught if issubclass(c.category, CalibWarning)]
    if strict and messages:
        raise FitError(f"{source}: {method}: {messages[0]} (an error with --strict)")
    n0, n1 = summ.n0, summ.n1
    training: dict[str, Any] = {
        "input": source,
        "from_summary": {"entries": summ.size, "step": summ.step, "weighted": summ.weighted},
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


@dataclass
class EvalRow:
    name: str
    kind: str  # "column" or "map"
    metrics: dict[str, float]
    intervals: dict[str, tuple[float, float]] | None = None  # with --bootstrap
    by_field: dict[str, Any] | None = None  # with --by-field
    reliability: list[dict[str, Any]] | None = None  # with --plot


@dataclass
class EvaluateOptions:
    """The optional parts of `calib evaluate`: gates, bootstrap, per-field view, reliability bins."""

    gates: gates.GateSpec = field(default_factory=gates.GateSpec)
    bootstrap: gates.BootstrapPlan | None = None
    by_field_top: int | None = None
    reliability_bins: int | None = None


@dataclass
class Evaluation:
    input: str
    rows: int
    positives: int
    field_col: str | None
    calbin_window: int
    results: list[EvalRow]
    bootstrap: gates.BootstrapPlan | None = None
    gate: gates.GateReport | None = None

    def to_json(self) -> dict[str, Any]:
        """The machine-readable report (`calib evaluate --json`, `--save-baseline`); NaN becomes null.

        Schema (version 2; version 1 had only the keys marked *):

        - `format`: "calibcli.evaluation"; `schema_version`: 2; `calibcli_version`
        - `input`*, `rows`*, `positives`*, `field_col`*, `calbin_window`*
        - `results`*: one object per --prob-col and --map, in order: `name`*, `kind`*
          ("column" or "map"), `metrics`* (snake_case keys of `metrics.METRICS`, null when
          n/a), `intervals` ({metric: [low, high]} with --bootstrap, else null), `by_field`
          (with --by-field: `fields`, `top`, `by_bias` and `by_relative_bias` lists of
          {field, rows, positives, mean_p, positive_rate, bias, relative_bias}, else null),
          `reliability` (with --plot: equal-mass bins {rows, mean_p, positive_rate, p_min,
          p_max}, else null)
        - `bootstrap`: {replicates, seed, level, method: "percentile"} or null
        - `gate`: {passed, gate_on, baseline (path or null), checked, failed, checks}; each
          check is {result, metric, kind ("above", "below", "regression"), value, compared,
          limit, passed, excess, threshold, baseline, allowed, relative}. With no gate
          options `passed` is true and `checks` is empty.

        Keys are only ever added within a schema version; a removal or change of meaning
        bumps it. `--baseline` reads versions 1 and 2.
        """
        from calibcli import __version__

        def clean(v: float) -> float | None:
            return None if v != v else v

        def result(r: EvalRow) -> dict[str, Any]:
            return {
                "name": r.name, "kind": r.kind,
                "metrics": {k: clean(v) for k, v in r.metrics.items()},
                "intervals": None if r.intervals is None else
                {k: [clean(lo), clean(hi)] for k, (lo, hi) in r.intervals.items()},
                "by_field": r.by_field,
                "reliability": r.reliability,
            }

        gate = self.gate or gates.GateReport("point", None, [])
        return {
            "format": gates.EVALUATION_FORMAT,
            "schema_version": gates.SCHEMA_VERSION,
            "calibcli_version": __version__,
            "input": self.input,
            "rows": self.rows,
            "positives": self.positives,
            "field_col": self.field_col,
            "calbin_window": self.calbin_window,
            "results": [result(r) for r in self.results],
            "bootstrap": self.bootstrap.to_json() if self.bootstrap else None,
            "gate": gate.to_json(),
        }

    def to_json_bytes(self) -> bytes:
        return (json.dumps(self.to_json(), indent=2, allow_nan=False) + "\n").encode()


def save_evaluation(evaluation: Evaluation, path: str) -> None:
    """Write the JSON report where a later `--baseline` can read it (atomically)."""
    output.write_bytes_atomic(path, evaluation.to_json_bytes())


def evaluate_file(
    path: str,
    prob_cols: Sequence[str],
    map_paths: Sequence[str],
    label_col: str = "label",
    score_col: str = "score",
    field_col: str | None = None,
    calbin_window: int = metrics.CALBIN_WINDOW,
    fmt: str | None = None,
    options: EvaluateOptions | None = None,
) -> Evaluation:
    """Metrics for each probability column and each map applied to the score column.

    With `options`: bootstrap intervals, the per-field view, reliability bins and the gate
    decisions (a baseline is checked against the evaluated names before the input is read).
    """
    opts = options or EvaluateOptions()
    if calbin_window < 1:
        raise UsageError("--calbin-window must be at least 1")
    if path == "-" and "-" in map_paths:
        raise UsageError("the input and a map cannot both come from stdin")
    if path == "-" and opts.gates.baseline == "-":
        raise UsageError("the input and the baseline cannot both come from stdin")
    if opts.by_field_top is not None and field_col is None:
        raise UsageError("--by-field needs --field-col")
    if opts.by_field_top is not None and opts.by_field_top < 1:
        raise UsageError("--top must be at least 1")
    if opts.bootstrap is not None and opts.bootstrap.replicates < 1:
        raise UsageError("--bootstrap must be at least 1")
    gates.require_field_col(opts.gates, field_col)
    loaded = [(m, maps.load_map(m)[0]) for m in map_paths]
    if not prob_cols and not loaded:
        prob_cols = [score_col]
    baseline = None
    if opts.gates.baseline is not None:
        baseline = gates.load_baseline(opts.gates.baseline)
        gates.check_baseline(baseline, [*prob_cols, *(io.display_name(m) for m, _ in loaded)],
                             field_col, calbin_window, opts.gates)
    source, y, columns, groups, field_names = _evaluation_arrays(
        path, fmt, label_col, score_col, prob_cols, loaded, field_col)

    def evaluate_one(name: str, kind: str, p: np.ndarray) -> EvalRow:
        row = EvalRow(name, kind, metrics.compute_all(y, p, groups, calbin_window))
        if opts.bootstrap is not None:
            row.intervals = gates.bootstrap_intervals(y, p, groups, calbin_window, opts.bootstrap)
        if opts.by_field_top is not None and groups is not None:
            row.by_field = diagnostics.field_breakdown(y, p, groups, field_names, opts.by_field_top)
        if opts.reliability_bins is not None:
            row.reliability = diagnostics.reliability_bins(y, p, opts.reliability_bins)
        return row

    results = [evaluate_one(name, kind, p) for name, kind, p in columns]
    report = Evaluation(source, int(y.size), int(np.sum(y == 1)), field_col, calbin_window, results,
                        opts.bootstrap)
    report.gate = gates.decide(opts.gates, [(r.name, r.metrics, r.intervals) for r in results],
                               baseline, field_col)
    return report


def _evaluation_arrays(path, fmt, label_col, score_col, prob_cols, loaded, field_col):
    """Stream the input in record batches, keeping only what the metrics need.

    Per row that is the label, one float64 per probability column or map, and the field
    code: about 8 * (1 + columns) + 8 bytes, whatever else the file holds. Maps predict
    batch by batch. Field codes are made global across batches (a batch's dictionary is
    mapped through one category -> code table). Returns (source name, labels, [(name,
    kind, probabilities)], field codes or None, field names).
    """
    strings = ((field_col,) if field_col else ()) + tuple(
        c for _, cal in loaded for c in cal.input_features()[0])
    source, schema, batches = io.iter_batches(path, fmt, string_columns=strings)
    name = source.name
    needed = [(label_col, "--label-col"), *((c, "--prob-col") for c in prob_cols)]
    if loaded:
        needed.append((score_col, "--score-col"))
    if field_col:
        needed.append((field_col, "--field-col"))
    for col, flag in needed:
        if col not in schema.names:
            raise io.missing_column(col, schema.names, name, flag)
    ys: list[np.ndarray] = []
    parts: list[list[np.ndarray]] = [[] for _ in (*prob_cols, *loaded)]
    group_parts: list[np.ndarray] = []
    coder: dict[str, int] = {}
    offset = 0
    for batch in batches:
        ys.append(io.labels_from(batch, label_col, name, offset))
        for k, col in enumerate(prob_cols):
            p = io.scores_from(batch, col, name, offset, flag="--prob-col")
            _check_probabilities(p, col, name, offset)
            parts[k].append(p)
        if loaded:
            s = io.scores_from(batch, score_col, name, offset)
            for k, (map_path, cal) in enumerate(loaded, start=len(prob_cols)):
                _check_map_scores(cal, s, score_col, name, map_path, offset)
                categorical, numeric = cal.input_features()
                feats = {c: io.field_values(batch, c, name) for c in categorical}
                feats.update({c: io.scores_from(batch, c, name, offset, flag="--feature-col")
                              for c in numeric})
                parts[k].append(predict_quietly(cal, s, feats or None))
        if field_col:
            codes, cats = io.field_codes(batch, field_col, name)
            lut = np.array([coder.setdefault(c, len(coder)) for c in cats], dtype=np.int64)
            group_parts.append(lut[codes] if codes.size else codes)
        offset += batch.num_rows
    if offset == 0:
        raise InputError(f"{name}: no data rows")
    names = [(c, "column") for c in prob_cols] + [(io.display_name(m), "map") for m, _ in loaded]
    columns = [(n, kind, np.concatenate(ps)) for (n, kind), ps in zip(names, parts)]
    groups = np.concatenate(group_parts) if field_col else None
    return name, np.concatenate(ys), columns, groups, list(coder)


def _check_probabilities(p: np.ndarray, col: str, source: str, offset: int = 0) -> None:
    bad = (p < 0) | (p > 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            f"{source}: column {col!r}, row {i + 1 + offset}: {float(p[i])!r} is not a probability in [0, 1]",
            hint="evaluate raw scores through a map with --map, or pick the probability column with --prob-col",
        )


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


def method_catalogue() -> list[tuple[str, str, list[str]]]:
    """(name, description, parameter lines) for every registered method."""
    return registry.catalogue()


__all__ = ["CalibError", "Columns", "EvaluateOptions", "Evaluation", "FitResult", "apply_file",
           "evaluate_file", "fit_file", "method_catalogue", "save_evaluation"]
