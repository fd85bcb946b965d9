"""``fit_on_cluster``: a linear MSVMAv fitted on a Dask cluster where its rows lie.

The fit is ``MSVMAv.fit``'s linear path (msvmav.md 1.2-1.4; docs/solver.md) with the rows in
the cluster's memory: the labels' classes, the column means and the feature-scale check come
from one first pass; each one-vs-rest task runs the shared iteration
(``_msvmav_core.iterate``, through ``MSVMAv._run_tasks``) on a cluster-backed space
(``_space``). The estimator ends with the attributes a local fit gives it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._base import Callback
from ..msvmav import MSVMAv
from ..params import validate_params
from . import _blocks
from ._calibration import calibrate_on_cluster
from ._cluster import ClusterRows
from ._kernel import CLUSTER_KERNELS, fit_kernel_on_cluster, hold_rows
from ._memory import plan_memory
from ._space import GramSpace, MatrixFreeSpace
from ._tasks import Relay, Target, Targets, start_fit


def check_cluster_params(estimator: MSVMAv) -> None:
    """ValueError naming the parameter the cluster fit cannot honour (it is linear only)."""
    validate_params(estimator)
    if not isinstance(estimator, MSVMAv):
        raise ValueError(f"estimator: the cluster fit is MSVMAv's, not {type(estimator).__name__}")
    if not estimator.kernel_kind.primal:
        _check_kernel_params(estimator)
    elif estimator.linear_solver == "woodbury":
        raise ValueError("linear_solver: 'woodbury' (the n x n row Gram matrix) is not "
                         "available on the cluster, which is linear only with 'auto', "
                         "'dense', 'gram' or 'cg'")
    if getattr(estimator, "class_weight", None) is not None:
        raise ValueError("class_weight: the cluster fit has no weighted form; fit the "
                         "weighted model on one machine (an uploaded dataset)")


def _check_kernel_params(estimator: MSVMAv) -> None:
    """ValueError naming what the cluster's kernel fit (``_kernel``) cannot honour."""
    if estimator.kernel not in CLUSTER_KERNELS:
        raise ValueError(f"kernel: the cluster fit is linear, rbf or poly; got kernel="
                         f"{estimator.kernel!r}")
    if estimator.approximation not in ("auto", "low_rank"):
        raise ValueError(f"approximation: the cluster's kernel fit is low-rank (Nystroem "
                         f"landmarks by pivoted Cholesky): 'auto' or 'low_rank', not "
                         f"{estimator.approximation!r}")


def fit_on_cluster(estimator: MSVMAv, X: Any, y: Any, *, client: Any,
                   callback: Callback | None = None, sample: int | None = None,
                   keep: str = "auto") -> MSVMAv:
    """Fit the unfitted linear ``estimator`` on the row-chunked dask arrays X (dense float or
    CSR blocks) and y (labels, X's row chunks) with the cluster of ``client``; returns it
    fitted, its decisions those of ``estimator.fit(X, y)`` up to summation order.

    X and y are computed into the cluster's memory once (pass them as reader or generator
    graphs, so that the scheduler can recompute a block lost with its worker) and let go at
    the end. ``callback`` receives the records a local fit gives (a true return value or
    FitStopped at one stops the fit, ``stopped_early_`` True) and, while a pass runs,
    {"stage": "cluster_pass", ...} records (``_tasks.Relay``): anything raised there cancels the
    pass's tasks and propagates. ValueError names a parameter or an input the cluster fit
    cannot take; DistributedFitError: the cluster failed a task.

    ``keep``: what the workers hold between passes (``_memory``): the raw rows ("rows"), a
    kernel fit's mapped features ("features"), nothing ("nothing": every pass reads each
    block from X's graph again), or "auto": the fastest way that every worker's memory holds
    by its own reading (its limit, lowest memory threshold and fixed cost), planned before
    any row is loaded; ValueError naming ``keep``, ``n_components`` or ``X`` when it would
    not fit.

    kernel="rbf" or "poly": the low-rank kernel path (``_kernel``: landmarks chosen from
    ``sample`` rows, the rows mapped to their features on the workers).

    calibration="sigmoid" or "isotonic": ``calibrator_`` from out-of-fold decision values of
    folds of blocks, each fold's clone fitted here the same way (``_calibration``)."""
    check_cluster_params(estimator)

    def fit(est: MSVMAv, X: Any, y: Any, callback: Callback | None) -> MSVMAv:
        if not est.kernel_kind.primal:
            return fit_kernel_on_cluster(est, X, y, client=client, callback=callback,
                                         sample=sample, keep=keep)
        return _fit_linear(est, X, y, client, callback, keep)

    fit(estimator, X, y, callback)
    if estimator.calibration != "none" and not estimator.stopped_early_:
        calibrate_on_cluster(estimator, X, y, client=client, fit=fit, callback=callback)
    return estimator


def _fit_linear(estimator: MSVMAv, X: Any, y: Any, client: Any,
                callback: Callback | None, keep: str) -> MSVMAv:
    memory = plan_memory(client, X.chunks[0], int(X.shape[1]), 0, keep)
    rows = hold_rows(client, X, y, bool(estimator.fit_intercept), memory)
    try:
        summary = rows.reduce(_blocks.summarise_block, combine=_blocks.merge_summaries,
                              d=int(X.shape[1]))
        start_fit(estimator, rows, summary)
        _fit_tasks(estimator, rows, summary, callback)
        estimator.fit_info_["cluster"].update(memory.info())
    finally:
        rows.release()
    return estimator


def _fit_tasks(estimator: MSVMAv, rows: ClusterRows, summary: dict,
               callback: Callback | None) -> None:
    """Each one-vs-rest task's iteration on a cluster space; coef_ and intercept_."""
    classes, d, n = summary["labels"], int(summary["sums"].size), rows.n
    positives = [classes[1]] if classes.size == 2 else list(classes)
    T = len(positives)
    relay = None if callback is None else Relay(callback, estimator.max_iter, T)
    rows.tick = None if relay is None else relay.tick
    path = estimator.linear_path(n, d, summary["stored"] if summary["sparse"] else None)
    bias = bool(estimator.fit_intercept)
    estimator.linear_solver_ = "cg" if path == "cg" else "dense"

    def make_space(target: Target) -> GramSpace | MatrixFreeSpace:
        if relay is not None:
            relay.start(target.task)
        if path == "cg":
            return MatrixFreeSpace(rows, target.positive, estimator.beta, bias=bias)
        return GramSpace(rows, target.positive, estimator.beta,
                         direct=estimator.update == "rebuild")

    W, info = estimator._run_tasks(Targets(n, positives), relay, make_space, rows.D)
    info["cluster"] = {"blocks": rows.blocks, "passes": rows.passes,
                       "space": "gram" if path != "cg" else "matrix_free"}
    estimator.fit_info_ = info
    estimator.coef_ = W[:d].T.copy()
    estimator.intercept_ = W[d].copy() if bias else np.zeros(T)
