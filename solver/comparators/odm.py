"""Optimal margin Distribution Machine (docs/algorithm.md, "ODM"), solved by dual coordinate descent
as in libodm (Zhang & Zhou, TKDE 2020)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from scipy.linalg.blas import daxpy, ddot
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from solver.params import Interval, StrOptions

from .._base import Callback, FitStopped, report
from .._footprint import (
    FLOAT,
    FitEstimate,
    augmented_copy_bytes,
    dense_rows_bytes,
    kernel_matrix_estimate,
    labels_bytes,
    n_targets,
)
from ..kernels import Linear, resolve_gamma
from ..msvmav import augment
from ._common import KERNEL_CONSTRAINTS, ExpansionClassifier, split_linear

# Sparse linear input is densified row-wise for the coordinate loop (BLAS-1 on contiguous rows is
# several times cheaper per coordinate than fancy indexing) when the dense copy fits this budget.
DENSE_ROWS_MAX_BYTES = 512 * 2**20


class ODM(ExpansionClassifier):
    """Optimal margin distribution machine: mean margin up, margin variance down.

    Primal (libodm convention, lambda = ``C``; m training points, m_i = y_i f(x_i)):

        F(w) = 1/2 ||w||^2 + lambda / (m (1-theta)^2)
               * sum_i [ (1-theta-m_i)_+^2 + mu (m_i-1-theta)_+^2 ]

    The paper's convention has lambda / (2m) instead; ``lambda_convention="paper"`` uses it
    (same model as libodm with lambda halved). Solved in the dual,

        min_{u, v >= 0} 1/2 (u-v)^T Q (u-v) + D_u/2 ||u||^2 + D_v/2 ||v||^2
                        - (1-theta) 1^T u + (1+theta) 1^T v,

    Q = Y K Y, D_u = m (1-theta)^2 / (2 lambda) (libodm; twice that for "paper"), D_v = D_u / mu,
    by coordinate descent: every epoch visits the 2m coordinates in a fresh random order, and the
    fit stops when max(PG) - min(PG) <= tol over an epoch (PG: projected gradient) or after
    ``max_iter`` epochs. Linear kernel: w = sum_i (u_i - v_i) y_i x~_i is kept up to date, with
    x~ = (x; 1) when fit_intercept (libodm ``bias=1``, the paper's augmentation; the bias is
    regularised). Other kernels: no bias, g = K (y * (u - v)) is kept up to date and
    f(x) = sum_i (u_i - v_i) y_i k(x_i, x). One-vs-rest for more than two classes.

    Parameters
    ----------
    C : float > 0
        ODM's lambda (the paper's "C").
    mu : float in (0, 1]
        Weight of the penalty on margins above 1 + theta.
    theta : float in [0, 1)
        Half-width of the zero-loss band around margin 1.
    kernel : {"linear", "rbf", "poly", "precomputed"}
    gamma : float > 0, "scale" (default), "auto" or None
        Kernel width for "rbf"/"poly", as scikit-learn's SVC: "scale" 1 / (d Var(X)), "auto"
        (and None, the default before "scale") 1 / d.
    degree, coef0 : polynomial kernel (gamma <x, z> + coef0) ** degree.
    tol : float >= 0
        Stopping tolerance on max PG - min PG (libodm's demos use 1e-3; its CLI default 1e-2).
    max_iter : int >= 1
        Maximum number of epochs (a ConvergenceWarning is issued when it is reached).
    fit_intercept : bool
        Linear kernel: append the constant-1 feature. Kernels have no bias.
    lambda_convention : {"libodm", "paper"}
        Whether C multiplies the loss sum by 1/m (libodm) or 1/(2m) (paper).
    random_state : int or None
        Seed of the coordinate order.

    Attributes
    ----------
    classes_, coef_, intercept_, dual_coef_, X_fit_ : the expansion ``ExpansionClassifier``
        describes (no bias for kernels: intercept_ 0); here dual_coef_, (n,) or (n, T), is
        (u - v) * y and X_fit_ every training row (None for "precomputed").
    u_, v_ : (n,) or (n, T)
        The dual variables (training diagnostics; not persisted by ``to_dict``).
    gamma_ : float or None, the gamma actually used.
    n_iter_ : int, epochs run (max over the one-vs-rest tasks).
    converged_ : bool, every task met the tolerance.
    history_ : list of dicts, one per epoch and task: iteration (epoch), task, pg_gap,
        primal (F(w)), dual (the dual objective's value as a lower bound on F), gap
        (primal - dual), objective (= primal), nonzero (number of nonzero u_i and v_i).
    """

    _parameter_constraints: dict = {
        "C": [Interval(Real, 0, None, closed="neither")],
        "mu": [Interval(Real, 0, 1, closed="right")],
        "theta": [Interval(Real, 0, 1, closed="left")],
        **KERNEL_CONSTRAINTS,
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "fit_intercept": ["boolean"],
        "lambda_convention": [StrOptions({"libodm", "paper"})],
        "random_state": ["random_state"],
    }
    _json_attrs = ("gamma_", "n_iter_", "converged_", "history_")

    def __init__(self, C: float = 1.0, *, mu: float = 0.8, theta: float = 0.2,
                 kernel: str = "linear", gamma: float | str | None = "scale", degree: int = 3,
                 coef0: float = 1.0, tol: float = 1e-3, max_iter: int = 1000,
                 fit_intercept: bool = True, lambda_convention: str = "libodm",
                 random_state: int | None = None, calibration: str = "none") -> None:
        self.C = C
        self.calibration = calibration
        self.mu = mu
        self.theta = theta
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.lambda_convention = lambda_convention
        self.random_state = random_state

    # -- problem constants ----------------------------------------------------------------
    def _loss_weight(self, m: int) -> float:
        """c in F(w) = 1/2 ||w||^2 + c sum_i [...]: lambda / (m (1-theta)^2), halved for "paper"."""
        c = self.C / (m * (1.0 - self.theta) ** 2)
        return c if self.lambda_convention == "libodm" else 0.5 * c

    def primal_objective(self, margins: np.ndarray, sq_norm: float) -> float:
        """F at a model with squared norm ``sq_norm`` and training margins ``margins``."""
        lo = np.maximum(1.0 - self.theta - margins, 0.0)
        hi = np.maximum(margins - 1.0 - self.theta, 0.0)
        return 0.5 * sq_norm + self._loss_weight(margins.size) * float(
            lo @ lo + self.mu * (hi @ hi))

    # -- fitting ----------------------------------------------------------------------------
    def fit_estimate(self, n_samples: int, n_features: int, nnz: int | None,
                     n_classes: int = 2) -> FitEstimate:
        n, d = n_samples, n_features
        # U, V and the coordinate loop's Python lists (u, v, their denominators, the labels,
        # the visiting order, one row view per row: about 400 bytes a row)
        fixed = labels_bytes(n, n_classes) + 2 * FLOAT * n * n_targets(n_classes) + 400 * n
        if self.kernel_kind.primal:
            D = d + (1 if self.fit_intercept else 0)
            copy = augmented_copy_bytes(n, d, nnz) if self.fit_intercept else 0
            dense = nnz is not None and n * D * 8 <= DENSE_ROWS_MAX_BYTES
            peak = copy + (dense_rows_bytes(n, D) if dense else 0) + fixed
            return FitEstimate(int(peak), "odm-linear", "use fewer rows or features")
        return kernel_matrix_estimate(n, d, nnz, self.kernel_kind, fixed, "ODM")

    def _fit_targets(self, X, Y: np.ndarray, callback: Callback | None) -> None:
        self._reset_fitted()
        self.history_ = []
        self.converged_ = True
        rng = check_random_state(self.random_state)
        n, T = Y.shape
        Du = 1.0 / (2.0 * self._loss_weight(n))  # = m (1-theta)^2 / (2 lambda) for libodm
        Dv = Du / self.mu
        U, V = np.zeros((n, T)), np.zeros((n, T))
        if self.kernel_kind.primal:
            Xa = augment(X) if self.fit_intercept else X
            W = np.zeros((T, Xa.shape[1]))
            rows = _LinearRows(Xa)
            for t in range(T):
                w = W[t]  # a view: the coordinate loop updates it in place
                state = _LinearState(rows, w, Y[:, t])
                if self._solve(state, Y[:, t], rows.sq_norms, Du, Dv, rng, U[:, t], V[:, t],
                               callback, t, T):
                    break
            self.coef_, self.intercept_ = split_linear(W, X.shape[1], self.fit_intercept)
        else:
            self.gamma_ = resolve_gamma(self.gamma, X)
            K = self.kernel_.gram(X)
            for t in range(T):
                state = _KernelState(K, Y[:, t])
                if self._solve(state, Y[:, t], K.diagonal().copy(), Du, Dv, rng, U[:, t],
                               V[:, t], callback, t, T):
                    break
            self._set_kernel_model((U - V) * Y, X)
        self.u_ = U[:, 0].copy() if T == 1 else U
        self.v_ = V[:, 0].copy() if T == 1 else V
        if not self.converged_ and not self.stopped_early_:
            warnings.warn(f"ODM: the dual coordinate descent did not reach tol={self.tol:g} in "
                          f"max_iter={self.max_iter} epochs", ConvergenceWarning, stacklevel=3)

    def _solve(self, state, y: np.ndarray, qdiag: np.ndarray, Du: float, Dv: float, rng,
               u_out: np.ndarray, v_out: np.ndarray, callback: Callback | None, task: int,
               n_tasks: int) -> bool:
        """Run coordinate descent on one +-1 target; True if the callback stopped the fit."""

        def on_epoch(epoch: int, pg_gap: float, u: list, v: list) -> None:
            ua, va = np.asarray(u), np.asarray(v)
            margins, sq_norm = state.margins_and_sq_norm()
            primal = self.primal_objective(margins, sq_norm)
            # the dual objective's value at (u, v), negated: a lower bound on min F
            dual = -(0.5 * sq_norm + 0.5 * Du * float(ua @ ua) + 0.5 * Dv * float(va @ va)
                     - (1.0 - self.theta) * float(ua.sum()) + (1.0 + self.theta) * float(va.sum()))
            record = {"iteration": epoch, "max_iter": self.max_iter, "task": task,
                      "n_tasks": n_tasks, "pg_gap": pg_gap, "primal": primal, "dual": dual,
                      "gap": primal - dual, "objective": primal,
                      "nonzero": int(np.count_nonzero(ua) + np.count_nonzero(va))}
            self.history_.append(record)
            report(callback, record)

        stopped = False
        try:
            epochs, converged = dual_coordinate_descent(
                state.margin_of, state.move, y, qdiag, Du, Dv, self.theta, self.tol,
                self.max_iter, rng, on_epoch, u_out, v_out)
        except FitStopped:
            stopped, converged = True, True
            epochs = len([h for h in self.history_ if h["task"] == task])
            self.stopped_early_ = True
        self.n_iter_ = max(self.n_iter_, epochs)
        self.converged_ = self.converged_ and converged
        return stopped


def dual_coordinate_descent(margin_of: Callable[[int], float], move: Callable[[int, float], None],
                            y: np.ndarray, qdiag: np.ndarray, Du: float, Dv: float, theta: float,
                            tol: float, max_iter: int, rng: np.random.RandomState,
                            on_epoch: Callable[[int, float, list, list], None],
                            u_out: np.ndarray, v_out: np.ndarray) -> tuple[int, bool]:
    """ODM's dual CD (docs/algorithm.md, "ODM") from u = v = 0.

    ``margin_of(i)`` returns <w, x_i> (without y_i) for the current model and ``move(i, a)``
    adds a * x_i to it, x_i being the i-th feature row (linear) or kernel column. Coordinates
    j < m are u_j, j >= m are v_{j-m}. The final u, v are written to u_out, v_out (even when
    ``on_epoch`` raises to stop the fit). Returns (epochs run, converged).
    """
    m = y.size
    # Python lists and floats: per-coordinate scalar work is far cheaper than on numpy scalars
    ys = y.tolist()
    u, v = [0.0] * m, [0.0] * m
    den_u = (qdiag + Du).tolist()
    den_v = (qdiag + Dv).tolist()
    lo, hi = 1.0 - theta, 1.0 + theta
    converged = False
    epoch = 0
    try:
        for epoch in range(1, max_iter + 1):  # noqa: B007 - epoch is returned
            pg_max, pg_min = -math.inf, math.inf
            for j in rng.permutation(2 * m).tolist():
                if j < m:
                    yi, old = ys[j], u[j]
                    G = yi * margin_of(j) + Du * old - lo
                    i = j
                    den = den_u[j]
                    cur = u
                    sign = yi
                else:
                    i = j - m
                    yi, old = ys[i], v[i]
                    G = -yi * margin_of(i) + Dv * old + hi
                    den = den_v[i]
                    cur = v
                    sign = -yi
                # projected gradient: at the bound 0 only a negative gradient can move
                pg = G if (old > 0.0 or G < 0.0) else 0.0
                if pg > pg_max:
                    pg_max = pg
                if pg < pg_min:
                    pg_min = pg
                if pg != 0.0:
                    new = old - G / den
                    if new < 0.0:
                        new = 0.0
                    if new != old:
                        cur[i] = new
                        move(i, (new - old) * sign)
            gap = pg_max - pg_min
            converged = gap <= tol
            on_epoch(epoch, gap, u, v)
            if converged:
                break
    finally:
        u_out[:] = u
        v_out[:] = v
    return epoch, converged


class _LinearRows:
    """Feature rows for the linear coordinate loop: dense contiguous rows when they fit in
    ``DENSE_ROWS_MAX_BYTES``, otherwise (indices, values) pairs of the CSR rows."""

    def __init__(self, Xa) -> None:
        self.X = Xa
        n, D = Xa.shape
        self.sq_norms = Linear().diagonal(Xa)  # ||x_i||^2
        self.dense = not sparse.issparse(Xa) or n * D * 8 <= DENSE_ROWS_MAX_BYTES
        if self.dense:
            Xd = Xa.toarray() if sparse.issparse(Xa) else np.ascontiguousarray(Xa)
            self.rows = list(Xd)
        else:
            ptr = Xa.indptr
            self.idx = [Xa.indices[ptr[i]:ptr[i + 1]] for i in range(n)]
            self.val = [Xa.data[ptr[i]:ptr[i + 1]] for i in range(n)]


class _LinearState:
    """w (updated in place) with margin_of(i) = <w, x_i> and move(i, a): w += a x_i."""

    def __init__(self, rows: _LinearRows, w: np.ndarray, y: np.ndarray) -> None:
        self.X, self.w, self.y = rows.X, w, y
        if rows.dense:
            r = rows.rows
            self.margin_of = lambda i: ddot(r[i], w)
            self.move = lambda i, a: daxpy(r[i], w, a=a)
        else:
            idx, val = rows.idx, rows.val

            def move(i: int, a: float) -> None:
                w[idx[i]] += a * val[i]

            self.margin_of = lambda i: float(val[i] @ w.take(idx[i]))
            self.move = move

    def margins_and_sq_norm(self) -> tuple[np.ndarray, float]:
        return self.y * np.asarray(self.X @ self.w).ravel(), float(self.w @ self.w)


class _KernelState:
    """g = K beta with beta = y * (u - v): margin_of(i) = g_i, move(i, a): g += a K_i."""

    def __init__(self, K: np.ndarray, y: np.ndarray) -> None:
        self.K, self.y = K, y
        self.beta = np.zeros(y.size)
        g = np.zeros(y.size)
        self.g = g
        rows = list(K)  # K is symmetric: row i is column i, and contiguous
        beta = self.beta

        def move(i: int, a: float) -> None:
            beta[i] += a
            daxpy(rows[i], g, a=a)

        self.margin_of = g.item
        self.move = move

    def margins_and_sq_norm(self) -> tuple[np.ndarray, float]:
        return self.y * self.g, float(self.beta @ self.g)
