"""The cumulative calibration path of many segments at once: for every segment S of a
column combination, the largest and smallest value of C_S(j) = sum of w_i (y_i - p_i) over
the rows i of S up to j in ascending p, with the path's starting 0 included. Rows of equal p
count as one step: the path is read only after the last row of each run of ties in S, so
the result does not depend on how tied rows are ordered (MCGrad sorts with an unstable
quicksort, which leaves that order, and so its value, to chance).

How, in O(n) per combination and cache-sized pieces: the rows, sorted by p once, are cut
into blocks of about 2^15 rows (a cut never splits a run of ties). A row's levels of every
column are packed in bit fields; in a block each row gets the word (fields << b) | position,
and a combination's key is word & (its columns' fields, the position). One SIMD value sort
of these keys groups the rows by segment in p order (no argsort: the position rides in the
key), one gather and one cumsum plus `maximum/minimum.reduceat` give each segment's block
total and its extremes relative to its value before the block. A scan over the blocks (a
cumsum of the totals) then joins the pieces: the extremes of the whole path are those of
offset + block extremes, and 0. Keeping each cumsum inside a block also bounds the
rounding: its values never exceed a block's sum of |w (y - p)|.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from calibcli.numeric import compiled

BLOCK = 1 << 15


def order_by_p(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, p[order]) with p ascending, for p in [+0.0, 1] (no -0.0, no NaN).

    One SIMD sort of uint64 keys (the top bits of p's IEEE pattern, which orders like the
    value, above the row index) instead of an argsort, several times slower; rows whose keys
    tie on those top bits but differ in p are then put in order by an argsort of just them.
    Tied p keep no particular order (none is needed: see the module docstring)."""
    n = p.size
    if n == 0:
        return np.zeros(0, dtype=np.intp), np.zeros(0)
    ib = max(1, (n - 1).bit_length())
    low = np.uint64((1 << ib) - 1)
    kernel = _kernel()
    if kernel is not None:  # the same keys and order, without the temporaries
        p = np.ascontiguousarray(p, dtype=np.float64)
        key = np.empty(n, np.uint64)
        kernel["order_keys"](_ptr(p), n, ib, _ptr(key))
        key.sort()
        order, ps = np.empty(n, np.intp), np.empty(n)
        kernel["order_unpack"](_ptr(key), n, ib, _ptr(p), _ptr(order), _ptr(ps))
    else:
        key = p.view(np.uint64) << np.uint64(2)  # p <= 1.0: the top two bits are 0
        key &= ~low
        key |= np.arange(n, dtype=np.uint64)
        key.sort()
        order = (key & low).view(np.int64).astype(np.intp, copy=False)
        ps = p[order]
    bad = np.flatnonzero(ps[1:] < ps[:-1])
    if bad.size:
        prefix = np.unique(key[bad] >> np.uint64(ib))
        lo = np.searchsorted(key, prefix << np.uint64(ib))
        hi = np.searchsorted(key, (prefix + np.uint64(1)) << np.uint64(ib))
        sizes = hi - lo
        idx = np.repeat(lo - np.cumsum(sizes) + sizes, sizes) + np.arange(sizes.sum())
        sub = np.argsort(ps[idx], kind="stable")
        order[idx] = order[idx][sub]
        ps[idx] = ps[idx][sub]
    return order, ps


def block_bounds(ps: np.ndarray, size: int | None = None) -> np.ndarray:
    """Block starts and the end: about every `size` rows, moved forward to the end of a tie run."""
    n = ps.size
    if n == 0:
        return np.zeros(1, np.intp)
    size = size or BLOCK
    cuts = np.arange(size, n, size)
    tied = ps[cuts] == ps[cuts - 1]
    if tied.any():
        cuts[tied] = np.searchsorted(ps, ps[cuts[tied]], side="right")
        cuts = np.unique(cuts[cuts < n])
    return np.concatenate(([0], cuts, [n])).astype(np.intp)


def position_bits(bounds: np.ndarray) -> int:
    """Bits of a row's position inside the longest block."""
    return max(1, (int(np.diff(bounds).max()) - 1).bit_length()) if bounds.size > 1 else 1


class _Buffers:
    """Scratch arrays reused block after block (no page is touched twice)."""

    def __init__(self, size: int) -> None:
        self.word = {t: np.empty(size, t) for t in (np.uint32, np.uint64)}
        self.key = {t: np.empty(size, t) for t in (np.uint32, np.uint64)}
        self.pos = {t: np.arange(size, dtype=t) for t in (np.uint32, np.uint64)}
        self.idx = np.empty(size, np.intp)
        self.d = np.empty(size)
        self.c = np.zeros(size + 1)
        self.valid = np.empty(size, bool)


def _extremes(src: np.ndarray, valid: np.ndarray | None, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if valid is None:
        return np.maximum.reduceat(src, starts), np.minimum.reduceat(src, starts)
    return (np.maximum.reduceat(np.where(valid, src, -np.inf), starts),
            np.minimum.reduceat(np.where(valid, src, np.inf), starts))


def _whole(d_b: np.ndarray, tie: np.ndarray | None, buf: _Buffers) -> tuple[float, float, float]:
    """(total, max, min) of one block's path when every row is in the segment."""
    m = d_b.size
    c = buf.c[:m + 1]
    np.cumsum(d_b, out=c[1:])
    valid = None
    if tie is not None:
        valid = buf.valid[:m]
        np.not_equal(tie[1:], tie[:-1], out=valid[:-1])
        valid[-1] = True
    hi, lo = _extremes(c[1:], valid, np.zeros(1, np.intp))
    return c[m], hi[0], lo[0]


def _stream(acc: list[np.ndarray] | None, s: np.ndarray, h: np.ndarray, l: np.ndarray) -> list[np.ndarray]:
    """Fold one block's (totals, highs, lows) of a combination's segments into the running
    [inclusive sum of totals, top, bottom]: the extremes of the whole path are those of
    offset + block extremes, offset the sum of the earlier blocks' totals (computed as the
    inclusive sum less this block's total)."""
    if acc is None:
        incl = s.copy()
        offset = incl - s
        return [incl, offset + h, offset + l]
    incl, top, bottom = acc
    incl += s
    offset = incl - s
    np.maximum(top, offset + h, out=top)
    np.minimum(bottom, offset + l, out=bottom)
    return acc


def _finish(acc: list[np.ndarray] | None, size: int) -> np.ndarray:
    """max(top, 0) - min(bottom, 0): the range of each path with its starting 0 (+0.0: no -0.0)."""
    if acc is None:
        return np.zeros(size)
    return np.maximum(acc[1], 0.0) - np.minimum(acc[2], 0.0) + 0.0


def path_extremes(d: np.ndarray, ps: np.ndarray, fields: np.ndarray, fbits: int,
                  combos: list[tuple[int, np.ndarray]], bounds: np.ndarray) -> list[np.ndarray]:
    """For each (mask, values) in `combos`: the range (max - min, 0 included) of the cumulative
    path of each of its segments. `d` = w (y - p) and `fields` are in the order of `ps`
    (ascending); `fields` packs each row's level of every column into bit fields (`fbits` bits
    in all), a segment's rows are those with `fields & mask == value`, and `values` (ascending,
    unique) lists every value present. `bounds`: `block_bounds(ps)`. The compiled
    `kernel_ranges` gives the same bytes."""
    nb = bounds.size - 1
    ties = ps.size > 1 and bool((ps[1:] == ps[:-1]).any())
    acc: list[list[np.ndarray] | None] = [None] * len(combos)
    buf = _Buffers(int(np.diff(bounds).max()) if nb else 1)
    shifted: dict[tuple[int, int], tuple[Any, np.ndarray]] = {}
    for b in range(nb):
        lo, hi = int(bounds[b]), int(bounds[b + 1])
        m = hi - lo
        ib = max(1, (m - 1).bit_length())
        kt = np.uint32 if fbits + ib <= 32 else np.uint64
        d_b = d[lo:hi]
        word = buf.word[kt][:m]  # (fields << ib) | position: each combination's key is word & mask
        np.copyto(word, fields[lo:hi], casting="unsafe")
        word <<= kt(ib)
        word |= buf.pos[kt][:m]
        tie = None
        if ties:
            new_run = ps[lo + 1:hi] != ps[lo:hi - 1]
            if not new_run.all():
                tie = np.zeros(m, np.int32)
                np.cumsum(new_run, out=tie[1:])
        c = buf.c[:m + 1]
        for j, (mask, values) in enumerate(combos):
            if values.size == 1:
                total, high, low = _whole(d_b, tie, buf)
                acc[j] = _stream(acc[j], np.array([total]), np.array([high]), np.array([low]))
                continue
            if (j, ib) not in shifted:
                shifted[(j, ib)] = (kt((mask << ib) | ((1 << ib) - 1)), (values.astype(np.uint64) << np.uint64(ib)).astype(kt))
            kmask, starts_of = shifted[(j, ib)]
            key = buf.key[kt][:m]
            np.bitwise_and(word, kmask, out=key)
            key.sort()
            starts = np.append(np.searchsorted(key, starts_of), m)
            idx = buf.idx[:m]
            np.bitwise_and(key, kt((1 << ib) - 1), out=idx, casting="unsafe")
            ds = buf.d[:m]
            np.take(d_b, idx, out=ds)
            np.cumsum(ds, out=c[1:])
            base = c[starts[:-1]]
            sums = c[starts[1:]] - base
            highs, lows = np.zeros(values.size), np.zeros(values.size)
            used = starts[1:] > starts[:-1]
            valid = None
            if tie is not None:
                valid = buf.valid[:m]
                tie_s = np.take(tie, idx)
                np.not_equal(tie_s[1:], tie_s[:-1], out=valid[:-1])
                valid[starts[1:][used] - 1] = True
            hi_, lo_ = _extremes(c[1:], valid, starts[:-1][used])
            highs[used] = hi_ - base[used]
            lows[used] = lo_ - base[used]
            acc[j] = _stream(acc[j], sums, highs, lows)
    return [_finish(a, v.size) for a, (_, v) in zip(acc, combos)]


@functools.cache
def _kernel():
    """The `KERNELS` from the compiled `calibcli/numeric/_kernels.c`, or None (`numeric.compiled`)."""
    import ctypes

    ptr, i64 = ctypes.c_void_p, ctypes.c_int64
    return compiled.functions({name: [i64 if a == "i" else ptr for a in args] for name, args in KERNELS.items()})


# The compiled functions (`calib_<name>`) and their arguments: p a pointer, i an int64.
KERNELS = {"segment_ranges": "pppipipipipppppppp", "cell_sums": "pippppppp", "order_keys": "piip",
           "order_unpack": "piippp", "sorted_rows": "pippppipp", "run_sums": "pppiiipppppp"}


def has_kernel() -> bool:
    return _kernel() is not None


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def kernel_ranges(d: np.ndarray, ps: np.ndarray, cells: np.ndarray, luts: list[np.ndarray],
                  bounds: np.ndarray) -> list[np.ndarray]:
    """`path_extremes` by the compiled kernel, the same bytes: each combination given as a
    lookup table from a row's cell (`cells`, in the order of `ps`) to its segment (0, 1, ...)."""
    ranges = _kernel()["segment_ranges"]
    d = np.ascontiguousarray(d, dtype=np.float64)
    ps = np.ascontiguousarray(ps, dtype=np.float64)
    cells = np.ascontiguousarray(cells, dtype=np.uint32)
    bounds = np.ascontiguousarray(bounds, dtype=np.int64)
    ncell = max((lut.size for lut in luts), default=0)
    table = np.zeros((len(luts), max(ncell, 1)), dtype=np.int32)
    nseg = np.zeros(len(luts), dtype=np.int64)
    for j, lut in enumerate(luts):
        table[j, :lut.size] = lut
        nseg[j] = int(lut.max()) + 1 if lut.size else 1
    total = int(nseg.sum())
    longest = int(np.diff(bounds).max()) if bounds.size > 1 else 1
    seg, sd, sp = np.empty(longest, np.int32), np.empty(longest), np.empty(longest)
    count = np.empty(4 * (int(nseg.max(initial=1)) + 1), np.int64)
    incl, top, bottom, out = (np.zeros(total) for _ in range(4))
    ranges(_ptr(d), _ptr(ps), _ptr(cells), d.size, _ptr(bounds), bounds.size - 1, _ptr(table), table.shape[1],
           _ptr(nseg), len(luts), _ptr(seg), _ptr(sd), _ptr(sp), _ptr(count), _ptr(incl), _ptr(top), _ptr(bottom),
           _ptr(out))
    return np.split(out, np.cumsum(nseg)[:-1])


def sorted_rows(order: np.ndarray, ps: np.ndarray, y: np.ndarray, w: np.ndarray | None,
                ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(w (y - p), cell) of the rows in ascending p (`order`, `ps` = p[order]): one compiled pass
    when the kernel is built, else numpy's gathers; the same bytes."""
    kernel = _kernel()
    if kernel is None or ids.dtype not in (np.uint16, np.uint32):
        d = y[order] - ps
        if w is not None:
            d *= w[order]
        return d, ids[order]
    order = np.ascontiguousarray(order, dtype=np.int64)
    y = np.ascontiguousarray(y, dtype=np.uint8)
    wp = None if w is None else np.ascontiguousarray(w, dtype=np.float64)
    d, cells = np.empty(order.size), np.empty(order.size, np.uint32)
    kernel["sorted_rows"](_ptr(order), order.size, _ptr(y), _ptr(ps), None if wp is None else _ptr(wp), _ptr(ids),
                          ids.dtype.itemsize, _ptr(d), _ptr(cells))
    return d, cells


def kernel_cell_sums(cells: np.ndarray, ncell: int, y: np.ndarray, p: np.ndarray,
                     w: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """(weight, sum w^2 p (1 - p), sum w p, sum w y) per cell, as `segment_plan.cell_sums`'s
    bincounts add them (row order), by the compiled kernel."""
    sums = _kernel()["cell_sums"]
    cells = np.ascontiguousarray(cells, dtype=np.uint32)
    y = np.ascontiguousarray(y, dtype=np.uint8)
    p = np.ascontiguousarray(p, dtype=np.float64)
    out = [np.zeros(ncell) for _ in range(4)]
    wp = None if w is None else np.ascontiguousarray(w, dtype=np.float64)
    sums(_ptr(cells), p.size, _ptr(y), _ptr(p), None if wp is None else _ptr(wp), *(_ptr(a) for a in out))
    return tuple(out)


__all__ = ["BLOCK", "order_by_p", "block_bounds", "position_bits", "path_extremes", "has_kernel",
           "kernel_ranges", "kernel_cell_sums", "sorted_rows"]
