"""`calib evaluate` as a library function: read the input, compute every metric per column
and map, add the optional views (bootstrap, per-field, reliability bins) and decide gates.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from calibcli import io
from calibcli.errors import InputError, UsageError
from calibcli.evaluation.metrics import diagnostics, intervals
from calibcli.evaluation import gates, kclass_driver as kclass_evaluate
from calibcli.evaluation.render import views
from calibcli.evaluation.baseline import load_baseline
from calibcli.evaluation.results import EvalRow, Evaluation
from calibcli.evaluation.bootstrap import state_intervals
from calibcli.evaluation.state.builder import StateBuilder
from calibcli.evaluation.metrics.selection import row_metrics
from calibcli.evaluation.state.binary import EvalState
from calibcli.evaluation.weighttotal import WeightTotal
from calibcli.requests import EvaluateOptions


def evaluate_file(path: str, prob_cols: Sequence[str], map_paths: Sequence[str],
                  options: EvaluateOptions | None = None, fmt: str | None = None) -> Evaluation:
    """Metrics for each probability column and each map applied to the score column.

    `options` (checked when built: `EvaluateOptions.build`) name the columns and set the
    metrics, bootstrap intervals, the per-field view, reliability bins and the gates (a
    baseline is checked against the evaluated names before the input is read).
    """
    with np.errstate(all="ignore"):  # degenerate data gives NaN (n/a) metrics, never raw numpy warnings
        return _evaluate_file(path, prob_cols, map_paths, options or EvaluateOptions(), fmt)


def _evaluate_file(path, prob_cols, map_paths, opts: EvaluateOptions, fmt):
    label_col, score_col, field_col, calbin_window = (opts.label_col, opts.score_col, opts.field_col,
                                                      opts.calbin_window)
    if path == "-" and "-" in map_paths:
        raise UsageError("the input and a map cannot both come from stdin")
    if path == "-" and opts.gates.baseline == "-":
        raise UsageError("the input and the baseline cannot both come from stdin")
    loaded = []
    if map_paths:
        from calibcli.maps import envelope as maps  # the calibrators load only when a map is evaluated

        loaded = [(m, maps.load_map(m)[0]) for m in map_paths]
    kclass = bool(opts.kclass_cols) or any(kclass_evaluate.is_kclass_map(cal) for _, cal in loaded)
    opts.check_kind(kclass)
    if kclass:
        kclass_evaluate.refuse_binary_options(
            prob_cols, [m for m, cal in loaded if not kclass_evaluate.is_kclass_map(cal)], field_col, opts)
        return kclass_evaluate.evaluate_kclass(path, fmt, opts.kclass_cols, loaded, label_col, calbin_window, opts)
    if not prob_cols and not loaded:
        prob_cols = [score_col]
    baseline = None
    if opts.gates.baseline is not None:
        baseline = load_baseline(opts.gates.baseline)
        gates.check_baseline(baseline, [*prob_cols, *(io.display_name(m) for m, _ in loaded)],
                       field_col, calbin_window, opts.gates, ece_bins=opts.ece_bins,
                       ece_strategy=opts.ece_strategy, weight_col=opts.weight_col, step=opts.step,
                       label_col=label_col, score_col=score_col if loaded else None,
                       hl_groups=opts.choice.hl_groups)
    source, rows, positives, columns, bounds = _evaluation_states(path, fmt, prob_cols, loaded, opts)

    def evaluate_one(name: str, kind: str, state: EvalState) -> EvalRow:
        ece = {"ece_bins": opts.ece_bins, "ece_strategy": opts.ece_strategy}
        values, corp_data, smooth_data = row_metrics(state, calbin_window, opts.ece_bins, opts.ece_strategy,
                                                     opts.choice, opts.diagram)
        row = EvalRow(name, kind, values, corp=corp_data, smooth=smooth_data)
        row.mce_count = state.mce_count(opts.ece_bins, opts.ece_strategy)
        if opts.bootstrap is not None:
            row.intervals = state_intervals(state, calbin_window, opts.bootstrap, opts.choice, **ece)
        if opts.by_field_top is not None and state.field_names is not None:
            row.by_field = diagnostics.field_breakdown_sums(state.field_w, state.field_y, state.field_p,
                                                            state.field_names, opts.by_field_top)
        if opts.reliability_bins is not None:
            views.add_plot_views(row, *state.pooled(), opts.ece_bins, opts.ece_strategy)
        row.step_bounds = state.step_bounds(calbin_window, opts.choice)
        if bounds:  # every row gets the keys (n/a without an interval), so tables stay rectangular
            row.metrics.update(bounds[name].metrics(opts.ece_bins, opts.ece_strategy) if name in bounds
                               else dict.fromkeys(intervals.KEYS))
        return row

    results = [evaluate_one(name, kind, state) for name, kind, state in columns]
    report = Evaluation(source, rows, positives, field_col, calbin_window, results, opts.bootstrap,
                        weight_col=opts.weight_col, step=opts.step, ece_bins=opts.ece_bins,
                        ece_strategy=opts.ece_strategy, label_col=label_col,
                        score_col=score_col if loaded else None, hl_groups=opts.choice.hl_groups)
    report.gate = gates.decide(opts.gates, [(r.name, r.metrics, r.intervals) for r in results],
                               baseline)
    return report


def _evaluation_states(path, fmt, prob_cols, loaded, opts: EvaluateOptions):
    """Stream the input in record batches into one evaluation state per column and map.

    No row is kept: each batch becomes a partial state (sums, per-field sums, its
    distribution of p), merged as they accumulate, so memory follows the number of distinct
    p (or 1/step with --step) and of field values. Maps predict batch by batch. Returns
    (source name, rows, positives, [(name, kind, state)], {prob col: IntervalCollector}).
    """
    label_col, score_col, field_col = opts.label_col, opts.score_col, opts.field_col
    strings = ((field_col,) if field_col else ()) + tuple(
        c for _, cal in loaded for c in cal.input_features()[0])
    source, schema, batches = io.iter_batches(path, fmt, string_columns=strings,
                                              dictionary_columns=(field_col,) if field_col else ())
    name = source.name
    needed = [(label_col, "--label-col"), *((c, "--prob-col") for c in prob_cols)]
    if loaded:
        needed.append((score_col, "--score-col"))
    if field_col:
        needed.append((field_col, "--field-col"))
    if opts.weight_col:
        needed.append((opts.weight_col, "--weight-col"))
    for col, flag in needed:
        if col not in schema.names:
            raise io.missing_column(col, schema.names, name, flag)
    pairs = intervals.interval_pairs(schema.names, prob_cols, opts.interval_cols, name)
    bounds = {col: intervals.IntervalCollector() for col in pairs}
    cells = opts.bootstrap is not None and field_col is not None
    total = io.parquet_rows(path) if not cells and opts.step is None and opts.weight_col is None else None
    builders = [StateBuilder(opts.step, cells, total, opts.ece_bins) for _ in (*prob_cols, *loaded)]
    offset = positives = 0
    positive = io.PosLabel(opts.pos_label) if opts.pos_label is not None else None
    weight_total = WeightTotal(opts.weight_col, name)
    for batch in batches:
        y = io.labels_from(batch, label_col, name, offset, pos_label=positive)
        positives += int(np.count_nonzero(y == 1))
        w = io.weights_from(batch, opts.weight_col, name, offset) if opts.weight_col else None
        weight_total.add(w)
        fields = io.field_codes(batch, field_col, name) if field_col else None
        for k, col in enumerate(prob_cols):
            p = io.scores_from(batch, col, name, offset, flag="--prob-col")
            _check_probabilities(p, col, name, offset)
            builders[k].add(y, p, fields, w)
            if col in pairs:
                low, high = (io.scores_from(batch, c, name, offset, flag="--interval-cols") for c in pairs[col])
                for c, v in zip(pairs[col], (low, high)):
                    _check_probabilities(v, c, name, offset)
                intervals.check_order(low, high, pairs[col], name, offset)
                bounds[col].add(p, y, w, low, high)
        if loaded:
            s = io.scores_from(batch, score_col, name, offset)
            for k, (map_path, cal) in enumerate(loaded, start=len(prob_cols)):
                io.check_scores_for(cal, s, score_col, name, map_path, offset)
                feats = io.map_features(batch, *cal.input_features(), name, offset) or None
                builders[k].add(y, cal.predict(s, feats), fields, w)
        offset += batch.num_rows
    if offset == 0:
        raise InputError(f"{name}: no data rows")
    weight_total.check()
    pa.default_memory_pool().release_unused()  # the read buffers, before the distributions are built
    names = [(c, "column") for c in prob_cols] + [(io.display_name(m), "map") for m, _ in loaded]
    return name, offset, positives, [(n, kind, b.result()) for (n, kind), b in zip(names, builders)], bounds


def _check_probabilities(p: np.ndarray, col: str, source: str, offset: int = 0) -> None:
    bad = (p < 0) | (p > 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            f"{source}: column {col!r}, row {i + 1 + offset}: {float(p[i])!r} is not a probability in [0, 1]",
            hint="evaluate raw scores through a map with --map, or pick the probability column with --prob-col",
        )


__all__ = ["EvaluateOptions", "evaluate_file"]  # EvaluateOptions: built and checked in calibcli.requests
