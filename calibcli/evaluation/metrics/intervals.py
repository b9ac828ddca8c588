"""Probability intervals (Venn-Abers' [p0, p1], `calib apply --interval`) in `calib evaluate`.

For a probability column p with interval columns (low, high):

- interval width: the (weighted) mean of high - low;
- interval coverage (bin-rate coverage, a proxy): the (weighted) share of rows whose interval
  holds the positive rate of their bin, low <= rate_b <= high, where the bins are those of
  ECE (`--ece-bins`, `--ece-strategy`) over p, and rate_b is the bin's (weighted) share of
  positives. Venn-Abers promises no such coverage: its intervals are about 1/(calibration
  rows) wide and a bin's rate mixes rows of many p, so a low value is no failure;
- label-side ECE and p (what the Venn-Abers guarantee is about): the label-side end of each
  row's interval, p_y = high for a positive and low for a negative, is the probability a
  Venn predictor computes with the true label, which is perfectly calibrated when the
  calibration rows and these rows are exchangeable (Vovk & Petej 2014, Theorem 1; for the
  inductive predictor, Vovk, Petej & Fedorova 2015). `interval_label_ece` is the ECE of p_y
  (same bins), `interval_label_p` the smallest Holm-adjusted p-value of the verdict's tests
  of p_y (`verdict.binary_verdict`). The guarantee is an average over the draw of the
  calibration rows too: every test row shares one calibration set's sampling errors (a small
  isotonic block's rate), so on many test rows p_y can be found off while the guarantee
  holds. A small p says these intervals are not calibrated on these rows (a shift since
  calibration, or too few calibration rows), not that the theorem failed.

Both need the rows' bins, known once every p is read, so the interval columns with p, the
label and the weight are kept in memory (32 bytes a row) for the columns that have one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from calibcli.errors import UsageError
from calibcli.evaluation.metrics import kernels, binary as metrics

KEYS = metrics.INTERVAL_KEYS


def interval_pairs(names: Sequence[str], prob_cols: Sequence[str], explicit: tuple[str, str] | None,
                   source: str) -> dict[str, tuple[str, str]]:
    """{prob col: (low col, high col)}: `explicit` (`--interval-cols LOW,HIGH`, for the one
    --prob-col), else `<col>_low` and `<col>_high` where the input has both."""
    if explicit is not None:
        if len(prob_cols) != 1:
            raise UsageError("--interval-cols needs exactly one --prob-col (the point prediction it belongs to)")
        for col in explicit:
            if col not in names:
                raise UsageError(f"{source}: --interval-cols names {col!r}, which the input does not have")
        return {prob_cols[0]: explicit}
    return {c: (f"{c}_low", f"{c}_high") for c in prob_cols if f"{c}_low" in names and f"{c}_high" in names}


def reversed_row(low: np.ndarray, high: np.ndarray) -> int | None:
    """The index of the first row whose interval is reversed (low > high; NaN counts as
    reversed: it is no interval), None when every row has low <= high."""
    bad = ~(low <= high)
    return int(np.argmax(bad)) if bad.any() else None


def check_order(low: np.ndarray, high: np.ndarray, cols: tuple[str, str], source: str, offset: int = 0) -> None:
    """Refuse (InputError, naming file, column and 1-based row) an interval whose low end is
    above its high end: a width below 0 and a coverage of 0 would be reported as numbers.
    Columns given the wrong way round (`--interval-cols HIGH,LOW`) say so in the hint."""
    from calibcli.errors import InputError, shown

    i = reversed_row(low, high)
    if i is None:
        return
    everywhere = bool(np.all(low >= high))
    hint = (f"{cols[0]} >= {cols[1]} on every row read: are they the wrong way round? --interval-cols takes LOW,HIGH"
            if everywhere else "each row's interval needs its low end at or below its high end")
    raise InputError(f"{source}: column {shown(cols[1])}, row {i + 1 + offset}: the interval's high end "
                     f"{float(high[i])!r} is below its low end {float(low[i])!r} (column {shown(cols[0])})", hint=hint)


@dataclass
class IntervalCollector:
    """The rows of one probability column with its interval, batch by batch."""

    parts: list[tuple[np.ndarray, ...]] = field(default_factory=list)

    def add(self, p: np.ndarray, y: np.ndarray, w: np.ndarray | None, low: np.ndarray, high: np.ndarray) -> None:
        self.parts.append((p, y, np.ones(p.size) if w is None else w, low, high))

    def metrics(self, bins: int, strategy: str) -> dict[str, float]:
        p, y, w, low, high = (np.concatenate(a) for a in zip(*self.parts))
        self.parts = [(p, y, w, low, high)]
        return interval_metrics(p, y, low, high, w, bins, strategy)

    def view(self, bins: int, strategy: str) -> dict:
        """The widths of the intervals and the verdict of their label-side end (`interval_view`)."""
        p, y, w, low, high = (np.concatenate(a) for a in zip(*self.parts))
        return interval_view(y, low, high, w, bins, strategy)


def row_bins(p: np.ndarray, w: np.ndarray, bins: int, strategy: str) -> np.ndarray:
    """The ECE bin of each row's p (as `kernels.bin_sums_of_distribution` assigns them)."""
    if strategy == "quantile":
        xs, inv = np.unique(p, return_inverse=True)
        weight = np.bincount(inv, weights=w, minlength=xs.size)
        inner = kernels.weighted_percentiles(xs, weight, np.linspace(0, 100, bins + 1))[1:-1]
        return np.searchsorted(inner, p)
    return np.minimum((p * bins).astype(np.int64), bins - 1)


def interval_metrics(p: np.ndarray, y: np.ndarray, low: np.ndarray, high: np.ndarray, w: np.ndarray | None = None,
                     bins: int = metrics.ECE_BINS, strategy: str = "uniform") -> dict[str, float]:
    """{interval_width, interval_coverage} (module docstring)."""
    w = np.ones(p.size) if w is None else np.asarray(w, dtype=np.float64)
    total = float(np.sum(w))
    b = row_bins(p, w, bins, strategy)
    n = np.bincount(b, weights=w, minlength=bins)
    pos = np.bincount(b, weights=w * y, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = (pos / n)[b]
    covered = (low <= rate) & (rate <= high)
    label_side = np.where(y == 1, high, low)
    v, n0, n1 = metrics.distribution(np.asarray(y, dtype=np.float64), label_side, w)
    verdict = _label_verdict(label_side, y, w, bins, strategy)
    return {"interval_width": float(np.sum(w * (high - low)) / total),
            "interval_coverage": float(np.sum(w[covered]) / total),
            "interval_label_ece": metrics.ece_from_distribution(v, n0, n1, bins, strategy),
            "interval_label_p": min((t["adjusted_p"] for t in verdict.evidence if t["adjusted_p"] == t["adjusted_p"]),
                                    default=float("nan"))}


def _label_verdict(label_side: np.ndarray, y: np.ndarray, w: np.ndarray | None, bins: int, strategy: str):
    from calibcli.evaluation.verdict import interval_verdict

    return interval_verdict(label_side, y, w, bins, strategy)


WIDTH_QUANTILES = (0.0, 0.1, 0.5, 0.9, 0.99, 1.0)


def interval_view(y: np.ndarray, low: np.ndarray, high: np.ndarray, w: np.ndarray | None = None,
                  bins: int = metrics.ECE_BINS, strategy: str = "uniform") -> dict:
    """{width: {mean, q0, q10, q50, q90, q99, q100} (weighted quantiles of high - low),
    label_side: the verdict (JSON) of the label-side end}: what the report's interval section shows."""
    w = np.ones(y.size) if w is None else np.asarray(w, dtype=np.float64)
    width = np.asarray(high, dtype=np.float64) - np.asarray(low, dtype=np.float64)
    xs, inv = np.unique(width, return_inverse=True)
    weight = np.bincount(inv, weights=w, minlength=xs.size)
    qs = kernels.weighted_percentiles(xs, weight, 100 * np.array(WIDTH_QUANTILES)) if xs.size else []
    widths = {"mean": float(np.sum(w * width) / np.sum(w)) if xs.size else float("nan")}
    widths.update({f"q{round(100 * q)}": float(v) for q, v in zip(WIDTH_QUANTILES, qs)})
    label_side = np.where(np.asarray(y) == 1, high, low)
    return {"width": widths, "label_side": _label_verdict(label_side, y, w, bins, strategy).to_json()}
