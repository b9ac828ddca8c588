"""Where Bayes-Iso samples: distinct scores pooled into rank cells, the data-driven bounds per
rank (paper, section 4.3) and blocks of consecutive ranks with their context. See `bayes_iso.py`.
"""

from __future__ import annotations

import math

import numpy as np

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
