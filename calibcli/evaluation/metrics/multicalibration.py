"""Multicalibration error (Guy et al. 2025, "Measuring multi-calibration", arXiv:2506.11251),
computed as Meta's MCGrad computes it (`mcgrad.metrics.MulticalibrationError`, 0.1.5): how
badly calibrated is the worst of many segments of the rows, in units of its noise?

For a segment S with weights w, rows sorted by p, the cumulative path is
C_S(j) = sum over i in S up to j of w_i (y_i - p_i) / sum_S w, starting at 0, and

    ECCE_S  = max_j C_S(j) - min_j C_S(j)       (0 included: the path's start)
    sigma_S = sqrt(sum_S w^2 p (1 - p)) / sum_S w

Results (`MulticalResult`; JSON keys of `metrics()`):
  - `multical_sigma` = max_S ECCE_S / sigma_S: how many noise units the worst segment is off
    (above ~5 is significant, MCGrad's rule of thumb);
  - `multical` = multical_sigma * sigma of the whole set (MCGrad's `mce`: the worst
    segment's evidence, on the probability scale of the whole set);
  - `multical_p` = the smallest p-value over the segments, P(range of a standard Brownian
    motion on [0, 1] >= ECCE_S / sigma_S): NOT corrected for the number of segments (as
    MCGrad: the segments overlap heavily, so Bonferroni would be far too strict). The series
    is MCGrad's, truncated where its terms fall below machine epsilon; p < 2.2e-16 (ratio
    >= 8.26732673) is reported as 2.2e-16, a ratio below 1e-20 as p = 1.

Segments (`segments.py` says how a column becomes levels): the whole set, then every
intersection of one level from each of d distinct columns, d = 1 .. `depth`. Order: by d;
within d, the column subsets in `itertools.combinations` order of the column list
(categorical columns first, each group in the order given, as MCGrad lists them); within a
subset, the level tuples in `itertools.product` order (the first column's level varies
slowest), skipping intersections with fewer than `min_rows` rows (rows, not weight). The
first `max_segments` in this order are checked (the whole set always, even with fewer rows
than `min_rows`; MCGrad raises an error then). MCGrad cuts in chunks of 50, which keeps the
same segments at its default 1000. `min_rows` is at least 1 (MCGrad's 0 would also list
intersections without rows). Weights only count through their ratios (multiplying them all
by c > 0 changes nothing); a row of weight 0 still counts in `min_rows` and in a column's
value counts, as in MCGrad.

Where calib departs from MCGrad, on purpose:
  - Ties in p: the path is read after each run of equal p (see `segment_paths.py`); MCGrad's
    unstable sort makes its value depend on the order of tied rows. Without ties, or when
    tied rows within a segment share a label, the two agree.
  - Arithmetic in float64 throughout: MCGrad's default `precision_dtype="float32"` rounds p
    and weights to float32 first (~1e-7 relative); with `precision_dtype="float64"` every
    segment agrees to ~1e-14 (tests/evaluation/test_multicalibration.py asks 1e-9).

Degenerate cases (no NaN, no warnings): a segment of weight 0 (all weights 0) has ECCE 0,
sigma 0, ratio 0, p 1 and no predicted/observed rate (None); a segment with sigma 0 (every
weighted p is 0 or 1) has ratio 0 if its ECCE is 0, else inf (a certain prediction that
failed), and p 2.2e-16; one row gives ECCE |y - p| and sigma sqrt(p (1 - p)). `multical` is
inf when a segment's ratio is inf and the whole set has sigma > 0; when the whole set has
sigma 0 (MCGrad: NaN or 0) it is the largest ECCE, on the probability scale. No rows: 0, 0, 1.

Streaming: `MulticalState.add` per record batch, `MulticalState.merge` across partitions,
`result(options)` once. Segments need global facts (a categorical column's counts, a numeric
column's exact quantiles), so the state keeps the rows: p (8 bytes), the label (1), the
weight (8, when given), a code per categorical column (1 byte up to 256 values, 2 up to
65 536) and a float64 per numeric column: 9 + 8 (weights) + 1 per categorical + 8 per numeric
bytes a row, e.g. 280 MB for 1e7 rows with three categorical and two numeric columns;
`result()` needs about as much again for its sort and scratch arrays.
"""

from __future__ import annotations

import contextlib
import math
import sys
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pyarrow as pa

from calibcli.evaluation.metrics import segment_plan as plan, segments as seg
from calibcli.evaluation.metrics.segment_paths import order_by_p, sorted_rows

SIGMA_MAX = 8.26732673  # MCGrad's ECCE_SIGMA_MAX: beyond it the p-value is machine epsilon
SIGMA_MIN = 1e-20  # below it the p-value is 1
EPS = sys.float_info.epsilon


@dataclass(frozen=True)
class MulticalOptions:
    """How segments are made (MCGrad's defaults: `max_values_per_segment_feature=3` is bins=3,
    top=2). `depth=None` intersects all columns; `max_segments=None` checks every segment."""

    bins: int = 3
    top: int = 2
    depth: int | None = 3
    min_rows: int = 10
    max_segments: int | None = 1000

    def check(self) -> None:
        for name, low in (("bins", 1), ("top", 1), ("depth", 0), ("min_rows", 1), ("max_segments", 1)):
            value = getattr(self, name)
            if value is None and name in ("depth", "max_segments"):
                continue
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise ValueError(f"multicalibration option {name} must be an integer >= {low}, got {value!r}")


@dataclass(frozen=True)
class SegmentRow:
    """One segment: its definition in words, size, rates and evidence."""

    definition: str
    index: int  # position in the enumeration order (0: the whole set)
    depth: int
    rows: int
    weight: float
    predicted: float | None  # weighted mean p (None when the weight is 0)
    observed: float | None  # weighted mean y
    ecce: float
    sigma: float
    ecce_sigma: float
    p: float


@dataclass(frozen=True)
class MulticalResult:
    multical: float
    multical_sigma: float
    multical_p: float
    ecce: float  # the whole set's ECCE
    sigma: float  # the whole set's sigma
    rows: int
    segments: tuple[SegmentRow, ...]  # every segment checked, worst (largest ECCE/sigma) first
    capped: bool  # True when max_segments stopped the enumeration

    def metrics(self) -> dict[str, float]:
        return {"multical": self.multical, "multical_sigma": self.multical_sigma, "multical_p": self.multical_p}

    def worst(self, k: int = 10) -> tuple[SegmentRow, ...]:
        return self.segments[:k]


def ecce_pvalue(ratio: Any) -> np.ndarray:
    """P(range of a standard Brownian motion on [0, 1] >= ratio), vectorised, as MCGrad's
    `ecce_pvalue_from_sigma`: 1 - sum_k (8/x^2 + 2/((k+1/2)^2 pi^2)) exp(-2 (k+1/2)^2 pi^2 / x^2)."""
    x = np.atleast_1d(np.asarray(ratio, dtype=np.float64))
    out = np.ones_like(x)
    out[x >= SIGMA_MAX] = EPS
    mid = (x >= SIGMA_MIN) & (x < SIGMA_MAX)
    if mid.any():
        xc = x[mid]
        fact = 4.0 / math.sqrt(2.0 * math.pi) * (1.0 / xc + xc / math.pi ** 2)
        kmax = np.ceil(0.5 + xc / math.pi / math.sqrt(2.0) * np.sqrt(np.log(fact / EPS))).astype(int)
        k = np.arange(int(kmax.max()))[None, :] + 0.5
        xx = xc[:, None]
        terms = (8.0 / xx ** 2 + 2.0 / k ** 2 / math.pi ** 2) * np.exp(-2.0 * k ** 2 * math.pi ** 2 / xx ** 2)
        terms[np.arange(k.shape[1])[None, :] >= kmax[:, None]] = 0.0
        out[mid] = 1.0 - terms.sum(axis=1)
    return out


def _ratio(ecce: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    out = np.zeros_like(ecce)
    np.divide(ecce, sigma, out=out, where=sigma > 0)
    out[(sigma <= 0) & (ecce != 0)] = np.inf
    return out


def _segment_table(levels, combos, chosen, sums, ranges, weight_scale: float) -> list[SegmentRow]:
    per_combo = [{name: np.bincount(lut, v, present.size) for name, v in sums.items()} for _, lut, present in combos]
    at = [(j, k) for j, k, _ in chosen]
    tot = {name: np.array([per_combo[j][name][k] for j, k in at]) for name in sums}
    raw = np.array([ranges[j][k] for j, k in at])
    weight = tot["w"]
    pos = weight > 0
    safe = np.where(pos, weight, 1.0)
    ecce = np.where(pos, raw / safe, 0.0)
    sigma = np.where(pos, np.sqrt(tot["v"]) / safe, 0.0)
    ratio = _ratio(ecce, sigma)
    pvalue = ecce_pvalue(ratio)
    out = []
    for i, (j, k, d) in enumerate(chosen):
        cols, _, present = combos[j]
        out.append(SegmentRow(
            plan.definition(levels, cols, int(present[k])), i, d, int(round(tot["rows"][i])),
            float(weight[i]) * weight_scale,
            float(tot["wp"][i] / weight[i]) if pos[i] else None,
            float(tot["wy"][i] / weight[i]) if pos[i] else None,
            float(ecce[i]), float(sigma[i]), float(ratio[i]), float(pvalue[i])))
    return out


def _validated(y: Any, p: Any, sample_weight: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    p = np.asarray(p, dtype=np.float64).ravel()
    bad = np.flatnonzero(~((p >= 0.0) & (p <= 1.0)))
    if bad.size:
        raise ValueError(f"multicalibration: p must be a probability in [0, 1], got {p[bad[0]]!r} at row {bad[0]}")
    p = p + 0.0  # -0.0 -> +0.0 (a copy: the state owns it)
    y = np.asarray(y).ravel()
    if y.dtype.kind not in "biuf":
        raise ValueError(f"multicalibration: labels must be the numbers 0 and 1, got {y.dtype} values")
    if y.dtype != bool:
        bad = np.flatnonzero((y != 0) & (y != 1))
        if bad.size:
            raise ValueError(f"multicalibration: labels must be 0 or 1, got {y[bad[0]]!r} at row {bad[0]}")
    y = y.astype(np.uint8)
    if y.size != p.size:
        raise ValueError(f"multicalibration: {y.size} labels but {p.size} probabilities")
    w = None
    if sample_weight is not None:
        w = np.array(sample_weight, dtype=np.float64, copy=True).ravel()
        bad = np.flatnonzero(~(np.isfinite(w) & (w >= 0)))
        if bad.size:
            raise ValueError(f"multicalibration: weights must be finite and >= 0, got {w[bad[0]]!r} at row {bad[0]}")
        if w.size != p.size:
            raise ValueError(f"multicalibration: {w.size} weights but {p.size} probabilities")
    return y, p, w


def _sums_and_paths(levels: list[seg.Levels], y: np.ndarray, p: np.ndarray, w: np.ndarray | None):
    """(numbered levels, cell levels, sums per cell, (d, p, cell) in ascending p for the paths).

    When p takes few values, rows are summed per (distinct p, cell) by hashing p, without
    sorting the rows; otherwise the rows are sorted by p and runs of ties, if many, summed."""
    ids, cell_levels = plan.cell_ids(levels, p.size)
    ncell = cell_levels.shape[1]
    few = plan.few_distinct(p, ncell)
    if few is None:
        rows = np.bincount(ids, minlength=ncell)
        first = np.full(ncell, np.inf)
        np.minimum.at(first, ids, p)
        levels, cell_levels = plan.number(levels, cell_levels, rows, first)
        sums = plan.cell_sums(ids, rows, y, p, w)
        order, ps = order_by_p(p)
        d, cells_sorted = sorted_rows(order, ps, y, w, ids)
        del order
        return levels, cell_levels, sums, plan.collapse_ties(d, ps, cells_sorted, ncell)
    run = plan.run_sums(*few, ids, ncell, y, w)
    cell, pk = run["cell"], run["p"]
    rows = np.rint(np.bincount(cell, run["rows"], ncell)).astype(np.int64)
    first = np.full(ncell, np.inf)
    np.minimum.at(first, cell, pk)
    levels, cell_levels = plan.number(levels, cell_levels, rows, first)
    sums = {"rows": rows, "w": np.bincount(cell, run["w"], ncell), "v": np.bincount(cell, pk * (1 - pk) * run["w2"], ncell),
            "wp": np.bincount(cell, pk * run["w"], ncell), "wy": np.bincount(cell, run["wy"], ncell)}
    return levels, cell_levels, sums, (run["wy"] - pk * run["w"], pk, cell)


class MulticalState:
    """The rows the multicalibration error needs, added batch by batch and mergeable.

    `kinds` forces a column's kind ("categorical" or "numeric"); otherwise float columns are
    numeric and every other column categorical (`segments.kind_of`). Every batch must carry
    the same columns (numpy arrays, lists or pyarrow arrays)."""

    def __init__(self, kinds: Mapping[str, str] | None = None) -> None:
        self.kinds = dict(kinds or {})
        for name, kind in self.kinds.items():
            if kind not in (seg.CATEGORICAL, seg.NUMERIC):
                raise ValueError(f"multicalibration: column {name!r}: kind must be 'categorical' or 'numeric', got {kind!r}")
        self.rows = 0
        self._p: list[np.ndarray] = []
        self._y: list[np.ndarray] = []
        self._w: list[np.ndarray | None] = []
        self._columns: dict[str, seg.CategoricalColumn | seg.NumericColumn] | None = None

    def add(self, y: Any, p: Any, columns: Mapping[str, Any] | None = None, sample_weight: Any = None) -> None:
        y, p, w = _validated(y, p, sample_weight)
        columns = dict(columns or {})
        if self._columns is None:
            self._columns = {name: seg.new_column(self.kinds.get(name) or seg.kind_of(v)) for name, v in columns.items()}
        elif set(columns) != set(self._columns):
            raise ValueError(f"multicalibration: a batch has columns {sorted(columns)}, earlier ones {sorted(self._columns)}")
        for name, store in self._columns.items():
            try:
                size = store.add(columns[name])
            except (TypeError, ValueError, pa.ArrowException) as exc:  # mixed or unparsable values
                raise ValueError(f"multicalibration: column {name!r} ({store.kind}): {exc}") from None
            if size != p.size:
                raise ValueError(f"multicalibration: column {name!r} has {size} rows, the batch {p.size}")
        self._p.append(p)
        self._y.append(y)
        self._w.append(w)
        self.rows += p.size

    def add_rows(self, y: Any, p: Any, sample_weight: Any = None) -> None:
        """Rows without their segment columns, for a state whose columns another state holds and
        adds (`segment_states.SegmentStates`: several predictions over the same rows)."""
        y, p, w = _validated(y, p, sample_weight)
        self._p.append(p)
        self._y.append(y)
        self._w.append(w)
        self.rows += p.size

    @classmethod
    def merge(cls, states: list[MulticalState]) -> MulticalState:
        """One state holding the rows of all `states` (categorical codes re-coded into one dictionary)."""
        states = list(states)
        out = cls(states[0].kinds if states else None)
        for s in states:
            if s._columns is not None:
                if out._columns is None:
                    out._columns = {name: seg.new_column(col.kind) for name, col in s._columns.items()}
                elif set(s._columns) != set(out._columns):
                    raise ValueError(f"multicalibration: cannot merge states with columns {sorted(s._columns)} "
                                     f"and {sorted(out._columns)}")
                for name, col in s._columns.items():
                    if col.kind != out._columns[name].kind:
                        raise ValueError(f"multicalibration: column {name!r} is {col.kind} in one state, "
                                         f"{out._columns[name].kind} in another")
                    col.merged_into(out._columns[name])
            out._p += s._p
            out._y += s._y
            out._w += s._w
            out.rows += s.rows
        return out

    @property
    def nbytes(self) -> int:
        """Bytes held by the rows (p, labels, weights, segment columns)."""
        arrays = self._p + self._y + [w for w in self._w if w is not None]
        return sum(a.nbytes for a in arrays) + sum(c.nbytes for c in (self._columns or {}).values())

    def _compact(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        def one(parts: list[np.ndarray], dtype) -> np.ndarray:
            return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0, dtype)

        if any(w is not None for w in self._w):
            self._w = [np.ones(p.size) if w is None else w for w, p in zip(self._w, self._p)]
        self._p, self._y = [one(self._p, np.float64)], [one(self._y, np.uint8)]
        w = None
        if self._w and self._w[0] is not None:
            self._w = [one(self._w, np.float64)]
            w = self._w[0]
        return self._y[0], self._p[0], w

    def result(self, options: MulticalOptions | None = None) -> MulticalResult:
        """The multicalibration error of the rows added (the state is kept, compacted)."""
        opts = options or MulticalOptions()
        opts.check()
        with _small_pages():
            return self._result(opts)

    def _result(self, opts: MulticalOptions) -> MulticalResult:
        y, p, w = self._compact()
        n = p.size
        scale = 1.0
        if w is not None and n and w.max() > 0:
            exponent = math.frexp(float(w.max()))[1]
            w = np.ldexp(w, -exponent)  # a power of two: exact, and no overflow in the sums below
            scale = math.ldexp(1.0, exponent)
        cols = self._columns or {}
        names = [k for k, c in cols.items() if c.kind == seg.CATEGORICAL] + \
                [k for k, c in cols.items() if c.kind == seg.NUMERIC]
        levels = [seg.levels_of(k, cols[k], p, opts.bins, opts.top) for k in names]
        levels, cell_levels, sums, paths = _sums_and_paths(levels, y, p, w)
        combos, chosen, capped = plan.enumerate_segments(levels, cell_levels, sums["rows"], opts.depth,
                                                         opts.min_rows, opts.max_segments)
        ranges = plan.ranges(levels, cell_levels, paths[2], paths[0], paths[1], combos)
        del paths
        table = _segment_table(levels, combos, chosen, sums, ranges, scale)
        whole = table[0]
        ratios = np.array([r.ecce_sigma for r in table])
        worst = float(ratios.max())
        if whole.sigma > 0:
            multical = worst * whole.sigma
        else:
            multical = max(r.ecce for r in table)
        ranked = sorted(range(len(table)), key=lambda i: -ratios[i])
        return MulticalResult(multical=multical, multical_sigma=worst, multical_p=float(ecce_pvalue(worst)[0]),
                              ecce=whole.ecce, sigma=whole.sigma, rows=n,
                              segments=tuple(table[i] for i in ranked), capped=capped)


@contextlib.contextmanager
def _small_pages():
    """numpy asks the kernel for huge pages for each large array (`madvise`); `result()` allocates
    and frees some twenty row-sized temporaries, and a fresh huge page can cost a compaction of
    memory first: on the shared 2-core machine that was about 1 s of system time in 10 at 1e7 rows
    (benchmarks/results_multicalibration.json). Plain pages meanwhile; numpy's setting after."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # another numpy: its own setting
        yield
        return
    previous = _set_madvise_hugepage(False)
    try:
        yield
    finally:
        _set_madvise_hugepage(previous)


def multicalibration(y: Any, p: Any, columns: Mapping[str, Any] | None = None, sample_weight: Any = None,
                     options: MulticalOptions | None = None, kinds: Mapping[str, str] | None = None) -> MulticalResult:
    """The multicalibration error of (y, p) over the segments of `columns` (one-shot form of
    `MulticalState`)."""
    state = MulticalState(kinds)
    state.add(y, p, columns, sample_weight)
    return state.result(options)


__all__ = ["MulticalOptions", "MulticalState", "MulticalResult", "SegmentRow", "multicalibration", "ecce_pvalue"]
