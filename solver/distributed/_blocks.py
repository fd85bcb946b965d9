"""What runs on the Dask workers: functions of one row block (a partition) of the training data.

Each takes a block ``part`` = (X, y): its augmented rows ``X`` (dense float64 or CSR, the
constant-1 column last when the fit has an intercept) and its labels ``y`` (one future holds
both, so that a task never fetches one from another worker), and the one-vs-rest task's
``positive`` label
(targets t_i = +1 where y_i == positive, -1 elsewhere, as ``MarginClassifier.fit`` builds them),
and returns sums over the block's rows; ``add`` (and ``merge_summaries``) combine two blocks'
sums. Nothing here keeps state between calls: the active set of a block is a function of
(w, theta) and of the block, so a lost block is recomputed from its source and the same
arguments (``_cluster``).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from ..msvmav import augment


def prepare(X, y, bias: bool) -> tuple:
    """The block as the fit reads it: (X as float64, CSR with duplicates summed, the
    constant-1 column appended with ``bias`` (``msvmav.augment``); y as an array)."""
    if sparse.issparse(X):
        X = sparse.csr_matrix(X, dtype=np.float64, copy=True)
        X.sum_duplicates()
    else:
        X = np.asarray(X, dtype=np.float64)
    return (augment(X) if bias else X), np.asarray(y)


def summarise_block(part: tuple, d: int) -> dict:
    """Rows, column sums of the first d columns, largest |x|, whether all are finite, labels,
    whether the block is sparse and its stored values (of the d columns)."""
    X, y = part
    is_sparse = sparse.issparse(X)
    values = X.data if is_sparse else X
    finite = bool(np.isfinite(values).all())
    stored = int(X[:, :d].nnz) if is_sparse else int(X.shape[0]) * d
    return {"n": int(X.shape[0]), "sparse": is_sparse, "stored": stored,
            "sums": np.asarray(X[:, :d].sum(axis=0), dtype=np.float64).ravel(),
            "largest": float(np.max(np.abs(values))) if values.size and finite else 0.0,
            "finite": finite, "labels": np.unique(np.asarray(y))}


def merge_summaries(*parts: dict) -> dict:
    out = dict(parts[0])
    for part in parts[1:]:
        out = {"n": out["n"] + part["n"], "sparse": out["sparse"] or part["sparse"],
               "stored": out["stored"] + part["stored"], "sums": out["sums"] + part["sums"],
               "largest": max(out["largest"], part["largest"]),
               "finite": out["finite"] and part["finite"],
               "labels": np.union1d(out["labels"], part["labels"])}
    return out


def add(*parts):
    """The sum of blocks' results: arrays and numbers, or dicts of them, key by key."""
    first = parts[0]
    if isinstance(first, dict):
        return {key: add(*(part[key] for part in parts)) for key in first}
    total = first.copy() if isinstance(first, np.ndarray) else first
    for part in parts[1:]:
        total = total + part
    return total


def targets(y: np.ndarray, positive) -> np.ndarray:
    return np.where(np.asarray(y) == positive, 1.0, -1.0)


def shift(part: tuple, positive) -> np.ndarray:
    """X^T t, the block's share of the average-margin direction s."""
    X, y = part
    return np.asarray(X.T @ targets(y, positive), dtype=np.float64).ravel()


def _active(X, t: np.ndarray, w: np.ndarray, theta: float) -> tuple[np.ndarray, float]:
    """(the mask of the block's rows with margin t_i x_i . w < theta, their sum of
    (theta - m_i)^2), as ``_margin_bounds.below``."""
    dev = theta - t * np.asarray(X @ w).ravel()
    mask = dev > 0
    np.maximum(dev, 0.0, out=dev)
    return mask, float(dev @ dev)


def _signed_gram(X, rows: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """sum_k sign_k x_{rows_k} x_{rows_k}^T, dense D x D."""
    U = X[rows]
    if sparse.issparse(U):
        return np.asarray((U.T @ U.multiply(sign[:, None]).tocsr()).toarray())
    return U.T @ (U * sign[:, None])


def gram_stats(part: tuple, positive, w: np.ndarray, theta: float,
               before: tuple[np.ndarray, float] | None = None) -> dict:
    """The block's |A|, sum_A (theta - m_i)^2, and G_A = X_A^T X_A, s_A = X_A^T t_A for
    A = {i : m_i < theta}; or, given ``before`` = (w', theta') of the previous set A', the
    changes G_A - G_A' and s_A - s_A' (summed over the rows that entered or left)."""
    X, y = part
    t = targets(y, positive)
    mask, sv = _active(X, t, w, theta)
    if before is None:
        rows, sign = np.flatnonzero(mask), np.ones(int(mask.sum()))
    else:
        old, _ = _active(X, t, *before)
        rows = np.flatnonzero(mask != old)
        sign = np.where(mask[rows], 1.0, -1.0)
    s = np.asarray(X[rows].T @ (sign * t[rows]), dtype=np.float64).ravel()
    return {"count": int(mask.sum()), "sv": sv, "G": _signed_gram(X, rows, sign), "s": s}


def active_stats(part: tuple, positive, w: np.ndarray, theta: float,
                 bias: bool) -> tuple[np.ndarray, dict]:
    """(the block's mask of A, kept on its worker for the products), and its |A|,
    sum_A (theta - m_i)^2, s_A = X_A^T t_A, diag(X_A^T X_A) and, with ``bias``, X_A^T 1_A."""
    X, y = part
    t = targets(y, positive)
    mask, sv = _active(X, t, w, theta)
    weights = mask.astype(np.float64)
    squares = X.multiply(X).T @ weights if sparse.issparse(X) else weights @ (X * X)
    stats = {"count": int(mask.sum()), "sv": sv,
             "s": np.asarray(X.T @ (weights * t), dtype=np.float64).ravel(),
             "squares": np.asarray(squares, dtype=np.float64).ravel(),
             "ones": np.asarray(X.T @ weights, dtype=np.float64).ravel() if bias
             else np.zeros(0)}
    return mask, stats


def product(part: tuple, mask: np.ndarray, v: np.ndarray) -> np.ndarray:
    """X_A^T X_A v over the block's rows of A."""
    X = part[0]
    Xv = np.asarray(X @ v).ravel()
    Xv *= mask
    return np.asarray(X.T @ Xv, dtype=np.float64).ravel()


def identity(value):
    """A task that holds ``value`` (a vector every block reads): computed once, fetched by
    the other workers, and recomputed from its task if its worker is lost (unlike scatter)."""
    return value
