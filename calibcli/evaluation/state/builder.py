"""`StateBuilder`: streams record batches into one `EvalState`, keeping the exact distribution
of an unweighted column as compact counts, a bucketed one on a dense grid (see its docstring
and docs/algorithms.md, "Evaluation state").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from calibcli.evaluation.metrics import kernels, binary as _metrics
from calibcli.evaluation.state.binary import EvalState, merge_states
from calibcli.numeric.pooling import compact_counts_of_keys, packed_keys


def _drain(chunks: list[np.ndarray]) -> np.ndarray:
    """Concatenate `chunks`, releasing each as it is copied (peak: the result plus one chunk)."""
    out = np.empty(sum(c.size for c in chunks), dtype=chunks[0].dtype if chunks else np.float64)
    at = 0
    chunks.reverse()
    while chunks:
        c = chunks.pop()
        out[at:at + c.size] = c
        at += c.size
        del c
    return out


class StateBuilder:
    """Streams batches into one state.

    - Unweighted exact p (the default): the sums are merged batch by batch and each row is
      kept as one packed sort key, (bits of p << 1) | label (8 bytes a row), sorted in place
      once and run-length encoded into the same storage (`pooling.compact_counts_of_keys`):
      the state's n0 and n1 are then unsigned integer counts of the smallest dtype that
      holds them (1 byte an entry unless a p repeats 256 times), which every metric reads
      through `pooling.as_weights`. Batches holding NaN or negative p (which only the
      engines can pass) take the per-batch path below.
    - With `step`: the sums likewise, and the bucketed distribution is added up on a dense
      grid of bucket indices (three float arrays of 1/step + 1 entries for p in [0, 1]).
    - Otherwise (field cells, or a grid wider than 2^24 buckets): a state per batch,
      merged whenever the pending ones grow, so memory follows the distribution's size.
    """

    _GRID_MAX = 1 << 24

    def __init__(self, step: float | None = None, field_cells: bool = False, rows: int | None = None,
                 ece_bins: int = _metrics.ECE_BINS):
        """`rows`: how many rows will come, when known (Parquet metadata): the exact path then
        writes its keys into one array of that size instead of concatenating them at the end.
        `ece_bins`: the equal-width bins whose sums the state keeps (exact ECE/MCE under `step`)."""
        self.step = step
        self.ece_bins = ece_bins
        self.field_cells = field_cells
        self._pending: list[EvalState] = []
        self._pending_size = 0
        self._merged_size = 0
        self._sums: EvalState | None = None
        self._keys: list[np.ndarray] = []  # packed (p, label) sort keys of the exact unweighted path
        self._key_buffer = np.empty(rows, dtype=np.uint64) if rows and step is None and not field_cells else None
        self._key_at = 0  # keys written into _key_buffer
        self._grid: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None  # (lowest index, rows, n0, n1)

    def add(self, y: Any, p: Any, fields: Any = None, sample_weight: Any = None) -> None:
        y = np.asarray(y, dtype=np.float64).ravel()
        p = np.asarray(p, dtype=np.float64).ravel()
        packable = self.step is not None or (sample_weight is None and (p.size == 0 or p.min() >= 0))  # NaN: no
        if not self.field_cells and packable:
            if self.step is None or self._to_grid(y, p, sample_weight):
                part = EvalState.from_arrays(y, p, fields, sample_weight, self.step, distribution=False,
                                             bin_sums=self.step is not None, ece_bins=self.ece_bins)
                self._sums = part if self._sums is None else merge_states([self._sums, part])
                if self.step is None:
                    buffer, at = self._key_buffer, self._key_at
                    if buffer is not None and at + p.size <= buffer.size:
                        packed_keys(p, y == 1, out=buffer[at:at + p.size])
                        self._key_at += p.size
                    else:
                        self._keys.append(packed_keys(p, y == 1))
                return
        part = EvalState.from_arrays(y, p, fields, sample_weight, self.step, self.field_cells, ece_bins=self.ece_bins)
        self._pending.append(part)
        self._pending_size += part.p.size
        if self._pending_size > 2 * self._merged_size + (1 << 22):
            self._pending = [merge_states(self._pending)]
            self._pending_size = self._merged_size = self._pending[0].p.size

    def _to_grid(self, y: np.ndarray, p: np.ndarray, sample_weight: Any) -> bool:
        """Add a batch's bucketed distribution to the grid; False when the grid would be too wide."""
        if p.size == 0:
            return True
        k = np.rint(p / self.step)
        lo, hi = float(k.min()), float(k.max())
        if self._grid is not None:
            lo, hi = min(lo, self._grid[0]), max(hi, self._grid[0] + self._grid[1].size - 1)
        if self._pending or hi - lo >= self._GRID_MAX:
            return False
        size, base = int(hi - lo) + 1, int(lo)
        if self._grid is None or self._grid[0] != base or self._grid[1].size != size:
            grown = [np.zeros(size) for _ in range(3)]
            if self._grid is not None:
                at = self._grid[0] - base
                for new, old in zip(grown, self._grid[1:]):
                    new[at:at + old.size] = old
            self._grid = (base, *grown)
        idx = (k - base).astype(np.int64)
        w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64).ravel()
        w1 = y if w is None else w * y
        _, rows, n0, n1 = self._grid
        rows += np.bincount(idx, minlength=size)
        n1 += np.bincount(idx, weights=w1, minlength=size)
        n0 += np.bincount(idx, weights=(1.0 - y) if w is None else w - w1, minlength=size)
        return True

    def result(self) -> EvalState:
        parts = list(self._pending)
        if self._sums is not None:
            if self._grid is not None:
                base, rows, n0, n1 = self._grid
                used = np.flatnonzero(rows > 0)
                self._sums.p, self._sums.n0, self._sums.n1 = (used + base) * self.step, n0[used], n1[used]
                self._grid = None
            elif self.step is None:
                if self._key_buffer is not None:
                    self._keys.insert(0, self._key_buffer[:self._key_at])
                    self._key_buffer = None
                keys = self._keys.pop() if len(self._keys) == 1 else _drain(self._keys)
                pa.default_memory_pool().release_unused()  # the read buffers, before the distribution
                p, n0, n1 = compact_counts_of_keys(keys)  # p is the sorted keys' storage
                del keys
                self._sums.p, self._sums.n0, self._sums.n1 = p, n0, n1
                self._sums.ece_w, self._sums.ece_p, self._sums.ece_y = kernels.bin_sums_of_distribution(
                    p, n0, n1, self.ece_bins)
            parts.append(self._sums)
            self._sums = None
        if not parts:
            return EvalState.from_arrays(np.empty(0), np.empty(0), step=self.step, ece_bins=self.ece_bins)
        return merge_states(parts)


__all__ = ["StateBuilder"]
