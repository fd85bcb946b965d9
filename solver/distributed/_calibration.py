"""Probabilities for a model fitted on a Dask cluster, and its evaluation on partitions it
did not train on (issue 46), the rows never gathered.

``calibrate_on_cluster`` gives a cluster fit what ``MarginClassifier._fit_calibrator`` gives a
local one (``solver.calibration``), with folds of partitions instead of rows:

1. the row blocks are dealt into ``min(CALIBRATION_FOLDS, blocks)`` folds by a permutation of
   the block indices seeded by ``random_state`` (0 when None): fold k holds the blocks at
   positions k, k + folds, ...; a clone (calibration="none") is fitted on the cluster on the
   other folds' blocks and scores fold k's blocks on their workers, where the out-of-fold
   decision values stay (8 bytes a row and class);
2. ``"sigmoid"``: Platt's (a, b) minimise the same smoothed log loss as ``platt_sigmoid``, by
   the same scipy trust-region solver from the same start, each evaluation of the loss, its
   gradient and Hessian one reduce over the blocks (exact sums): the local calibrator on the
   gathered values up to summation order;
3. ``"isotonic"``: scikit-learn's IsotonicRegression on the out-of-fold values gathered to this
   process when there are at most ISOTONIC_ROWS of them (then exactly ``isotonic_map``), else
   on a uniform sample of about ISOTONIC_ROWS of them (each row kept with probability
   ISOTONIC_ROWS / n, seeded by block): memory bounded, and a calibrator from a sample.

The calibrated model labels by its most probable class, as a local calibrated model does
(``MarginClassifier.predicted_index``): the label and the probabilities never disagree.

``cluster_evaluation``: accuracy, log loss, Brier score, expected calibration error (top label,
``solver.evaluation``'s bins) and the confusion counts of a fitted model on
row-chunked dask arrays (e.g. a hold-out set of partitions), each an exact reduce of counts and
sums over the blocks; the ranking metrics (ROC, PR), which need the rows sorted, are not
computed there.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import optimize, special
from sklearn.base import clone

from ..calibration import CALIBRATION_FOLDS, Calibrator, isotonic_map
from ..evaluation import N_BINS
from . import _blocks

#: out-of-fold values the isotonic calibrator is fitted on here (all of them up to this many)
ISOTONIC_ROWS = 1_000_000


def block_folds(n_blocks: int, folds: int = CALIBRATION_FOLDS,
                random_state: int | None = 0) -> list[np.ndarray]:
    """The blocks' indices of each fold: a seeded permutation dealt round-robin into
    ``min(folds, n_blocks)`` folds. ValueError with fewer than 2 blocks."""
    if n_blocks < 2:
        raise ValueError("calibration: the cluster's folds are of partitions (blocks) and "
                         f"need at least 2, got {n_blocks}; use calibration='none' or split "
                         "the data into more partitions")
    order = np.random.default_rng(0 if random_state is None else random_state).permutation(
        n_blocks)
    k = min(folds, n_blocks)
    return [np.sort(order[j::k]) for j in range(k)]


def _seed(estimator: Any) -> int:
    seed = getattr(estimator, "random_state", None)
    return int(seed) if isinstance(seed, int | np.integer) else 0


def _blocks_of(X: Any, y: Any, index: np.ndarray) -> tuple[Any, Any]:
    import dask.array as da

    return (da.concatenate([X.blocks[int(i)] for i in index]),
            da.concatenate([y.blocks[int(i)] for i in index]))


def oof_block(model: Any, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """A held-out block's decision values under ``model`` and its labels (kept on its worker)."""
    return np.asarray(model.decision_function(X), dtype=np.float64), np.asarray(y)


def out_of_fold(estimator: Any, X: Any, y: Any, client: Any, fit: Any,
                callback: Any = None) -> list | None:
    """For each block, in block order, a future of (its out-of-fold decision values, labels):
    each fold's blocks scored by a clone fitted by ``fit(clone, X, y, callback)`` on the other
    folds. None when the callback stopped a fold's fit."""
    import dask

    parts: list = [None] * len(X.chunks[0])
    try:
        for test in block_folds(len(X.chunks[0]), random_state=_seed(estimator)):
            train = np.setdiff1d(np.arange(len(X.chunks[0])), test)
            est = fit(clone(estimator).set_params(calibration="none"),
                      *_blocks_of(X, y, train), callback)
            if getattr(est, "stopped_early_", False):
                raise _Stopped
            held = client.submit(_blocks.identity, est, pure=False)
            xs = X.to_delayed(optimize_graph=False).ravel()
            ys = y.to_delayed(optimize_graph=False).ravel()
            graph = [dask.delayed(oof_block, pure=False)(held, xs[i], ys[i]) for i in test]
            for i, future in zip(test, client.compute(graph, optimize_graph=False),
                                 strict=True):
                parts[int(i)] = future
            held.release()
    except _Stopped:
        _release(parts)
        return None
    except BaseException:
        _release(parts)
        raise
    return parts


class _Stopped(Exception):  # noqa: N818 - a signal, handled in this module
    """The callback stopped a fold's fit."""


def _release(parts: list) -> None:
    for future in parts:
        if future is not None:
            future.release()


def counts_block(part: tuple, column: int, positive: Any) -> dict:
    """|f| max, positives and rows of one block's column ``column`` (-1: a 1-D decision)."""
    f = _column(part[0], column)
    return {"n": int(f.size), "pos": int(np.count_nonzero(np.asarray(part[1]) == positive)),
            "scale": float(np.max(np.abs(f))) if f.size else 0.0}


def _column(D: np.ndarray, column: int) -> np.ndarray:
    return D if column < 0 else D[:, column]


def merge_counts(*parts: dict) -> dict:
    return {"n": sum(p["n"] for p in parts), "pos": sum(p["pos"] for p in parts),
            "scale": max(p["scale"] for p in parts)}


def platt_block(part: tuple, column: int, positive: Any, ab: np.ndarray, scale: float,
                targets: tuple[float, float]) -> dict:
    """The block's share of ``platt_sigmoid``'s loss, gradient and Hessian at ``ab``."""
    g = _column(part[0], column) / scale
    t = np.where(np.asarray(part[1]) == positive, targets[0], targets[1])
    z = ab[0] * g + ab[1]
    s = special.expit(z)
    r = s - (1.0 - t)
    w = s * (1.0 - s)
    return {"loss": float(np.sum(np.logaddexp(0.0, z) - (1.0 - t) * z)),
            "grad": np.array([r @ g, r.sum()]),
            "hess": np.array([[w @ (g * g), w @ g], [w @ g, w.sum()]])}


def cluster_platt(rows: Any, column: int, positive: Any) -> dict[str, float]:
    """``platt_sigmoid`` over the blocks' out-of-fold values (one reduce an evaluation)."""
    counts = rows.reduce(counts_block, combine=merge_counts, column=column, positive=positive)
    n_pos, n_neg = float(counts["pos"]), float(counts["n"] - counts["pos"])
    targets = ((n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    scale = counts["scale"] if counts["scale"] > 0 else 1.0
    memo: dict = {}

    def at(ab: np.ndarray) -> dict:
        key = tuple(float(v) for v in ab)
        if key not in memo:
            memo.clear()
            memo[key] = rows.reduce(platt_block, column=column, positive=positive,
                                    ab=np.array(key), scale=scale, targets=targets)
        return memo[key]

    prior = np.log((n_neg + 1.0) / (n_pos + 1.0))
    result = optimize.minimize(lambda ab: at(ab)["loss"], np.array([0.0, prior]),
                               jac=lambda ab: at(ab)["grad"], hess=lambda ab: at(ab)["hess"],
                               method="trust-exact", options={"gtol": 1e-10})
    a, b = result.x
    return {"a": float(a / scale), "b": float(b)}


def sample_block(part: tuple, block: tuple, column: int, positive: Any,
                 share: float) -> tuple[np.ndarray, np.ndarray]:
    """The block's values of ``column`` and whether each is ``positive``: every row, or each
    kept with probability ``share`` (seeded by the block's index)."""
    f, positives = _column(part[0], column), np.asarray(part[1]) == positive
    if share < 1.0:
        keep = np.random.default_rng([int(block[1]), 46]).random(f.size) < share
        f, positives = f[keep], positives[keep]
    return f, positives


def cluster_isotonic(rows: Any, column: int, positive: Any) -> dict[str, np.ndarray]:
    """``isotonic_map`` on the out-of-fold values gathered here (a sample of about
    ISOTONIC_ROWS of them when there are more)."""
    n = rows.reduce(counts_block, combine=merge_counts, column=column, positive=positive)["n"]
    share = min(1.0, ISOTONIC_ROWS / n) if n else 1.0

    def run() -> list:
        futures = rows.map(sample_block, blocks=rows.names, column=column, positive=positive,
                           share=share)
        rows.wait(futures)
        return rows.client.gather(futures)

    parts = rows.again(run)
    f = np.concatenate([p[0] for p in parts])
    positives = np.concatenate([p[1] for p in parts])
    return isotonic_map(f, positives)


def fit_cluster_calibrator(parts: list, client: Any, classes: np.ndarray,
                           method: str) -> Calibrator:
    """The ``method`` calibrator on the out-of-fold futures ``parts`` (``out_of_fold``), one
    map per class as ``fit_calibrator``."""
    from ._cluster import ClusterRows

    rows = ClusterRows(client, parts, 0, 0)
    try:
        fit_one = cluster_platt if method == "sigmoid" else cluster_isotonic
        if classes.size == 2:
            params = [fit_one(rows, -1, classes[1])]
        else:
            params = [fit_one(rows, j, c) for j, c in enumerate(classes)]
    finally:
        rows.release()
    return Calibrator(method, classes, params)


def calibrate_on_cluster(estimator: Any, X: Any, y: Any, *, client: Any, fit: Any,
                         callback: Any = None) -> None:
    """``calibrator_`` of the fitted ``estimator`` from out-of-fold decision values by
    partition-level folds (``fit(clone, X, y, callback)`` fits each fold's clone on the
    cluster); ``stopped_early_`` when the callback stopped a fold's fit."""
    def tagged(info: dict) -> Any:
        return callback({**info, "phase": "calibration"})

    with client.as_current():
        parts = out_of_fold(estimator, X, y, client, fit, tagged if callback else None)
        if parts is None:
            estimator.stopped_early_ = True
            return
        estimator.calibrator_ = fit_cluster_calibrator(parts, client, estimator.classes_,
                                                       estimator.calibration)
    estimator.oof_decision_ = estimator.oof_index_ = None  # left on the cluster, not kept


def evaluation_block(model: Any, X: Any, y: Any) -> dict:
    """A block's counts and sums of ``cluster_evaluation``."""
    D = model.decision_function(X)
    y = np.asarray(y)
    classes = model.classes_
    truth = np.searchsorted(classes, y).clip(0, classes.size - 1)
    known = classes[truth] == y
    proba = model.probabilities(D) if model.calibrated else None
    predicted = model.predicted_index(D, proba)
    confusion = np.zeros((classes.size, classes.size), dtype=np.int64)
    np.add.at(confusion, (truth[known], predicted[known]), 1)
    out = {"n": int(y.size), "correct": int(np.count_nonzero(known & (predicted == truth))),
           "confusion": confusion}
    if proba is not None:
        eps = np.finfo(np.float64).eps  # scikit-learn's log_loss clipping
        p = np.clip(proba[known], eps, 1.0 - eps)
        onehot = np.eye(classes.size)[truth[known]]
        top = proba[known].max(axis=1)
        bins = np.searchsorted(np.linspace(0.0, 1.0, N_BINS + 1)[1:-1], top)
        hit = (predicted[known] == truth[known]).astype(np.float64)
        out.update({"scored": int(np.count_nonzero(known)),
                    "log_loss": float(-np.sum(np.log(p[np.arange(p.shape[0]),
                                                        truth[known]]))),
                    "brier": float(np.sum((proba[known] - onehot) ** 2)),
                    "bin_n": np.bincount(bins, minlength=N_BINS).astype(np.int64),
                    "bin_hit": np.bincount(bins, hit, minlength=N_BINS),
                    "bin_conf": np.bincount(bins, top, minlength=N_BINS)})
    return out


def cluster_evaluation(model: Any, X: Any, y: Any, *, client: Any) -> dict:
    """{n, accuracy, confusion_matrix, log_loss, brier_score, ece} of the fitted ``model`` on
    the row-chunked dask arrays X, y (the probability metrics None without a calibrator;
    log loss with scikit-learn's clipping at machine epsilon; the binary Brier score is that of the
    positive class, the multi-class one summed over classes), reduced over the blocks."""
    import dask

    from ._cluster import ClusterRows

    with client.as_current():
        held = client.submit(_blocks.identity, model, pure=False)
        rows = ClusterRows(client, [], 0, 0)
        try:
            graph = [dask.delayed(evaluation_block, pure=False)(held, xb, yb)
                     for xb, yb in zip(X.to_delayed(optimize_graph=False).ravel().tolist(),
                                       y.to_delayed(optimize_graph=False).ravel().tolist(),
                                       strict=True)]
            parts = client.compute(graph, optimize_graph=False)
            total = rows.total(parts)
        finally:
            rows.release()
            held.release()
    return _metrics(total, model.classes_.size)


def _metrics(total: dict, k: int) -> dict:
    n = total["n"]
    out: dict = {"n": int(n), "accuracy": total["correct"] / n if n else math.nan,
                 "confusion_matrix": total["confusion"].tolist(), "log_loss": None,
                 "brier_score": None, "ece": None}
    if "log_loss" in total and total["scored"]:
        m = total["scored"]
        out["log_loss"] = total["log_loss"] / m
        # binary: scikit-learn's brier_score_loss of the positive class (half the two-column sum)
        out["brier_score"] = total["brier"] / m / (2.0 if k == 2 else 1.0)
        out["ece"] = float(np.sum(np.abs(total["bin_hit"] - total["bin_conf"])) / m)
    return out
