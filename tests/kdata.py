"""K-class test data: logits of an overconfident model, their softmax, labels drawn from a
calibrated version (so every method has something to correct)."""

from __future__ import annotations

import numpy as np


def logits(n: int = 600, k: int = 4, seed: int = 0, scale: float = 2.5, truth: float = 0.6):
    """(z, y): logits z (n, k) and labels drawn from softmax(truth * z) (z is overconfident)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * scale + np.linspace(0.0, 0.5, k)
    p = softmax(truth * z)
    y = (p.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1)
    return z, np.minimum(y, k - 1)


def probabilities(n: int = 600, k: int = 4, seed: int = 0):
    """(P, y): the softmax of `logits`, rows summing to 1."""
    z, y = logits(n, k, seed)
    return softmax(z), y


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def log_loss(p: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> float:
    """Weighted mean -ln p_y (no clipping: the fitted maps never give 0 here)."""
    terms = -np.log(p[np.arange(y.size), y])
    return float(np.average(terms, weights=w))
