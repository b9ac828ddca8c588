"""The segments of the multicalibration error as arrays: cells (one per combination of every
column's level that occurs), their sums, the checked segments in MCGrad's order, and the
ranges of their cumulative paths (`segment_paths.path_extremes`). The rules are in the
docstrings of `multicalibration.py` (order, min_rows, max_segments) and `segments.py` (levels).
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np

from calibcli.evaluation.metrics import segments as seg
from calibcli.evaluation.metrics import segment_paths
from calibcli.evaluation.metrics.segment_paths import block_bounds, path_extremes, position_bits

DENSE = 1 << 16  # up to this many level combinations, every one is a cell (no np.unique of the rows)


def _narrow(size: int) -> type:
    return np.uint16 if size <= 1 << 16 else np.uint32 if size <= 1 << 32 else np.int64


def cell_ids(levels: list[seg.Levels], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(a cell id per row, the level of each column in each cell: shape (columns, cells)), with
    the levels as `levels_of` gives them (not yet numbered)."""
    sizes = [len(lv.labels) for lv in levels]
    total = math.prod(sizes)
    if not levels or total == 0:  # no columns: one cell; no rows: none
        return np.zeros(n, np.uint16), np.zeros((len(levels), 1 if not levels else 0), np.int64)
    if total >= 1 << 62:
        raise ValueError("too many segment columns: the product of their level counts must stay below 2^62")
    code = np.zeros(n, dtype=_narrow(total))
    for lv, size in zip(levels, sizes):
        code *= code.dtype.type(size)
        identity = lv.table.size <= size and np.array_equal(lv.table, np.arange(lv.table.size))
        np.add(code, lv.raw if identity else lv.table.astype(code.dtype)[lv.raw], out=code, casting="unsafe")
    if total <= DENSE:
        return code, np.array(np.unravel_index(np.arange(total), sizes), dtype=np.int64).reshape(len(sizes), -1)
    present, ids = np.unique(code, return_inverse=True)
    return ids.astype(_narrow(present.size)), np.array(np.unravel_index(present, sizes), dtype=np.int64)


def number(levels: list[seg.Levels], cell_levels: np.ndarray, rows: np.ndarray,
           first: np.ndarray) -> tuple[list[seg.Levels], np.ndarray]:
    """Levels numbered in MCGrad's order from each cell's rows and smallest p (no pass over
    the rows), and `cell_levels` renumbered to match."""
    numbered, cell_levels = [], cell_levels.copy()
    for c, lv in enumerate(levels):
        size = len(lv.labels)
        level_first = np.full(size, np.inf)
        np.minimum.at(level_first, cell_levels[c], first)
        lv, renumber = seg.number_levels(lv, np.bincount(cell_levels[c], rows, size), level_first)
        cell_levels[c] = renumber[cell_levels[c]]
        numbered.append(lv)
    return numbered, cell_levels


def cells(levels: list[seg.Levels], p: np.ndarray) -> tuple[list[seg.Levels], np.ndarray, np.ndarray, np.ndarray]:
    """(numbered levels, cell id per row, cell levels, rows per cell) for rows with these p."""
    ids, cell_levels = cell_ids(levels, p.size)
    rows = np.bincount(ids, minlength=cell_levels.shape[1])
    first = np.full(cell_levels.shape[1], np.inf)
    np.minimum.at(first, ids, p)
    levels, cell_levels = number(levels, cell_levels, rows, first)
    return levels, ids, cell_levels, rows


def few_distinct(p: np.ndarray, ncell: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(each row's code, the rank of each code's p among the distinct p, the distinct p
    ascending) when p takes few values (at most a quarter of the rows, and distinct p x cells at
    most 2^24), found by hashing, without sorting the rows; None otherwise (decided on the first
    65 536 rows first, so data with distinct p pay almost nothing)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = p.size
    if n < 8 or np.unique(p[:1 << 16]).size * 8 > min(n, 1 << 16):
        return None
    enc = pc.dictionary_encode(pa.array(p))
    values = enc.dictionary.to_numpy()
    if values.size > n // 4 or values.size * ncell > 1 << 24:
        return None
    order = np.argsort(values)
    rank = np.empty(values.size, np.int64)
    rank[order] = np.arange(values.size)
    return enc.indices.to_numpy().astype(np.int32, copy=False), rank, values[order]


def run_sums(codes: np.ndarray, rank: np.ndarray, distinct: np.ndarray, ids: np.ndarray, ncell: int,
             y: np.ndarray, w: np.ndarray | None) -> dict[str, np.ndarray]:
    """Sums per (distinct p, cell) that occur, in ascending p: the cell, p, rows, sum w,
    sum w^2, sum w y. p being constant in each, every other sum follows from these. (The
    compiled kernel, when built, adds them in the same order: the same bytes.)"""
    size = distinct.size * ncell
    kernel = segment_paths._kernel()
    if kernel is not None and ids.dtype in (np.uint16, np.uint32):
        rows, swy, sw, sw2 = np.zeros(size, np.int64), np.zeros(size), np.zeros(size), np.zeros(size)
        codes, y = np.ascontiguousarray(codes, np.int32), np.ascontiguousarray(y, np.uint8)
        wp = None if w is None else np.ascontiguousarray(w, np.float64)
        ptr = segment_paths._ptr
        kernel["run_sums"](ptr(codes), ptr(rank), ptr(ids), ids.dtype.itemsize, codes.size, ncell, ptr(y),
                           None if wp is None else ptr(wp), ptr(rows), ptr(swy), ptr(sw), ptr(sw2))
        present = np.flatnonzero(rows)
        rows = rows[present]
        if w is None:
            sw = sw2 = rows.astype(np.float64)
        else:
            sw, sw2 = sw[present], sw2[present]
        swy = swy[present]
    else:
        key = rank[codes] * ncell
        key += ids
        rows = np.bincount(key, minlength=size)
        present = np.flatnonzero(rows)
        rows = rows[present]
        if w is None:
            sw = sw2 = rows.astype(np.float64)
            swy = np.bincount(key, y, size)[present]
        else:
            sw = np.bincount(key, w, size)[present]
            sw2 = np.bincount(key, w * w, size)[present]
            swy = np.bincount(key, w * y, size)[present]
    return {"cell": present % ncell, "p": distinct[present // ncell], "rows": rows, "w": sw, "w2": sw2, "wy": swy}


def cell_sums(cells: np.ndarray, rows: np.ndarray, y: np.ndarray, p: np.ndarray, w: np.ndarray | None) -> dict[str, np.ndarray]:
    """Per cell: rows, weight, sum w^2 p (1 - p), sum w p, sum w y (the compiled kernel, when
    built, adds them in the same order: the same bytes)."""
    ncell = rows.size
    if segment_paths.has_kernel():
        sw, v, wp, wy = segment_paths.kernel_cell_sums(cells, ncell, y, p, w)
        return {"rows": rows, "w": rows.astype(np.float64) if w is None else sw, "v": v, "wp": wp, "wy": wy}
    q = p * (1.0 - p)
    if w is None:
        return {"rows": rows, "w": rows.astype(np.float64), "v": np.bincount(cells, q, ncell),
                "wp": np.bincount(cells, p, ncell), "wy": np.bincount(cells, y, ncell)}
    q *= w
    q *= w
    return {"rows": rows, "w": np.bincount(cells, w, ncell), "v": np.bincount(cells, q, ncell),
            "wp": np.bincount(cells, w * p, ncell), "wy": np.bincount(cells, w * y, ncell)}


def enumerate_segments(levels: list[seg.Levels], cell_levels: np.ndarray, rows: np.ndarray,
                       depth: int | None, min_rows: int, max_segments: int | None):
    """The checked segments in MCGrad's order: a list of combos (columns, lut over cells,
    present codes) and of segments (combo index, compact code, depth)."""
    sizes = [len(lv.labels) for lv in levels]
    depth = len(levels) if depth is None else min(depth, len(levels))
    cap = math.inf if max_segments is None else max_segments
    combos: list[tuple[tuple[int, ...], np.ndarray, np.ndarray]] = []
    chosen: list[tuple[int, int, int]] = []
    occupied = rows > 0
    for d in range(depth + 1):
        for cols in combinations(range(len(levels)), d):
            code = np.zeros(cell_levels.shape[1], dtype=np.int64)
            for c in cols:
                code *= sizes[c]
                code += cell_levels[c]
            present = np.unique(code[occupied]) if d else np.zeros(1, np.int64)
            lut = np.minimum(np.searchsorted(present, code), present.size - 1).astype(np.uint32)
            counts = np.bincount(lut, rows, present.size)
            keep = np.flatnonzero(counts >= min_rows) if d else np.zeros(1, np.int64)
            keep = keep[:int(min(keep.size, cap - len(chosen)))]
            if keep.size:
                combos.append((cols, lut, present))
                chosen.extend((len(combos) - 1, int(k), d) for k in keep)
            if len(chosen) >= cap:
                return combos, chosen, True
    return combos, chosen, False


def definition(levels: list[seg.Levels], cols: tuple[int, ...], code: int) -> str:
    if not cols:
        return "all rows"
    sizes = [len(levels[c].labels) for c in cols]
    picks = np.unravel_index(code, sizes)
    return " & ".join(levels[c].labels[int(i)] for c, i in zip(cols, picks))


def collapse_ties(d: np.ndarray, ps: np.ndarray, cells_sorted: np.ndarray, ncell: int):
    """(d, p, cell) with the rows of equal p and equal cell summed into one, when p has few
    distinct values (a step-function calibrator's output): the paths are read only after a
    run of ties, so this changes no result and shrinks the rows the kernel walks to at most
    (distinct p) x (cells). Left as they are when ties are rare or the table would be large."""
    n = ps.size
    if n < 2:
        return d, ps, cells_sorted
    new = ps[1:] != ps[:-1]
    runs = int(np.count_nonzero(new)) + 1
    if runs > n // 4 or runs * ncell > 1 << 24:
        return d, ps, cells_sorted
    key = np.zeros(n, np.int64)
    np.cumsum(new, out=key[1:])
    key *= ncell
    key += cells_sorted
    present = np.flatnonzero(np.bincount(key, minlength=runs * ncell))
    total = np.bincount(key, d, runs * ncell)[present]
    run_p = ps[np.concatenate(([0], np.flatnonzero(new) + 1))]
    return total, run_p[present // ncell], (present % ncell).astype(cells_sorted.dtype)


def _bits(size: int) -> int:
    return max(0, size - 1).bit_length()


def ranges(levels: list[seg.Levels], cell_levels: np.ndarray, cells_sorted: np.ndarray, d: np.ndarray,
           ps: np.ndarray, combos: list) -> list[np.ndarray]:
    """The range of each checked combination's segment paths (raw: not divided by the weight).

    Each row's levels are packed into bit fields (first column highest, so a combination's
    values ascend with its MCGrad order); combinations go to the kernel in groups whose
    columns fit in a 64-bit key beside a row's position in its block (one group, unless
    there are some 20 columns or more)."""
    bounds = block_bounds(ps)
    if segment_paths.has_kernel():
        return segment_paths.kernel_ranges(d, ps, cells_sorted, [lut for _, lut, _ in combos], bounds)
    budget = 64 - position_bits(bounds)
    bits = [_bits(len(lv.labels)) for lv in levels]
    groups: list[list[int]] = []
    used: set[int] = set()
    for j, (cols, _, _) in enumerate(combos):
        union = used | set(cols)
        if not groups or sum(bits[c] for c in union) > budget:
            groups.append([])
            union = set(cols)
        groups[-1].append(j)
        used = union
    out: list[np.ndarray] = [np.zeros(0)] * len(combos)
    for group in groups:
        members = sorted({c for j in group for c in combos[j][0]})
        offset, at = {}, 0
        for c in reversed(members):
            offset[c] = at
            at += bits[c]
        packed = np.zeros(cell_levels.shape[1], dtype=np.uint64)
        for c in members:
            packed |= cell_levels[c].astype(np.uint64) << np.uint64(offset[c])
        dtype = np.uint16 if at <= 16 else np.uint32 if at <= 32 else np.uint64
        fields = packed.astype(dtype)[cells_sorted]
        todo = []
        for j in group:
            cols, _, present = combos[j]
            mask, values = 0, np.zeros(present.size, dtype=np.uint64)
            picks = np.unravel_index(present, [len(levels[c].labels) for c in cols]) if cols else ()
            for c, pick in zip(cols, picks):
                mask |= ((1 << bits[c]) - 1) << offset[c]
                values |= pick.astype(np.uint64) << np.uint64(offset[c])
            todo.append((mask, values))
        for j, r in zip(group, path_extremes(d, ps, fields, at, todo, bounds)):
            out[j] = r
    return out
