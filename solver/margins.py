"""Margin-distribution statistics of a margin vector m_i = y_i f(x_i), for any classifier.

Everything returned is plain JSON (floats, ints, lists), so the service can store and serve it
without conversion. The definitions follow the paper: mean = theta-hat, semi-variance
SV = mean((theta-hat - m)_+^2) (population, divides by n), and the paper's objective SV/theta-hat^2.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

QUANTILE_LEVELS: tuple[int, ...] = (5, 10, 25, 50, 75, 90, 95)


def semivariance(m: np.ndarray) -> float:
    """Lower semi-variance about the mean, divided by n (the paper's SV-hat)."""
    below = np.minimum(m - m.mean(), 0.0)
    return float(below @ below / m.size)


def label_margins(decision: np.ndarray, index: np.ndarray) -> np.ndarray:
    """(n,) the margin of each row for the class ``index[i]`` (its column in ``classes_``):
    binary (``decision`` of shape (n,)) y f(x) with y = +1 for class 1 and -1 for class 0;
    multi-class (n, k) f_label(x) - max_{j != label} f_j(x)."""
    index = np.asarray(index)
    if decision.ndim == 1:
        return np.where(index == 1, decision, -decision)
    rows = np.arange(decision.shape[0])
    others = decision.copy()
    others[rows, index] = -np.inf
    return decision[rows, index] - others.max(axis=1)


def margin_statistics(m: ArrayLike, *, bins: int = 20, cdf_points: int = 101) -> dict:
    """Statistics of a margin vector.

    Parameters
    ----------
    m : array of shape (n,)
        Margins y_i f(x_i). Must be finite and non-empty.
    bins : int
        Number of equal-width histogram bins over [min, max].
    cdf_points : int
        Number of points of the empirical CDF returned for plotting (the CDF is evaluated at
        evenly spaced margins between min and max; with fewer distinct margins the jumps are exact).

    Returns
    -------
    dict with n, mean, semivariance, sv_ratio (SV / mean^2; None when mean <= 0), variance, std
    (both population, ddof=0), min, max, quantiles (keys "5".."95", linear interpolation),
    frac_nonpositive (share of m_i <= 0, i.e. misclassified or on the boundary),
    histogram {"edges", "counts"} and cdf {"x", "p"} with p = share of margins <= x.
    """
    m = np.asarray(m, dtype=np.float64).ravel()
    if m.size == 0:
        raise ValueError("margins: need at least one margin")
    if not np.all(np.isfinite(m)):
        raise ValueError("margins: contain NaN or infinity")
    n = m.size
    mean = float(m.mean())
    sv = semivariance(m)
    var = float(m.var())
    lo, hi = float(m.min()), float(m.max())
    counts, edges = np.histogram(m, bins=bins, range=(lo, hi) if hi > lo else (lo - 0.5, hi + 0.5))
    xs = np.linspace(lo, hi, cdf_points) if hi > lo else np.array([lo])
    sorted_m = np.sort(m)
    p = np.searchsorted(sorted_m, xs, side="right") / n
    return {
        "n": int(n),
        "mean": mean,
        "semivariance": sv,
        "sv_ratio": sv / mean**2 if mean > 0 else None,
        "variance": var,
        "std": math.sqrt(var),
        "min": lo,
        "max": hi,
        "quantiles": {str(q): float(v) for q, v in zip(QUANTILE_LEVELS,
                                                        np.percentile(m, QUANTILE_LEVELS),
                                                        strict=True)},
        "frac_nonpositive": float(np.count_nonzero(m <= 0) / n),
        "histogram": {"edges": edges.tolist(), "counts": counts.astype(int).tolist()},
        "cdf": {"x": xs.tolist(), "p": p.tolist()},
    }


def linear_rademacher_terms(X_aug_norms: np.ndarray, n: int) -> dict:
    """Theorem 1's data-dependent terms for a unit-norm linear model: r = max ||x||, r / sqrt(n)."""
    r = float(X_aug_norms.max()) if X_aug_norms.size else 0.0
    return {"radius": r, "rademacher_bound": r / math.sqrt(n)}


def kernel_rademacher_terms(K_diag: np.ndarray) -> dict:
    """Theorem 1's data-dependent term for ||f||_H = 1: (2/n) sqrt(sum_i K_ii)."""
    return kernel_rademacher_sums(float(K_diag.sum()), float(K_diag.max()), K_diag.size)


def kernel_rademacher_sums(total: float, largest: float, n: int) -> dict:
    """``kernel_rademacher_terms`` from sum_i K_ii, max_i K_ii and n (summed by parts)."""
    return {"radius": float(math.sqrt(largest)),
            "rademacher_bound": 2.0 / n * math.sqrt(total)}
