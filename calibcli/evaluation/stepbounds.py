"""What `calib evaluate --step` does to every metric: exact, within a bound computed from the
bucketed distribution, or n/a.

Under `--step` the distribution of p is kept per bucket (p -> rint(p / step) * step, each p
moved by at most step/2: `--step` is at least 1e-12, `requests.bounds`). Per metric
(docs/algorithms.md, "Evaluation state", has the derivations):

- exact (bound 0): log-loss, Brier, ECE and MCE (equal-width bins, from row sums),
  Spiegelhalter z and p (row sums), Field-ECE/RCE, the UNC terms (the positive rate);
- AUC: only positive/negative pairs inside one bucket change (to half a tie):
  sum_b n0_b n1_b / (2 N0 N1);
- CalBin: step/2 + min(1, c_max / s) (c_max the most rows in one bucket, s the window);
- Brier MCB and DSC: the buckets' PAV is the exact PAV constrained to be constant in each
  bucket, so S(p^) can only rise, by at most the labels' spread inside the buckets:
  sum_b n0_b n1_b / (n0_b + n1_b) / N (MCB and DSC fall by that at most);
- log-loss MCB and DSC: the same with the labels' entropy inside the buckets,
  sum_b c_b H(n1_b / c_b) / N, H the binary entropy in nats;
- n/a (`STEP_NA`, their gates refused): the calibration slope and intercept (a fit on every
  row's logit(p), which a bucket moves without bound near 0 and 1), and the resampling and
  goodness-of-fit tests and smooth ECE (CORP p, smECE, ECE debiased, HL, KS, Kuiper and
  their p-values), whose bins, groups or kernel grids the bucketed p can move by more than
  any bound the state gives.

Each bound is inflated by a relative 1e-9 and 1e-15 for the rounding of the sums.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibcli.numeric.pooling import as_weights
from calibcli.requests.metrics import STEP_NA

_ROUNDING = 1e-9


def _inflated(value: float) -> float:
    return value * (1 + _ROUNDING) + 1e-15


def bounds(v: np.ndarray, n0: np.ndarray, n1: np.ndarray, weight: float, step: float, calbin_window: int,
           choice: Any = None, has_fields: bool = False) -> dict[str, float | None]:
    """{metric: the largest |bucketed - exact| the distribution allows (0: exact), None: n/a}
    for the chosen metrics (`choice.keys`; default `selection.BASE`) of a state bucketed by
    `step` (ascending buckets `v`, their weights of negatives `n0` and positives `n1`)."""
    from calibcli.evaluation.metrics import selection

    n0, n1 = as_weights(n0), as_weights(n1)
    c = n0 + n1
    w0, w1 = float(n0.sum()), float(n1.sum())
    total = w0 + w1
    nan = float("nan")
    auc = _inflated(float((n0 / w0) @ (n1 / w1)) / 2) if w0 > 0 and w1 > 0 else nan
    c_max = float(c.max()) if v.size else 0.0
    s = min(float(calbin_window), max(weight, 1.0))
    keep = c > 0
    rate = np.divide(n1, c, out=np.zeros_like(c), where=keep)
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = float(np.sum(c[keep] * rate[keep] * (1 - rate[keep]))) / total if total > 0 else nan
        entropy = -(np.where(rate > 0, rate * np.log(rate), 0.0) + np.where(rate < 1, (1 - rate) * np.log1p(-rate), 0.0))
        information = float(np.sum(c[keep] * entropy[keep])) / total if total > 0 else nan
    out: dict[str, float | None] = {k: 0.0 for k in (*selection.BASE, *selection.NEW)}
    out.update(auc=auc, calbin=step / 2 * (1 + 1e-12) + 1e-15 + min(1.0, c_max / s),
               brier_mcb=_inflated(spread), brier_dsc=_inflated(spread),
               log_loss_mcb=_inflated(information), log_loss_dsc=_inflated(information))
    out.update(dict.fromkeys(STEP_NA))
    keys = selection.BASE if choice is None else choice.keys
    return {k: out[k] for k in keys if has_fields or not k.startswith("field_")}


__all__ = ["STEP_NA", "bounds"]
