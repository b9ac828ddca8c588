"""The field-aware logit as a network: eta(logit) + per-level shifts + linear numeric terms + g.

`Network` holds the named weights and runs the forward pass (`additive`, `mlp`, `logits`) and
the backward pass of g (`mlp_backward`); `loss_and_grads` is the stage-2 batch objective.
The model and its training are described in `field_aware.py` and docs/algorithms.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibcli.calibrators.ilps import ilps_eta
from calibcli.calibrators.logistic import sigmoid

_CHUNK = 65536  # rows per forward pass at predict / validation time (bounds memory)


@dataclass
class Network:
    """Named weights of the field-aware logit; every per-level table has row 0 = unknown level."""

    b: np.ndarray  # ILPS knot values at the splits a
    shifts: list[np.ndarray]  # per categorical column: (levels + 1,) logit shifts, row 0 = 0
    linear: np.ndarray  # (numeric columns,) coefficients beta of the standardised columns
    embeddings: list[np.ndarray]  # per categorical column: (levels + 1, embed_dim)
    weights: list[np.ndarray]  # per hidden layer: (inputs, hidden)
    biases: list[np.ndarray]  # per hidden layer: (hidden,)
    out_w: np.ndarray  # (last width,)
    out_b: np.ndarray  # (1,)

    def trainable(self) -> list[np.ndarray]:
        """The arrays of g in a fixed order (stage 2 updates them in place)."""
        layers = [q for pair in zip(self.weights, self.biases) for q in pair]
        return [*self.embeddings, *layers, self.out_w, self.out_b]

    def additive(self, a: np.ndarray, logit: np.ndarray, codes: np.ndarray, xnum: np.ndarray) -> np.ndarray:
        """The stage-1 logit eta(logit) + sum_f s_f[z_f] + x . beta."""
        z = ilps_eta(logit, a, self.b)
        for f, shift in enumerate(self.shifts):
            z = z + shift[codes[:, f]]
        if self.linear.size:
            z = z + xnum @ self.linear
        return z

    def mlp(self, codes: np.ndarray, xnum: np.ndarray) -> tuple[np.ndarray, tuple]:
        """g(z, x) and the activations the backward pass needs."""
        parts = [emb[codes[:, f]] for f, emb in enumerate(self.embeddings)]
        if xnum.shape[1]:
            parts.append(xnum)
        h = np.concatenate(parts, axis=1)
        hs, zs = [h], []
        for weight, bias in zip(self.weights, self.biases):
            z = h @ weight + bias
            h = np.maximum(z, 0.0)
            zs.append(z)
            hs.append(h)
        return h @ self.out_w + self.out_b[0], (hs, zs)

    def mlp_backward(self, codes: np.ndarray, cache: tuple, r: np.ndarray) -> list[np.ndarray]:
        """Gradients of sum_i r_i * g(x_i), in `trainable()` order."""
        hs, zs = cache
        dh = np.outer(r, self.out_w)
        layer_grads: list[np.ndarray] = []
        for j in range(len(zs) - 1, -1, -1):
            dz = dh * (zs[j] > 0)
            layer_grads[:0] = [hs[j].T @ dz, dz.sum(axis=0)]
            dh = dz @ self.weights[j].T
        emb_grads, col = [], 0
        for f, emb in enumerate(self.embeddings):
            rows, dim = emb.shape
            flat = (codes[:, f, None] * dim + np.arange(dim)).ravel()
            emb_grads.append(np.bincount(flat, weights=dh[:, col : col + dim].ravel(), minlength=rows * dim))
            emb_grads[-1] = emb_grads[-1].reshape(rows, dim)
            col += dim
        return [*emb_grads, *layer_grads, hs[-1].T @ r, np.array([r.sum()])]

    def logits(
        self, a: np.ndarray, logit: np.ndarray, codes: np.ndarray, xnum: np.ndarray, emb_codes: np.ndarray | None = None
    ) -> np.ndarray:
        """The full logit for every row in chunks of _CHUNK rows; g looks levels up in `emb_codes`
        when given (training: rare levels -> 0), else in `codes`."""
        emb_codes = codes if emb_codes is None else emb_codes
        out = np.empty(logit.size)
        for start in range(0, logit.size, _CHUNK):
            sl = slice(start, start + _CHUNK)
            out[sl] = self.additive(a, logit[sl], codes[sl], xnum[sl]) + self.mlp(emb_codes[sl], xnum[sl])[0]
        return out


def weighted_logloss(z: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """Weighted mean log-loss of sigmoid(z)."""
    return float(np.sum(w * (np.logaddexp(0.0, z) - y * z))) / float(w.sum())


def loss_and_grads(
    net: Network, base: np.ndarray, codes: np.ndarray, xnum: np.ndarray, y: np.ndarray, w: np.ndarray
) -> tuple[float, list[np.ndarray]]:
    """Stage-2 batch objective (weighted mean log-loss of sigmoid(base + g)) and its gradients."""
    g, cache = net.mlp(codes, xnum)
    z = base + g
    r = w * (sigmoid(z) - y) / float(w.sum())
    return weighted_logloss(z, y, w), net.mlp_backward(codes, cache, r)
