"""Affine softmax maps fitted with ODIR regularisation, and the held-out choice of its strengths.

The map is p = softmax(z W^T + b) on logits z (the logs of probabilities for Dirichlet
calibration): W full (K x K, Dirichlet / matrix scaling) or diagonal (vector scaling). The fit
minimises the weighted mean log-loss plus the ODIR penalties of Kull et al. (2019):

    lambda / (K (K - 1)) * sum_{i != j} W_ij^2  +  mu / K * sum_j b_j^2

by L-BFGS (scipy) with the analytic gradient, (P - Y)^T z for W and the column sums of
P - Y for b, summed over chunks of rows (no n x K temporary beyond one chunk). It starts from
the identity map (W = I, b = 0: on probabilities softmax(ln p) = p).

Unless given, lambda and mu are chosen on held-out folds, as the paper does: rows are split
into `folds` folds by a seeded permutation, each candidate is fitted on the other folds (from
the strongest penalty to the weakest, each fold's fit warm-started from its previous one) and
scored by the held-out weighted log-loss, the search stopping once that has risen twice in a
row; the candidate with the lowest mean wins (the stronger penalty on a tie), and the map is
then fitted on every row, starting from the mean of the winner's fold fits.

A class with no (weighted) rows in the rows fitted has no evidence for its scale: the
likelihood alone would run its scale v_k (row k of W) to infinity, driving its logit, and so
its probability, to exactly 0 on most rows (the logs of its probabilities are negative). Its
scale row is therefore held at the identity (v_k = 1; W_kk = 1, W_kj = 0), so its logit stays
its own score plus an intercept b_k, which the ODIR penalty mu keeps finite: the class gets a
small probability, never a degenerate 0 (docs/algorithms.md, "K classes").

Above `CV_VALUES` (2^19) scores (rows x K) the choice is made on an evenly spaced subsample of m
rows and the chosen strengths are scaled by m / n for the fit on all n rows: the penalty is
a prior on W and b (the mean loss times n plus n * lambda * penalty is the negative log
posterior), and scaling by m / n keeps that prior's weight, n * lambda, the one the folds
chose, while the data's weight grows with n. At n * K <= CV_VALUES it is the paper's
procedure on every row.

BLAS runs on one thread during the fits: (P - Y)^T z reduces over the rows, and OpenBLAS's
threads on that shape wait on each other more than they compute when cores are shared.
"""

from __future__ import annotations

import contextlib

import numpy as np

# Candidate penalty strengths, strongest first. With one of lambda, mu given, the other runs
# over the grid; with neither, the two are tied (lambda = mu) along it. The penalties are
# divided by K(K - 1) and K, so a strong one (1e4) leaves about vector scaling.
GRID = (1e4, 1e3, 1e2, 10.0, 1.0, 1e-1, 1e-2, 1e-3, 1e-4)
RISES = 2  # the search stops once the held-out loss has risen this many times in a row
CV_VALUES = 1 << 19  # rows x K the penalties are chosen on, at most (a subsample above)
FIT_CLIP = 1e8  # logits beyond +-FIT_CLIP are clipped for the fit (the softmax is saturated there)
_CHUNK = 1 << 21  # values (rows x K) per chunk of a pass
TIGHT = {"maxiter": 15000, "maxfun": 30000, "ftol": 1e-14, "gtol": 1e-9}
LOOSE = {"maxiter": 150, "maxfun": 300, "ftol": 1e-7, "gtol": 1e-5}


class Problem:
    """Rows (z, y, w) and the map's shape: `full` W or diagonal; `theta` packs W then b."""

    def __init__(self, z: np.ndarray, y: np.ndarray, w: np.ndarray | None, full: bool):
        self.z = np.clip(z, -FIT_CLIP, FIT_CLIP)
        self.y = y
        self.w = w
        self.full = full
        self.k = z.shape[1]
        self.total = float(y.size if w is None else np.sum(w))
        self.absent = np.bincount(y, weights=w, minlength=self.k) <= 0  # classes without weighted rows

    def rows(self, keep: np.ndarray) -> "Problem":
        return Problem(self.z[keep], self.y[keep], None if self.w is None else self.w[keep], self.full)

    def split(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = self.k
        n_w = k * k if self.full else k
        return (theta[:n_w].reshape(k, k) if self.full else theta[:n_w]), theta[n_w:]

    def identity(self) -> np.ndarray:
        return np.concatenate([np.eye(self.k).ravel() if self.full else np.ones(self.k), np.zeros(self.k)])

    def bounds(self) -> list[tuple[float | None, float | None]] | None:
        """L-BFGS-B bounds holding the scale row of each absent class at the identity (None:
        every class has rows, nothing held)."""
        if not self.absent.any():
            return None
        fixed = self.identity()
        held = np.zeros(fixed.size, dtype=bool)
        k = self.k
        for j in np.flatnonzero(self.absent):
            if self.full:
                held[j * k:(j + 1) * k] = True  # row j of W
            else:
                held[j] = True
        return [(float(v), float(v)) if h else (None, None) for v, h in zip(fixed, held)]

    def loss(self, theta: np.ndarray, gradient: bool = True) -> tuple[float, np.ndarray | None]:
        """Weighted mean log-loss of the map (and its gradient in theta)."""
        wmat, b = self.split(theta)
        rows = max(1, _CHUNK // self.k)
        total, gw, gb = 0.0, np.zeros_like(wmat), np.zeros(self.k)
        for lo in range(0, self.y.size, rows):
            z = self.z[lo:lo + rows]
            y = self.y[lo:lo + rows]
            a = z @ wmat.T if self.full else z * wmat
            a += b
            a -= a.max(axis=1, keepdims=True)
            ay = a[np.arange(y.size), y]
            np.exp(a, out=a)
            s = a.sum(axis=1)
            terms = np.log(s) - ay
            w = None if self.w is None else self.w[lo:lo + rows]
            total += float(terms.sum() if w is None else w @ terms)
            if gradient:
                a /= s[:, None]
                a[np.arange(y.size), y] -= 1.0  # P - Y
                if w is not None:
                    a *= w[:, None]
                gw += a.T @ z if self.full else np.einsum("ij,ij->j", a, z)
                gb += a.sum(axis=0)
        grad = np.concatenate([gw.ravel(), gb]) / self.total if gradient else None
        return total / self.total, grad


def penalty(problem: Problem, theta: np.ndarray, lam: float, mu: float) -> tuple[float, np.ndarray]:
    """The ODIR penalty and its gradient."""
    wmat, b = problem.split(theta)
    k = problem.k
    gw = np.zeros_like(wmat)
    value = 0.0
    if problem.full and lam > 0:
        off = wmat - np.diag(np.diag(wmat))
        c = lam / (k * (k - 1))
        value += c * float(np.sum(off * off))
        gw = 2 * c * off
    value += mu / k * float(b @ b)
    return value, np.concatenate([gw.ravel(), 2 * mu / k * b])


def fit(problem: Problem, lam: float, mu: float, x0: np.ndarray | None = None,
        options: dict | None = None) -> np.ndarray:
    """theta minimising the penalised loss, by L-BFGS from `x0` (the identity map)."""
    from scipy.optimize import minimize

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = problem.loss(theta)
        pv, pg = penalty(problem, theta, lam, mu)
        return value + pv, grad + pg

    start = problem.identity() if x0 is None else x0
    bounds = problem.bounds()
    if bounds is not None:  # a warm start from rows where the class was present: back to the identity
        start = np.array([v if lo is None else lo for v, (lo, _) in zip(start, bounds)])
    with one_blas_thread():
        result = minimize(objective, start, jac=True, method="L-BFGS-B", bounds=bounds, options=options or TIGHT)
    return result.x if np.all(np.isfinite(result.x)) else start


def one_blas_thread() -> contextlib.AbstractContextManager:
    """Limit BLAS to one thread (threadpoolctl, when installed)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def candidates(lam: float | None, mu: float | None) -> list[tuple[float, float]]:
    """The (lambda, mu) pairs to try, strongest first; one pair when both are given."""
    if lam is not None and mu is not None:
        return [(lam, mu)]
    if lam is not None:
        return [(lam, g) for g in GRID]
    if mu is not None:
        return [(g, mu) for g in GRID]
    return [(g, g) for g in GRID]


def choose(problem: Problem, pairs: list[tuple[float, float]], folds: int, seed: int
           ) -> tuple[tuple[float, float], list[float], np.ndarray | None, float]:
    """The pair with the lowest mean held-out log-loss over `folds` seeded folds, the mean
    held-out loss of each pair tried (strongest first; the search stops once it has risen
    `RISES` times in a row), the mean of the winner's fold fits (a start for the fit on
    every row; None when nothing was tried) and m / n, the scale of a chosen strength for
    the fit on all rows (1 unless the choice was made on a subsample of m rows)."""
    if len(pairs) == 1:
        return pairs[0], [], None, 1.0
    n_all = problem.y.size
    if n_all * problem.k > CV_VALUES:
        problem = problem.rows(np.arange(0, n_all, -(-n_all * problem.k // CV_VALUES)))
    n = problem.y.size
    folds = max(2, min(folds, n))
    fold = np.empty(n, dtype=np.int64)
    fold[np.random.default_rng(seed).permutation(n)] = np.arange(n) % folds
    parts = [(problem.rows(fold != f), problem.rows(fold == f)) for f in range(folds)]
    parts = [(train, test) for train, test in parts if train.total > 0 and test.total > 0]
    thetas: list[np.ndarray | None] = [None] * len(parts)
    means: list[float] = []
    best: np.ndarray | None = None
    for lam, mu in pairs:
        held = 0.0
        for i, (train, test) in enumerate(parts):
            thetas[i] = fit(train, lam, mu, thetas[i], LOOSE)
            held += test.loss(thetas[i], gradient=False)[0] * test.total
        means.append(held / sum(test.total for _, test in parts))
        if means[-1] == min(means):
            best = np.mean(thetas, axis=0)
        if len(means) > RISES and all(means[-j] > means[-j - 1] for j in range(1, RISES + 1)):
            break
    return pairs[int(np.argmin(means))], means, best, n / n_all
