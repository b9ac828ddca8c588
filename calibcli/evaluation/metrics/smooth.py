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

from calibcli.evaluation.metrics.prefix import Prefix

DENSITY_EPS = 1e-4  # relplot's BaseKernelMixin.smooth
MESH_POINTS = 200  # relplot.config.smECE_mesh_pts and plot_mesh_pts
SIGMA_EPS = 0.001  # relplot.smECE's eps
REFINE = 10


def _grid(pre: Prefix, values: tuple[tuple[str, str, str, str], ...], points: int) -> list[np.ndarray]:
    """Spread quantities of a distribution linearly onto `points` equally spaced points of
    [0, 1], as relplot's `smooth_round_to_grid`: an entry at p in cell b = floor(p (points - 1))
    gives a (1 - frac) to point b and a frac to point b + 1, frac = p (points - 1) - b. Per
    cell that is sum a and sum a p, so the spread reads them off running sums; each value is
    (a, a p) as sums `plus` minus `minus` of `prefix.QUANTITIES` (minus may be "")."""
    v = pre.v
    scale = points - 1
    cuts = np.searchsorted(v, np.arange(1, points - 1) / scale, side="left")
    sums = pre.between(np.concatenate([[0], cuts, [v.size]]))
    b = np.arange(points - 1, dtype=np.float64)
    out = []
    for plus, minus, plus_p, minus_p in values:
        a = sums[plus] - (sums[minus] if minus else 0.0)
        ap = sums[plus_p] - (sums[minus_p] if minus_p else 0.0)
        right = scale * ap - b * a
        grid = np.zeros(points)
        grid[:-1] += a - right
        grid[1:] += right
        out.append(grid)
    return out


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


RESIDUAL = ("mp", "y", "mpp", "yp")  # sum m p - y, and times p
MASS = ("m", "", "mp", "")
POSITIVES = ("y", "", "yp", "")


class _Spread:
    """Two quantities of a distribution spread onto relplot's grids, each grid size computed
    once (the bisection visits a few sizes, the distribution may be large)."""

    def __init__(self, pre: Prefix, *values: tuple[str, str, str, str]):
        self.pre, self.values, self.grids = pre, values, {}

    def smoothed(self, k: int, x_eval: np.ndarray, sigma: float) -> np.ndarray:
        points = max(2000, round(20 / sigma)) // 2 + 1
        if points not in self.grids:
            self.grids[points] = _grid(self.pre, self.values, points)
        return _smooth_grid(self.grids[points][k], x_eval, sigma)

    def at_sigma(self, sigma: float) -> float:
        """smECE_σ, with values (residuals, mass)."""
        t = np.linspace(0, 1, max(round(10 / sigma), MESH_POINTS))
        dens = self.smoothed(1, t, sigma) + DENSITY_EPS
        rs = self.smoothed(0, t, sigma) / dens
        return float(np.sum(np.abs(rs) * dens) / np.sum(dens))


def _prefix(p, n0, n1, prefix: Prefix | None) -> Prefix:
    return prefix if prefix is not None else Prefix(p, n0, n1)


def smece_at(p, n0, n1, sigma: float, prefix: Prefix | None = None) -> float:
    """smECE_σ at a fixed bandwidth (`relplot.smECE_sigma`)."""
    pre = _prefix(p, n0, n1, prefix)
    return _Spread(pre, RESIDUAL, MASS).at_sigma(sigma) if pre.v.size else float("nan")


def smece(p, n0, n1, prefix: Prefix | None = None) -> tuple[float, float]:
    """(smECE, σ): the smooth ECE at the bandwidth where smECE_σ = σ (`relplot.smECE`)."""
    pre = _prefix(p, n0, n1, prefix)
    if pre.v.size == 0 or not pre.total["m"] > 0:
        return float("nan"), float("nan")
    spread = _Spread(pre, RESIDUAL, MASS)

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
    pre = Prefix(p, n0, n1)
    if sigma is None:
        sigma = smece(p, n0, n1, pre)[1]
    t = np.linspace(0, 1, points)
    if pre.v.size == 0 or not sigma == sigma:
        return t, np.full(points, np.nan), np.zeros(points)
    spread = _Spread(pre, POSITIVES, MASS)
    dens = spread.smoothed(1, t, sigma)
    # the ratio of the two smoothings, without relplot's 1e-4 (which pulls the curve to 0
    # where p has no mass); where even the kernel's tails vanish, the nearest defined value
    valid = dens > 0
    rate = np.divide(spread.smoothed(0, t, sigma), dens, out=np.zeros(points), where=valid)
    if valid.any() and not valid.all():
        rate[~valid] = np.interp(t[~valid], t[valid], rate[valid])
    return t, np.clip(rate, 0.0, 1.0), dens / pre.total["m"]


__all__ = ["smece", "smece_at", "smooth_curve"]
