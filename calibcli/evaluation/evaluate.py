"""`calib evaluate` as a library function: read the input, compute every metric per column
and map, add the optional views (bootstrap, per-field, reliability bins) and decide gates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from calibcli import io, maps
from calibcli.errors import InputError, UsageError
from calibcli.evaluation import diagnostics, gates, metrics
from calibcli.evaluation.baseline import EvalRow, Evaluation, check_baseline, load_baseline
from calibcli.evaluation.bootstrap import BootstrapPlan, bootstrap_intervals
from calibcli.pipeline import _check_map_scores as check_map_scores, predict_quietly


@dataclass
class EvaluateOptions:
    """The optional parts of `calib evaluate`: gates, bootstrap, per-field view, reliability bins."""

    gates: gates.GateSpec = field(default_factory=gates.GateSpec)
    bootstrap: BootstrapPlan | None = None
    by_field_top: int | None = None
    reliability_bins: int | None = None


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
        baseline = load_baseline(opts.gates.baseline)
        check_baseline(baseline, [*prob_cols, *(io.display_name(m) for m, _ in loaded)],
                             field_col, calbin_window, opts.gates)
    source, y, columns, groups, field_names = _evaluation_arrays(
        path, fmt, label_col, score_col, prob_cols, loaded, field_col)

    def evaluate_one(name: str, kind: str, p: np.ndarray) -> EvalRow:
        row = EvalRow(name, kind, metrics.compute_all(y, p, groups, calbin_window))
        if opts.bootstrap is not None:
            row.intervals = bootstrap_intervals(y, p, groups, calbin_window, opts.bootstrap)
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
                check_map_scores(cal, s, score_col, name, map_path, offset)
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


__all__ = ["EvaluateOptions", "evaluate_file"]
