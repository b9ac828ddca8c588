"""What `calib evaluate` does differently for each kind of prediction, one small run per kind;
`driver.evaluate_file` streams the batches through the run of the options' kind (`RUNS`).

`BinaryRun`: each `--prob-col` and each binary `--map` (applied to `--score-col`) streams into
one `EvalState` (`state.builder.StateBuilder`), the labels read once a batch (0/1, or
`--pos-label`), with the field column, the interval columns and the optional views.

`KClassRun`: each `--prob-cols SPEC` and each multiclass `--map` (its score columns read as
`apply` reads them, `kinds.columns.map_columns`) streams into one `KClassState`; labels are read
per prediction, against its classes (`kinds.labels.ClassLabels`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from calibcli import io
from calibcli.errors import InputError, Where
from calibcli.evaluation import verdict
from calibcli.evaluation.bootstrap import kclass_intervals, state_intervals
from calibcli.evaluation import multical
from calibcli.evaluation.metrics import diagnostics, intervals
from calibcli.evaluation.metrics.selection import row_metrics
from calibcli.evaluation.render import views
from calibcli.evaluation.results import EvalRow
from calibcli.evaluation.state.builder import StateBuilder
from calibcli.evaluation.state.kclass import KClassState, merge_kclass_states
from calibcli.kinds import BINARY, KCLASS, labels, probabilities
from calibcli.requests.metrics import TOP_LABEL
from calibcli.kinds import columns as score_columns

MERGE_EVERY = 16  # K-class batch states merged at a time: memory stays a few distributions


class BinaryRun:
    """Binary probabilities: `--prob-col`s, binary maps on `--score-col`."""

    def __init__(self, opts: Any, loaded: Sequence[tuple[str, Any]], path: str):
        self.opts, self.loaded = opts, list(loaded)
        self.prob_cols = list(opts.prob_cols) or ([] if loaded else [opts.score_col])
        self.names = [*self.prob_cols, *(io.display_name(m) for m, _ in loaded)]
        field_col = opts.field_col
        self.string_columns = ((field_col,) if field_col else ()) + tuple(
            c for _, cal in loaded for c in cal.input_features()[0])
        self.segment_cols = opts.segments.cols if opts.segments else ()
        read_as_numbers = {opts.label_col, opts.score_col, opts.weight_col, *self.prob_cols}
        self.dictionary_columns = ((field_col,) if field_col else ()) + tuple(  # text segment columns: codes
            c for c in self.segment_cols if c not in read_as_numbers and c != field_col)
        self.multical: multical.SegmentCollector | None = None
        cells = opts.bootstrap is not None and field_col is not None
        total = io.parquet_rows(path) if not cells and opts.step is None and opts.weight_col is None else None
        self.builders = [StateBuilder(opts.step, cells, total, opts.ece_bins) for _ in self.names]
        self.labels = labels.BinaryLabels(opts.pos_label)
        self.positives = 0
        self.pairs: dict[str, tuple[str, str]] = {}
        self.bounds: dict[str, intervals.IntervalCollector] = {}

    def check(self, schema: pa.Schema, source: str) -> None:
        opts = self.opts
        needed = [(opts.label_col, "--label-col"), *((c, "--prob-col") for c in self.prob_cols)]
        if self.loaded:
            needed.append((opts.score_col, "--score-col"))
        if opts.field_col:
            needed.append((opts.field_col, "--field-col"))
        if opts.weight_col:
            needed.append((opts.weight_col, "--weight-col"))
        needed += [(c, "--segment-col") for c in self.segment_cols]
        for col, flag in needed:
            if col not in schema.names:
                raise io.missing_column(col, schema.names, source, flag)
        if opts.segments:
            self.multical = multical.SegmentCollector(opts.segments, len(self.names),
                                                      multical.kinds_of(schema, self.segment_cols))
        self.pairs = intervals.interval_pairs(schema.names, self.prob_cols, opts.interval_cols, source)
        self.bounds = {col: intervals.IntervalCollector() for col in self.pairs}

    def resolved(self) -> list[tuple[str, list[str] | None]]:
        """(name, the input columns it reads; None for a map) of each result, as baselines match them."""
        return [(c, [c]) for c in self.prob_cols] + [(io.display_name(m), None) for m, _ in self.loaded]

    def resolver(self, schema: pa.Schema, source: str):
        """How a baseline's result name reads this input: a column name is itself (no resolution)."""
        return None

    def add(self, batch: pa.RecordBatch, w: np.ndarray | None, source: str, offset: int) -> None:
        opts = self.opts
        y = labels.from_file(batch, opts.label_col, source, self.labels, offset)
        self.positives += int(np.count_nonzero(y == 1))
        fields = io.field_codes(batch, opts.field_col, source) if opts.field_col else None
        ps = []
        for k, col in enumerate(self.prob_cols):
            p = io.scores_from(batch, col, source, offset, flag="--prob-col")
            _check_probabilities(p, col, source, offset)
            self.builders[k].add(y, p, fields, w)
            ps.append(p)
            if col in self.pairs:
                low, high = (io.scores_from(batch, c, source, offset, flag="--interval-cols") for c in self.pairs[col])
                for c, v in zip(self.pairs[col], (low, high)):
                    _check_probabilities(v, c, source, offset)
                intervals.check_order(low, high, self.pairs[col], source, offset)
                self.bounds[col].add(p, y, w, low, high)
        if self.loaded:
            s = io.scores_from(batch, opts.score_col, source, offset)
            for k, (map_path, cal) in enumerate(self.loaded, start=len(self.prob_cols)):
                io.check_scores_for(cal, s, opts.score_col, source, map_path, offset)
                feats = io.map_features(batch, *cal.input_features(), source, offset) or None
                p = cal.predict(s, feats)
                self.builders[k].add(y, p, fields, w)
                ps.append(p)
        if self.multical is not None:
            self.multical.add({c: batch.column(c) for c in self.segment_cols}, [y] * len(ps), ps, w, source, offset)

    def results(self) -> list[EvalRow]:
        pa.default_memory_pool().release_unused()  # the read buffers, before the distributions are built
        kinds = ["column"] * len(self.prob_cols) + ["map"] * len(self.loaded)
        rows = [self._row(name, kind, builder.result()) for name, kind, builder in zip(self.names, kinds, self.builders)]
        if self.multical is not None:
            for row, result in zip(rows, self.multical.results()):
                multical.fill_row(row, result, self.opts.segments)
        return rows

    def _row(self, name: str, kind: str, state: Any) -> EvalRow:
        opts = self.opts
        ece = {"ece_bins": opts.ece_bins, "ece_strategy": opts.ece_strategy}
        values, corp_data, smooth_data = row_metrics(state, opts.calbin_window, opts.ece_bins, opts.ece_strategy,
                                                     opts.choice, opts.diagram)
        row = EvalRow(name, kind, values, corp=corp_data, smooth=smooth_data)
        row.columns = [name] if kind == "column" else None
        row.verdict = verdict.binary_verdict(*state.pooled(), opts.ece_bins, opts.ece_strategy, values)
        row.mce_count = state.mce_count(opts.ece_bins, opts.ece_strategy)
        if opts.bootstrap is not None:
            row.intervals = state_intervals(state, opts.calbin_window, opts.bootstrap, opts.choice, **ece)
        if opts.by_field_top is not None and state.field_names is not None:
            row.by_field = diagnostics.field_breakdown_sums(state.field_w, state.field_y, state.field_p,
                                                            state.field_names, opts.by_field_top, opts.min_rows)
        if opts.reliability_bins is not None:
            views.add_plot_views(row, *state.pooled(), opts.ece_bins, opts.ece_strategy)
        row.step_bounds = state.step_bounds(opts.calbin_window, opts.choice)
        if self.bounds:  # every row gets the keys (n/a without an interval), so tables stay rectangular
            row.metrics.update(self.bounds[name].metrics(opts.ece_bins, opts.ece_strategy) if name in self.bounds
                               else dict.fromkeys(intervals.KEYS, float("nan")))
            if name in self.bounds:
                row.interval = self.bounds[name].view(opts.ece_bins, opts.ece_strategy)
        return row

    def header(self) -> dict[str, Any]:
        """The report's fields of a binary run (beyond input, rows, results, options)."""
        opts = self.opts
        return {"positives": self.positives, "field_col": opts.field_col, "step": opts.step,
                "score_col": opts.score_col if self.loaded else None, "hl_groups": opts.choice.hl_groups}


def _check_probabilities(p: np.ndarray, col: str, source: str, offset: int = 0) -> None:
    bad = (p < 0) | (p > 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            f"{source}: column {col!r}, row {i + 1 + offset}: {float(p[i])!r} is not a probability in [0, 1]",
            hint="evaluate raw scores through a map with --map, or pick the probability column with --prob-col",
        )


class _Prediction:
    """One K-class prediction being streamed: its columns, classes, map, labels and states."""

    def __init__(self, name: str, kind: str, cols: score_columns.ScoreCols, cal: Any = None):
        self.name, self.kind, self.cols, self.cal = name, kind, cols, cal
        self.labels = labels.ClassLabels(cols.classes) if cols.classes else None
        self.states: list[KClassState] = []
        self.rows: list[tuple[np.ndarray, np.ndarray]] = []  # kept for --bootstrap

    def add(self, batch: pa.RecordBatch, label_col: str, w: np.ndarray | None, source: str, offset: int,
            keep_rows: bool) -> tuple[np.ndarray, np.ndarray]:
        S = score_columns.matrix_from(batch, self.cols, source, offset)
        if self.cols.k is None:  # a list column: K from its first row
            self.cols = self.cols.with_k(S.shape[1], source, self.cols.classes or None)
            self.labels = labels.ClassLabels(self.cols.classes)
        if self.cal is None or self.cal.score_kind == "probability":
            hint = probabilities.PROB_COLS_HINT if self.cal is None else probabilities.MAP_HINT
            names = list(self.cols.columns) or [self.cols.list_column] * S.shape[1]
            probabilities.refuse_rows(S, Where(source, offset=offset), names, hint)
        P = S if self.cal is None else self.cal.predict(S)
        codes = labels.from_file(batch, label_col, source, self.labels, offset)
        self.states.append(KClassState.from_arrays(codes, P, w, self.cols.classes))
        if keep_rows:
            self.rows.append((codes, P))
        if len(self.states) >= MERGE_EVERY:
            self.states = [merge_kclass_states(self.states)]
        return codes, P


class KClassRun:
    """K-class predictions: `--prob-cols SPEC`s, multiclass maps."""

    string_columns: tuple[str, ...] = ()
    dictionary_columns: tuple[str, ...] = ()
    positives = None

    def __init__(self, opts: Any, loaded: Sequence[tuple[str, Any]], path: str):
        self.opts, self.loaded = opts, list(loaded)
        self.names = [*opts.kclass_cols, *(io.display_name(m) for m, _ in loaded)]
        self.string_columns = (opts.label_col,)
        self.preds: list[_Prediction] = []
        self.segment_cols = opts.segments.cols if opts.segments else ()
        self.multical: multical.SegmentCollector | None = None

    def check(self, schema: pa.Schema, source: str) -> None:
        opts = self.opts
        for col, flag in ((opts.label_col, "--label-col"), (opts.weight_col, "--weight-col"),
                          *((c, "--segment-col") for c in self.segment_cols)):
            if col is not None and col not in schema.names:
                raise io.missing_column(col, schema.names, source, flag)
        self.preds = [_Prediction(spec, "column", score_columns.resolve(spec, schema, source, opts.classes,
                                                                        flag="--prob-cols"))
                      for spec in opts.kclass_cols]
        for map_path, cal in self.loaded:
            name = io.display_name(map_path)
            cols = score_columns.map_columns(cal.classes_.tolist(), cal.score_cols, cal.list_column, opts.score_cols,
                                             schema, source, name)
            self.preds.append(_Prediction(name, "map", cols, cal))
        if opts.segments:
            self.multical = multical.SegmentCollector(opts.segments, len(self.preds),
                                                      multical.kinds_of(schema, self.segment_cols))

    def resolved(self) -> list[tuple[str, list[str] | None]]:
        """(name, the input columns it reads; None for a map) of each prediction (after `check`)."""
        return [(p.name, (list(p.cols.columns) or [p.cols.list_column]) if p.kind == "column" else None)
                for p in self.preds]

    def resolver(self, schema: pa.Schema, source: str):
        """A baseline result's name read as a --prob-cols SPEC against this input (None when it does not read)."""
        from calibcli.errors import CalibError

        def resolve(spec: str) -> list[str] | None:
            try:
                cols = score_columns.resolve(spec, schema, source, self.opts.classes, flag="--prob-cols")
            except CalibError:
                return None
            return list(cols.columns) or [cols.list_column]

        return resolve

    def add(self, batch: pa.RecordBatch, w: np.ndarray | None, source: str, offset: int) -> None:
        pairs = [pred.add(batch, self.opts.label_col, w, source, offset, self.opts.bootstrap is not None)
                 for pred in self.preds]
        if self.multical is not None:  # the top label: whether the top class is right, against the confidence
            tops = [multical.top_label(codes, P) for codes, P in pairs]
            self.multical.add({c: batch.column(c) for c in self.segment_cols}, [y for y, _ in tops],
                              [p for _, p in tops], w, source, offset)

    def results(self) -> list[EvalRow]:
        rows = [self._row(pred) for pred in self.preds]
        if self.multical is not None:
            for row, result in zip(rows, self.multical.results()):
                multical.fill_row(row, result, self.opts.segments, prefix=TOP_LABEL)
        return rows

    def _row(self, pred: _Prediction) -> EvalRow:
        opts = self.opts
        state = merge_kclass_states(pred.states)
        row = EvalRow(pred.name, pred.kind, state.metrics(opts.ece_bins, opts.ece_strategy, opts.choice),
                      classes=list(pred.cols.classes))
        row.columns = (list(pred.cols.columns) or [pred.cols.list_column]) if pred.kind == "column" else None
        row.verdict = verdict.kclass_verdict(state.top.pooled(), [s.pooled() for s in state.per_class],
                                             row.classes, opts.ece_bins, opts.ece_strategy)
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

    def header(self) -> dict[str, Any]:
        return {"positives": None, "field_col": None, "score_col": self.opts.score_cols if self.loaded else None}


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


RUNS = {BINARY: BinaryRun, KCLASS: KClassRun}

__all__ = ["BinaryRun", "KClassRun", "RUNS"]
