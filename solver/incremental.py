"""Incremental updates of a fitted MSVMAv: rows added and removed (issue 48; docs/solver.md,
"Incremental updates").

``MSVMAv.update_fit`` is the warm-started fit of the updated rows, computed with what the
parent's fit left: its iterate as the start (linear ``coef_``, ``intercept_``; exact kernel
``dual_coef_`` on the kept rows, 0 on the added ones), its kernel width, and, on the exact
kernel while the parent's factorisation is still in memory, K and (I + K)^{-1} updated for the
rows removed (Schur complement) and added (bordering) instead of formed again. This module
holds the pieces that are not the estimator's: the row change, the bordered inverse, the
parent's last objective rate and the report.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import linalg, sparse
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, validate_data

from ._base import canonical, column_means, to_dense_rows
from ._linalg import spd_inverse
from ._msvmav_core import OBJECTIVE_WINDOW, UPDATE_WINDOW
from ._row_blocks import THREADPOOLS
from .expansion import as_tasks

# Below this many rows the bordered inverse runs on one BLAS thread (msvmav.SMALL_KERNEL).
SMALL_KERNEL = 8192


@dataclass(frozen=True)
class RowChange:
    """The rows after an update: the previous rows ``keep`` (indices, in order), then the
    ``n_added`` new rows."""

    n_before: int
    keep: np.ndarray
    n_added: int

    @property
    def n_removed(self) -> int:
        return self.n_before - self.keep.size

    @property
    def n_after(self) -> int:
        return self.keep.size + self.n_added

    def stack(self, before, added):
        """The updated rows (dense or CSR as ``before``): before[keep], then ``added``."""
        kept = before[self.keep] if self.n_removed else before
        if added is None or self.n_added == 0:
            return kept
        if sparse.issparse(kept) or sparse.issparse(added):
            return sparse.vstack([sparse.csr_matrix(kept), sparse.csr_matrix(added)],
                                 format="csr")
        return np.concatenate([np.asarray(kept), np.asarray(added)])


def updated_rows(X_fit, y_fit, add=None, remove=None):
    """The rows and labels ``MSVMAv.update_fit((X_fit, y_fit), add=(X, y), remove=remove)``
    fits, in its order: X_fit without the rows ``remove``, then X (dense or CSR as given) — the
    ``fitted_rows`` of the next update."""
    X, y = (None, None) if add is None else add
    change = row_change(X_fit.shape[0], 0 if X is None else X.shape[0], remove)
    labels = np.asarray(y_fit)[change.keep]
    if y is not None:
        labels = np.concatenate([labels, np.asarray(y)])
    return change.stack(X_fit, X), labels


def row_change(n_before: int, n_added: int, remove) -> RowChange:
    """The change of removing the previous rows ``remove`` (indices into them, or None) and
    appending ``n_added`` rows. ValueError naming ``remove`` for an index out of range or
    given twice."""
    drop = np.zeros(0, dtype=np.intp) if remove is None else np.asarray(remove)
    if drop.size and (drop.ndim != 1 or drop.dtype.kind not in "iu"):
        raise ValueError("remove: must be a 1-D array of integer row indices into "
                         "fitted_rows")
    drop = drop.astype(np.intp, copy=False)
    if drop.size and (drop.min() < 0 or drop.max() >= n_before):
        raise ValueError(f"remove: indices must be in [0, {n_before}) (the rows of "
                         f"fitted_rows), got {int(drop.min())}..{int(drop.max())}")
    if np.unique(drop).size != drop.size:
        raise ValueError("remove: an index is given more than once")
    mask = np.ones(n_before, dtype=bool)
    mask[drop] = False
    return RowChange(n_before, np.flatnonzero(mask), int(n_added))


def bordered_pair(K: np.ndarray, Binv: np.ndarray, change: RowChange, K_ka: np.ndarray,
                  K_aa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(K', (I + K')^{-1}) of the updated rows from the parent's (K, (I + K)^{-1}).

    Removal: the inverse of the kept block is the Schur complement of the removed one in the
    inverse, B_kk^{-1} = Binv_kk - Binv_kr Binv_rr^{-1} Binv_rk. Addition (bordering) by
    C = K[kept, added] (``K_ka``) and D = I + K[added, added] (``K_aa`` + I): with E = B^{-1} C
    and S = D - C^T E, the inverse is [[B^{-1} + E S^{-1} E^T, -E S^{-1}], [-S^{-1} E^T,
    S^{-1}]]. O(n^2 (removed + added)) instead of the O(n^3) inverse."""
    keep = change.keep
    Bi = Binv
    Kk = K
    if change.n_removed:
        drop = np.setdiff1d(np.arange(change.n_before), keep, assume_unique=True)
        Bkr = Binv[np.ix_(keep, drop)]
        Bi = Binv[np.ix_(keep, keep)] - Bkr @ np.linalg.solve(Binv[np.ix_(drop, drop)], Bkr.T)
        Kk = K[np.ix_(keep, keep)]
    m, p = keep.size, change.n_added
    if p == 0:
        return np.ascontiguousarray(Kk), _symmetric(Bi)
    E = Bi @ K_ka
    S = K_aa + np.eye(p) - K_ka.T @ E
    Sinv = spd_inverse(_symmetric(S), overwrite=True)
    ES = E @ Sinv
    Kn = np.empty((m + p, m + p))
    Kn[:m, :m], Kn[:m, m:], Kn[m:, :m], Kn[m:, m:] = Kk, K_ka, K_ka.T, K_aa
    Bn = np.empty((m + p, m + p))
    Bn[:m, :m] = Bi + ES @ E.T
    Bn[:m, m:] = -ES
    Bn[m:, :m] = -ES.T
    Bn[m:, m:] = Sinv
    return Kn, _symmetric(Bn)


def _symmetric(A: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(0.5 * (A + A.T))


def final_rate(history: list[dict]) -> float | None:
    """The largest over one-vs-rest tasks of the last objective rate of a fit's
    ``history_``: |J_T - J_(T-W)| / (W J_T), W = OBJECTIVE_WINDOW (the "objective" rule's
    measure, docs/solver.md "Convergence"); None where no task ran W + 1 iterations."""
    rates = []
    tasks = sorted({int(r.get("task", 0)) for r in history})
    for t in tasks:
        J = [r.get("objective") for r in history if int(r.get("task", 0)) == t]
        if len(J) <= OBJECTIVE_WINDOW or J[-1] is None or J[-1 - OBJECTIVE_WINDOW] is None:
            continue
        last, old = float(J[-1]), float(J[-1 - OBJECTIVE_WINDOW])
        if last > 0:
            rates.append(abs(last - old) / (OBJECTIVE_WINDOW * last))
    return max(rates) if rates else None


def cold_reference(info: dict | None, n_iter) -> dict:
    """What an update's saving is measured against when no cold fit is run beside it: the
    lineage's last cold fit, i.e. the parent's own reference when the parent was itself an
    update, else the parent's fit (its rows, iterations and seconds, ``measured`` False:
    other rows than the update's)."""
    info = info or {}
    inherited = (info.get("warm_start") or {}).get("cold")
    if inherited:
        return {**inherited, "measured": False}
    return {"measured": False, "rows": info.get("rows"),
            "n_iter": int(np.max(n_iter)) if n_iter is not None and np.size(n_iter) else None,
            "seconds": info.get("seconds")}


class IncrementalFit:
    """``update_fit`` for ``MSVMAv`` (a mixin before ``WeightedFit``): see its docstring."""

    def update_fit(self, fitted_rows, *, add=None, remove=None, sample_weight=None,
                   callback=None, tol: float | None = None, measure_cold: bool = False,
                   warm_folds: bool = False):
        """Update the fitted model for rows added (``add=(X, y)``) and removed (``remove``):
        the warm-started fit of the updated rows (docs/solver.md, "Incremental updates").

        ``fitted_rows=(X_fit, y_fit)``: the rows the model was fitted on, in that fit's order
        (MSVMAv is a batch method and keeps no training rows; not scikit-learn's
        ``partial_fit``). The updated rows are X_fit without the rows ``remove`` (indices
        into them), then the added X (``solver.updated_rows``: the next update's
        ``fitted_rows``). The fit starts from this model's solution (linear ``coef_``,
        ``intercept_``; exact kernel ``dual_coef_`` on the kept rows, 0 on the added; low-rank:
        its pivots as a fixed feature map and its weights), keeps its width ``gamma_`` and its
        kernel path, and on the exact kernel borders the parent's K and (I + K)^{-1} when
        they are in memory (``warm_start=True`` or a previous update; never persisted).
        ``tol`` None: the model's, or the parent's last objective rate where the parent ran
        out of iterations above it; on ``stop="objective"`` a warm update's rule counts from
        its start over UPDATE_WINDOW iterations (``_msvmav_core.StoppingRule``), not a fresh
        window of OBJECTIVE_WINDOW. ``sample_weight``: the updated rows' weights.

        ``fit_info_["warm_start"]`` (``fit_report().warm_start``, persisted) reports the rows
        before / removed / added, ``start`` ("parent", or "mamc" with a ``reason``),
        ``reused``, ``tol``, ``window`` (the rule's), ``n_iter``, ``seconds``,
        ``calibration_folds`` and ``cold``:
        with ``measure_cold=True`` a cold fit of the same rows run first (``measured``; its
        ``n_iter``, ``seconds``, ``converged``, and ``agreement`` of the two models' labels
        on the updated rows), else the lineage's last cold fit; ``iterations_saved`` and
        ``speedup`` against it. A calibrated model refits its calibration folds cold, or
        with ``warm_folds=True`` each from the updated solution (which has seen the fold's
        held-out rows: a mild leak towards confident probabilities). Returns self."""
        check_is_fitted(self)
        X_prev, y_prev = self._checked_fitted_rows(fitted_rows)
        X_add, y_add = self._added_rows(add)
        change = row_change(X_prev.shape[0], 0 if X_add is None else X_add.shape[0], remove)
        X_new = change.stack(X_prev, X_add)
        y_new = np.concatenate([y_prev[change.keep], *(() if y_add is None else (y_add,))])
        self._check_update_labels(y_new)
        cold_model, cold = (self._cold_fit(X_new, y_new, sample_weight) if measure_cold
                            else (None, cold_reference(self.fit_info_, self.n_iter_)))
        start = time.perf_counter()
        plan, report = self._update_plan(change, X_prev, X_add, tol)
        self._pending_update = plan
        if warm_folds:
            self._prepare_fold = _FoldStart(self, plan)
        try:
            self._fit_rows(X_new, y_new, callback, sample_weight)
        finally:
            self.__dict__.pop("_pending_update", None)
            self.__dict__.pop("_prepare_fold", None)
        report["calibration_folds"] = (None if self.calibration == "none"
                                       else "warm" if warm_folds else "cold")
        seconds = time.perf_counter() - start
        if cold_model is not None:  # how far the two models' labels of the rows agree
            cold["agreement"] = float(np.mean(cold_model.predict(X_new) == self.predict(X_new)))
        self.fit_info_["warm_start"] = _saving(
            {**report, "tol": plan["tol"], "window": plan.get("window", OBJECTIVE_WINDOW)},
            cold, self.n_iter_, seconds)
        return self

    def _checked_fitted_rows(self, fitted_rows):
        """(X_fit, y_fit) validated, and checked to be the rows the model was fitted on as
        far as the model can tell: their count (``fit_info_["rows"]``), their column means
        (``feature_means_``, to rounding) and, on the exact kernel, the rows ``X_fit_``."""
        if fitted_rows is None:
            raise ValueError("fitted_rows: an update needs the rows the model was fitted on, "
                             "(X_fit, y_fit) in that fit's order: MSVMAv is a batch method "
                             "(every row takes part in each iteration's active set)")
        if not self.kernel_kind.on_features:
            raise ValueError("kernel: update_fit needs feature rows, not a precomputed "
                             "kernel matrix")
        Xp, yp = fitted_rows
        Xp = canonical(validate_data(self, Xp, reset=False, accept_sparse="csr",
                                     dtype=np.float64))
        yp = np.asarray(yp)
        if yp.ndim != 1 or yp.shape[0] != Xp.shape[0]:
            raise ValueError(f"fitted_rows: y_fit must hold one label per row of X_fit "
                             f"({Xp.shape[0]} rows), got shape {yp.shape}")
        rows = (getattr(self, "fit_info_", None) or {}).get("rows")
        if rows is not None and rows != Xp.shape[0]:
            raise ValueError(f"fitted_rows: the model was fitted on {rows} rows, "
                             f"X_fit has {Xp.shape[0]}")
        means = getattr(self, "feature_means_", None)
        if means is not None and not np.allclose(column_means(Xp), means, rtol=1e-9,
                                                 atol=1e-12):
            raise ValueError("fitted_rows: X_fit's column means differ from those of the "
                             "rows the model was fitted on (feature_means_)")
        exact = getattr(self, "kernel_approximation_", None) == "exact"
        if exact and not np.array_equal(to_dense_rows(Xp), self.X_fit_):
            raise ValueError("fitted_rows: X_fit is not the rows of the exact kernel model "
                             "(X_fit_), in their order")
        return Xp, yp

    def _added_rows(self, add):
        """The added rows (X, y) validated (None, None when there are none)."""
        if add is None:
            return None, None
        try:
            X, y = add
        except (TypeError, ValueError):
            raise ValueError("add: must be a pair (X, y) of rows and their labels") from None
        Xa = canonical(validate_data(self, X, reset=False, accept_sparse="csr",
                                     dtype=np.float64))
        ya = np.asarray(y)
        if ya.ndim != 1 or ya.shape[0] != Xa.shape[0]:
            raise ValueError(f"add: y must hold one label per added row ({Xa.shape[0]}), got "
                             f"shape {ya.shape}")
        return Xa, ya

    def _check_update_labels(self, y: np.ndarray) -> None:
        classes = np.unique(y)
        if classes.shape != self.classes_.shape or not np.all(classes == self.classes_):
            raise ValueError(f"y: the updated rows hold the classes {classes.tolist()!r}, the "
                             f"model {self.classes_.tolist()!r}; an update keeps the classes "
                             "(fit afresh for others)")

    def _update_tol(self, tol: float | None) -> float:
        """The update's tolerance: ``tol``, else the model's; on the "objective" rule, the
        parent's last objective rate where the parent ran out of iterations above it."""
        if tol is not None:
            return float(tol)
        if self.stop != "objective" or self.converged_ or self.stopped_early_:
            return float(self.tol)
        rate = final_rate(self.history_ or [])
        return float(self.tol) if rate is None else max(float(self.tol), rate)

    def _update_plan(self, change: RowChange, X_prev, X_add, tol) -> tuple[dict, dict]:
        """What the fit of the updated rows takes from this model (the plan ``_fit_on_path``
        reads: start, width, tolerance, factorisation) and the report's first entries."""
        T = 1 if self.classes_.size == 2 else self.classes_.size
        report = {"rows_before": change.n_before, "rows_removed": change.n_removed,
                  "rows_added": change.n_added, "rows": change.n_after}
        plan: dict = {"tol": self._update_tol(tol)}
        reused: list[str] = []
        if self.kernel_kind.primal:
            init = self._warm_init((change.n_after, self.n_features_in_), T)
            reason = None if init is not None else "the parent's coefficients do not fit"
        else:
            plan["gamma"] = self.gamma_
            reused.append("kernel width gamma_")
            landmarks = self._fixed_map()
            if landmarks is not None:
                plan["landmarks"] = landmarks
                reused += ["iterate (the parent's solution as the start)",
                           "the parent's pivot rows as a fixed feature map (no pivoted "
                           "Cholesky)"]
            init, reason = (None, None) if landmarks is not None else (
                self._dual_start(change, T))
            plan["dual"] = init is not None
            if init is not None:
                plan["path"] = "exact"
            pair = self._bordered(change, X_prev, X_add) if init is not None else None
            if pair is not None:
                plan["pair"] = pair
                reused.append("kernel matrix and (I + K)^-1, updated for the rows removed "
                              "and bordered for the rows added")
        plan["init"] = init
        warm = init is not None or "landmarks" in plan
        if not warm:  # a cold fit: the parent's rate says nothing of it
            plan["tol"] = float(self.tol if tol is None else tol)
        else:  # judged from its start (the parent's solution), over UPDATE_WINDOW
            plan["window"] = UPDATE_WINDOW
        if warm and init is not None:
            reused.insert(0, "iterate (the parent's solution as the start)")
        report.update(start="parent" if warm else "mamc", reused=reused)
        if reason:
            report["reason"] = reason
        return plan, report

    def _fixed_map(self) -> tuple | None:
        """A low-rank parent's feature map and weights: (pivot rows X_P, L_PP = chol(K_PP),
        W = L_PP^T dual_coef_, f(x) = phi(x)^T W); None on other paths."""
        if getattr(self, "kernel_approximation_", None) != "low_rank":
            return None
        rows = np.asarray(self.X_fit_, dtype=np.float64)
        with THREADPOOLS.limit(limits=1, user_api="blas"):
            try:
                block = linalg.cholesky(self.kernel_.gram(rows), lower=True,
                                        check_finite=False)
            except linalg.LinAlgError:  # pivots numerically dependent: a cold fit instead
                return None
        return rows, block, block.T @ as_tasks(self.dual_coef_)

    def _dual_start(self, change: RowChange, n_tasks: int):
        """The exact kernel's start on the updated rows (the parent's dual coefficients on the
        kept rows, 0 on the added: the parent's function but for the removed rows' terms),
        or (None, why not)."""
        approx = getattr(self, "kernel_approximation_", None)
        if approx != "exact":
            return None, (f"the parent's kernel path is {approx!r}: its coordinates are its "
                          "own factorisation's")
        path = self.kernel_path(change.n_after)
        if path == "low_rank" and self.approximation == "auto" and self._exact_fits(
                change.n_after):  # "auto" chose the exact kernel for the parent: kept
            path = "exact"
        if path != "exact":
            return None, (f"the {change.n_after} updated rows take the {path!r} path "
                          f"(approximation={self.approximation!r})")
        dual = as_tasks(self.dual_coef_)
        init = np.zeros((change.n_after, n_tasks))
        init[: change.keep.size] = dual[change.keep]
        return init, None

    def _bordered(self, change: RowChange, X_prev, X_add):
        """The parent's (K, (I + K)^{-1}) updated to the new rows, where it is in memory
        for this kernel; else None (the fit forms them)."""
        held = getattr(self, "_factorisation", None)
        if held is None or held[0].shape[0] != change.n_before:
            return None
        if held[2] != self._kernel_key():
            return None
        kernel = self.kernel_
        kept = to_dense_rows(change.stack(X_prev, None))
        p = change.n_added
        added = to_dense_rows(X_add) if p else np.zeros((0, kept.shape[1]))
        # one BLAS thread below SMALL_KERNEL rows, as the exact fit's products
        # (msvmav.kernel_threads: a second, spinning pool costs more than it gives)
        small = change.n_after < SMALL_KERNEL
        with THREADPOOLS.limit(limits=1 if small else None, user_api="blas"):
            K_ka = kernel.matrix(kept, added) if p else np.zeros((kept.shape[0], 0))
            K_aa = kernel.gram(added) if p else np.zeros((0, 0))
            return bordered_pair(held[0], held[1], change, K_ka, K_aa)

    def _cold_fit(self, X, y, sample_weight) -> tuple:
        """A cold fit of the updated rows with this model's parameters and width, run to
        measure the update's saving: (the model, its figures)."""
        cold = clone(self).set_params(warm_start=False)
        if not self.kernel_kind.primal:
            cold.set_params(gamma=self.gamma_)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            cold.fit(X, y, sample_weight=sample_weight)
        seconds = time.perf_counter() - start
        return cold, {"measured": True, "rows": int(X.shape[0]),
                      "n_iter": int(np.max(cold.n_iter_)), "seconds": seconds,
                      "converged": bool(cold.converged_)}


class _FoldStart:
    """``prepare`` of an update's calibration folds (``cross_validated_decisions``): each
    fold's clone starts from the updated model's solution (on the exact kernel, its rows of
    the fold's training rows), with the update's width, tolerance and rule (UPDATE_WINDOW,
    from its start)."""

    def __init__(self, model, plan: dict) -> None:
        self.model, self.plan = model, plan

    def __call__(self, est, train: np.ndarray) -> None:
        model = self.model
        if model.kernel_kind.primal:
            init = model._warm_init((train.size, model.n_features_in_), model.coef_.shape[0])
        elif getattr(model, "kernel_approximation_", None) == "exact":
            init = as_tasks(model.dual_coef_)[train]
        else:
            init = None
        est._pending_update = {"init": init, "dual": not model.kernel_kind.primal,
                               "gamma": self.plan.get("gamma"), "path": self.plan.get("path"),
                               "tol": self.plan["tol"] if init is not None else model.tol,
                               "window": UPDATE_WINDOW if init is not None else None}


def _saving(report: dict, cold: dict, n_iter, seconds: float) -> dict:
    """The update's report: what it reused, its iterations and seconds, the cold fit's (or
    the lineage's) and the saving against them."""
    out = {**report, "n_iter": int(np.max(n_iter)), "seconds": seconds, "cold": cold}
    if cold.get("n_iter") is not None:
        out["iterations_saved"] = int(cold["n_iter"]) - out["n_iter"]
    if cold.get("seconds") and seconds > 0:
        out["speedup"] = float(cold["seconds"]) / seconds
    return out
