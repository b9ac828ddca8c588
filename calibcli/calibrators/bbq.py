"""BBQ, Bayesian Binning into Quantiles: a posterior-weighted average of histogram binnings.

`variant=paper` (Naeini, Cooper & Hauskrecht 2015): every equal-frequency binning with B
bins, B from max(1, floor(N^(1/3) / 10)) to ceil(10 N^(1/3)), scored by the BDeu marginal
likelihood with equivalent sample size N' = 2 and bin priors Beta(N'/B p_b, N'/B (1 - p_b)),
p_b the midpoint of the bin's interval of [0, 1]; a bin predicts its posterior mean
(m_b + N'/B p_b) / (N_b + N'/B) and the models are averaged with their posterior weights
(uniform model prior).

`variant=netcal` reproduces `netcal.binning.BBQ()` 1.4: equal-width bins, B up to
min(ceil(N / 5), ceil(10 N^(1/3))), each bin its positive rate (an empty bin its midpoint),
models scored by BIC on float32 log-likelihoods, pruned by netcal's elbow rule
(alpha = 0.001) and weighted by exp(-BIC/2).

Both store one step map: the union of the averaged models' edges with the averaged value
of each interval, so prediction is one `searchsorted` (a score on an edge belongs to the
interval below, as netcal's `transform` does). N and the bin counts are summed weights.
See docs/algorithms.md, "BBQ".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibcli.calibrators.fitdata import weighted_rows
from calibcli.calibrators.piecewise import StepMap
from calibcli.calibrators.statespec import Field, StateSpec
from calibcli.calibrators.params import Param
from calibcli.calibrators.registry import register

ESS = 2.0  # the paper's equivalent sample size N'
ELBOW_ALPHA = 0.001  # netcal's elbow threshold


MAX_BINS = 10_000  # 10 N^(1/3) at N = 1e9: larger counts (frequency weights up to 1e308) stop here


def bin_range(n: float, netcal: bool, finest: float = np.inf) -> range:
    """Numbers of bins averaged over: [N^(1/3)/10, 10 N^(1/3)] (netcal also caps at N/5),
    at most MAX_BINS; `finest` is a B from which on every binning is the same (the range
    stops there: the larger B would repeat it).

    netcal takes np.power(N, 1/3) as it rounds (1e6 gives 99.99999999999997, so its range
    starts at 9); the paper's variant uses the exact root of a perfect cube."""
    root = float(np.power(n, 1.0 / 3.0))
    if not netcal and round(root) ** 3 == n:
        root = float(round(root))
    lo = min(max(1.0, np.floor(root / 10.0)), MAX_BINS)
    hi = min(np.ceil(root * 10.0), MAX_BINS)
    if netcal:
        hi = min(np.ceil(n / 5.0), hi)
    hi = min(hi, max(lo, finest))
    return range(int(lo), int(max(lo, hi)) + 1)


class _Sums:
    """Cumulative weight and weighted-positive sums of the sorted training scores."""

    def __init__(self, s: np.ndarray, y: np.ndarray, w: np.ndarray):
        order = np.argsort(s, kind="stable")
        self.s = s[order]
        self.cw = np.concatenate([[0.0], np.cumsum(w[order])])
        self.cwy = np.concatenate([[0.0], np.cumsum((w * y)[order])])

    def finest(self) -> float:
        """A number of bins from which on every quantile binning puts an edge at every distinct
        score: each row's share of the weight spans more than two levels j / B."""
        share = float(np.min(np.diff(self.cw)[np.diff(self.cw) > 0]) / self.cw[-1])
        return np.ceil(4.0 / share) if share > 0 else np.inf

    def quantiles(self, q: np.ndarray) -> np.ndarray:
        """`binning.weighted_quantiles` (inverted CDF) from the sums already sorted."""
        cum = self.cw[1:]
        idx = np.searchsorted(cum, q * cum[-1] * (1 - 1e-12), side="left")
        return self.s[np.minimum(idx, self.s.size - 1)]

    def counts(self, inner: np.ndarray, side: str) -> tuple[np.ndarray, np.ndarray]:
        """(weight, positive weight) per bin of the inner edges; side "left": a score on an
        edge is in the bin below, "right": above."""
        pos = np.concatenate([[0], np.searchsorted(self.s, inner, side="right" if side == "left" else "left"),
                              [self.s.size]])
        return np.diff(self.cw[pos]), np.diff(self.cwy[pos])


def _paper_models(sums: _Sums, n: float):
    """(inner edges, bin values, log marginal likelihood) of each equal-frequency binning."""
    from scipy.special import gammaln

    lo, hi = float(sums.s[0]), float(sums.s[-1])
    seen: set[bytes] = set()
    for b in bin_range(n, netcal=False, finest=sums.finest()):
        inner = np.unique(sums.quantiles(np.arange(1, b) / b)) if b > 1 else np.empty(0)
        inner = inner[(inner >= lo) & (inner < hi)]
        key = inner.tobytes()
        if key in seen:  # heavy ties: a coarser B gave the same binning, counted once
            continue
        seen.add(key)
        nb, m = sums.counts(inner, "left")
        k = inner.size + 1
        bounds = np.concatenate([[0.0], inner, [1.0]])
        mid = np.clip(0.5 * (bounds[:-1] + bounds[1:]), 1e-12, 1.0 - 1e-12)  # a prior mean of 0 or 1 is improper
        a = ESS / k * mid
        bb = ESS / k - a
        neg = np.maximum(nb - m, 0.0)
        log_ml = float(np.sum(gammaln(ESS / k) - gammaln(nb + ESS / k)
                              + gammaln(m + a) - gammaln(a) + gammaln(neg + bb) - gammaln(bb)))
        yield inner, (m + a) / (nb + ESS / k), log_ml


def _paper_weights(log_ml: np.ndarray) -> np.ndarray:
    weights = np.exp(log_ml - log_ml.max())
    return weights / weights.sum()


def _netcal_models(sums: _Sums, n: float):
    """netcal's HistogramBinning(bins=B, equal_intervals=True) for each B, and its BIC.

    Bin values are counted with a score on an edge in the bin above (scipy's
    binned_statistic) but the likelihood, like `transform`, puts it in the bin below.
    """
    for b in bin_range(n, netcal=True):
        full = np.linspace(0.0, 1.0, b + 1)
        inner = full[1:-1]
        nb, m = sums.counts(inner, "right")
        values = 0.5 * (full[:-1] + full[1:])
        filled = nb > 0
        values[filled] = m[filled] / nb[filled]
        nl, ml = sums.counts(inner, "left")
        p32 = values.astype(np.float32)
        with np.errstate(divide="ignore"):
            log_p = np.maximum(np.log(p32), np.float32(-100)).astype(np.float64)
            log_q = np.maximum(np.log(np.float32(1) - p32), np.float32(-100)).astype(np.float64)
        with np.errstate(invalid="ignore"):
            ll = np.sum(np.where(ml > 0, ml * log_p, 0.0) + np.where(nl - ml > 0, (nl - ml) * log_q, 0.0))
        yield inner, values, -2.0 * float(ll) + b * float(np.log(n))


def _elbow(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """netcal's `_elbow`: (kept model indices, best first; their normalised weights)."""
    var = float(np.var(scores))
    order = np.argsort(scores)[::-1]
    ranked = scores[order]
    k = 0
    while k < ranked.size - 1 and ranked[k] == ranked[k + 1]:
        k += 1
    with np.errstate(divide="ignore", invalid="ignore"):
        while k < ranked.size - 1 and (ranked[k] - ranked[k + 1]) / var > ELBOW_ALPHA:
            k += 1
    kept = order[: k + 1]
    return kept, scores[kept] / np.sum(scores[kept])


def merge_step_maps(models: list[tuple[np.ndarray, np.ndarray]], weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One step map equal to sum_i weights[i] * model_i (summed in the models' order).

    Every model's edges are among the merged ones, so a merged interval lies inside one bin
    of each model: its value is that bin's."""
    edges = np.unique(np.concatenate([inner for inner, _ in models])) if models else np.empty(0)
    values = np.zeros(edges.size + 1)
    for (inner, vals), wt in zip(models, weights):
        idx = np.concatenate([np.searchsorted(inner, edges, side="left"), [inner.size]])
        values = values + wt * vals[idx]
    return edges, values


@register
class BBQCalibrator(StepMap):
    """Bayesian Binning into Quantiles (the paper's, or netcal 1.4's defaults)."""

    name = "bbq"
    complexity = 3000
    fitted = "an average of binnings, one rate per bin (grows with the data)"
    description = ("BBQ: Bayesian average of equal-frequency binnings scored by BDeu "
                   "(variant=netcal: netcal 1.4's equal-width, BIC, elbow-pruned BBQ)")
    params = (
        Param("variant", str, "paper", "paper: equal-frequency bins, BDeu (Naeini et al. 2015); "
              "netcal: netcal 1.4's BBQ() defaults (equal-width bins, BIC, elbow pruning)",
              choices=("paper", "netcal")),
    )
    monotone = False
    needs_probabilities = True
    extremes = ("inside (0, 1) for variant=paper (every bin's Beta prior); variant=netcal gives 0 "
                "or 1 where every averaged bin had one class, as netcal does")

    def _fit(self, s, y, w):
        s, y, w = weighted_rows(s, y, w)
        n = float(np.sum(w))
        sums = _Sums(s, y, w)
        if self.params["variant"] == "paper":
            found = list(_paper_models(sums, n))
            weights = _paper_weights(np.array([f[2] for f in found]))
            order = np.flatnonzero(weights > 0)  # exp underflow: exactly zero weight, no effect
        else:
            found = list(_netcal_models(sums, n))
            bic = np.array([f[2] for f in found])
            order, weights_kept = _elbow(np.exp((bic.min() - bic) / 2.0))
            weights = np.zeros(len(found))
            weights[order] = weights_kept
        self.models_ = int(order.size)
        self.edges_, self.values_ = merge_step_maps([found[i][:2] for i in order], weights[order])
        self.values_ = np.clip(self.values_, 0.0, 1.0)

    state_spec = StateSpec(
        Field("edges", order="increasing", low=0.0, high=1.0),
        Field("values", unit=True, min_size=1),
        check=StepMap.state_spec.check,
    )

    def _set_state(self, state: dict[str, Any]) -> None:
        super()._set_state(state)
        self.models_ = None

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"intervals": int(self.values_.size)}
        if getattr(self, "models_", None) is not None:
            out["models"] = self.models_
        return out
