"""CORP reliability (Dimitriadis, Gneiting & Jordan, PNAS 2021): the PAV recalibration of p,
the score decomposition it gives, and the consistency bands and test under calibration.

Everything works on a distribution of p (`EvalState.pooled()`): ascending distinct p with
the weight of positives and of negatives at each, so it is exact from a merged state.

API::

    from calibcli.evaluation import corp
    fitted = corp.pav_recalibration(p, pos_w, neg_w)       # p-hat at each distinct p
    parts = corp.decomposition(p, pos_w, neg_w)             # {"brier_mcb": ..., "log_loss_unc": ...}
    bands = corp.consistency_bands(p, pos_w + neg_w, rounds=100, seed=0, level=0.9, pos_w=pos_w)
    bands.x, bands.lower, bands.upper                       # pointwise band of the PAV curve
    bands.p_value                                           # corp-p (None without pos_w)
    corp.diagram(p, pos_w, neg_w, rounds=100, seed=0)       # the curve, band and p-value, as lists

- `pav_recalibration`: weighted pool-adjacent-violators of the positive rate at each
  distinct p (ties are pooled by construction), the isotonic regression of y on p.
- `decomposition`: for the Brier score and the log-loss S, with p-hat the recalibration and
  ybar the (weighted) positive rate: MCB = S(p) - S(p-hat), DSC = S(ybar) - S(p-hat),
  UNC = S(ybar), so S(p) = MCB - DSC + UNC. S(p) may be passed in (the exact means of a
  state, whose log-loss clips p to [1e-15, 1 - 1e-15]); S(p-hat) and S(ybar) use 0 log 0 = 0.
- `consistency_bands`: `rounds` resamples of the labels under calibration (positives at p
  ~ Binomial(rows at p, p)), PAV refitted each time; the band is the pointwise
  (1-level)/2 and (1+level)/2 quantiles of the refitted curves at up to `BAND_POINTS`
  distinct p; the p-value of the resampling test of calibration with statistic Brier MCB
  is (1 + #{MCB* >= MCB}) / (1 + rounds). Weights that are not whole numbers are rounded
  to a count of rows at each p (at least one), drawn, and scaled back to the weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibcli.evaluation.metrics.binary import LOG_LOSS_EPS
from calibcli.numeric.pava import pav_blocks, pav_inplace
from calibcli.numeric.pooling import as_weights

BAND_POINTS = 512  # distinct p at which a band is kept (evenly in p and in mass)
DECOMPOSITION_KEYS = ("brier_mcb", "brier_dsc", "brier_unc", "log_loss_mcb", "log_loss_dsc", "log_loss_unc")


def _positive(p, pos_w, neg_w):
    """(p, pos, total) restricted to entries of positive weight, as float64."""
    pos, neg = as_weights(pos_w), as_weights(neg_w)
    total = pos + neg
    keep = total > 0
    if not keep.all():
        return np.asarray(p, dtype=np.float64)[keep], pos[keep], total[keep]
    return np.asarray(p, dtype=np.float64), pos, total


def _pav(rate: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The weighted PAV fit of `rate`, written over `rate` (`weight` is left as it was)."""
    from calibcli.numeric.pava import pav_blocks

    return pav_inplace(rate, np.array(weight, dtype=np.float64))


def pav_recalibration(p, pos_w, neg_w) -> np.ndarray:
    """The recalibrated probability p-hat at each distinct p (ascending): the weighted isotonic
    regression of the positive rate. Entries without weight get their neighbours' value."""
    p = np.asarray(p, dtype=np.float64)
    pos, neg = as_weights(pos_w), as_weights(neg_w)
    total = pos + neg
    keep = total > 0
    fitted = _pav(pos[keep] / total[keep], total[keep])
    if keep.all():
        return fitted
    out = np.full(p.size, np.nan)
    out[keep] = fitted
    if fitted.size:  # a weightless entry takes the value at the next weighted p (the last: the previous)
        nxt = np.searchsorted(np.flatnonzero(keep), np.flatnonzero(~keep))
        out[~keep] = fitted[np.minimum(nxt, fitted.size - 1)]
    return out


def brier_of(q: np.ndarray, pos: np.ndarray, total: np.ndarray) -> float:
    """Mean Brier score of probabilities q for `pos` positives among `total` rows at each."""
    return float((pos @ (1.0 - q) ** 2 + (total - pos) @ q ** 2) / total.sum())


def _xlogy(a: np.ndarray, q: np.ndarray) -> float:
    """sum a log q with 0 log 0 = 0 (`scipy.special.xlogy`, summed)."""
    used = a != 0
    if used.all():
        return float(a @ np.log(q))
    return float(a[used] @ np.log(q[used]))


def log_loss_of(q: np.ndarray, pos: np.ndarray, total: np.ndarray) -> float:
    """Mean log-loss of q (0 log 0 = 0, no clipping) for `pos` positives among `total` rows."""
    return -(_xlogy(pos, q) + _xlogy(total - pos, 1.0 - q)) / float(total.sum())


def _clipped_log_loss(p: np.ndarray, pos: np.ndarray, total: np.ndarray) -> float:
    q = np.clip(p, LOG_LOSS_EPS, 1 - LOG_LOSS_EPS)
    return float(-(pos @ np.log(q) + (total - pos) @ np.log1p(-q)) / total.sum())


def decomposition(p, pos_w, neg_w, brier: float | None = None, log_loss: float | None = None
                  ) -> dict[str, float]:
    """MCB, DSC and UNC of the Brier score and the log-loss (`DECOMPOSITION_KEYS`).

    `brier`, `log_loss`: S(p) when known exactly (a state's sums; with bucketed p the
    recalibration is that of the buckets); else from the distribution. NaN without weight."""
    total = np.add(pos_w, neg_w, dtype=np.float64)  # the few n-long arrays a large distribution needs
    if total.size and total.min() <= 0:  # weightless entries carry nothing: drop them
        v, pos, total = _positive(p, pos_w, neg_w)
        pos_w, neg_w = pos, total - pos
    else:
        v = np.asarray(p, dtype=np.float64)
    sum_pos, sum_total = float(np.sum(pos_w, dtype=np.float64)), float(total.sum())
    if v.size == 0 or sum_total <= 0:
        return dict.fromkeys(DECOMPOSITION_KEYS, float("nan"))
    if brier is None or log_loss is None:
        pos = as_weights(pos_w)
        brier = brier_of(v, pos, total) if brier is None else brier
        log_loss = _clipped_log_loss(v, pos, total) if log_loss is None else log_loss
    fitted = np.divide(pos_w, total, dtype=np.float64)
    fitted, block_w, block_r = pav_blocks(fitted, total)  # total is garbled
    del total
    ybar = np.array([sum_pos / sum_total])
    one = np.array([sum_pos]), np.array([sum_total])
    # p-hat is constant on each PAV block, the block's positive rate: score the blocks
    value = fitted[block_r[:-1]]
    blocks = value, value * block_w, block_w
    del fitted
    out = {}
    for name, score, s_p in (("brier", brier_of, brier), ("log_loss", log_loss_of, log_loss)):
        s_hat, unc = score(*blocks), score(ybar, *one)
        out[f"{name}_mcb"], out[f"{name}_dsc"], out[f"{name}_unc"] = s_p - s_hat, unc - s_hat, unc
    return out


@dataclass
class Bands:
    """Consistency band of the PAV curve at distinct p `x`, and the test's p-value."""

    x: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    level: float
    rounds: int
    p_value: float | None = None


def band_points(p: np.ndarray, weight: np.ndarray, points: int = BAND_POINTS) -> np.ndarray:
    """Indices of up to `points` distinct p, half evenly spaced in p and half in mass."""
    if p.size <= points:
        return np.arange(p.size)
    half = points // 2
    by_p = np.searchsorted(p, np.linspace(p[0], p[-1], half))
    cum = np.cumsum(weight)
    by_mass = np.searchsorted(cum, np.linspace(0, cum[-1], half), side="left")
    return np.unique(np.clip(np.concatenate([by_p, by_mass, [0, p.size - 1]]), 0, p.size - 1))


class _Resampler:
    """Labels drawn under calibration at each distinct p, and the Brier MCB of a labelling.

    MCB = S(p) - S(p-hat) is computed as sum_i w_i p_i^2 - 2 pos_i p_i + w_i p-hat_i^2, over
    the total weight: on a PAV block p-hat is the block's positive rate, so sum pos p-hat =
    sum w p-hat^2 there (three dot products a round instead of two squared residuals)."""

    def __init__(self, v: np.ndarray, w: np.ndarray, seed: int):
        self.v, self.w, self.total = v, w, float(w.sum())
        self.q = np.clip(v, 0.0, 1.0)
        rows = np.rint(w)
        self.scale = None if np.array_equal(rows, w) else w / np.maximum(rows, 1.0)
        self.rows = np.maximum(rows, 1.0).astype(np.int64)
        self.single = bool((self.rows == 1).all())  # one row at every p: a uniform draw is a Bernoulli draw
        self.vwv = float((w * v) @ v)
        self.rng = np.random.default_rng(seed)

    def draw(self) -> np.ndarray:
        if self.single:
            drawn = (self.rng.random(self.q.size) < self.q).astype(np.float64)
        else:
            drawn = self.rng.binomial(self.rows, self.q).astype(np.float64)
        return drawn if self.scale is None else drawn * self.scale

    def mcb(self, pos: np.ndarray) -> tuple[float, np.ndarray]:
        """(Brier MCB, PAV fit) of positives `pos` at each p."""
        fitted = _pav(pos / self.w, self.w)
        return (self.vwv - 2.0 * float(pos @ self.v) + float((self.w * fitted) @ fitted)) / self.total, fitted


def consistency_bands(p, weights, rounds: int, seed: int, level: float = 0.9, pos_w=None,
                      points: int = BAND_POINTS) -> Bands:
    """Pointwise band of the PAV curve under calibration, and corp-p when `pos_w` is given.

    `p`: ascending distinct p; `weights`: the rows (weight) at each; `pos_w`: the observed
    positives (weight) at each. Seeded: the same inputs and seed give the same band."""
    v = np.asarray(p, dtype=np.float64)
    w = as_weights(weights)
    keep = w > 0
    pos = None if pos_w is None else as_weights(pos_w)
    if not keep.all():
        v, w, pos = v[keep], w[keep], None if pos is None else pos[keep]
    if rounds < 1 or v.size == 0:
        empty = np.zeros(0)
        return Bands(v[:0], empty, empty, level, max(rounds, 0), None if pos is None else float("nan"))
    idx = band_points(v, w, points)
    sampler = _Resampler(v, w, seed)
    curves = np.empty((rounds, idx.size))
    stats = np.empty(rounds)
    for r in range(rounds):  # one draw and one linear PAV per round
        stats[r], fitted = sampler.mcb(sampler.draw())
        curves[r] = fitted[idx]
    q = np.quantile(curves, [(1 - level) / 2, (1 + level) / 2], axis=0)
    p_value = None
    if pos is not None:
        p_value = float((1 + np.count_nonzero(stats >= sampler.mcb(pos)[0])) / (1 + rounds))
    return Bands(v[idx], q[0], q[1], level, rounds, p_value)


CURVE_POINTS = 4096  # the most points of a recalibration curve kept for a diagram


def diagram(p, pos_w, neg_w, rounds: int, seed: int, level: float = 0.9) -> dict:
    """What a CORP reliability diagram draws, as JSON-ready lists: the PAV recalibration
    curve (`p`, `recalibrated`: the ends of each constant block, at most `CURVE_POINTS`),
    the consistency band (`band_p`, `band_lower`, `band_upper`; empty without rounds), its
    `level` and `rounds`, the test's `p_value` (None without rounds), and the Brier score's
    `decomposition` {mcb, dsc, unc} (the figure's title, also where the metrics omit it)."""
    v, pos, total = _positive(p, pos_w, neg_w)
    fitted = _pav(pos / total, total)
    change = np.flatnonzero(np.diff(fitted) != 0) if fitted.size > 1 else np.zeros(0, dtype=np.int64)
    ends = np.unique(np.concatenate([[0, max(v.size - 1, 0)], change, change + 1])) if v.size else change
    if ends.size > CURVE_POINTS:
        ends = band_points(v, total, CURVE_POINTS)
    bands = consistency_bands(v, total, rounds, seed, level, pos_w=pos)
    return {"p": v[ends].tolist(), "recalibrated": fitted[ends].tolist(), "band_p": bands.x.tolist(),
            "band_lower": bands.lower.tolist(), "band_upper": bands.upper.tolist(), "level": level,
            "rounds": bands.rounds, "p_value": bands.p_value if rounds > 0 else None,
            "decomposition": {k[6:]: x for k, x in decomposition(v, pos, total - pos).items() if k.startswith("brier_")}}


__all__ = ["BAND_POINTS", "Bands", "DECOMPOSITION_KEYS", "band_points", "brier_of", "consistency_bands",
           "decomposition", "diagram", "log_loss_of", "pav_recalibration"]
