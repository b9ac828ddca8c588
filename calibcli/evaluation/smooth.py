"""Smooth ECE (Błasiok & Nakkiran, "Smooth ECE: Principled Reliability Diagrams via Kernel
Smoothing", ICLR 2024) from a distribution of p, computed as `relplot.smECE` computes it.

smECE_σ is the mean absolute kernel-smoothed residual E[f - y | f ≈ t] under the
kernel-smoothed density of f, with the Gaussian kernel of width σ reflected at 0 and 1;
smECE is smECE_σ at the σ where smECE_σ = σ, found by bisection. The numerics follow
relplot 1.0 so the values agree to rounding: the residuals and the mass are spread
linearly onto a grid of max(2000, round(20/σ)) // 2 + 1 points, convolved with the kernel
sampled on as many points of [0, 1] (the grid reflected at both ends), read back by linear
interpolation on max(round(10/σ), 200) points, with 1e-4 added to the density; the
bisection starts at σ = 1 and halves [0, 1] ten times, stopping at σ < 0.001.

A distinct p with weight W and positive weight n1 carries the residual W p - n1 and the
mass W, exactly what its rows carry (a row of weight w counts as w rows).
"""

from __future__ import annotations

import math

import numpy as np

from calibcli.pooling import as_weights

DENSITY_EPS = 1e-4  # relplot's BaseKernelMixin.smooth
MESH_POINTS = 200  # relplot.config.smECE_mesh_pts and plot_mesh_pts
SIGMA_EPS = 0.001  # relplot.smECE's eps
REFINE = 10


def _grid(v: np.ndarray, values: tuple[np.ndarray, ...], points: int) -> list[np.ndarray]:
    """Spread each of `values` at p = `v` linearly onto `points` equally spaced points of [0, 1]."""
    scaled = v * (points - 1)
    bins = scaled.astype(np.int64).clip(0, points - 2)
    frac = scaled - bins
    del scaled
    return [np.bincount(bins, (1 - frac) * a, minlength=points) + np.bincount(bins + 1, frac * a, minlength=points)
            for a in values]


def _smooth_grid(grid: np.ndarray, x_eval: np.ndarray, sigma: float) -> np.ndarray:
    """The reflected-Gaussian smoothing of a spread grid, read at `x_eval`."""
    points = grid.size
    t = np.linspace(0, 1, points)
    kernel = np.exp(-(t - 0.5) * (t - 0.5) / (2 * sigma ** 2)) / (math.sqrt(2 * math.pi) * sigma)
    ext = np.concatenate([np.flip(grid)[:-1], grid, np.flip(grid)[1:]])
    if points > 1500:  # a long kernel: the FFT's rounding (1e-13 relative) is far below the tolerance
        size = ext.size + points - 1
        fft = 1 << (size - 1).bit_length()
        conv = np.fft.irfft(np.fft.rfft(ext, fft) * np.fft.rfft(kernel, fft), fft)[points - 1: ext.size]
    else:
        conv = np.convolve(ext, kernel, "valid")
    smooth = conv[points // 2: points // 2 + points]
    idx = (x_eval * (points - 1)).astype(np.int64).clip(0, points - 2)
    step = 1 / (points - 1)
    resid = (x_eval - idx * step) / step
    return smooth[idx] * (1 - resid) + smooth[idx + 1] * resid


class _Spread:
    """The residuals and the mass of a distribution spread onto relplot's grids, each grid
    size computed once (the bisection visits a few sizes, the distribution may be large)."""

    def __init__(self, v: np.ndarray, *values: np.ndarray):
        self.v, self.values, self.grids = v, values, {}

    def smoothed(self, k: int, x_eval: np.ndarray, sigma: float) -> np.ndarray:
        points = max(2000, round(20 / sigma)) // 2 + 1
        if points not in self.grids:
            self.grids[points] = _grid(self.v, self.values, points)
        return _smooth_grid(self.grids[points][k], x_eval, sigma)

    def at_sigma(self, sigma: float) -> float:
        """smECE_σ, with values (residuals, mass)."""
        t = np.linspace(0, 1, max(round(10 / sigma), MESH_POINTS))
        dens = self.smoothed(1, t, sigma) + DENSITY_EPS
        rs = self.smoothed(0, t, sigma) / dens
        return float(np.sum(np.abs(rs) * dens) / np.sum(dens))


def _parts(p, n0, n1):
    v = np.asarray(p, dtype=np.float64)
    pos = as_weights(n1)
    mass = as_weights(n0) + pos
    return v, mass * v - pos, mass


def smece_at(p, n0, n1, sigma: float) -> float:
    """smECE_σ at a fixed bandwidth (`relplot.smECE_sigma`)."""
    v, resid, mass = _parts(p, n0, n1)
    return _Spread(v, resid, mass).at_sigma(sigma) if v.size else float("nan")


def smece(p, n0, n1) -> tuple[float, float]:
    """(smECE, σ): the smooth ECE at the bandwidth where smECE_σ = σ (`relplot.smECE`)."""
    v, resid, mass = _parts(p, n0, n1)
    if v.size == 0 or mass.sum() <= 0:
        return float("nan"), float("nan")
    spread = _Spread(v, resid, mass)

    def wide_enough(sigma: float) -> bool:
        return sigma < SIGMA_EPS or sigma < spread.at_sigma(sigma)

    sigma = 1.0
    if not wide_enough(sigma):
        start, end = 1.0, 0.0
        for _ in range(REFINE):
            mid = (start + end) / 2
            if wide_enough(mid):
                end = mid
            else:
                start = mid
        sigma = start
    return spread.at_sigma(sigma), sigma


def smooth_curve(p, n0, n1, sigma: float | None = None, points: int = MESH_POINTS
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t, smoothed positive rate at t, density of p at t) on `points` equally spaced t, with
    the smECE bandwidth unless `sigma` is given: the curve of the smooth reliability diagram
    (`--diagram smooth`). The density integrates to about 1 over [0, 1]."""
    v, _, mass = _parts(p, n0, n1)
    if sigma is None:
        sigma = smece(p, n0, n1)[1]
    t = np.linspace(0, 1, points)
    if v.size == 0 or not sigma == sigma:
        return t, np.full(points, np.nan), np.zeros(points)
    spread = _Spread(v, as_weights(n1), mass)
    dens = spread.smoothed(1, t, sigma)
    rate = spread.smoothed(0, t, sigma) / (dens + DENSITY_EPS)
    return t, np.clip(rate, 0.0, 1.0), dens / mass.sum()


__all__ = ["smece", "smece_at", "smooth_curve"]
