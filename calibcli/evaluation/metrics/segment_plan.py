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
from calibcli.evaluation.metrics.segment_paths import block_bounds, path_extremes, position_bits

def _narrow(size: int) -> type:
    return np.uint16 if size <= 1 << 16 else np.uint32 if size <= 1 << 32 else np.int64


def cells(levels: list[seg.Levels], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(cell id per row, the level of each column in each cell: shape (columns, cells))."""
    sizes = [len(lv.labels) for lv in levels]
    total = math.prod(sizes)
    if not levels or total == 0:  # no columns: one cell; no rows: none
        return np.zeros(n, np.uint16), np.zeros((len(levels), 1 if not levels else 0), np.int64)
    if total >= 1 << 62:
        raise ValueError("too many segment columns: the product of their level counts must stay below 2^62")
    code = np.zeros(n, dtype=_narrow(total))
    for lv, size in zip(levels, sizes):
        code *= code.dtype.type(size)
        code += lv.codes
    if total <= 1 << 22:
        return code, np.array(np.unravel_index(np.arange(total), sizes), dtype=np.int64).reshape(len(sizes), -1)
    present, cells = np.unique(code, return_inverse=True)
    return cells.astype(_narrow(present.size)), np.array(np.unravel_index(present, sizes), dtype=np.int64)


def cell_sums(cells: np.ndarray, ncell: int, y: np.ndarray, p: np.ndarray, w: np.ndarray | None) -> dict[str, np.ndarray]:
    """Per cell: rows, weight, sum w^2 p (1 - p), sum w p, sum w y."""
    rows = np.bincount(cells, minlength=ncell)
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
