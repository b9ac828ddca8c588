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
import warnings
from typing import Any, NamedTuple

import numpy as np

from calibcli.calibrators.base import ScoreCalibrator
from calibcli.calibrators.fitdata import as_float_array
from calibcli.calibrators.isotonic import interpolate, pav
from calibcli.calibrators.registry import register
from calibcli.calibrators.statespec import MAX_KNOTS, Field, StateSpec
from calibcli.errors import CalibWarning
from calibcli.options import PLATT_CORRECTION, SEED, Param
from calibcli.pooling import unique_with_sums

SHARE = 64  # maps filled per sampled pivot tree (see module docstring)
CHUNK_CELLS = 1_000_000  # (map, rank) values per chunk: bounds memory, keeps arrays in cache
VALUE_EPS = 1e-7  # sampled values stay in [VALUE_EPS, 1 - VALUE_EPS]


def sample_bounds(
    sw: np.ndarray, n1: np.ndarray, iso: np.ndarray, bin_size: float, margin: float
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds per rank from bins of `bin_size` instances (paper, section 4.3).

    Ranks carry weights `sw` and positive counts `n1`; a bin may cut a rank, whose positives
    are then counted pro rata. Upper bound: positive rate of the bin starting at the rank;
    lower bound: of the bin ending at it. Monotonised (running max / reverse running min),
    widened to contain the isotonic fit `iso`, then +/- `margin`, clipped to [0, 1].
    """
    cw = np.concatenate([[0.0], np.cumsum(sw)])
    cp = np.concatenate([[0.0], np.cumsum(n1)])
    total = cw[-1]
    start, end = cw[:-1], cw[1:]
    right = np.minimum(start + bin_size, total)
    left = np.maximum(end - bin_size, 0.0)
    # A bin narrower than the rounding of a huge cumulative count (start + bin_size == start)
    # is the rank's own rate.
    own = n1 / sw
    with np.errstate(divide="ignore", invalid="ignore"):
        upper = np.where(right > start, (np.interp(right, cw, cp) - cp[:-1]) / (right - start), own)
        lower = np.where(end > left, (cp[1:] - np.interp(left, cw, cp)) / (end - left), own)
    upper = np.maximum(np.maximum.accumulate(upper), iso)
    lower = np.minimum(np.minimum.accumulate(lower[::-1])[::-1], iso)
    return np.clip(lower - margin, 0.0, 1.0), np.clip(upper + margin, 0.0, 1.0)


def pivot_trees(rng: np.random.Generator, n: int, bstart: np.ndarray, bend: np.ndarray, trees: int) -> list:
    """Random-pivot recursion for `trees` trees over ranks 0..n-1, each block its own root.

    Returns the levels, top down: (rank, row, lower-anchor row, upper-anchor row) arrays, rows
    indexing a (trees * (n + 2))-row table where row t*(n+2) holds 0 and t*(n+2)+n+1 holds 1.
    Every interval of ranks [lo, hi) picks a uniform pivot k and splits into [lo, k), (k, hi).
    """
    nb = bstart.size
    stride = n + 2
    t = np.repeat(np.arange(trees, dtype=np.int64) * stride, nb)
    lo = np.tile(bstart, trees)
    hi = np.tile(bend, trees)
    plo = np.zeros(t.size, dtype=np.int64)
    phi = np.full(t.size, n + 1, dtype=np.int64)
    levels = []
    while t.size:
        k = lo + (rng.random(t.size) * (hi - lo)).astype(np.int64)
        levels.append((k, t + k + 1, t + plo, t + phi))
        left = k > lo
        right = hi > k + 1
        t = np.concatenate([t[left], t[right]])
        lo, hi, plo, phi = (
            np.concatenate([lo[left], k[right] + 1]),
            np.concatenate([k[left], hi[right]]),
            np.concatenate([plo[left], k[right] + 1]),
            np.concatenate([k[left] + 1, phi[right]]),
        )
    return levels


def sample_maps(rng, lower, upper, bstart, bend, trees, share):
    """`trees * share` maps from the bounded prior, as a (trees, n, share) float32 array.

    Level by level over all trees at once: a node's value is uniform between
    max(its lower bound, left anchor's value) and min(its upper bound, right anchor's value).
    """
    n = lower.size
    levels = pivot_trees(rng, n, bstart, bend, trees)
    table = np.empty((trees, n + 2, share), dtype=np.float32)
    table[:, 0, :] = 0.0
    table[:, n + 1, :] = 1.0
    rows = table.reshape(trees * (n + 2), share)
    uniform = rng.random((trees * n, share), dtype=np.float32)
    lo32 = lower.astype(np.float32)[:, None]
    hi32 = upper.astype(np.float32)[:, None]
    offset = 0
    for rank, row, lrow, hrow in levels:
        a = rows[lrow]
        np.maximum(a, lo32[rank], out=a)
        b = rows[hrow]
        np.minimum(b, hi32[rank], out=b)
        b -= a
        b *= uniform[offset : offset + rank.size]
        offset += rank.size
        b += a
        rows[row] = b
    return table[:, 1 : n + 1, :]


def log_likelihood(maps, main_pos, main_count, mixed, minor_count, bstart):
    """Binomial log-likelihood (eq. 3) of each map per block, as (trees, blocks, share).

    One log per (map, rank): log v for ranks whose positive count is the larger, log(1 - v)
    for the others, times that count; ranks with both counts add the smaller term separately.
    Sums accumulate in float64.
    """
    sign = np.where(main_pos, 1.0, -1.0).astype(np.float32)[:, None]
    offset = np.where(main_pos, 0.0, 1.0).astype(np.float32)[:, None]
    q = maps * sign
    q += offset
    np.log(q, out=q)
    q *= main_count[:, None]
    ll = np.add.reduceat(q, bstart, axis=1, dtype=np.float64)
    if mixed.size:
        sub = maps[:, mixed, :]
        minor = np.where(main_pos[mixed], -1.0, 1.0).astype(np.float32)[:, None]
        sub *= minor
        sub += np.where(main_pos[mixed], 1.0, 0.0).astype(np.float32)[:, None]
        np.log(sub, out=sub)
        sub *= minor_count[:, None]
        block = np.searchsorted(bstart, mixed, side="right") - 1
        starts = np.flatnonzero(np.diff(block, prepend=-1))
        ll[:, block[starts], :] += np.add.reduceat(sub, starts, axis=1, dtype=np.float64)
    return ll


class Posterior(NamedTuple):
    """What `posterior_mean` returns: the mean per rank and diagnostics per block."""

    mean: np.ndarray  # posterior mean per rank
    ess: np.ndarray  # effective number of independent pivot trees, per block
    map_ess: np.ndarray  # (sum w)^2 / sum w^2 over single maps, per block: overstates
    dominated: np.ndarray  # one tree outweighs all other trees together, per block
    samples: np.ndarray  # maps drawn per block


class Tally:
    """Running likelihood-weighted sums of sampled maps, per block (and per rank for the map).

    Weights are kept as exp(log-likelihood - top) with a running maximum `top` per block, so
    chunks and sampling rounds combine without overflow. A tree's weight is the sum of the
    weights of the maps filled on it.
    """

    def __init__(self, n: int, nb: int):
        self.top = np.full(nb, -np.inf)
        self.total = np.zeros(nb)  # sum of map weights
        self.map_sq = np.zeros(nb)  # sum of squared map weights
        self.tree_sq = np.zeros(nb)  # sum of squared tree weights
        self.tree_max = np.zeros(nb)  # largest tree weight
        self.acc = np.zeros(n)  # weighted sum of maps, per rank
        self.samples = np.zeros(nb, dtype=np.int64)

    def rescale(self, top, block_of):
        """Move every sum to the log scale `top` (>= the current one, elementwise)."""
        scale = np.exp(np.where(np.isneginf(self.top), -np.inf, self.top - top))
        self.top = top
        self.total *= scale
        self.map_sq *= scale * scale
        self.tree_sq *= scale * scale
        self.tree_max *= scale
        self.acc *= scale[block_of]

    def add(self, maps, ll, block_of):
        """Add a chunk: maps (trees, n, share), log-likelihoods (trees, blocks, share)."""
        self.rescale(np.maximum(self.top, ll.max(axis=(0, 2))), block_of)
        w = np.exp(ll - self.top[None, :, None])
        trees = w.sum(axis=2)
        self.total += trees.sum(axis=0)
        self.map_sq += (w * w).sum(axis=(0, 2))
        self.tree_sq += (trees * trees).sum(axis=0)
        self.tree_max = np.maximum(self.tree_max, trees.max(axis=0))
        w32 = w.astype(np.float32)
        if w.shape[1] == 1:
            self.acc += np.matmul(maps, w32[:, 0, :, None])[..., 0].sum(axis=0, dtype=np.float64)
        else:
            self.acc += (maps * w32[:, block_of, :]).sum(axis=(0, 2), dtype=np.float64)

    def merge(self, other, blocks, ranks, block_of):
        """Add `other`, the tally of the sub-problem made of `blocks` (whose ranks are `ranks`)."""
        top = self.top.copy()
        top[blocks] = np.maximum(top[blocks], other.top)
        self.rescale(top, block_of)
        scale = np.exp(other.top - top[blocks])
        self.total[blocks] += other.total * scale
        self.map_sq[blocks] += other.map_sq * scale * scale
        self.tree_sq[blocks] += other.tree_sq * scale * scale
        self.tree_max[blocks] = np.maximum(self.tree_max[blocks], other.tree_max * scale)
        self.acc[ranks] += other.acc * scale[np.searchsorted(blocks, block_of[ranks])]
        self.samples[blocks] += other.samples

    def ess(self):
        """Effective number of independent pivot trees per block, (sum W)^2 / sum W^2."""
        return self.total * self.total / self.tree_sq


def draw(rng, problem, bstart, bend, samples):
    """Tally of `samples` bounded-prior maps per block, drawn `SHARE` to a tree, in chunks.

    `problem` is (lower, upper, main_pos, main_count, mixed, minor_count) over the ranks.
    """
    lower, upper, main_pos, main_count, mixed, minor_count = problem
    n = lower.size
    nb = bstart.size
    block_of = np.repeat(np.arange(nb), bend - bstart)
    tally = Tally(n, nb)
    share = max(1, min(SHARE, samples, CHUNK_CELLS // n))  # fewer per tree for huge grids
    n_trees = -(-samples // share)
    per_chunk = max(1, CHUNK_CELLS // (n * share))
    drawn = 0
    for first in range(0, n_trees, per_chunk):
        trees = min(per_chunk, n_trees - first)
        maps = sample_maps(rng, lower, upper, bstart, bend, trees, share)
        ll = log_likelihood(maps, main_pos, main_count, mixed, minor_count, bstart)
        spare = trees * share - (samples - drawn)
        if spare > 0:
            ll[-1, :, share - spare :] = -np.inf
        drawn += trees * share
        tally.add(maps, ll, block_of)
    tally.samples[:] = samples
    return tally


def posterior_mean(n1, n0, lower, upper, bstart, bend, samples, seed, target_ess=0.0, budget=0.0):
    """Likelihood-weighted mean of bounded-prior maps per block, with diagnostics.

    Every block gets `samples` maps. Then, in rounds, each block whose effective number of
    trees is below `target_ess` gets about as many more as that ESS says it needs (at most 4x
    what it has), the needy blocks sampled together as one smaller problem, until all reach
    the target or the extra (map, rank) values would pass `budget` times the first round's.
    Returns a `Posterior`.
    """
    rng = np.random.default_rng(seed)
    lower = np.clip(lower, VALUE_EPS, 1.0 - VALUE_EPS)
    upper = np.clip(upper, VALUE_EPS, 1.0 - VALUE_EPS)
    main_pos = n1 >= n0  # the larger count's term per rank; the other only where both > 0
    main_count = np.where(main_pos, n1, n0).astype(np.float32)
    problem = (lower, upper, main_pos, main_count, np.where(main_pos, n0, n1))
    block_of = np.repeat(np.arange(bstart.size), bend - bstart)
    tally = draw(rng, sub_problem(problem, np.arange(lower.size)), bstart, bend, samples)
    left = budget * lower.size * samples
    while left > 0:
        ess = tally.ess()
        needy = np.flatnonzero(ess < target_ess)
        if not needy.size:
            break
        have = tally.samples[needy]
        more = np.clip(have * (target_ess / np.maximum(ess[needy], 1.0) - 1.0), have / 4, 4 * have)
        more = SHARE * 2.0 ** np.ceil(np.log2(more / SHARE))  # whole trees, few distinct sizes
        size = bend[needy] - bstart[needy]
        cost = float(more @ size)
        if cost > left:  # last round: what the budget allows
            more = SHARE * np.floor(more * (left / cost) / SHARE)
            cost = left
        left -= cost
        for m in np.unique(more[more > 0]):
            blocks = needy[more == m]
            ranks = np.flatnonzero(np.isin(block_of, blocks))
            width = bend[blocks] - bstart[blocks]
            ends = np.cumsum(width)
            extra = draw(rng, sub_problem(problem, ranks), ends - width, ends, int(m))
            tally.merge(extra, blocks, ranks, block_of)
    return Posterior(
        tally.acc / tally.total[block_of],
        tally.ess(),
        tally.total * tally.total / tally.map_sq,
        tally.tree_max > tally.total - tally.tree_max,
        tally.samples,
    )


def sub_problem(problem, ranks):
    """The sampling inputs restricted to `ranks` (sorted): bounds, likelihood terms."""
    lower, upper, main_pos, main_count, minor = (a[ranks] for a in problem)
    mixed = np.flatnonzero(minor > 0)
    return lower, upper, main_pos, main_count, mixed, minor[mixed].astype(np.float32)


def pool_cells(xs, sw, swy, grid):
    """Pool consecutive distinct scores into at most `grid` cells of about equal weight."""
    if xs.size <= grid:
        return xs, sw, swy
    mid = np.cumsum(sw) - 0.5 * sw
    cell = np.minimum((mid / np.sum(sw) * grid).astype(np.int64), grid - 1)
    _, cell = np.unique(cell, return_inverse=True)
    cw = np.bincount(cell, weights=sw)
    e = math.frexp(float(np.max(np.abs(xs))))[1]
    e = e if e > 256 else 0  # huge scores: mean of scores scaled by a power of two (exact)
    centre = np.ldexp(np.bincount(cell, weights=sw * np.ldexp(xs, -e)) / cw, e)
    centre = np.maximum.accumulate(np.clip(centre, xs[0], xs[-1]))
    cy = np.bincount(cell, weights=swy)
    if np.all(centre[1:] > centre[:-1]):
        return centre, cw, cy
    # cells whose mean scores round to one float (subnormal scores) are one knot
    centre, merged = np.unique(centre, return_inverse=True)
    return centre, np.bincount(merged, weights=cw), np.bincount(merged, weights=cy)


_MAX_COUNT_EXP = 100  # summed weights above 2**100 are scaled down to it (counts are float32)


def block_edges(sw, block_size):
    """Start and end rank of blocks of about `block_size` instances (consecutive ranks).

    A rank belongs to the block holding the middle of its weight, so a heavy rank is never
    split and blocks with no rank vanish.
    """
    total = float(np.sum(sw))
    nblocks = max(1, min(round(total / block_size), sw.size))
    mid = np.cumsum(sw) - 0.5 * sw
    block = np.minimum((mid / total * nblocks).astype(np.int64), nblocks - 1)
    starts = np.flatnonzero(np.diff(block, prepend=-1))
    return starts, np.append(starts[1:], sw.size)


def widen_blocks(sw, bstart, bend, overlap):
    """Blocks widened by `overlap` instances on each side (clipped at the ends).

    Returns the ranks of the widened blocks laid end to end (a rank near a junction appears
    in two blocks), their start and end in that sequence, and where each rank's own block
    put it (the value to keep).
    """
    cw = np.concatenate([[0.0], np.cumsum(sw)])
    first = np.minimum(np.searchsorted(cw[1:], cw[bstart] - overlap, side="right"), bstart)
    last = np.clip(np.searchsorted(cw, cw[bend] + overlap, side="left"), bend, sw.size)
    size = last - first
    end = np.cumsum(size)
    start = end - size
    ranks = np.arange(end[-1]) - np.repeat(start - first, size)
    own = np.arange(sw.size) - np.repeat(first - start, bend - bstart)
    return ranks, start, end, own


@register
class BayesIsoCalibrator(ScoreCalibrator):
    """Posterior mean of isotonic maps under the bounded random-pivot prior (Bayes-Iso)."""

    name = "bayes-iso"
    extremes = "inside (0, 1): a posterior mean of sampled maps (no Platt correction needed)"
    description = "Bayes-Iso: posterior mean isotonic map by likelihood-weighted prior sampling"
    params = (
        Param("samples", int, 10000, "maps drawn from the prior (per block); time grows as samples x grid", low=1,
              high=1_000_000),
        Param(
            "target_ess",
            float,
            100.0,
            "blocks whose effective number of independent pivot trees is below this get more "
            "samples (0: exactly `samples`)",
            low=0.0,
            high=1e6,
        ),
        Param(
            "budget",
            float,
            16.0,
            "the extra samples for target_ess cost at most this many times the first `samples`",
            low=0.0,
            high=1000.0,
        ),
        Param(
            "bin_size",
            float,
            None,
            "instances per bin for the sampling bounds; auto: N/20 (released code), N^(2/3) past 8000",
            low=1.0,
            high=1e12,
            optional=True,
        ),
        Param(
            "margin",
            float,
            None,
            "half-width added to the bins' positive rates; auto: 1/sqrt(N) (released code; "
            "the paper's text: 1/sqrt(bin_size))",
            low=0.0,
            high=1.0,
            optional=True,
        ),
        Param(
            "block_size",
            float,
            None,
            "instances per independently sampled block of consecutive ranks; auto: 1000 (the "
            "paper's suggestion), so up to 1500 instances are one block",
            low=1.0,
            high=1e12,
            optional=True,
        ),
        Param(
            "overlap",
            float,
            None,
            "instances of context each block also samples on each side (only its own ranks are "
            "kept); auto: min(bin_size, block_size / 2)",
            low=0.0,
            high=1e12,
            optional=True,
        ),
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
            warnings.warn(
                f"bayes-iso: one sampled pivot tree outweighs all others in {where} (effective "
                f"number of trees {self.ess_:.1f}), so the map is close to a single random draw; "
                "use more samples (--param samples=... or a larger --param budget=...), smaller "
                "blocks (--param block_size=..., e.g. 500) or tighter bounds (a smaller --param margin=...)",
                CalibWarning,
                stacklevel=3,
            )

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
