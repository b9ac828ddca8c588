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


TAU2_RANGE = (0.01, 100.0)  # prior variance of a column's shifts (floor: sd 0.1 logit; see docs)
RIDGE = 1e-3  # rho: only makes beta unique for a constant or collinear column
_DENSE_MAX = 800  # coefficients solved as a dense system up to this many
_TAU2_TOL = 1e-3  # relative change of tau^2 at which it is taken as converged
# Newton: at most _MAX_ITER steps; no row's logit moves more than _MAX_MOVE in one step (far
# from the optimum); one Hessian factor serves _REUSE steps once tau^2 is fixed; converged when
# the Newton decrement per unit of summed weight is below _DECREMENT_TOL.
_MAX_ITER, _MAX_MOVE, _REUSE, _DECREMENT_TOL = 100, 20.0, 4, 1e-12


def fast_sigmoid(t: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-t)) for the fits' gradients: one transcendental call instead of
    `logistic.sigmoid`'s two, equal to it within a few ulps; exp(-t) overflows to inf below
    t = -709 and gives exactly 0 there. Predictions use `logistic.sigmoid`."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-t))


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

    def __init__(self, rows: Rows, like: "_Design | None" = None):
        """`like`: a design of the same rows' codes (another dense part) whose level and pair
        indices are reused (their np.unique is most of the set-up)."""
        self.rows = rows
        self.dense = [np.ones(rows.y.size)] + ([] if rows.logit is None else [rows.logit]) + list(rows.x.T)
        self.dense_x = np.column_stack(self.dense)
        self.nd = len(self.dense)
        self.levels = [v - 1 for v in rows.sizes]
        self.start = np.concatenate([[self.nd], self.nd + np.cumsum(self.levels)]).astype(np.int64)
        self.size = int(self.start[-1])
        nf, nd = len(rows.sizes), self.nd
        self.n_lev = self.size - nd
        if like is None:
            # every row's index among the levels of all shift tables (level v of table f -> its slot)
            self.lev = rows.codes.astype(np.int64) - 1 + (self.start[:-1] - nd)[None, :]
            pair_idx, pr, pc, m = [], [], [], 0
            for f in range(nf):
                for g in range(f + 1, nf):
                    key = rows.codes[:, f].astype(np.int64) * rows.sizes[g] + rows.codes[:, g]
                    uniq, inv = np.unique(key, return_inverse=True)
                    pair_idx.append(inv.ravel() + m)
                    pr.append(self.start[f] - nd + uniq // rows.sizes[g] - 1)
                    pc.append(self.start[g] - nd + uniq % rows.sizes[g] - 1)
                    m += uniq.size
            self.n_pairs = len(pair_idx)
            self.pair_idx = np.concatenate(pair_idx) if pair_idx else np.zeros(0, dtype=np.int64)
            self.pair_levels = (np.concatenate(pr) if pr else np.zeros(0, dtype=np.int64),
                                np.concatenate(pc) if pc else np.zeros(0, dtype=np.int64))
            self.n_pair_entries = m
        else:
            self.lev, self.n_pairs, self.pair_idx = like.lev, like.n_pairs, like.pair_idx
            self.pair_levels, self.n_pair_entries = like.pair_levels, like.n_pair_entries
        self.lev_flat = self.lev.ravel()
        self.cross_idx = (self.lev[:, :, None] * nd + np.arange(nd)[None, None, :]).ravel()
        pr, pc = [self.pair_levels[0] + nd], [self.pair_levels[1] + nd]
        # (row, column) of every value `hessian` computes, in its order: the dense block, the
        # levels' diagonal, their cross terms with the dense columns (both triangles), the
        # pairs of levels that occur together (both triangles); every entry once
        levels = nd + np.arange(self.n_lev)
        dense_r, dense_c = np.repeat(np.arange(nd), nd), np.tile(np.arange(nd), nd)
        cross_r, cross_c = np.repeat(levels, nd), np.tile(np.arange(nd), self.n_lev)
        prr = np.concatenate(pr) if pr else np.zeros(0, dtype=np.int64)
        pcc = np.concatenate(pc) if pc else np.zeros(0, dtype=np.int64)
        self.plan = (np.concatenate([dense_r, levels, cross_r, cross_c, prr, pcc]).astype(np.int64),
                     np.concatenate([dense_c, levels, cross_c, cross_r, pcc, prr]).astype(np.int64))
        self.flat_plan = self.plan[0] * self.size + self.plan[1]

    def hessian(self, h: np.ndarray, prec: np.ndarray) -> Any:
        """X' diag(h) X + diag(prec): a dense array up to _DENSE_MAX coefficients, else a
        scipy.sparse matrix; two bincounts give every level term, one scatter places them."""
        nd, t = self.nd, self.rows.codes.shape[1]
        hx = h[:, None] * self.dense_x
        cross = np.bincount(self.cross_idx, np.broadcast_to(hx[:, None, :], (h.size, t, nd)).ravel(),
                            self.n_lev * nd)
        pairs = np.bincount(self.pair_idx, np.tile(h, self.n_pairs), self.n_pair_entries)
        values = np.concatenate([(hx.T @ self.dense_x).ravel(), cross[::nd], cross, cross, pairs, pairs])
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
        t = self.rows.codes.shape[1]
        return np.concatenate([r @ self.dense_x, np.bincount(self.lev_flat, np.repeat(r, t), self.n_lev)])

    def unpack(self, theta: np.ndarray) -> tuple[float, float, np.ndarray, list[np.ndarray]]:
        slope_at = 1 if self.rows.logit is not None else None
        c = float(theta[0])
        m = float(theta[1]) if slope_at else 0.0
        beta = theta[1 + (slope_at or 0) : self.nd]
        shifts = [np.concatenate([[0.0], theta[self.start[f] : self.start[f + 1]]]) for f in range(len(self.levels))]
        return c, m, beta, shifts


def design_of(rows: Rows, like: "_Design | None" = None) -> "_Design":
    """The Hessian's index structures for `rows` (pass to `fit_terms` to reuse them across refits);
    `like`: a design of the same codes whose level and pair indices are reused."""
    return _Design(rows, like)


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
        s0[nd - n_lin : nd] = centre.linear[:n_lin]  # a refit without linear terms has n_lin = 0
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
    it, decrement, factor, stale = 0, np.inf, None, 0
    for it in range(1, _MAX_ITER + 1):
        p = fast_sigmoid(z)
        grad = design.gradient(w * (p - y)) + prec * (s0 + theta)
        # With tau^2 fixed the Hessian changes little between steps: its factor is reused for up
        # to _REUSE steps (a chord step, still a descent direction), and refreshed for the last step.
        if factor is None or estimate or stale >= _REUSE:
            factor, stale = _factor(design.hessian(w * p * (1.0 - p), prec)), 0
        step = _apply(factor, grad)
        decrement = float(grad @ step)
        if decrement < tol and stale:  # converged on an old factor: one exact Newton step to finish
            factor, stale = _factor(design.hessian(w * p * (1.0 - p), prec)), 0
            step = _apply(factor, grad)
            decrement = float(grad @ step)
        stale += 1
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
                    theta, z, f_old = cand, zc, fc
                    break
                t *= 0.5
                stale = _REUSE  # a step that needs shortening: refresh the Hessian next time
            else:
                break  # no decrease at float precision: as close as rounding allows
        if estimate:
            old = list(tau2)
            tau2 = _update_tau2(tau2, theta + s0, z, rows, design)
            if max((abs(a - b) / b for a, b in zip(tau2, old)), default=0.0) < _TAU2_TOL:
                estimate = False  # converged: finish the Newton steps with tau^2 fixed
            prec = precisions()
            f_old = objective(theta, z, prec)
        elif decrement < tol:
            f_old = objective(theta, z, prec)
    c, m, beta, shifts = design.unpack(theta)
    info = {"iterations": it, "decrement": decrement, "shift_sd": [float(np.sqrt(v)) for v in tau2]}
    return Terms(c, m, shifts, np.array(beta)), tau2, info


def _update_tau2(tau2: list[float], total: np.ndarray, z: np.ndarray, rows: Rows, design: "_Design") -> list[float]:
    """One evidence fixed-point update of every column's prior variance (module docstring)."""
    p = fast_sigmoid(z)
    h = rows.w * p * (1.0 - p)
    out = list(tau2)
    for f in range(len(tau2)):
        curv = np.bincount(rows.codes[:, f], h, rows.sizes[f])[1:]
        s = total[design.start[f] : design.start[f + 1]]
        gamma = float(np.sum(tau2[f] * curv / (1.0 + tau2[f] * curv)))
        if gamma > 0.0:
            out[f] = float(np.clip(np.sum(s * s) / gamma, *TAU2_RANGE))
    return out


def _factor(hess: Any) -> tuple[str, Any]:
    """A reusable factorisation of the Hessian: Cholesky (dense), SuperLU (sparse), or the
    matrix itself when Cholesky fails (solved by least squares)."""
    if not isinstance(hess, np.ndarray):
        from scipy.sparse.linalg import splu

        return "lu", splu(hess)
    from scipy.linalg import cho_factor

    try:
        return "cho", cho_factor(hess, check_finite=False)
    except np.linalg.LinAlgError:
        return "lstsq", hess


def _apply(factor: tuple[str, Any], grad: np.ndarray) -> np.ndarray:
    kind, f = factor
    if kind == "lu":
        return f.solve(grad)
    if kind == "cho":
        from scipy.linalg import cho_solve

        return cho_solve(f, grad, check_finite=False)
    return np.linalg.lstsq(f, grad, rcond=None)[0]
