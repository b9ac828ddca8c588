"""Bayes-Iso: non-parametric Bayesian isotonic calibration (posterior mean of isotonic maps).

Allikivi & Kull (2019), "Non-parametric Bayesian isotonic calibration: fighting
over-confidence in binary classification", ECML-PKDD, section 4. The calibrated value at each
training score is the posterior mean E[C | y] of Theorem 1 (eq. 2-3), estimated by
self-normalised importance sampling: maps are drawn from the paper's random-pivot prior
restricted to data-driven bounds (sections 4.2-4.3) and weighted by their binomial likelihood.
Prediction joins (score, posterior mean) knots by linear interpolation, constant outside.

Choices where the paper and the released code (`mlkruup/bayesiso`, distr=8) differ:

- Bounds (section 4.3): bins of B instances give p +/- margin, but the defaults follow the
  released code, not the paper's text: B = N/20 and margin 1/sqrt(N) instead of B = N/10 and
  1/sqrt(B), since the paper's numbers came from that code (`benchmarks/bayes_iso_table1.py
  --ablations` compares both on the section 5.1 data). Past 8000 instances B = N^(2/3) (= N/20 at 8000),
  so bins keep shrinking relative to N and the bounds stay tight enough for large data.
  `bin_size` and `margin` override them (bin_size=N/10 with margin=1/sqrt(N/10) is the
  paper's text). The bin for the upper bound of a score
  starts at its tie group, the bin for the lower bound ends at it (the paper's
  C_{j+1} <= p <= C_{j+B}), shortened at the ends of the ranking. Bounds are monotonised as
  the paper says and, as in the code, widened to contain the isotonic (PAV) fit so the
  maximum-likelihood map is always inside.
- Tied scores form one rank with counts n1 = sum w*y and n0 = sum w*(1-y) (as the code's
  "join" view), so targets may be fractional (Platt correction) and cost grows with distinct
  scores, not rows. Weights act as counts everywhere: N, bins and the likelihood use summed
  weights, so weights equal duplicated rows exactly, and weights scaled to sum to 1 mean
  "one observation" (wide bounds, a nearly flat likelihood).
- Sampling: the random-pivot recursion is a random Cartesian tree; every node's value is
  uniform between its two nearest ancestors' values (left and right), clipped to its bounds.
  We draw a tree, then fill its levels for `SHARE` maps at once, so each map follows the
  paper's prior with bounds exactly; maps that share a tree are independent given the tree
  (dependence only through the pivot order), which keeps the estimator consistent and makes
  the inner loop dense row operations. Sampled values are kept in [1e-7, 1 - 1e-7] so every
  log-likelihood term is finite (the code substitutes log(1e-323)).
- Log-likelihoods are combined by a running log-sum-exp over chunks of maps; no map is stored.
- Effective sample size: maps of one tree are not independent draws, so the ESS counts
  trees: (sum W)^2 / sum W^2 with W a tree's summed map weights (the plain formula over
  single maps overstates the precision). It is conservative (a tree of 64 maps counts once)
  and equals the plain ESS with one map per tree. The dominance flag is the paper's at the
  same level: one tree outweighs all other trees together.
- Adaptive sampling (not in the paper): every block gets `samples` maps; blocks whose ESS is
  below `target_ess` then get more, sized from their ESS, until they reach it or the extra
  work passes `budget` times the first round's.
- Large data: the paper notes instability beyond ~3000 instances and suggests blocks of ~1000
  consecutive ranks. The ranking is cut into blocks of about `block_size` = 1000 instances
  that are sampled and weighted independently (bounds still come from all data); up to
  1500 instances this is the paper's single block. A block's edge values are held
  only by the bounds, not by the neighbouring block's values, which biases them; so each
  block also samples `overlap` instances of context on each side (likelihood included) and
  keeps only its own ranks. Blocks approximate the single-block estimator (see
  docs/algorithms.md). More than `grid` distinct scores are pooled into `grid` rank cells of
  equal weight (one value per cell, knot at the cell's mean score). The joined block means
  are made monotone by weighted PAV (a no-op inside blocks).
- Diagnostics: the smallest ESS over blocks and the number of dominated blocks; a
  CalibWarning says what to do.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibcli.calibrators.base import ScoreCalibrator, fit_warning
from calibcli.calibrators.bayes_iso_bounds import block_edges, pool_cells, sample_bounds, widen_blocks
from calibcli.calibrators.bayes_iso_sampler import posterior_mean
from calibcli.calibrators.fitdata import as_float_array
from calibcli.calibrators.isotonic import pav
from calibcli.calibrators.piecewise import interpolate
from calibcli.calibrators.registry import register
from calibcli.calibrators.statespec import MAX_KNOTS, Field, StateSpec
from calibcli.calibrators.params import PLATT_CORRECTION, SEED, Param
from calibcli.numeric.pooling import unique_with_sums

_MAX_COUNT_EXP = 100  # summed weights above 2**100 are scaled down to it (counts are float32)


def _auto(name: str, help: str, low: float, high: float) -> Param:
    """An optional float option; None ("auto") lets the fit choose it from the data."""
    return Param(name, float, None, help, low=low, high=high, optional=True)


@register
class BayesIsoCalibrator(ScoreCalibrator):
    """Posterior mean of isotonic maps under the bounded random-pivot prior (Bayes-Iso)."""

    name = "bayes-iso"
    complexity = 5000
    fitted = "a posterior mean of sampled isotonic maps (grows with the data)"
    extremes = "inside (0, 1): a posterior mean of sampled maps (no Platt correction needed)"
    description = "Bayes-Iso: posterior mean isotonic map by likelihood-weighted prior sampling"
    params = (
        Param("samples", int, 10000, "maps drawn from the prior (per block); time grows as samples x grid", low=1,
              high=1_000_000),
        Param("target_ess", float, 100.0, "blocks whose effective number of independent pivot trees is below "
              "this get more samples (0: exactly `samples`)", low=0.0, high=1e6),
        Param("budget", float, 16.0, "the extra samples for target_ess cost at most this many times the first "
              "`samples`", low=0.0, high=1000.0),
        _auto("bin_size", "instances per bin for the sampling bounds; auto: N/20 (released code), N^(2/3) past "
              "8000", 1.0, 1e12),
        _auto("margin", "half-width added to the bins' positive rates; auto: 1/sqrt(N) (released code; the "
              "paper's text: 1/sqrt(bin_size))", 0.0, 1.0),
        _auto("block_size", "instances per independently sampled block of consecutive ranks; auto: 1000 (the "
              "paper's suggestion), so up to 1500 instances are one block", 1.0, 1e12),
        _auto("overlap", "instances of context each block also samples on each side (only its own ranks are "
              "kept); auto: min(bin_size, block_size / 2)", 0.0, 1e12),
        Param("grid", int, 3000, "at most this many distinct ranks are sampled; more are pooled", low=2,
              high=100_000),
        SEED,
        PLATT_CORRECTION,
    )

    def _fit(self, s, y, w):
        xs, sw, swy = unique_with_sums(s, y, w)
        e = math.frexp(float(sw.sum()))[1]
        if e > _MAX_COUNT_EXP:  # counts beyond float32's range: still overwhelming at 2**100
            sw, swy = np.ldexp(sw, _MAX_COUNT_EXP - e), np.ldexp(swy, _MAX_COUNT_EXP - e)
        keep = sw > 0
        xs, sw, swy = pool_cells(xs[keep], sw[keep], swy[keep], self.params["grid"])
        total = float(sw.sum())
        bin_size = self.params["bin_size"] or max(1.0, min(total / 20.0, total ** (2.0 / 3.0)))
        block_size = self.params["block_size"] or 1000.0
        iso = pav(swy / sw, sw)
        margin = self.params["margin"]
        if margin is None:
            margin = 1.0 / math.sqrt(total)
        lower, upper = sample_bounds(sw, swy, iso, bin_size, margin)
        bstart, bend = block_edges(sw, block_size)
        n1 = swy
        n0 = np.maximum(sw - swy, 0.0)
        overlap = self.params["overlap"]
        if overlap is None:
            overlap = min(bin_size, block_size / 2.0)
        ranks, wstart, wend, own = widen_blocks(sw, bstart, bend, overlap if bstart.size > 1 else 0.0)
        post = posterior_mean(
            n1[ranks], n0[ranks], lower[ranks], upper[ranks], wstart, wend, self.params["samples"],
            self.params["seed"], self.params["target_ess"], self.params["budget"],
        )
        mean = post.mean[own]
        if bstart.size > 1:
            mean = pav(mean, sw)
        self.x_ = xs
        self.y_ = np.clip(np.maximum.accumulate(mean), 0.0, 1.0)
        self.ess_ = float(post.ess.min())
        self.blocks_ = int(bstart.size)
        self.dominated_ = int(np.count_nonzero(post.dominated))
        self.bin_size_ = float(bin_size)
        if self.dominated_:
            where = "the sample" if self.blocks_ == 1 else f"{self.dominated_} of {self.blocks_} blocks"
            fit_warning(f"bayes-iso: one sampled pivot tree outweighs all others in {where} (effective "
                        f"number of trees {self.ess_:.1f}), so the map is close to a single random draw; "
                        "use more samples (--param samples=... or a larger --param budget=...), smaller "
                        "blocks (--param block_size=..., e.g. 500) or tighter bounds (a smaller --param "
                        "margin=...)", stacklevel=3)

    def _predict(self, s):
        return interpolate(self.x_, self.y_, s)

    def _get_state(self) -> dict[str, Any]:
        return {
            "x": self.x_,
            "y": self.y_,
            "ess": self.ess_,
            "dominated_blocks": self.dominated_,
            "blocks": self.blocks_,
            "bin_size": self.bin_size_,
        }

    state_spec = StateSpec(
        Field("x", order="increasing", min_size=1, max_size=lambda p: p["grid"]),
        Field("y", unit=True, order="monotone", same_size="x"),
        Field("ess", "number", low=0.0),
        Field("dominated_blocks", "int", low=0),
        Field("blocks", "int", low=1, high=MAX_KNOTS),
        Field("bin_size", "number", low=0.0),
        check=lambda params, v, fail: v["dominated_blocks"] <= v["blocks"] or fail(
            "dominated_blocks", None, v["dominated_blocks"], f"exceeds 'blocks' = {v['blocks']}"),
    )

    def _set_state(self, state: dict[str, Any]) -> None:
        self.x_ = as_float_array(state["x"], "state x")
        self.y_ = as_float_array(state["y"], "state y")
        self.ess_ = float(state["ess"])
        self.dominated_ = int(state["dominated_blocks"])
        self.blocks_ = int(state["blocks"])
        self.bin_size_ = float(state["bin_size"])

    def summary(self) -> dict[str, Any]:
        return {
            "knots": int(self.x_.size),
            "effective_sample_size": self.ess_,
            "dominated": bool(self.dominated_),
            "dominated_blocks": self.dominated_,
            "blocks": self.blocks_,
            "bin_size": self.bin_size_,
        }
