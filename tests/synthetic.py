"""Data builders several test modules share (importable as `synthetic`, see conftest.py).

Section 5.1 of Allikivi & Kull (2019): balanced classes; negatives' scores ~ Beta(1, 3),
positives' a 50/50 mixture of Beta(1.5, 3) and Beta(30, 3). The two builders draw the same
distribution in a different order; each test keeps the order its asserted numbers came from.
"""

from __future__ import annotations

import numpy as np


def logit(p):
    return np.log(p) - np.log1p(-p)


def sigmoid(t):
    return 1.0 / (1.0 + np.exp(-t))


def section51(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, 0/1 float labels), every mixture component drawn for all n rows."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.5).astype(float)
    pick = rng.random(n) < 0.5
    s = np.where(y == 0, rng.beta(1, 3, n), np.where(pick, rng.beta(1.5, 3, n), rng.beta(30, 3, n)))
    return s, y


def section51_by_class(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(scores, 0/1 float labels) from `rng`, the positives' mixture drawn only for positive rows."""
    y = (rng.random(n) < 0.5).astype(float)
    s = rng.beta(1.0, 3.0, n)
    pos = y == 1
    k = int(pos.sum())
    s[pos] = np.where(rng.random(k) < 0.5, rng.beta(1.5, 3.0, k), rng.beta(30.0, 3.0, k))
    return s, y


def rounded_scores(n: int = 5000, seed: int = 0, decimals: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Uniform scores rounded to `decimals` (so many ties) and labels drawn with P(y=1) = score."""
    rng = np.random.default_rng(seed)
    s = np.round(rng.random(n), decimals)
    return s, (rng.random(n) < s).astype(float)


def write_parquet(path, s, y, **extra) -> None:
    """A score/label Parquet file (parent folders made), with any extra columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"score": s, "label": y, **extra}), path)
