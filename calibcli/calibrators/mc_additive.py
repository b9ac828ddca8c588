"""The additive part of `multicalibration`, fitted by Newton's method on all coefficients at once.

    z = offset + c + m * logit + sum_f s_f[level_f] + sum_j beta_j * x_j

minimising sum_i w_i logloss(y_i, z_i) + sum_f sum_v (S_fv + s_fv)^2 / (2 tau_f^2)
+ rho/2 sum_j (B_j + beta_j)^2 + rho/2 (m - 1)^2, where S and B are the centres of the prior (0 for the first
fit; the shifts and coefficients already in the map for a refit, so the prior always acts
on the map's total per-level shift). The intercept c is not penalised; the slope's tiny ridge
only keeps it finite when the logit separates the classes.

At the optimum the gradient is zero, which is the unbiasedness the method promises on its fit
rows: sum_i w_i (y_i - p_i) = 0 overall (c), sum_{i in v} w_i (y_i - p_i) = (S_v + s_v) / tau_f^2
in every level v (a level's bias is its total shift over tau^2: the empirical-Bayes shrinkage,
small for a level with many rows), and sum_i w_i (y_i - p_i) x_ij = rho (B_j + beta_j).

The first fit also estimates tau_f^2 (empirical Bayes, MacKay's evidence fixed point
tau^2 = sum_v s_v^2 / sum_v gamma_v with gamma_v = tau^2 H_v / (1 + tau^2 H_v), H_v the level's
curvature), interleaved with the Newton steps; refits keep it. The Hessian has a dense block
(intercept, slope, numeric columns), a diagonal block per categorical column and a block per
pair of columns holding only the level pairs that occur together; it is solved densely up to
_DENSE_MAX coefficients, else as a sparse system (SuperLU).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from calibcli.calibrators.logistic import sigmoid

TAU2_RANGE = (0.01, 100.0)  # prior variance of a column's shifts (floor: sd 0.1 logit; see docs)
RIDGE = 1e-3  # rho: only makes beta unique for a constant or collinear column
_DENSE_MAX = 800  # coefficients solved as a dense system up to this many
_MAX_ITER = 100
_TAU2_TOL = 1e-3  # relative change of tau^2 at which it is taken as converged
_MAX_MOVE = 20.0  # largest change of any row's logit in one Newton step (far from the optimum)
_DECREMENT_TOL = 1e-12  # Newton decrement (per unit of summed weight) at which the fit has converged


@dataclass
class Rows:
    """The rows a fit sees: logit (or None: no slope), level codes (rows, columns; 1..V, 0 never
    occurs), standardised numeric columns, labels and weights."""

    logit: np.ndarray | None
    codes: np.ndarray
    sizes: list[int]  # levels + 1 per categorical column
    x: np.ndarray  # (rows, numeric columns)
    y: np.ndarray
    w: np.ndarray

    def take(self, idx: np.ndarray) -> "Rows":
        return Rows(None if self.logit is None else self.logit[idx], self.codes[idx], self.sizes, self.x[idx],
                    self.y[idx], self.w[idx])


@dataclass
class Terms:
    """Fitted additive coefficients (shifts[f][0] = 0: the unknown level)."""

    intercept: float
    slope: float
    shifts: list[np.ndarray]
    linear: np.ndarray

    def logit(self, logit: np.ndarray | None, codes: np.ndarray, x: np.ndarray) -> np.ndarray:
        """c + m * logit + shifts + beta . x, element by element in a fixed order (no BLAS), so a
        row's value never depends on the other rows in the batch."""
        n = codes.shape[0]
        z = np.full(n, self.intercept) if logit is None else self.intercept + self.slope * logit
        for f, s in enumerate(self.shifts):
            z = z + s[codes[:, f]]
        for j, b in enumerate(self.linear):
            z = z + b * x[:, j]
        return z


class _Design:
    """Index structures of the Hessian that do not change between Newton steps."""

    def __init__(self, rows: Rows):
        self.rows = rows
        self.dense = [np.ones(rows.y.size)] + ([] if rows.logit is None else [rows.logit]) + list(rows.x.T)
        self.dense_x = np.column_stack(self.dense)
        self.code_cols = [np.ascontiguousarray(rows.codes[:, f]) for f in range(rows.codes.shape[1])]
        self.nd = len(self.dense)
        self.levels = [v - 1 for v in rows.sizes]
        self.start = np.concatenate([[self.nd], self.nd + np.cumsum(self.levels)]).astype(np.int64)
        self.size = int(self.start[-1])
        self.pairs = []
        nf = len(rows.sizes)
        for f in range(nf):
            for g in range(f + 1, nf):
                key = rows.codes[:, f].astype(np.int64) * rows.sizes[g] + rows.codes[:, g]
                uniq, inv = np.unique(key, return_inverse=True)
                self.pairs.append((f, g, uniq // rows.sizes[g], uniq % rows.sizes[g], inv.ravel(), uniq.size))
        self.plan = self._plan()
        self.flat_plan = self.plan[0] * self.size + self.plan[1]

    def _plan(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, columns) of the Hessian entries `hessian` computes, in the order of its values:
        the dense block, then per shift table its diagonal and its cross terms with each dense
        column (both triangles), then per pair of tables the level pairs that occur (both)."""
        nd = self.nd
        ri, ci = [np.repeat(np.arange(nd), nd)], [np.tile(np.arange(nd), nd)]
        for f, v in enumerate(self.levels):
            idx = self.start[f] + np.arange(v)
            ri.append(idx), ci.append(idx)
            for a in range(nd):
                ri += [idx, np.full(v, a)]
                ci += [np.full(v, a), idx]
        for f, g, lf, lg, _, _ in self.pairs:
            rf, rg = self.start[f] + lf - 1, self.start[g] + lg - 1
            ri += [rf, rg]
            ci += [rg, rf]
        return np.concatenate(ri).astype(np.int64), np.concatenate(ci).astype(np.int64)

    def hessian(self, h: np.ndarray, prec: np.ndarray) -> Any:
        """X' diag(h) X + diag(prec): a dense array up to _DENSE_MAX coefficients, else a
        scipy.sparse matrix. Every entry belongs to one block, so one scatter fills it."""
        nd = self.nd
        hx = [h * d for d in self.dense]
        vals = [(np.column_stack(hx).T @ self.dense_x).ravel()]
        for f, v in enumerate(self.levels):
            col_codes = self.code_cols[f]
            cols = [np.bincount(col_codes, hx[0], v + 1)[1:]]  # the diagonal = the cross term with the intercept
            cols += [np.bincount(col_codes, hx[a], v + 1)[1:] for a in range(1, nd)]
            vals.append(cols[0])
            for col in cols:
                vals += [col, col]
        for _, _, _, _, inv, m in self.pairs:
            cross = np.bincount(inv, h, m)
            vals += [cross, cross]
        values = np.concatenate(vals)
        if self.size <= _DENSE_MAX:
            out = np.zeros(self.size * self.size)
            out[self.flat_plan] = values
            out[:: self.size + 1] += prec
            return out.reshape(self.size, self.size)
        from scipy import sparse  # imported when used: `calib` starts without scipy.sparse

        diag = np.arange(self.size)
        return sparse.coo_matrix((np.concatenate([values, prec]), (np.concatenate([self.plan[0], diag]),
                                  np.concatenate([self.plan[1], diag]))), shape=(self.size, self.size)).tocsc()

    def gradient(self, r: np.ndarray) -> np.ndarray:
        """X' r."""
        out = [r @ self.dense_x]
        out += [np.bincount(self.code_cols[f], r, v + 1)[1:] for f, v in enumerate(self.levels)]
        return np.concatenate(out)

    def unpack(self, theta: np.ndarray) -> tuple[float, float, np.ndarray, list[np.ndarray]]:
        slope_at = 1 if self.rows.logit is not None else None
        c = float(theta[0])
        m = float(theta[1]) if slope_at else 0.0
        beta = theta[1 + (slope_at or 0) : self.nd]
        shifts = [np.concatenate([[0.0], theta[self.start[f] : self.start[f + 1]]]) for f in range(len(self.levels))]
        return c, m, beta, shifts


def design_of(rows: Rows) -> "_Design":
    """The Hessian's index structures for `rows` (pass to `fit_terms` to reuse them across refits)."""
    return _Design(rows)


def fit_terms(rows: Rows, offset: np.ndarray | None = None, centre: Terms | None = None,
              tau2: list[float] | None = None, design: "_Design | None" = None) -> tuple[Terms, list[float], dict]:
    """The additive coefficients minimising the penalised log-loss (module docstring).

    `centre`: the map's current totals (shifts, linear) the prior is centred on; its
    intercept and slope are ignored. `tau2`: the columns' prior variances, estimated here
    when None. Returns (the fitted increments as Terms, tau2, diagnostics).
    """
    design = _Design(rows) if design is None else design
    y, w = rows.y, rows.w
    nf, nd = len(rows.sizes), design.nd
    estimate = tau2 is None
    tau2 = [1.0] * nf if tau2 is None else list(tau2)
    s0 = np.zeros(design.size)  # prior centres, in the coefficient layout
    n_lin = rows.x.shape[1]
    if centre is not None:
        s0[nd - n_lin : nd] = centre.linear
        for f in range(nf):
            s0[design.start[f] : design.start[f + 1]] = centre.shifts[f][1:]
    base = np.zeros(y.size) if offset is None else offset
    theta = np.zeros(design.size)
    if rows.logit is not None:
        theta[1] = 1.0  # start from the input logit
        s0[1] = -1.0  # the slope's ridge pulls it toward 1 (and keeps it finite on separable rows)
    prec_of = np.zeros(design.size)

    def precisions() -> np.ndarray:
        prec_of[:] = 0.0
        prec_of[nd - n_lin : nd] = RIDGE
        if rows.logit is not None:
            prec_of[1] = RIDGE
        for f in range(nf):
            prec_of[design.start[f] : design.start[f + 1]] = 1.0 / tau2[f]
        return prec_of

    def objective(th: np.ndarray, z: np.ndarray, prec: np.ndarray) -> float:
        return float(np.sum(w * (np.logaddexp(0.0, z) - y * z))) + 0.5 * float(np.sum(prec * (s0 + th) ** 2))

    def logit_of(th: np.ndarray) -> np.ndarray:
        c, m, beta, shifts = design.unpack(th)
        return base + Terms(c, m, shifts, beta).logit(rows.logit, rows.codes, rows.x)

    prec = precisions()
    z = logit_of(theta)
    f_old = objective(theta, z, prec)
    tol = _DECREMENT_TOL * max(1.0, float(np.sum(w)))
    it, decrement = 0, np.inf
    for it in range(1, _MAX_ITER + 1):
        p = sigmoid(z)
        grad = design.gradient(w * (p - y)) + prec * (s0 + theta)
        step = _solve(design.hessian(w * p * (1.0 - p), prec), grad)
        decrement = float(grad @ step)
        if decrement < tol:  # at the optimum up to rounding: one last full step, no line search
            theta = theta - step
            z = logit_of(theta)
            if not estimate:
                break
        else:
            t = 1.0
            for _ in range(60):  # Armijo backtracking, no row's logit moving more than _MAX_MOVE
                cand = theta - t * step
                zc = logit_of(cand)
                with np.errstate(over="ignore", invalid="ignore"):
                    moved = float(np.max(np.abs(zc - z), initial=0.0))
                    fc = objective(cand, zc, prec) if moved <= _MAX_MOVE else np.inf
                if fc <= f_old - 1e-4 * t * decrement:
                    theta, z = cand, zc
                    break
                t *= 0.5
            else:
                break  # no decrease at float precision: as close as rounding allows
        if estimate:
            old = list(tau2)
            tau2 = _update_tau2(tau2, theta + s0, z, rows, design)
            if max((abs(a - b) / b for a, b in zip(tau2, old)), default=0.0) < _TAU2_TOL:
                estimate = False  # converged: finish the Newton steps with tau^2 fixed
            prec = precisions()
        f_old = objective(theta, z, prec)
    c, m, beta, shifts = design.unpack(theta)
    info = {"iterations": it, "decrement": decrement, "shift_sd": [float(np.sqrt(v)) for v in tau2]}
    return Terms(c, m, shifts, np.array(beta)), tau2, info


def _update_tau2(tau2: list[float], total: np.ndarray, z: np.ndarray, rows: Rows, design: "_Design") -> list[float]:
    """One evidence fixed-point update of every column's prior variance (module docstring)."""
    p = sigmoid(z)
    h = rows.w * p * (1.0 - p)
    out = list(tau2)
    for f in range(len(tau2)):
        curv = np.bincount(rows.codes[:, f], h, rows.sizes[f])[1:]
        s = total[design.start[f] : design.start[f + 1]]
        gamma = float(np.sum(tau2[f] * curv / (1.0 + tau2[f] * curv)))
        if gamma > 0.0:
            out[f] = float(np.clip(np.sum(s * s) / gamma, *TAU2_RANGE))
    return out


def _solve(hess: Any, grad: np.ndarray) -> np.ndarray:
    from scipy.linalg import cho_factor, cho_solve

    if not isinstance(hess, np.ndarray):
        from scipy.sparse.linalg import spsolve

        return np.asarray(spsolve(hess, grad))
    try:
        return cho_solve(cho_factor(hess, check_finite=False), grad, check_finite=False)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(hess, grad, rcond=None)[0]
