"""Running sums over a distribution of p (ascending distinct p with the weight n0 of negatives
and n1 of positives at each), read at any index: the sums over any run of consecutive p (a
bin, a group, a grid cell) are differences of two reads.

Built in one chunked pass that keeps the running sums only at every `STRIDE`-th entry (a
1e8-entry distribution keeps 5 x 50 MB, not 5 x 800 MB); a read adds the at most
`STRIDE - 1` entries after the stored one, recomputed from p, n0, n1. The quantities are
`m` (rows, weight), `y` (positives), `mp` (sum of m p), `mpp` (sum of m p^2), `yp` (sum of
y p): what the binned metrics (debiased ECE, Hosmer-Lemeshow) and smECE's linear spreading
onto a grid need.
"""

from __future__ import annotations

import numpy as np

from calibcli.numeric import pooling
from calibcli.numeric.pooling import as_weights

STRIDE = 16
QUANTITIES = ("m", "y", "mp", "mpp", "yp")


def _terms(v: np.ndarray, n0: np.ndarray, n1: np.ndarray) -> dict[str, np.ndarray]:
    y = as_weights(n1)
    m = as_weights(n0) + y
    mp = m * v
    return {"m": m, "y": y, "mp": mp, "mpp": mp * v, "yp": y * v}


class Prefix:
    """Running sums of `QUANTITIES` over a distribution, read at sorted or unsorted indices."""

    def __init__(self, v, n0, n1):
        self.v = np.asarray(v, dtype=np.float64)
        self.n0, self.n1 = n0, n1
        n = self.v.size
        blocks = -(-n // STRIDE)
        self.stored = {k: np.zeros(blocks + 1) for k in QUANTITIES}  # sums before entry b * STRIDE
        chunk = max(STRIDE, pooling.CHUNK // STRIDE * STRIDE)
        carry = dict.fromkeys(QUANTITIES, 0.0)
        self.high = self.low = 0.0  # the extremes of the running sum of y - m p (KS and Kuiper)
        if n:
            self.high, self.low = -np.inf, np.inf
        size = min(chunk, -(-n // STRIDE) * STRIDE)
        buf = {k: np.zeros(size) for k in QUANTITIES}  # reused chunk to chunk: no page is touched twice
        diff = np.zeros(size)
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            k = hi - lo
            x = self.v[lo:hi]
            m, y, mp, mpp, yp = (buf[q][:k] for q in QUANTITIES)
            np.copyto(y, n1[lo:hi], casting="unsafe")
            np.copyto(m, n0[lo:hi], casting="unsafe")
            m += y
            np.multiply(m, x, out=mp)
            np.multiply(mp, x, out=mpp)
            np.multiply(y, x, out=yp)
            steps = diff[:k]
            np.subtract(y, mp, out=steps)
            np.cumsum(steps, out=steps)
            steps += carry["y"] - carry["mp"]
            self.high, self.low = max(self.high, float(steps.max())), min(self.low, float(steps.min()))
            padded = -(-k // STRIDE) * STRIDE
            for q in QUANTITIES:
                whole = buf[q][:padded]
                whole[k:] = 0.0
                sums = np.cumsum(whole.reshape(-1, STRIDE).sum(axis=1))
                sums += carry[q]
                self.stored[q][lo // STRIDE + 1: lo // STRIDE + 1 + sums.size] = sums
                carry[q] = float(sums[-1])
        self.total = {k: carry[k] for k in QUANTITIES}

    def at(self, idx) -> dict[str, np.ndarray]:
        """Each quantity's sum over the entries before index `idx` (0 .. n), per index."""
        idx = np.asarray(idx, dtype=np.int64)
        block = idx // STRIDE
        out = {k: self.stored[k][block].copy() for k in QUANTITIES}
        start = block * STRIDE
        for r in range(STRIDE - 1):
            take = idx > start + r
            if not take.any():
                break
            at = start[take] + r
            terms = _terms(self.v[at], self.n0[at], self.n1[at])
            for k in QUANTITIES:
                out[k][take] += terms[k]
        return out

    def between(self, idx) -> dict[str, np.ndarray]:
        """Sums over the runs [idx[0], idx[1]), [idx[1], idx[2]), ... (idx ascending)."""
        c = self.at(idx)
        return {k: np.diff(a) for k, a in c.items()}

    def rank(self, mass, side: str = "left") -> np.ndarray:
        """The index of the entry where the running row weight reaches each of `mass`:
        `np.searchsorted(cumsum(m), mass, side)` without the cumulative array."""
        mass = np.asarray(mass, dtype=np.float64)
        stored = self.stored["m"]
        # the block whose stored sum is the last one below (side left) / at or below (right)
        block = np.maximum(np.searchsorted(stored, mass, side=side) - 1, 0)
        base = block * STRIDE
        n = self.v.size
        out = np.full(mass.shape, n, dtype=np.int64)
        running = stored[block].copy()
        done = np.zeros(mass.shape, dtype=bool)
        for r in range(STRIDE + 1):
            at = base + r
            live = ~done & (at < n)
            if not live.any():
                break
            w = as_weights(self.n0[at[live]]) + as_weights(self.n1[at[live]])
            after = running[live] + w
            hit = after >= mass[live] if side == "left" else after > mass[live]
            rows = np.flatnonzero(live)
            out[rows[hit]] = at[live][hit]
            done[rows[hit]] = True
            running[live] = after
        return out


__all__ = ["Prefix", "QUANTITIES", "STRIDE"]
