"""The one rule for the weights `calib evaluate` (and `calibcli.evaluate`) reads: their total.

Evaluation counts a row of weight w as w rows (a frequency weight), and several metrics use
those counts as counts: CalBin's windows start at whole rows 0, 1, 2, ... of the expanded
rows, the calibration tests (Spiegelhalter, Hosmer-Lemeshow, KS, Kuiper) and CORP's
resampling read the number of rows. Row positions are exact in float64 up to 2^53, so the
total weight must lie in (0, 2^53]: a column of zeros evaluates nothing (refused with the
words `calib fit` uses), and a total above 2^53 (weights of 1e308, or 1e12 on a million rows)
has row positions float64 cannot tell apart (refused: divide the weights by a common factor).
Small totals are fine: the metrics that do not count rows are those of the same weights at
unit scale (AUC, the calibration slope, Field-RCE rescale or divide before products of two
small numbers), down to weights of about 1e-298, whose products with p stay normal floats.
"""

from __future__ import annotations

import math

import numpy as np

from calibcli.errors import InputError, shown

MAX_TOTAL = 2.0**53  # the largest total weight: row positions exact in float64


class WeightTotal:
    """The running total of a weight column read batch by batch (None: no weights)."""

    def __init__(self, column: str | None, source: str):
        self.column, self.source, self.total = column, source, 0.0

    def add(self, w: np.ndarray | None) -> None:
        """Add a batch's (checked: finite, non-negative) weights; refuse as soon as the total
        passes `MAX_TOTAL`."""
        if w is None or self.column is None:
            return
        with np.errstate(over="ignore"):
            self.total += float(np.sum(w))
        if not self.total <= MAX_TOTAL:
            raise InputError(self._said(f"the weights add up to {_amount(self.total)}, more than the 2^53 "
                                        "(9.0e+15) rows evaluate can count"),
                             hint="evaluate counts a weight of w as w rows: divide the weights by a common factor")

    def check(self) -> None:
        """At the end of the input: refuse a column of zero weights."""
        if self.column is not None and self.total == 0:
            raise InputError(self._said("all weights are zero: evaluation needs weighted rows"),
                             hint="check --weight-col")

    def _said(self, what: str) -> str:
        return f"{self.source}: column {shown(self.column)}: {what}"


def _amount(total: float) -> str:
    return f"{total:.3g}" if math.isfinite(total) else "over 1.8e+308"


def check_weights(w: np.ndarray | None, what: str = "sample_weight") -> None:
    """The same rule for weights given in memory (`calibcli.evaluate`), as a UsageError."""
    if w is None:
        return
    from calibcli.errors import UsageError

    try:
        total = WeightTotal(what, "<arrays>")
        total.add(w)
        total.check()
    except InputError as exc:
        raise UsageError(exc.message.replace("<arrays>: column ", "", 1), hint=exc.hint) from None


__all__ = ["MAX_TOTAL", "WeightTotal", "check_weights"]
