"""The Bayes-Iso sampler: maps drawn from the bounded random-pivot prior, weighted by their
binomial likelihood, summed per block (`posterior_mean`). The method and its choices are
described in `bayes_iso.py`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

SHARE = 64  # maps filled per sampled pivot tree (see module docstring)
CHUNK_CELLS = 1_000_000  # (map, rank) values per chunk: bounds memory, keeps arrays in cache
VALUE_EPS = 1e-7  # sampled values stay in [VALUE_EPS, 1 - VALUE_EPS]


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
