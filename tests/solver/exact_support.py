"""The naive reference MSVMAv and its tolerances the exactness tests share (test_msvmav_exact,
test_linear_solvers, test_margin_bounds), and a planted sparse problem (test_margin_bounds,
test_linear_step_protocol)."""

from __future__ import annotations

import numpy as np
from scipy import sparse

# the naive loops' rule: the authors' step below 1e-8
STEP = {"stop": "step", "tol": 1e-8}


def naive_linear(X, y, alpha, beta, T=100, tol=1e-8, intercept=True):
    Xa = np.hstack([X, np.ones((X.shape[0], 1))]) if intercept else X
    n, D = Xa.shape
    s = Xa.T @ y
    w = s / np.linalg.norm(s)
    flips, thetas = 0, []
    for _ in range(T):
        marg = y * (Xa @ w)
        th = marg.mean()
        A = marg < th
        rhs = w + th / (n * beta) * Xa[A].T @ y[A]
        wp = np.linalg.solve(np.eye(D) + Xa[A].T @ Xa[A] / (n * beta), rhs)
        if np.mean(y * (Xa @ wp)) < 0:
            wp, flips = -wp, flips + 1
        wn = wp + s / (2 * alpha * n)
        wn /= np.linalg.norm(wn)
        done = np.linalg.norm(wn - w) / np.sqrt(D) < tol
        w = wn
        thetas.append(np.mean(y * (Xa @ w)))
        if done:
            break
    return w, len(thetas), flips, thetas


def rel(a, b):
    return np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(b)


PARAMS = [(16, 0.25), (1.0, 1.0), (2**-6, 2**4), (2**8, 2**-8), (1e-2, 1e-3)]


def planted(n: int = 4000, d: int = 700, per_row: int = 30, seed: int = 0):
    """CSR rows of per_row values in [0, 1), labels from a planted linear rule, 5% flipped
    (bench/wide.py's kind of data, smaller): "auto" keeps the Gram matrix."""
    rng = np.random.default_rng(seed)
    X = sparse.random(n, d, density=per_row / d, format="csr", random_state=seed)
    score = X @ rng.normal(size=d)
    y = np.where(score > np.median(score), 1, -1)
    flip = rng.random(n) < 0.05
    y[flip] = -y[flip]
    return X, y
