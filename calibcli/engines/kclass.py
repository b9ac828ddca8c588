"""K-class `evaluate` on Spark and Dask: what both engines share.

Each partition (a pandas frame) becomes one `KClassState` per prediction (`kclass_cols`,
each a SPEC of K probability columns as `calib evaluate --prob-cols` takes it: a comma list
or a pattern, list columns being for files only; and multiclass `maps`, applied to their
score columns in the partition), with counts of its invalid rows; the
engine merges the states and `evaluation` reads the report off them, so the numbers are
those of `calib evaluate --prob-cols` on the same rows.

Labels are read as the CLI reads them (`kinds.labels`): class names when any label of the
partition is one, else 0-based indices; partitions that disagree, like a file whose batches do,
are refused. A map reads its score columns as `calib apply` does (`kinds.columns.map_columns`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from calibcli import engines, kinds
from calibcli.errors import InputError, UsageError
from calibcli.kinds.labels import NAMES, INDICES  # noqa: F401  (how labels read)


@dataclass(frozen=True)
class Prediction:
    """One K-class prediction: its report name and kind, its K columns (`ScoreCols`), and for a
    map its envelope (rebuilt in each partition, as the binary engines ship maps)."""

    name: str
    kind: str  # "column" or "map"
    cols: Any
    envelope: dict | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        return self.cols.columns

    @property
    def classes(self) -> tuple[str, ...]:
        return self.cols.classes


def plan(columns: Sequence[str], source: str, kclass_cols: Any, maps_: Any, *, classes: Sequence[str] | None,
         score_cols_spec: str | None, label_col: str, weight_col: str | None, ece_bins: int,
         ece_strategy: str, metrics: str = "default", bands: int | None = None, seed: int = 0,
         hl_groups: int = 10, segment_options: Mapping[str, Any] | None = None) -> tuple[list[Prediction], Any]:
    """Each prediction of `evaluate_kclass` (Spark's and Dask's) resolved against the
    DataFrame's columns; options checked.

    `kclass_cols`: one SPEC per prediction (a comma list or a pattern such as "p_*"); `classes`
    names their classes (default: the suffixes); `maps_`: multiclass maps (paths, `ClassMap`s
    or envelopes), applied to `score_cols_spec` (default: the columns each was fitted on);
    `metrics`, `bands`, `seed`, `hl_groups` as `calib evaluate --metrics ...`;
    `segment_options`: `segment_cols=...` and the other segment keywords of
    `EvaluateOptions.build` (the top-label multicalibration error). Returns the predictions and
    the checked `EvaluateOptions` (its `choice`: the metrics; `segments`: the segment spec).
    """
    import pyarrow as pa

    from calibcli.kinds import columns as score_cols
    from calibcli.requests import EvaluateOptions

    if isinstance(kclass_cols, str) or isinstance(maps_, str):
        raise UsageError("kclass_cols and maps are lists (SPECs such as 'p_*', maps), one per prediction")
    kclass_cols = list(kclass_cols)
    options = EvaluateOptions.build(label_col=label_col, weight_col=weight_col, ece_bins=ece_bins,
                                    ece_strategy=ece_strategy, kclass_cols=tuple(kclass_cols),
                                    metrics=metrics, bands=bands, seed=seed, hl_groups=hl_groups, kind=kinds.KCLASS,
                                    **(segment_options or {}))
    if not kclass_cols and not maps_:
        raise UsageError("nothing to evaluate: give kclass_cols or maps")
    engines.check_columns(list(columns), source, label_col=label_col, weight_col=weight_col,
                          **{f"segment_col {c!r}": c for c in (options.segments.cols if options.segments else ())})
    schema = pa.schema([(str(c), pa.float64()) for c in columns])
    names = None if classes is None else tuple(str(c) for c in classes)
    out = [Prediction(spec, "column", score_cols.resolve(spec, schema, source, names, flag="kclass_cols"))
           for spec in kclass_cols]
    for m in maps_:
        cal, envelope = _resolve_map(m)
        name = engines.map_name(m, cal)
        cols = score_cols.map_columns(cal.classes_.tolist(), cal.score_cols, None, score_cols_spec, schema, source,
                                      f"the map {name}", flag="score_cols")
        out.append(Prediction(name, "map", cols, envelope))
    return out, options


def read_columns(preds: list[Prediction], options: Any, label_col: str,
                 weight_col: str | None) -> tuple[list[str], tuple[str, ...]]:
    """(the columns a partition reads, once each, in order; the segment columns) of a `plan`."""
    segment_cols = tuple(options.segments.cols) if options.segments else ()
    keep = [label_col, *(c for k in preds for c in k.columns), *([weight_col] if weight_col else []), *segment_cols]
    return list(dict.fromkeys(keep)), segment_cols


def _resolve_map(m: Any):
    """(ClassMap, envelope) of a multiclass map given as a path, a `ClassMap` or an envelope."""
    cal, envelope = engines.resolve_map(m)
    kinds.require(cal, kinds.KCLASS, f"the map {engines.map_name(m, cal)}", hint="evaluate it with evaluate()")
    return cal, envelope


def partition_states(pdf, preds: list[Prediction], label_col: str, weight_col: str | None):
    """One state per prediction of a pandas partition, how its labels read, and bad-row counts
    [weights invalid, then per prediction labels not a class, score rows invalid (not
    finite; not probabilities where probabilities are read)]."""
    from calibcli.evaluation.state.kclass import KClassState

    w = engines.floats(pdf[weight_col]) if weight_col else None
    bad_w = (~np.isfinite(w) | (w < 0)) if w is not None else np.zeros(len(pdf), dtype=bool)
    bad, states, hows = [int(bad_w.sum())], [], []
    for pred in preds:
        codes, P, ok, bad_y, bad_s, how = _rows(pdf, pred, label_col, bad_w)
        bad += [int(bad_y.sum()), int(bad_s.sum())]
        hows.append(how)
        states.append(KClassState.from_arrays(codes[ok], P, None if w is None else w[ok], pred.classes))
    return states, hows, np.array(bad, dtype=np.int64)


def _rows(pdf, pred: Prediction, label_col: str, bad_w: np.ndarray):
    """(class codes, probabilities of the valid rows, which rows are valid, bad labels, bad score
    rows, how the labels read) of one prediction in a pandas partition."""
    from calibcli.kinds import probabilities
    from calibcli.kinds.labels import ClassLabels
    from calibcli.maps import envelope as maps

    S = np.column_stack([engines.floats(pdf[c]) for c in pred.columns]) if len(pdf) else \
        np.zeros((0, len(pred.columns)))
    cal = None if pred.envelope is None else maps.envelope_to_calibrator(pred.envelope, "map")
    bad_s = ~np.isfinite(S).all(axis=1)
    if cal is None or cal.score_kind == "probability":
        with np.errstate(invalid="ignore"):
            bad_s |= probabilities.problem_rows(S)
    codes, how = ClassLabels(pred.classes).codes(pdf[label_col])
    bad_y = codes < 0
    ok = ~(bad_w | bad_y | bad_s)
    P = S[ok] if cal is None or not ok.any() else cal.predict(S[ok])
    return codes, P, ok, bad_y, bad_s, how


def partition_segments(pdf, preds: list[Prediction], label_col: str, weight_col: str | None, kinds: Mapping[str, str],
                       cols: Sequence[str], values: Mapping[str, Any] | None = None):
    """The top-label multicalibration state of a pandas partition (`--segment-col` with K-class
    predictions: whether the top class is right against the confidence), over the rows every
    prediction reads as valid (any invalid row makes `evaluation` refuse the input anyway);
    each map predicts again here. `values`: the segment columns as the engine holds them."""
    from calibcli.evaluation.metrics.segment_states import SegmentStates
    from calibcli.evaluation.multical import top_label

    w = engines.floats(pdf[weight_col]) if weight_col else None
    bad_w = (~np.isfinite(w) | (w < 0)) if w is not None else np.zeros(len(pdf), dtype=bool)
    rows = [_rows(pdf, pred, label_col, bad_w) for pred in preds]
    ok = ~bad_w
    for _, _, valid, _, _, _ in rows:
        ok &= valid
    tops = [top_label(codes[ok], P[ok[valid]]) for codes, P, valid, _, _, _ in rows]
    values = values if values is not None else {c: pdf[c] for c in cols}
    states = SegmentStates(len(preds), kinds)
    states.add([y for y, _ in tops], [p for _, p in tops],
               {c: engines.rows_of(v, None if ok.all() else ok) for c, v in values.items()},
               None if w is None else w[ok])
    return states


def joint_how(hows: Sequence[str | None]) -> str | None:
    """How the labels of several partitions read together ("mixed" when they disagree)."""
    seen = {h for h in hows if h is not None}
    return seen.pop() if len(seen) == 1 else ("mixed" if seen else None)


def evaluation(source: str, preds: list[Prediction], states: list, hows: list, bad: np.ndarray, *,
               label_col: str, weight_col: str | None, ece_bins: int, ece_strategy: str,
               score_cols_spec: str | None = None, choice: Any = None, options: Any = None, segments: Any = None):
    """The `calib evaluate --prob-cols` report from merged states (one per prediction); with
    `options.segments`, the top-label multicalibration error of the merged `segments`."""
    from calibcli.evaluation.results import EvalRow, Evaluation

    engines.check_bad_rows(source, {weight_col: ("a null, negative or non-finite weight", int(bad[0]))}
                           if weight_col else {})
    for i, pred in enumerate(preds):
        if hows[i] == "mixed":
            raise InputError(f"{source}: column {label_col!r}: labels are class names in some partitions "
                             "and not in others", hint="classes: " + ", ".join(pred.classes))
        what = ("probabilities that are null, negative or do not sum to 1" if pred.envelope is None
                or pred.envelope.get("score_kind") == "probability" else "a null, NaN or infinite score")
        engines.check_bad_rows(source, {label_col: ("a label that is not a class", int(bad[1 + 2 * i])),
                                        pred.cols.spec: (what, int(bad[2 + 2 * i]))})
    if not states or states[0].rows == 0:
        raise InputError(f"{source}: no data rows")
    results = [EvalRow(p.name, p.kind, s.metrics(ece_bins, ece_strategy, choice), classes=list(p.classes))
               for p, s in zip(preds, states)]
    maps_ = any(p.kind == "map" for p in preds)
    settings = {}
    if options is not None:
        from calibcli.requests.metrics import TOP_LABEL

        engines.add_segments(results, segments, options, TOP_LABEL)
        settings = engines.segment_settings(options)
    return Evaluation(source, states[0].rows, None, None, 100, results, weight_col=weight_col,
                      ece_bins=ece_bins, ece_strategy=ece_strategy, label_col=label_col,
                      score_col=score_cols_spec if maps_ else None, **settings)
