"""Mergeable evaluation state: every metric of `calib evaluate` from per-batch partial results.

Build a state per record batch, file part or engine partition, merge the states, then read
the metrics off the merged state::

    from calibcli.evaluation.state.binary import EvalState
    state = EvalState.from_arrays(y, p, fields=field_values, sample_weight=w, step=None)
    state = state.merge(EvalState.from_arrays(y2, p2, fields=field_values2))
    state.metrics(calbin_window=100)   # {"log_loss": ..., "auc": ..., "field_rce": ...}
    table = state.to_arrow()           # one row: ship it, concatenate, then
    EvalState.from_arrow(table)        # merges every row of a table of states

What a state holds (see docs/algorithms.md, "Evaluation state"):

- sums for the additive metrics: total weight, rows, positives, the log-loss and Brier
  sums, per equal-width ECE bin the weight and the weighted sums of p and of y, and the
  three sums of Spiegelhalter's z (these two under `step`, where they keep ECE, MCE and z
  exact);
- per field value (by name, so states from different partitions align): the weight, the
  weighted sum of y and of p, from which Field-ECE and Field-RCE follow;
- the distribution of distinct probabilities: ascending p with the weight of negatives n0
  and of positives n1 at each, from which AUC and CalBin follow (both pool tied p).

Merging adds sums and merges distributions (sorted merge, equal p pooled); the result
equals `compute_all` of all rows in memory to rounding of the sums, in any split and order. `step` buckets p in the distribution only (p -> rint(p / step) * step),
bounding it to 1/step + 1 entries: log-loss, Brier, ECE and MCE (equal-width bins),
Spiegelhalter and the field metrics stay exact, AUC and CalBin move by at most the bounds
of `step_bounds` (docs/algorithms.md), the calibration slope and intercept are n/a.

With `field_cells=True` the distribution is kept per (p, field value) cell instead of per
p, which is what an exact Poisson bootstrap of the field metrics needs (`bootstrap.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa

from calibcli.errors import UsageError
from calibcli.io.columns import encode_fields
from calibcli.evaluation.metrics import kernels, binary as _metrics
from calibcli.evaluation import stepbounds
from calibcli.numeric.pooling import as_weights, bucket

STATE_VERSION = 1
ARROW_KEY = b"calibcli.evaluation_state"


@dataclass
class EvalState:
    """Partial sums and the probability distribution of some rows of one probability column."""

    p: np.ndarray  # ascending distinct (or bucketed) p; with cell_field, one entry per (p, field)
    n0: np.ndarray  # weight of negatives at each entry (or compact unsigned counts: see builder.StateBuilder)
    n1: np.ndarray  # weight of positives at each entry
    rows: int
    positives: int
    weight: float
    log_loss_sum: float
    brier_sum: float
    ece_p: np.ndarray  # per ECE bin, the weighted sum of p
    ece_y: np.ndarray  # per ECE bin, the weighted sum of y
    field_names: list[str] | None = None
    field_w: np.ndarray = field(default_factory=lambda: np.zeros(0))
    field_y: np.ndarray = field(default_factory=lambda: np.zeros(0))
    field_p: np.ndarray = field(default_factory=lambda: np.zeros(0))
    cell_field: np.ndarray | None = None  # field code of each entry (field_cells=True)
    step: float | None = None
    weighted: bool = False
    ece_w: np.ndarray | None = None  # per ECE bin, the weight of its rows (None: states of older versions)
    spiegel: np.ndarray | None = None  # the row sums of `kernels.spiegelhalter_sums` (None: not kept)

    # ------------------------------------------------------------------------ building

    @classmethod
    def from_arrays(cls, y: Any, p: Any, fields: Any = None, sample_weight: Any = None,
                    step: float | None = None, field_cells: bool = False,
                    distribution: bool = True, bin_sums: bool = True,
                    ece_bins: int = _metrics.ECE_BINS) -> "EvalState":
        """The state of rows with labels y (0/1), probabilities p in [0, 1], optional field
        values (an array of values, or a `(codes, names)` pair of integer codes into names),
        optional non-negative row weights `sample_weight` and an optional bucket width `step` for p.

        `distribution=False` leaves the distribution empty (sums only), for callers that
        build it themselves (`builder.StateBuilder`); `bin_sums=False` the sums of the `ece_bins`
        equal-width bins and of Spiegelhalter's test too, for callers that take them from an
        exact distribution. Those sums are what keeps ECE, MCE and Spiegelhalter exact under
        `step`."""
        y = np.asarray(y, dtype=np.float64).ravel()
        p = np.asarray(p, dtype=np.float64).ravel()
        if y.shape != p.shape:
            raise UsageError(f"labels and probabilities differ in length ({y.size} vs {p.size})")
        w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64).ravel()
        if w is not None and w.shape != p.shape:
            raise UsageError(f"weights and probabilities differ in length ({w.size} vs {p.size})")
        codes, names = _codes(fields, p.size)
        if field_cells and codes is None:
            raise UsageError("field_cells needs fields")
        if bin_sums:
            bw, sp, sy = kernels.bin_sums(y, p, w, ece_bins)
            spiegel = kernels.spiegelhalter_sums(y, p, w)
        else:
            bw, sp, sy, spiegel = np.zeros(ece_bins), np.zeros(ece_bins), np.zeros(ece_bins), None
        terms = _metrics.log_loss_terms(y, p)
        sq = p - y
        sq *= sq
        state = cls(
            np.zeros(0), np.zeros(0), np.zeros(0), int(y.size), int(np.count_nonzero(y == 1)),
            float(y.size if w is None else w.sum()),
            float(terms.sum() if w is None else terms @ w), float(sq.sum() if w is None else sq @ w),
            sp, sy, names, step=step, weighted=w is not None, ece_w=bw, spiegel=spiegel)
        if codes is not None:
            state.field_w, state.field_y, state.field_p = kernels.field_sums(y, p, codes, w, len(names))
        if not distribution:
            return state
        w1 = y if w is None else w * y
        w0 = (1.0 - y) if w is None else w - w1
        if step is not None and not field_cells and p.size:

            state.p, state.n0, state.n1 = bucket(p, w0, w1, float(step))  # the summary's grid aggregation
            return state
        key = p if step is None else np.rint(p / step) * step
        state.p, state.n0, state.n1, state.cell_field = _pool(key, w0, w1, codes if field_cells else None)
        return state

    # ------------------------------------------------------------------------ merging

    def merge(self, *others: "EvalState") -> "EvalState":
        """A new state of the rows behind this state and `others` (any number, any order)."""
        return merge_states([self, *others])

    # ------------------------------------------------------------------------ reading

    def pooled(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(distinct p ascending, n0, n1): the distribution with field cells pooled."""
        if self.cell_field is None:
            return self.p, self.n0, self.n1
        starts = _starts(self.p)
        n0, n1 = as_weights(self.n0), as_weights(self.n1)
        return (self.p[starts], np.add.reduceat(n0, starts) if starts.size else n0,
                np.add.reduceat(n1, starts) if starts.size else n1)

    def metrics(self, calbin_window: int = _metrics.CALBIN_WINDOW, ece_bins: int = _metrics.ECE_BINS,
                ece_strategy: str = "uniform", choice: Any = None) -> dict[str, float]:
        """Every metric, in `metrics.METRICS` order (field metrics when the state has fields):
        those of `selection.BASE`, or with `choice` (a `selection.MetricChoice`) the chosen ones.

        With `step`, the metrics that read the distribution of p come from exact row sums
        instead where they can (ECE and MCE of equal-width bins, Spiegelhalter), AUC and
        CalBin from the bucketed distribution (within `step_bounds`), and the calibration
        slope and intercept, a maximum-likelihood fit on every row's logit(p) that no sum
        gives and no useful bound covers, are n/a (NaN)."""
        nan = float("nan")
        from calibcli.evaluation.metrics import selection

        chosen = selection.BASE if choice is None else choice.keys
        if self.weight <= 0:
            return {k: nan for k in chosen if self.field_names is not None or not k.startswith("field_")}
        v, n0, n1 = self.pooled()
        with np.errstate(all="ignore"):
            out = {
                "log_loss": self.log_loss_sum / self.weight,
                "brier": self.brier_sum / self.weight,
                "auc": kernels.auc_from_ties(n1, n0),
                "calbin": kernels.calbin_counts(v, n0, n1, calbin_window),
            }
            if self.step is None:
                out["ece"] = self._ece(v, n0, n1, ece_bins, ece_strategy)
                out.update(_metrics.distribution_metrics(v, n0, n1, ece_bins, ece_strategy))
            else:
                out.update(self._exact_under_step(ece_bins, ece_strategy))
            if self.field_names is not None:
                sums = (self.field_w, self.field_y, self.field_p)
                out["field_ece"] = _metrics.field_ece_from_sums(*sums)
                out["field_rce"] = _metrics.field_rce_from_sums(*sums)
            if choice is not None:
                out.update(selection.new_metrics(v, n0, n1, choice if self.step is None else choice.under_step(),
                                                 ece_bins, out["brier"], out["log_loss"]))
        if self.step is not None:  # no bound from the buckets covers these: n/a (stepbounds.STEP_NA)
            out.update(dict.fromkeys(stepbounds.STEP_NA, nan))
        return {k: out[k] for k in chosen if k in out}

    def _ece(self, v: np.ndarray, n0: np.ndarray, n1: np.ndarray, bins: int, strategy: str) -> float:
        """ECE of exact p: from the row sums for the default 10 equal-width bins (what every
        state keeps), from the distribution for other bins."""
        if bins == _metrics.ECE_BINS and strategy == "uniform" and self.ece_p.size == bins:
            return float(np.sum(np.abs(self.ece_p - self.ece_y)) / self.weight)
        return _metrics.ece_from_distribution(v, n0, n1, bins, strategy)

    def _exact_under_step(self, ece_bins: int, ece_strategy: str) -> dict[str, float]:
        """ECE, MCE and Spiegelhalter from the row sums a bucketed state keeps (its equal-width bins:
        `EvaluateOptions.build` refuses --ece-strategy quantile with --step); slope and intercept n/a."""
        if self.ece_w is None or self.ece_w.size != ece_bins or self.spiegel is None:
            raise UsageError(f"this evaluation state keeps the sums of {self.ece_p.size} equal-width bins, "
                             f"not {ece_bins}: build it with ece_bins={ece_bins}")
        ece, mce = _metrics.binned_errors(self.ece_w, self.ece_p, self.ece_y)
        z, pval = _metrics.spiegelhalter_from_sums(self.spiegel)
        nan = float("nan")
        return {"ece": ece, "mce": mce, "cal_slope": nan, "cal_intercept": nan,
                "spiegelhalter_z": z, "spiegelhalter_p": pval}

    def mce_count(self, ece_bins: int = _metrics.ECE_BINS, ece_strategy: str = "uniform") -> float:
        """The rows (weight) of the bin where MCE is reached, as `metrics` computes MCE (NaN when n/a)."""
        if self.weight <= 0:
            return float("nan")
        if self.step is None:
            return _metrics.mce_count_of_distribution(*self.pooled(), ece_bins, ece_strategy)
        self._exact_under_step(ece_bins, ece_strategy)  # the same refusals as `metrics`
        keep = self.ece_w > 0
        return _metrics.mce_bin_weight(self.ece_w[keep], np.abs(self.ece_p[keep] - self.ece_y[keep]) / self.ece_w[keep])

    def step_bounds(self, calbin_window: int = _metrics.CALBIN_WINDOW, choice: Any = None
                    ) -> dict[str, float | None] | None:
        """With `step`: how far each metric may be from its exact value, None where it is n/a
        (`stepbounds.bounds`; None without step)."""
        if self.step is None:
            return None
        return stepbounds.bounds(*self.pooled(), self.weight, self.step, calbin_window, choice,
                                 self.field_names is not None)

    # ------------------------------------------------------------------------ Arrow

    def to_arrow(self) -> pa.Table:
        """The state as a one-row Arrow table (list columns), for shipping between processes."""
        header = {"version": STATE_VERSION, "rows": self.rows, "positives": self.positives,
                  "weight": self.weight, "log_loss_sum": self.log_loss_sum, "brier_sum": self.brier_sum,
                  "step": self.step, "weighted": self.weighted, "has_fields": self.field_names is not None,
                  "field_cells": self.cell_field is not None}
        f64 = pa.list_(pa.float64())
        cols = {
            "header": pa.array([json.dumps(header)]),
            "p": pa.array([self.p], f64), "n0": pa.array([as_weights(self.n0)], f64),
            "n1": pa.array([as_weights(self.n1)], f64),
            "cell_field": pa.array([self.cell_field if self.cell_field is not None else []], pa.list_(pa.int64())),
            "ece_p": pa.array([self.ece_p], f64), "ece_y": pa.array([self.ece_y], f64),
            "field_names": pa.array([self.field_names or []], pa.list_(pa.string())),
            "field_w": pa.array([self.field_w], f64), "field_y": pa.array([self.field_y], f64),
            "field_p": pa.array([self.field_p], f64),
            "ece_w": pa.array([self.ece_w], f64), "spiegel": pa.array([self.spiegel], f64),
        }
        return pa.table(cols).replace_schema_metadata({ARROW_KEY: str(STATE_VERSION).encode()})

    @classmethod
    def from_arrow(cls, table: pa.Table) -> "EvalState":
        """The merge of every state row of `table` (rows of `to_arrow` tables, concatenated)."""
        if table.num_rows == 0:
            raise UsageError("no evaluation states to read: the table is empty")
        missing = {"header", "p", "n0", "n1"} - set(table.column_names)
        if missing:
            raise UsageError(f"not an evaluation state table: no column {sorted(missing)[0]!r}")
        data = table.to_pydict()
        states = []
        for i in range(table.num_rows):
            h = json.loads(data["header"][i])
            if h.get("version", 0) > STATE_VERSION:
                raise UsageError(f"evaluation state version {h.get('version')} is newer than this calibcli reads")
            arr = {k: np.asarray(data[k][i], dtype=np.float64) for k in
                   ("p", "n0", "n1", "ece_p", "ece_y", "field_w", "field_y", "field_p")}
            states.append(cls(
                arr["p"], arr["n0"], arr["n1"], int(h["rows"]), int(h["positives"]), float(h["weight"]),
                float(h["log_loss_sum"]), float(h["brier_sum"]), arr["ece_p"], arr["ece_y"],
                list(data["field_names"][i]) if h["has_fields"] else None,
                arr["field_w"], arr["field_y"], arr["field_p"],
                np.asarray(data["cell_field"][i], dtype=np.int64) if h["field_cells"] else None,
                h["step"], bool(h["weighted"]), *(
                    None if data.get(k, [None] * (i + 1))[i] is None else np.asarray(data[k][i], dtype=np.float64)
                    for k in ("ece_w", "spiegel"))))
        return merge_states(states)


def compute_all(y: np.ndarray, p: np.ndarray, groups: Any = None, calbin_window: int = _metrics.CALBIN_WINDOW,
                sample_weight: Any = None, order: np.ndarray | None = None, ece_bins: int = _metrics.ECE_BINS,
                ece_strategy: str = "uniform", choice: Any = None) -> dict[str, float]:
    """Every metric of rows in memory, in `metrics.METRICS` order: the `EvalState` of the rows,
    read by `EvalState.metrics`. `groups`: integer field codes (or a `(codes, names)` pair),
    for the field metrics; `order`: an argsort of p if known; `choice`: as `EvalState.metrics`. Degenerate input (no weight,
    one class) gives NaN for what is undefined, silently."""
    with np.errstate(all="ignore"):
        return state_of(y, p, groups, sample_weight, order).metrics(calbin_window, ece_bins, ece_strategy, choice)


def state_of(y: np.ndarray, p: np.ndarray, groups: Any = None, sample_weight: Any = None,
             order: np.ndarray | None = None) -> EvalState:
    """The `EvalState` of rows in memory (`compute_all`'s): its metrics, and its distribution of p
    for the verdict."""
    if groups is not None and not isinstance(groups, tuple):
        groups = np.asarray(groups, dtype=np.int64)
        groups = (groups, [str(k) for k in range(int(groups.max()) + 1 if groups.size else 0)])
    with np.errstate(all="ignore"):
        state = EvalState.from_arrays(y, p, groups, sample_weight, distribution=False)
        state.p, state.n0, state.n1 = _metrics.distribution(np.asarray(y, dtype=np.float64).ravel(),
                                                            np.asarray(p, dtype=np.float64).ravel(), sample_weight,
                                                            order)
    return state


# ---------------------------------------------------------------------------- helpers


def _codes(fields: Any, n: int) -> tuple[np.ndarray | None, list[str] | None]:
    if fields is None:
        return None, None
    if isinstance(fields, tuple) and len(fields) == 2:
        codes, names = fields
        codes = np.asarray(codes, dtype=np.int64).ravel()
        names = [str(x) for x in names]
    else:
        codes, names = encode_fields(fields)
    if codes.size != n:
        raise UsageError(f"fields and probabilities differ in length ({codes.size} vs {n})")
    return codes, names


def _starts(keys: np.ndarray) -> np.ndarray:
    """Index of the first entry of each run of equal values in a sorted array."""
    if keys.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))


def _pool(key: np.ndarray, w0: np.ndarray, w1: np.ndarray, cell: np.ndarray | None, presorted_runs: bool = False):
    """Sort entries by key (then field cell) and add the weights of equal entries.

    `presorted_runs`: the input is a concatenation of sorted runs, so a stable sort
    (timsort) merges them in about linear time.
    """
    if cell is None:
        order = np.argsort(key, kind="stable" if presorted_runs else None)
    else:
        order = np.lexsort((cell, key))
    ks = key[order]
    if cell is None:
        starts = _starts(ks)
        cs = None
        if starts.size == ks.size:  # no ties: nothing to add up
            return ks, w0[order], w1[order], None
    else:
        cs = cell[order]
        change = np.concatenate([[True], (ks[1:] != ks[:-1]) | (cs[1:] != cs[:-1])]) if ks.size else np.zeros(0, bool)
        starts = np.flatnonzero(change)
        cs = cs[starts]
    if starts.size == 0:
        return ks, w0[:0].astype(np.float64), w1[:0].astype(np.float64), cs
    return ks[starts], np.add.reduceat(w0[order], starts), np.add.reduceat(w1[order], starts), cs


def merge_states(states: Sequence[EvalState] | Iterable[EvalState]) -> EvalState:
    """One state of the union of the rows behind `states` (one sorted merge of all of them)."""
    parts = list(states)
    if not parts:
        raise UsageError("nothing to merge: no evaluation states")
    if len(parts) == 1:
        return replace(parts[0])
    first = parts[0]
    for s in parts[1:]:
        if s.step != first.step:
            raise UsageError(f"cannot merge evaluation states bucketed with different steps "
                             f"({first.step} and {s.step})")
        if s.ece_p.size != first.ece_p.size:
            raise UsageError(f"cannot merge evaluation states with {first.ece_p.size} and {s.ece_p.size} ECE bins")
        if (s.field_names is None) != (first.field_names is None) or \
                (s.cell_field is None) != (first.cell_field is None):
            raise UsageError("cannot merge evaluation states with and without fields")
    names: list[str] | None = None
    remaps: list[np.ndarray | None] = [None] * len(parts)
    if first.field_names is not None:
        index: dict[str, int] = {}
        for i, s in enumerate(parts):
            remaps[i] = np.array([index.setdefault(n, len(index)) for n in s.field_names], dtype=np.int64)
        names = list(index)
    k = len(names) if names is not None else 0

    def fields_of(attr: str) -> np.ndarray:
        out = np.zeros(k)
        for s, lut in zip(parts, remaps):
            if lut is not None and lut.size:
                np.add.at(out, lut, getattr(s, attr))
        return out

    cells = None
    if first.cell_field is not None:
        cells = np.concatenate([lut[s.cell_field] if s.cell_field.size else s.cell_field
                                for s, lut in zip(parts, remaps)])
    p, n0, n1, cell = _pool(np.concatenate([s.p for s in parts]),
                            np.concatenate([s.n0 for s in parts], dtype=np.float64),
                            np.concatenate([s.n1 for s in parts], dtype=np.float64), cells, presorted_runs=True)
    return EvalState(
        p, n0, n1, sum(s.rows for s in parts), sum(s.positives for s in parts),
        float(sum(s.weight for s in parts)), float(sum(s.log_loss_sum for s in parts)),
        float(sum(s.brier_sum for s in parts)), sum(s.ece_p for s in parts), sum(s.ece_y for s in parts),
        names, fields_of("field_w"), fields_of("field_y"), fields_of("field_p"), cell,
        first.step, any(s.weighted for s in parts),
        None if any(s.ece_w is None for s in parts) else sum(s.ece_w for s in parts),
        None if any(s.spiegel is None for s in parts) else sum(s.spiegel for s in parts))


__all__ = ["EvalState", "compute_all", "merge_states", "state_of"]
