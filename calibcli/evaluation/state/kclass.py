"""Mergeable K-class evaluation state: the metrics of `kclass_metrics` from partial results.

Build a state per record batch, file part or engine partition, merge, then read::

    from calibcli.evaluation.state.kclass import KClassState
    state = KClassState.from_arrays(y_codes, P, sample_weight=w)    # P of shape (n, K)
    state = state.merge(KClassState.from_arrays(y2, P2))
    state.metrics(ece_bins=10, ece_strategy="uniform")   # {"log_loss": ..., "auc": ...}
    KClassState.from_arrow(state.to_arrow())             # merges every state in the table

What a state holds: the total weight and rows, the weighted sums of the per-row log-loss
and Brier terms and of the rows whose top class is right (accuracy), and K + 1 binary
distributions, each an `EvalState` without sums (ascending distinct p with the weight of
negatives n0 and positives n1 at each): the confidence max_k p_k against whether the top
class is right (top-label ECE and MCE, and every binary metric of `selection.NEW` as
`top_label_<name>` when chosen), and p_k against 1[y = k] for each class k
(classwise ECE and the one-vs-rest AUC). Nothing is bucketed, so every metric is exact for
any `--ece-bins` and `--ece-strategy`: merged states equal `kclass_metrics.compute_all` of
all rows to the rounding of sums added in another order, in any split and merge order.

`to_arrow` gives K + 1 rows (column `kclass_part`: 0 is the top label, k + 1 is class k),
each an `EvalState.to_arrow` row plus the K-class sums (`kclass_header`, JSON), so tables of
several states concatenate and `from_arrow` merges them part by part.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from calibcli.errors import UsageError
from calibcli.evaluation.metrics import kclass as km, kernels, binary as metrics
from calibcli.evaluation.metrics.binary import ECE_BINS
from calibcli.evaluation.state.binary import EvalState, merge_states

KCLASS_STATE_VERSION = 1
ARROW_KEY = b"calibcli.kclass_evaluation_state"
_SUMS = ("rows", "weight", "log_loss_sum", "brier_sum", "correct")


@dataclass
class KClassState:
    """Partial sums and the K + 1 binary distributions of some rows of one K-class prediction."""

    classes: list[str]
    rows: int
    weight: float
    log_loss_sum: float
    brier_sum: float
    correct: float  # weight of the rows whose top class is right
    top: EvalState  # confidence against top class right
    per_class: list[EvalState]  # p_k against 1[y = k]

    @classmethod
    def from_arrays(cls, y: Any, P: Any, sample_weight: Any = None, classes: Sequence[Any] | None = None
                    ) -> "KClassState":
        """The state of rows with class codes y (0 .. K-1) and probabilities P (n, K), with
        optional row weights; `classes` names the K columns (default "0" .. "K-1"), and only
        states of the same names merge. Input is checked (`kclass_metrics.check_inputs`)."""
        y, P, w = km.check_inputs(y, P, sample_weight)
        k = P.shape[1]
        names = [str(c) for c in classes] if classes is not None else [str(i) for i in range(k)]
        if len(names) != k:
            raise UsageError(f"{len(names)} class names for {k} probability columns")
        conf, correct = km.top_label(y, P)

        def total(values: np.ndarray) -> float:
            return float(values.sum() if w is None else values @ w)

        def binary(y01: np.ndarray, p: np.ndarray) -> EvalState:
            return EvalState.from_arrays(y01, p, sample_weight=w, bin_sums=False)

        return cls(names, int(y.size), float(y.size if w is None else w.sum()),
                   total(km.log_loss_terms(y, P)), total(km.brier_terms(y, P)), total(correct),
                   binary(correct, conf), [binary((y == j).astype(np.float64), P[:, j]) for j in range(k)])

    def merge(self, *others: "KClassState") -> "KClassState":
        """A new state of the rows behind this state and `others` (any number, any order)."""
        return merge_kclass_states([self, *others])

    def metrics(self, ece_bins: int = ECE_BINS, ece_strategy: str = "uniform", choice: Any = None
                ) -> dict[str, float]:
        """Every K-class metric, in `kclass_metrics.KCLASS_METRICS` order, or with `choice` (a
        `selection.MetricChoice`) those of its `kclass_keys` (NaN without weight)."""
        sums = (self.weight, self.log_loss_sum, self.brier_sum, self.correct)
        return metrics_of(sums, self.top.pooled(), [s.pooled() for s in self.per_class], ece_bins, ece_strategy,
                          choice)

    def to_arrow(self) -> pa.Table:
        """The state as K + 1 Arrow rows (see the module docstring), for shipping between processes."""
        header = json.dumps({"version": KCLASS_STATE_VERSION, "classes": self.classes,
                             **{k: getattr(self, k) for k in _SUMS}})
        parts = [self.top, *self.per_class]
        table = pa.concat_tables([s.to_arrow().replace_schema_metadata(None) for s in parts])
        table = table.append_column("kclass_part", pa.array(np.arange(len(parts)), pa.int64()))
        table = table.append_column("kclass_header", pa.array([header] * len(parts)))
        return table.combine_chunks().replace_schema_metadata({ARROW_KEY: str(KCLASS_STATE_VERSION).encode()})

    @classmethod
    def from_arrow(cls, table: pa.Table) -> "KClassState":
        """The merge of every state in `table` (`to_arrow` tables, concatenated)."""
        if "kclass_part" not in table.column_names or "kclass_header" not in table.column_names:
            raise UsageError("not a K-class evaluation state table: no column 'kclass_part'")
        if table.num_rows == 0:
            raise UsageError("no evaluation states to read: the table is empty")
        parts = table.column("kclass_part").to_numpy()
        first = table.filter(pc.equal(table.column("kclass_part"), 0))
        headers = [json.loads(h) for h in first.column("kclass_header").to_pylist()]
        for h in headers:
            if h.get("version", 0) > KCLASS_STATE_VERSION:
                raise UsageError(f"K-class evaluation state version {h.get('version')} is newer than this calibcli reads")
        classes = headers[0]["classes"] if headers else []
        if any(h["classes"] != classes for h in headers) or set(parts.tolist()) != set(range(len(classes) + 1)):
            raise UsageError("cannot merge K-class evaluation states of different classes")
        subs = [EvalState.from_arrow(table.filter(pc.equal(table.column("kclass_part"), j)))
                for j in range(len(classes) + 1)]
        sums = {k: sum(h[k] for h in headers) for k in _SUMS}
        return cls(classes, int(sums["rows"]), float(sums["weight"]), float(sums["log_loss_sum"]),
                   float(sums["brier_sum"]), float(sums["correct"]), subs[0], subs[1:])


def metrics_of(sums: Sequence[float], top: tuple, per_class: Sequence[tuple], ece_bins: int = ECE_BINS,
               ece_strategy: str = "uniform", choice: Any = None) -> dict[str, float]:
    """The K-class metrics from the sums (weight, log-loss, Brier, right top labels) and the
    distributions (xs, n0, n1) of the confidence and of each p_k (also a bootstrap replicate's):
    those of `KCLASS_METRICS`, or the `kclass_keys` of `choice`, whose top-label metrics are
    the binary ones (`selection.new_metrics`) of the confidence's distribution."""
    keys = km.KCLASS_METRICS if choice is None else choice.kclass_keys
    out = _first_metrics(sums, top, per_class, ece_bins, ece_strategy)
    if choice is not None and sums[0] > 0:
        from calibcli.evaluation.metrics import selection

        with np.errstate(all="ignore"):
            top_label = selection.new_metrics(*top, choice.top_label(), ece_bins)
        out.update({metrics.TOP_LABEL + k: v for k, v in top_label.items()})
    return {k: out.get(k, float("nan")) for k in keys}


def _first_metrics(sums: Sequence[float], top: tuple, per_class: Sequence[tuple], ece_bins: int,
                   ece_strategy: str) -> dict[str, float]:
    weight, log_loss_sum, brier_sum, correct = sums
    if not weight > 0:
        return dict.fromkeys(km.KCLASS_METRICS, float("nan"))
    with np.errstate(all="ignore"):
        ece, mce = km.ece_mce_of_distribution(*top, ece_bins, ece_strategy)
        classwise = [km.ece_mce_of_distribution(*d, ece_bins, ece_strategy)[0] for d in per_class]
        aucs = [kernels.auc_from_ties(n1, n0) for _, n0, n1 in per_class]
    return {"log_loss": log_loss_sum / weight, "brier": brier_sum / weight, "accuracy": correct / weight,
            "top_label_ece": ece, "top_label_mce": mce, "classwise_ece": float(np.mean(classwise)),
            "auc": km.macro_auc(aucs)}


def merge_kclass_states(states: Sequence[KClassState]) -> KClassState:
    """One state of the union of the rows behind `states` (of the same classes)."""
    parts = list(states)
    if not parts:
        raise UsageError("nothing to merge: no K-class evaluation states")
    first = parts[0]
    if any(s.classes != first.classes for s in parts):
        raise UsageError("cannot merge K-class evaluation states of different classes "
                         f"({first.classes} and {next(s.classes for s in parts if s.classes != first.classes)})")
    return KClassState(
        list(first.classes), sum(s.rows for s in parts), float(sum(s.weight for s in parts)),
        float(sum(s.log_loss_sum for s in parts)), float(sum(s.brier_sum for s in parts)),
        float(sum(s.correct for s in parts)), merge_states([s.top for s in parts]),
        [merge_states([s.per_class[j] for s in parts]) for j in range(len(first.classes))])


__all__ = ["KClassState", "merge_kclass_states", "metrics_of"]
