"""Tie pooling: sorted distinct scores with their summed weights and summed weighted targets.

Every fit that works per distinct score (isotonic, beta, ENIR, ILPS, Bayes-Iso) and the
score summaries start here. Results are bit-identical to the plain recipe

    xs, inv = np.unique(s, return_inverse=True)
    sw, swy = np.bincount(inv, weights=w), np.bincount(inv, weights=w * y)

but faster (see `docs/algorithms.md`, "Tie pooling"):

- unit weights and two target values (0/1 labels or Platt's targets, the common case): the
  label is packed into the lowest bit of an order-preserving integer key of the score, so
  one value sort (`np.sort` on uint64, SIMD, several times faster than an argsort) orders
  rows by (score, label); counts per distinct score are whole numbers, exact in any order;
- other whole-number weights and targets: one default-kind argsort, tie detection on the
  sorted scores and sums over sorted rows (exact in any order);
- anything else: the same argsort, then bincounts in row order, as `np.unique` does.
"""

from __future__ import annotations

import numpy as np

CHUNK = 1 << 16  # entries per chunk of every chunked pass (metrics, Newton): temporaries stay in cache


def as_weights(counts: np.ndarray) -> np.ndarray:
    """Counts or weights as float64 (no copy when they are already). A distribution's n0 and
    n1 may be compact unsigned counts (`compact_counts_of_keys`): every reader casts them,
    whole or a chunk at a time, before any arithmetic, so none wraps around."""
    return np.asarray(counts, dtype=np.float64)


def unique_with_sums(s: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pool tied scores: (sorted distinct scores, summed weights, summed weighted targets)."""
    if s.size == 0:
        return s[:0].copy(), w[:0].copy(), w[:0].copy()
    if np.isnan(s).any():  # np.unique pools NaNs; keep its exact behaviour for them
        xs, inv = np.unique(s, return_inverse=True)
        return xs, np.bincount(inv, weights=w, minlength=xs.size), np.bincount(inv, weights=w * y, minlength=xs.size)
    if unit_weights(w) and not _has_negative_zero(s):
        pooled = _two_target_sums(s, y)
        if pooled is not None:
            return pooled
    order = np.argsort(s)
    ss = s[order]
    starts = np.flatnonzero(np.concatenate([[True], ss[1:] != ss[:-1]]))
    xs = ss[starts]
    wy = w * y
    if _exact_sums(w, wy):
        return xs, np.add.reduceat(w[order], starts), np.add.reduceat(wy[order], starts)
    group = np.cumsum(np.concatenate([[False], ss[1:] != ss[:-1]]))
    inv = np.empty(s.size, dtype=np.intp)
    inv[order] = group
    sw = np.bincount(inv, weights=w, minlength=xs.size)
    swy = np.bincount(inv, weights=wy, minlength=xs.size)
    return xs, sw, swy


_SAMPLE = 1 << 16


def mostly_distinct(s: np.ndarray) -> bool:
    """True for large inputs whose strided sample of 65 536 scores is 90% distinct.

    Then pooling ties would cost a full sort and shrink the data little; callers whose fit
    gives the same optimum on rows or pooled rows (logistic-type fits) skip it.
    """
    if s.size < 4 * _SAMPLE:
        return False
    sample = s[:: s.size // _SAMPLE]
    return np.unique(sample).size > 0.9 * sample.size


def unit_weights(w: np.ndarray) -> bool:
    """True when every weight is 1 (a broadcast scalar is checked without a pass over rows)."""
    if w.ndim == 1 and w.size and w.strides[0] == 0:
        return bool(w[0] == 1)
    return bool(np.all(w == 1))


def _two_target_sums(s: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Unit-weight pooling when the targets take two values (0/1 labels, or Platt's targets).

    Counts come from `_unit_counts`. With 0/1 targets the positive count is the target sum.
    Otherwise a group holding only target t sums c copies of t; bincount adds them one by
    one from 0.0, which `np.cumsum` reproduces bit for bit. A group mixing both targets
    would depend on row order: then None, and the caller takes the argsort path.
    """
    lo, hi = float(y.min()), float(y.max())
    positive = y == hi
    if not bool(np.all(positive | (y == lo))):
        return None
    xs, rows, n_hi = _unit_counts(s, positive)
    if lo == 0.0 and hi == 1.0:
        return xs, rows, n_hi
    is_hi = n_hi > 0
    if bool(np.any(is_hi & (n_hi < rows))):
        return None
    sums = np.where(is_hi, hi, lo)  # a one-row group sums to its target exactly
    multi = np.flatnonzero(rows > 1)
    if multi.size:
        k = rows[multi].astype(np.intp) - 1
        table = {t: np.cumsum(np.full(int(k.max()) + 1, t)) for t in (lo, hi)}
        sums[multi] = np.where(is_hi[multi], np.take(table[hi], k), np.take(table[lo], k))
    return xs, rows, sums


def _has_negative_zero(s: np.ndarray) -> bool:
    """-0.0 ties with 0.0; which one np.unique keeps depends on its sort, so such data takes that path."""
    zero = s == 0
    return bool(zero.any()) and bool(np.signbit(s[zero]).any())


def _unit_counts(s: np.ndarray, positive: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct scores, row counts and positive counts for unit weights and 0/1 labels.

    Negative scores are pooled as their (positive) negation and put back in front reversed.
    """
    negative = s < 0
    if not negative.any():
        return _nonnegative_counts(s, positive)
    xn, cn, pn = _nonnegative_counts(-s[negative], positive[negative])
    rest = ~negative
    xp, cp, pp = _nonnegative_counts(s[rest], positive[rest])
    return (np.concatenate([-xn[::-1], xp]), np.concatenate([cn[::-1], cp]),
            np.concatenate([pn[::-1], pp]))


def _nonnegative_counts(v: np.ndarray, positive: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_unit_counts` for scores >= +0.0 (`counts_of_keys` of their packed keys)."""
    return counts_of_keys(packed_keys(v, positive))


def packed_keys(v: np.ndarray, positive: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Sort keys `(bits << 1) | label` of scores >= +0.0 (-0.0 packs as +0.0) and 0/1 labels,
    written into `out` (uint64, v's length) when given.

    For non-negative doubles the bit pattern, read as an unsigned integer, orders like the
    value and has its top bit clear, so shifting it left by one loses nothing.
    """
    keys = np.left_shift(np.ascontiguousarray(v, dtype=np.float64).view(np.uint64), np.uint64(1), out=out)
    keys |= positive
    return keys


def counts_of_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct scores ascending, rows, positive rows) of packed keys, sorting `keys` in place
    (which becomes the distinct scores' storage when they are all distinct)."""
    keys.sort()
    label = np.empty(keys.size)
    np.bitwise_and(keys, np.uint64(1), out=label, casting="unsafe")  # no uint64 temporary
    keys >>= np.uint64(1)
    xs = keys.view(np.float64)
    if xs.size < 2 or bool(np.all(keys[1:] != keys[:-1])):
        return xs, np.ones(xs.size), label
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    rows = np.diff(np.append(starts, xs.size)).astype(np.float64)
    return xs[starts], rows, np.add.reduceat(label, starts)


_KEY_CHUNK = 1 << 18  # keys per chunk of `compact_counts_of_keys`: chunk temporaries stay a few MB


def compact_counts_of_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct scores ascending, negatives, positives) of packed keys, as `counts_of_keys`
    but with the counts in the smallest unsigned integer dtype that holds them (one byte an
    entry until a score repeats 256 times) and no n-long temporary: `keys` is sorted in
    place and then, chunk by chunk, overwritten with the distinct scores it returns (a view).

    This is what an exact 1e8-row evaluation keeps: the 8 bytes of keys a row plus 2 bytes a
    distinct score, where float64 counts took 24 bytes a distinct score on top of the keys.
    Counts are whole numbers, so readers that cast them to float64 get the same values.
    """
    keys.sort()
    n = keys.size
    n0, n1 = np.empty(n, np.uint8), np.empty(n, np.uint8)
    m = 0  # distinct scores written so far, into keys[:m]; m <= lo, so no unread key is overwritten
    one = np.uint64(1)
    for lo in range(0, n, _KEY_CHUNK):
        chunk = keys[lo:lo + _KEY_CHUNK]
        label = (chunk & one).astype(np.uint8)
        v = chunk >> one  # a copy: writing keys[m:] below cannot change it
        new = np.empty(v.size, dtype=bool)
        new[0] = m == 0 or v[0] != keys[m - 1]
        np.not_equal(v[1:], v[:-1], out=new[1:])
        if not new[0]:  # the chunk starts inside the last score of the previous one
            head = int(np.argmax(new)) if new.any() else v.size
            pos = int(label[:head].sum(dtype=np.int64))
            neg0, pos0 = int(n0[m - 1]) + head - pos, int(n1[m - 1]) + pos
            n0, n1 = _widened(n0, m, max(neg0, pos0)), _widened(n1, m, max(neg0, pos0))
            n0[m - 1], n1[m - 1] = neg0, pos0
            v, label, new = v[head:], label[head:], new[head:]
        if v.size == 0:
            continue
        if new.all():  # no ties in the chunk: one row per score
            g = v.size
            keys[m:m + g] = v
            n1[m:m + g] = label
            np.subtract(1, label, out=n0[m:m + g], casting="unsafe")
        else:
            starts = np.flatnonzero(new)
            g = starts.size
            rows = np.diff(np.append(starts, v.size))
            pos = np.add.reduceat(label, starts, dtype=np.int64)
            rows -= pos
            top = int(max(rows.max(), pos.max()))
            n0, n1 = _widened(n0, m, top), _widened(n1, m, top)
            keys[m:m + g] = v[starts]
            n0[m:m + g] = rows
            n1[m:m + g] = pos
        m += g
    return keys[:m].view(np.float64), n0[:m], n1[:m]


def _widened(counts: np.ndarray, used: int, top: int) -> np.ndarray:
    """`counts` (its first `used` entries kept) in the smallest unsigned dtype holding `top`."""
    if top <= np.iinfo(counts.dtype).max:
        return counts
    out = np.empty(counts.size, dtype=np.min_scalar_type(top))
    out[:used] = counts[:used]
    return out


def _exact_sums(w: np.ndarray, wy: np.ndarray) -> bool:
    """True when summing `w` and `wy` in any order gives the same float (whole numbers < 2**53)."""
    total = float(np.sum(w))
    return (total < 2.0 ** 53 and bool(np.all(w >= 0)) and bool(np.all(w == np.floor(w)))
            and bool(np.all(wy == np.floor(wy))) and bool(np.all(wy >= 0)))


BINCOUNT_SPAN = 1 << 24  # bucketed keys spanning at most this many steps use bincount (no sort)


def aggregate(keys: np.ndarray, w0: np.ndarray, w1: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sorted distinct keys and the sums of w0 and w1 per key (one argsort, no stable sort)."""
    if keys.size == 0:
        return keys.copy(), w0.copy(), w1.copy()
    order = np.argsort(keys)
    ks = keys[order]
    starts = np.flatnonzero(np.concatenate([[True], ks[1:] != ks[:-1]]))
    return ks[starts], np.add.reduceat(w0[order], starts), np.add.reduceat(w1[order], starts)


def bucket(s: np.ndarray, w0: np.ndarray, w1: np.ndarray, step: float) -> tuple[np.ndarray, ...]:
    """Aggregate on the grid of multiples of `step`; a bincount when the grid span is small.

    A score of magnitude 2^52 steps or more is its own bucket: float64's spacing there is at
    least the step, so the grid point rint(s / step) * step is s itself up to rounding (and
    s / step may overflow): such scores keep their value, and every bucket stays finite."""
    with np.errstate(over="ignore"):
        k = np.rint(s / step)
    far = ~(np.abs(k) < 2.0**52)
    if far.any():
        with np.errstate(over="ignore"):
            grid = np.where(far, 0.0, k) * step
        return aggregate(np.where(far, s, grid), w0, w1)
    lo, hi = float(k.min()), float(k.max())
    if hi - lo < BINCOUNT_SPAN:
        idx = (k - lo).astype(np.int64)
        n0 = np.bincount(idx, weights=w0)
        n1 = np.bincount(idx, weights=w1)
        used = np.flatnonzero((n0 > 0) | (n1 > 0) | (np.bincount(idx) > 0))
        return (used + lo) * step, n0[used], n1[used]
    keys, n0, n1 = aggregate(k, w0, w1)
    return keys * step, n0, n1
