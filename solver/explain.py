"""Per-row explanations of decision values, complete by construction:

    baseline_decision + values.sum(axis=1) == decision_function(X)

* **linear** models (f(x) = w.x + b): exactly w_j (x_j - baseline_j).
* **RBF** kernel expansions (f(x) = sum_i a_i exp(-gamma ||x - z_i||^2) + b: MSVMAv exact,
  low-rank and Nystroem, and the comparators' kernel models): integrated gradients along the
  straight path x(t) = baseline + t (x - baseline), t in [0, 1], with the RBF kernel's analytic
  gradient, integrated **in closed form**: along the path each kernel term is a Gaussian in t,
  so its integral is an erf (computed through erfcx, without overflow or cancellation), and

      values_j = -2 gamma delta_j sum_i a_i [(b_j - z_ij) I0_i + delta_j I1_i],
      I0_i = int_0^1 g_i(t) dt,  I1_i = int_0^1 t g_i(t) dt,  g_i(t) = k(x(t), z_i).

  Their sum telescopes to sum_i a_i (g_i(1) - g_i(0)) = f(x) - f(baseline): complete up to
  rounding (measured in ``Explanation.completeness_error``), no quadrature error.
* **polynomial** kernels: the same integrated gradients; along the path the gradient is a
  polynomial of degree ``degree - 1`` in t, integrated exactly by ceil(degree / 2)
  Gauss-Legendre nodes (``steps`` may ask for more).

A "precomputed" kernel has no feature space to explain. ``explain_work`` is the cost bound
(multiply-adds) a caller checks before starting; ``permutation_importance`` is the model-level
counterpart (scikit-learn's ``sklearn.inspection.permutation_importance``; feature groups, such as
one-hot columns of one raw column, permuted together).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse, special
from sklearn.inspection import permutation_importance as sk_permutation_importance
from sklearn.metrics import check_scoring
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .kernels import RBF, Kernel

# Rows explained at a time (kernel methods hold a few rows x expansion-size arrays).
BLOCK_ROWS = 256


@dataclass
class Explanation:
    """Contributions of each feature to each row's decision value.

    values: (n, d) for one decision value per row (two classes), (n, d, k) one-vs-rest;
    baseline: (d,) the point the path starts from; baseline_decision: float or (k,);
    decision: the rows' decision values ((n,) or (n, k)); method: "linear",
    "integrated-gradients-rbf" or "integrated-gradients-poly"; completeness_error: the largest
    |baseline_decision + values.sum(axis=1) - decision| over rows (and outputs)."""

    values: np.ndarray
    baseline: np.ndarray
    baseline_decision: float | np.ndarray
    decision: np.ndarray
    method: str
    completeness_error: float


def _kind(estimator) -> type[Kernel]:
    kind = estimator.kernel_kind
    if kind.explanation is None:
        raise ValueError(f"kernel: a {kind.name!r} model cannot be explained per feature (it "
                         "has no feature rows); explain a model fitted on features")
    return kind


def _closed_form(kind: type[Kernel]) -> bool:
    """Whether the path integral has a closed form (the RBF kernel's); else Gauss-Legendre."""
    return issubclass(kind, RBF)


def _outputs(estimator) -> int:
    return 1 if np.asarray(estimator.classes_).size == 2 else np.asarray(estimator.classes_).size


def _nodes(estimator, steps: int | None) -> int:
    exact = max(1, math.ceil(int(estimator.degree) / 2))
    return exact if steps is None else max(exact, int(steps))


def explain_work(estimator, n_rows: int, steps: int | None = None) -> int:
    """Multiply-adds ``contributions`` of n_rows rows costs on this model (a bound to check
    before starting): linear n d T; RBF n m d (T + 1); polynomial nodes x that, with m the
    expansion rows, d the features, T the decision values per row."""
    check_is_fitted(estimator)
    kind = _kind(estimator)
    d, T = int(estimator.n_features_in_), _outputs(estimator)
    if kind.primal:
        return int(n_rows) * d * T
    m = int(np.asarray(estimator.X_fit_).shape[0])
    per_row = m * d * (T + 1)
    return int(n_rows) * per_row * (1 if _closed_form(kind) else _nodes(estimator, steps))


def _baseline(estimator, baseline) -> np.ndarray:
    d = int(estimator.n_features_in_)
    if baseline is None:
        baseline = getattr(estimator, "feature_means_", None)
        if baseline is None:
            raise ValueError("baseline: the model has no stored training means "
                             "(feature_means_); pass a baseline of length "
                             f"{d}")
    b = np.asarray(baseline, dtype=np.float64).ravel()
    if b.shape != (d,) or not np.all(np.isfinite(b)):
        raise ValueError(f"baseline: expected {d} finite values, got shape {b.shape}")
    return b


def _expansion(estimator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Z (m, d), A (m, T), intercept (T,)) of f(x) = k(x, Z) @ A + intercept."""
    A = np.asarray(estimator.dual_coef_, dtype=np.float64)
    A = A[:, None] if A.ndim == 1 else A
    b = getattr(estimator, "intercept_", None)
    b = np.zeros(A.shape[1]) if b is None else np.asarray(b, dtype=np.float64)
    return np.asarray(estimator.X_fit_, dtype=np.float64), A, b


def _rbf_integrals(P: np.ndarray, q: np.ndarray, c: np.ndarray, g0: np.ndarray,
                   g1: np.ndarray, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """I0 = int_0^1 g dt and I1 = int_0^1 t g dt for g(t) = exp(-gamma (q t^2 + 2 P t + c)),
    per row (q (B,), P (B, m)) and expansion row (c (m,)); g0 = g(0) (m,), g1 = g(1) (B, m).
    Rows with q = 0 get 0."""
    g0 = g0[None, :]
    qs = np.where(q > 0, q, 1.0)[:, None]
    s = np.sqrt(gamma * qs)
    lo = np.sqrt(gamma) * P / np.sqrt(qs)  # the Gaussian's argument at t = 0 and t = 1
    hi = lo + s
    I0 = np.empty_like(P)
    right, left = lo >= 0, hi <= 0
    mid = ~(right | left)
    # erf(hi) - erf(lo) written so that no exponential overflows and no two close numbers
    # are subtracted: through erfcx on one side of the Gaussian's peak, erf across it
    I0[right] = (g0 * special.erfcx(lo))[right] - (g1 * special.erfcx(hi))[right]
    I0[left] = (g1 * special.erfcx(-hi))[left] - (g0 * special.erfcx(-lo))[left]
    line = np.minimum(0.0, -gamma * (c[None, :] - P * P / qs))  # -gamma dist(z_i, line)^2
    I0[mid] = (np.exp(line) * (special.erf(hi) - special.erf(lo)))[mid]
    I0 *= math.sqrt(math.pi) / (2.0 * s)
    # d/dt g = -2 gamma (q t + P) g integrates to g(1) - g(0): I1 from I0
    I1 = ((g0 - g1) / (2.0 * gamma) - P * I0) / qs
    zero = q <= 0
    I0[zero], I1[zero] = 0.0, 0.0
    return I0, I1


def _rbf_block(Xb: np.ndarray, b: np.ndarray, Z: np.ndarray, A: np.ndarray,
               kernel: RBF) -> np.ndarray:
    """(B, d, T) integrated gradients of an RBF expansion for the rows Xb."""
    gamma = kernel.gamma
    delta = Xb - b
    q = np.einsum("ij,ij->i", delta, delta)
    bz = b[None, :] - Z  # (m, d)
    c = np.einsum("ij,ij->i", bz, bz)
    P = delta @ bz.T  # (B, m): (b - z_i) . delta
    # the ends' kernel values as the model computes them: the sum telescopes to its f(x) - f(b)
    g0 = kernel.matrix(b[None, :], Z)[0]
    g1 = kernel.matrix(Xb, Z)
    I0, I1 = _rbf_integrals(P, q, c, g0, g1, gamma)
    out = np.empty((Xb.shape[0], Xb.shape[1], A.shape[1]))
    for t in range(A.shape[1]):
        W0 = I0 * A[:, t]
        # sum_i a_i I0_i (b_j - z_ij) = b_j (W0 1) - (W0 Z)_j
        inner = (W0.sum(axis=1)[:, None] * b[None, :] - W0 @ Z
                 + delta * (I1 @ A[:, t])[:, None])
        out[:, :, t] = -2.0 * gamma * delta * inner
    return out


def _quadrature_block(Xb: np.ndarray, b: np.ndarray, Z: np.ndarray, A: np.ndarray,
                      kernel: Kernel, nodes: int) -> np.ndarray:
    """(B, d, T) integrated gradients of a kernel expansion (the polynomial one: exact for
    ceil(degree / 2) nodes), Gauss-Legendre in t over the kernel's ``expansion_gradient``."""
    delta = Xb - b
    t, w = np.polynomial.legendre.leggauss(nodes)
    t, w = (t + 1.0) / 2.0, w / 2.0  # on [0, 1]
    out = np.zeros((Xb.shape[0], Xb.shape[1], A.shape[1]))
    for tk, wk in zip(t, w, strict=True):
        out += wk * kernel.expansion_gradient(b[None, :] + tk * delta, Z, A)
    return out * delta[:, :, None]


def contributions(estimator, X, baseline=None, steps: int | None = None) -> Explanation:
    """Each feature's contribution to each row's decision value (see the module doc).

    X: (n, d) rows as the estimator takes them (dense or CSR; explained densely, a block of
    rows at a time); baseline: (d,) or None for the training means ``feature_means_``;
    steps: Gauss-Legendre nodes for polynomial kernels (at least the exact number)."""
    check_is_fitted(estimator)
    kind = _kind(estimator)
    Xv = estimator._validated(X)
    b = _baseline(estimator, baseline)
    D = estimator.decision_values(Xv)
    D0 = estimator.decision_values(b[None, :])[0]
    T = _outputs(estimator)
    n, d = Xv.shape
    values = np.empty((n, d, T))
    if not kind.primal:
        Z, A, _ = _expansion(estimator)
        kernel = estimator.kernel_
    for start in range(0, n, BLOCK_ROWS):
        Xb = Xv[start:start + BLOCK_ROWS]
        Xb = Xb.toarray() if sparse.issparse(Xb) else np.asarray(Xb)
        if kind.primal:
            block = (Xb - b)[:, :, None] * np.asarray(estimator.coef_).T[None, :, :]
        elif _closed_form(kind):
            block = _rbf_block(Xb, b, Z, A, kernel)
        else:
            block = _quadrature_block(Xb, b, Z, A, kernel, _nodes(estimator, steps))
        values[start:start + Xb.shape[0]] = block
    if T == 1:
        values = values[:, :, 0]
    residual = (D0 + values.sum(axis=1)) - D
    error = float(np.max(np.abs(residual))) if residual.size else 0.0
    method = kind.explanation
    return Explanation(values, b, float(D0) if T == 1 else np.asarray(D0), D, method, error)


def permutation_importance(estimator, X, y, *, groups: list[list[int]] | None = None,
                           n_repeats: int = 5, random_state: int | None = 0,
                           scoring: str | None = None) -> dict[str, np.ndarray]:
    """Model-level importance: the drop of ``scoring`` (default the estimator's accuracy) when
    a feature's values are shuffled across rows, over ``n_repeats`` shuffles.

    Without ``groups``: scikit-learn's ``permutation_importance`` per feature. With ``groups``
    (lists of column indices, e.g. the one-hot columns of one raw column): each group's columns
    shuffled together (the same row permutation). Returns {"importances_mean",
    "importances_std", "importances" (n_groups, n_repeats)}."""
    if groups is None:
        result = sk_permutation_importance(estimator, X, y, scoring=scoring,
                                           n_repeats=n_repeats, random_state=random_state)
        return {key: np.asarray(result[key]) for key in
                ("importances_mean", "importances_std", "importances")}
    scorer = check_scoring(estimator, scoring=scoring)
    X = X.toarray() if sparse.issparse(X) else np.array(X, dtype=np.float64)
    y = np.asarray(y)
    base = scorer(estimator, X, y)
    rng = check_random_state(random_state)
    scores = np.empty((len(groups), n_repeats))
    for g, cols in enumerate(groups):
        original = X[:, cols].copy()
        for r in range(n_repeats):
            X[:, cols] = original[rng.permutation(X.shape[0])]
            scores[g, r] = base - scorer(estimator, X, y)
        X[:, cols] = original
    return {"importances_mean": scores.mean(axis=1), "importances_std": scores.std(axis=1),
            "importances": scores}


__all__ = ["BLOCK_ROWS", "Explanation", "contributions", "explain_work",
           "permutation_importance"]
