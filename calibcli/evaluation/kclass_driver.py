"""`calib evaluate` for K-class predictions: each `--prob-cols SPEC` (K probability columns,
resolved by `io.score_cols`) and each multiclass `--map` (applied to `--score-cols`, or the
columns the map records) streams into one `KClassState`; the report, gates, baseline,
bootstrap and reliability views are those of the binary path, on the K-class metrics.

Labels are class names (or 0-based indices, `score_cols.label_codes`), matched per
prediction against its classes: the suffixes of its columns, `--classes`, or the map's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from calibcli import io
from calibcli.errors import InputError, UsageError
from calibcli.evaluation import gates
from calibcli.evaluation.render import views
from calibcli.evaluation.baseline import load_baseline
from calibcli.evaluation.bootstrap import kclass_intervals
from calibcli.evaluation.state.kclass import KClassState, merge_kclass_states
from calibcli.evaluation.results import EvalRow, Evaluation
from calibcli.evaluation.weighttotal import WeightTotal
from calibcli.io import score_cols

MERGE_EVERY = 16  # batch states merged at a time: memory stays a few distributions


def is_kclass_map(cal: Any) -> bool:
    """Whether a loaded map calibrates K columns (it has `classes_`)."""
    return getattr(cal, "classes_", None) is not None


def refuse_binary_options(prob_cols: Sequence[str], binary_maps: Sequence[str], field_col: str | None,
                          opts: Any) -> None:
    """The options of one-column probabilities that K-class predictions do not take (UsageError);
    their --metrics and gates: `EvaluateOptions.check_kind`."""
    if prob_cols or binary_maps:
        what = f"--prob-col {prob_cols[0]}" if prob_cols else f"the binary map {io.display_name(binary_maps[0])}"
        raise UsageError(f"{what} and K-class predictions cannot be evaluated in one run: their labels differ",
                         hint="run calib evaluate once for the binary columns and once for the K-class ones")
    refused = [("--field-col", field_col), ("--step", opts.step), ("--interval-cols", opts.interval_cols),
               ("--by-field", opts.by_field_top), ("--pos-label", opts.pos_label)]
    for flag, value in refused:
        if value is not None:
            raise UsageError(f"{flag} applies to binary probabilities; K-class predictions do not take it")


@dataclass
class Prediction:
    """One K-class prediction being streamed: its columns, classes, map and partial states."""

    name: str
    kind: str  # "column" or "map"
    cols: score_cols.ScoreCols
    cal: Any = None  # the map (None: the columns are the probabilities)
    how: str | None = None  # how labels are read (class names or indices), fixed by the first batch
    states: list[KClassState] = field(default_factory=list)
    rows: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # kept for --bootstrap

    def add(self, batch, label_col: str, w: np.ndarray | None, source: str, offset: int, keep_rows: bool) -> None:
        S = score_cols.matrix_from(batch, self.cols, source, offset)
        if self.cols.k is None:  # a list column: K from its first row
            self.cols = self.cols.with_k(S.shape[1], source, self.cols.classes or None)
        if self.cal is None or self.cal.score_kind == "probability":
            score_cols.check_probabilities(S, self.cols, source, offset, score_cols.PROB_COLS_HINT
                                           if self.cal is None else score_cols.MAP_HINT)
        P = S if self.cal is None else self.cal.predict(S)
        codes, self.how = score_cols.label_codes(batch, label_col, self.cols.classes, source, offset, self.how)
        self.states.append(KClassState.from_arrays(codes, P, w, self.cols.classes))
        if keep_rows:
            self.rows.append((codes, P))
        if len(self.states) >= MERGE_EVERY:
            self.states = [merge_kclass_states(self.states)]


def evaluate_kclass(path: str, fmt: str | None, prob_specs: Sequence[str], loaded: Sequence[tuple[str, Any]],
                    label_col: str, calbin_window: int, opts: Any) -> Evaluation:
    """The `Evaluation` of K-class predictions (options already checked by `refuse_binary_options`)."""
    source, schema, batches = io.iter_batches(path, fmt, string_columns=(label_col,))
    name = source.name
    if label_col not in schema.names:
        raise io.missing_column(label_col, schema.names, name, "--label-col")
    if opts.weight_col and opts.weight_col not in schema.names:
        raise io.missing_column(opts.weight_col, schema.names, name, "--weight-col")
    preds = [Prediction(spec, "column", score_cols.resolve(spec, schema, name, opts.classes, flag="--prob-cols"))
             for spec in prob_specs]
    for map_path, cal in loaded:
        preds.append(Prediction(io.display_name(map_path), "map", _map_columns(map_path, cal, schema, name, opts), cal))
    baseline = _baseline(preds, calbin_window, label_col, opts)
    offset = 0
    weight_total = WeightTotal(opts.weight_col, name)
    for batch in batches:
        if batch.num_rows == 0:
            continue
        w = io.weights_from(batch, opts.weight_col, name, offset) if opts.weight_col else None
        weight_total.add(w)
        for pred in preds:
            pred.add(batch, label_col, w, name, offset, opts.bootstrap is not None)
        offset += batch.num_rows
    if offset == 0:
        raise InputError(f"{name}: no data rows")
    weight_total.check()
    results = [_result(pred, opts) for pred in preds]
    report = Evaluation(name, offset, None, None, calbin_window, results, opts.bootstrap,
                        weight_col=opts.weight_col, ece_bins=opts.ece_bins, ece_strategy=opts.ece_strategy,
                        label_col=label_col, score_col=opts.score_cols if loaded else None)
    report.gate = gates.decide(opts.gates, [(r.name, r.metrics, r.intervals) for r in results], baseline)
    return report


def _map_columns(map_path: str, cal: Any, schema, source: str, opts: Any) -> score_cols.ScoreCols:
    """The score columns a multiclass map reads: `--score-cols`, else those it was fitted on."""
    spec = opts.score_cols or ",".join(getattr(cal, "score_cols", None) or [])
    if not spec:
        raise UsageError(f"{io.display_name(map_path)} does not record its score columns",
                         hint="name them with --score-cols")
    classes = [str(c) for c in cal.classes_]
    cols = score_cols.resolve(spec, schema, source, None, flag="--score-cols")
    if cols.k is not None and cols.k != len(classes):
        raise InputError(f"{source}: {cols.shown} give {cols.k} scores a row, but the map "
                         f"{io.display_name(map_path)} has {len(classes)} classes")
    return cols.with_k(len(classes), source, classes)


def _baseline(preds: Sequence[Prediction], calbin_window: int, label_col: str, opts: Any):
    """The checked baseline of a --max-regression gate (None without one), before any row is read."""
    if opts.gates.baseline is None:
        return None
    baseline = load_baseline(opts.gates.baseline)
    gates.check_baseline(baseline, [p.name for p in preds], None, calbin_window, opts.gates,
                         ece_bins=opts.ece_bins, ece_strategy=opts.ece_strategy, weight_col=opts.weight_col,
                         label_col=label_col)
    return baseline


def _result(pred: Prediction, opts: Any) -> EvalRow:
    """The metrics (and the optional views) of one prediction from its merged state."""
    state = merge_kclass_states(pred.states)
    row = EvalRow(pred.name, pred.kind, state.metrics(opts.ece_bins, opts.ece_strategy, opts.choice),
                  classes=list(pred.cols.classes))
    if opts.bootstrap is not None:
        codes = np.concatenate([c for c, _ in pred.rows])
        P = np.concatenate([p for _, p in pred.rows])
        row.intervals = kclass_intervals(codes, P, opts.bootstrap, opts.ece_bins, opts.ece_strategy,
                                         opts.choice.without_tests())
    if opts.reliability_bins is not None:
        top = state.top.pooled()
        views.add_plot_views(row, *top, opts.ece_bins, opts.ece_strategy)
        row.corp, row.smooth = _top_label_curves(*top, opts)
    return row


def _top_label_curves(v: np.ndarray, n0: np.ndarray, n1: np.ndarray, opts: Any) -> tuple[dict | None, dict | None]:
    """The `--diagram` data of the top label (the CORP or the smooth curve of whether the top
    class is right against the confidence), as the binary rows carry for p and y."""
    if not v.size or not float(np.sum(n0) + np.sum(n1)) > 0:
        return None, None
    if opts.diagram == "corp":
        from calibcli.evaluation.metrics import corp

        return corp.diagram(v, n1, n0, opts.choice.bands, opts.choice.seed), None
    if opts.diagram == "smooth":
        from calibcli.evaluation.metrics import smooth

        t, rate, density = smooth.smooth_curve(v, n0, n1)
        return None, {"p": t.tolist(), "rate": rate.tolist(), "density": density.tolist()}
    return None, None


__all__ = ["evaluate_kclass", "is_kclass_map", "refuse_binary_options"]
