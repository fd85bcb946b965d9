"""Label-prior shift: the window's class priors estimated from its calibrated probabilities
alone, and the accuracy they imply, beside the confidence-based estimate, which a label shift
breaks (issue 47).

Maximum-likelihood label shift (MLLS: the EM fixed point of Saerens, Latinne and Decaestecker,
Neural Computation 2002; Alexandari, Kundaje and Shrikumar, ICML 2020, found it more accurate
than the confusion-matrix BBSE of Lipton et al. 2018, and so it was here: on magic's balanced
windows BBSE's priors stayed at 0.40–0.44 for a true 0.50, MLLS gave 0.47–0.50). If the window
differs from the reference only in its class priors q (P(x | y) fixed), a row's probabilities
become P_q(y | x) ∝ (q_y / p_y) P(y | x), p the reference rows' class shares; q maximises the
window's likelihood Σ_i log Σ_y (q_y / p_y) P(y | x_i), found by EM (q ← mean of P_q(y | x)).
The accuracy this reading gives is the mean of P_q(predicted | x); at q = p it is the
confidence-based estimate itself. Its 95 % interval for the realised accuracy (delta method)
adds the variance of q (the inverse of the likelihood's observed information) carried through
the accuracy, and the window's own spread if each row is right with its P_q(predicted | x),
Σ a(1 − a)/n²; ``expected_low``, ``expected_high`` take the first alone: the accuracies the
priors the window cannot rule out would lead one to expect. ``p_value``: the likelihood-ratio test
of q = p (χ² with k − 1 degrees of freedom). At most ``ROWS`` rows (a seeded subsample) are
used. It assumes P(x | y) did not move and the probabilities were calibrated on the reference;
a covariate shift also moves q, and then the estimate says what the accuracy would be had the
classes moved instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

ROWS = 20_000  # window rows the estimate uses at most (a seeded subsample)
MAX_ITER = 1_000
TOL = 1e-7  # EM stops when no prior moves by more than this
FREE = 1e-6  # priors below this are at the simplex's edge: not free in the interval
SEED = 0


def _em(r: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The q maximising Σ log (r q), r = P / p (EM from q = p)."""
    q = p.copy()
    for _ in range(MAX_ITER):
        q_new = q * np.mean(r / (r @ q)[:, None], axis=0)
        moved = float(np.max(np.abs(q_new - q)))
        q = q_new
        if moved < TOL:
            break
    return q / q.sum()


def _accuracy(r: np.ndarray, q: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Each row's P_q(predicted | x)."""
    rows = np.arange(r.shape[0])
    return q[predicted] * r[rows, predicted] / (r @ q)


def _variance_of_q(r: np.ndarray, q: np.ndarray, predicted: np.ndarray) -> float:
    """The accuracy's variance through q's (delta method over the free priors, one of them
    written as 1 minus the others)."""
    free = np.flatnonzero(q > FREE)
    if free.size < 2:
        return 0.0
    base, others = free[0], free[1:]
    D = (r[:, others] - r[:, [base]]) / (r @ q)[:, None]
    grad = np.empty(others.size)
    for j, c in enumerate(others):
        step = np.zeros_like(q)
        step[c], step[base] = 1e-6, -1e-6
        grad[j] = (np.mean(_accuracy(r, q + step, predicted))
                   - np.mean(_accuracy(r, q - step, predicted))) / 2e-6
    return float(max(grad @ np.linalg.pinv(D.T @ D) @ grad, 0.0))


def estimate(proba: np.ndarray, predicted: np.ndarray, priors: np.ndarray,
             alpha: float = 0.05) -> dict[str, Any] | None:
    """{"method": "mlls", estimate, low, high, expected_low, expected_high, p_value,
    priors_reference, priors_window, n} of a window of calibrated probabilities ``proba``
    (n, k) and predicted class indices (``expected_low``, ``expected_high``: the interval of
    the accuracy expected under the priors, from their uncertainty alone);
    ``priors`` the reference rows' class shares. None without rows, or when a class has no
    reference row."""
    priors = np.asarray(priors, dtype=np.float64)
    n = int(predicted.size)
    if n == 0 or priors.size != proba.shape[1] or np.any(priors <= 0):
        return None
    if n > ROWS:
        keep = np.sort(np.random.default_rng(SEED).choice(n, ROWS, replace=False))
        proba, predicted = proba[keep], predicted[keep]
    r = np.clip(np.asarray(proba, dtype=np.float64), 1e-12, None) / priors
    q = _em(r, priors)
    per_row = _accuracy(r, q, predicted)
    acc = float(np.mean(per_row))
    spread = float(np.sum(per_row * (1.0 - per_row))) / per_row.size**2
    var_q = _variance_of_q(r, q, predicted)
    z = float(stats.norm.ppf(1.0 - alpha / 2.0))
    half, half_q = z * np.sqrt(var_q + spread), z * np.sqrt(var_q)
    ratio = 2.0 * float(np.sum(np.log(r @ q)))  # the log-likelihood at q = p is 0
    return {"method": "mlls", "estimate": acc, "low": max(0.0, acc - half),
            "high": min(1.0, acc + half), "expected_low": max(0.0, acc - half_q),
            "expected_high": min(1.0, acc + half_q),
            "p_value": float(stats.chi2.sf(max(ratio, 0.0), priors.size - 1)),
            "priors_reference": priors.tolist(), "priors_window": q.tolist(), "n": n}
