"""The MSVMAv estimator (Qian, Ai, Zhang, Gao, IJCAI 2022) with scikit-learn conventions."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
from scipy import linalg, sparse
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_approximation import Nystroem

from solver.params import constraints_of, parameters_section

from ._active_set import DualSystem
from ._base import Callback, MarginClassifier, WeightedFit, to_dense_rows
from ._footprint import FLOAT, FitEstimate, copy_bytes, dense_rows_bytes, labels_bytes
from ._huge_pages import small_pages
from ._linalg import inverse_checks
from ._linear_step import (
    DENSE_MAX_DIM,
    choose_linear_solver,
    linear_step_class,
    linear_system_bytes,
)
from ._msvmav_core import DEFAULT_TOL, OBJECTIVE_WINDOW, DualSpace, PrimalSpace, iterate
from ._row_blocks import THREADPOOLS, fit_threads
from ._weighted import WeightedDualSpace, WeightedPrimalSpace
from .fit_cost import RankChooser
from .incremental import IncrementalFit
from .kernels import Linear, resolve_gamma
from .low_rank import MAX_BLOCK, landmark_features, pivoted_cholesky
from .margins import kernel_rademacher_terms, linear_rademacher_terms
from .msvmav_parameters import AUTO_EXACT_ROWS, LOW_RANK_SHARE, PARAMETERS

# Exact kernel MSVMAv holds about four n x n float64 arrays at its peak.
EXACT_KERNEL_ARRAYS = 4
# Below this dimension the linear path's BLAS calls are too small to gain from threads.
SMALL_SYSTEM = 512
# Below this many training rows the exact kernel iterations run on one BLAS thread.
SMALL_KERNEL = 8192
# Floats per training row and unit of rank the low-rank path holds (factor, rotated features).
LOW_RANK_ARRAYS = 3
# "Far outside [0, 1]": the fit warns when some |x_ij| exceeds this (see FeatureScaleWarning).
FEATURE_SCALE_LIMIT = 10.0


def kernel_threads(n: int):
    """BLAS threads for the Gram matrix and the iterations of an n-row exact kernel.

    Below SMALL_KERNEL rows, one: the Gram product is small and the iterations are
    memory-bound matrix-vector work where a second thread costs more in wake-ups than it
    gains (numpy and scipy load separate OpenBLAS pools, and a pool's idle threads keep
    spinning, slowing the other pool's work). Only the inverse of I + K, outside this
    context, uses two."""
    return THREADPOOLS.limit(limits=1 if n < SMALL_KERNEL else None, user_api="blas")


class FeatureScaleWarning(UserWarning):
    """MSVMAv was given features far outside [0, 1] (some |x_ij| > FEATURE_SCALE_LIMIT = 10).

    The method assumes min-max scaled features: the linear bias is a coordinate of w inside
    ||w|| = 1 and gamma = 1/d assumes unit ranges, so on raw features it can fail silently
    (load_breast_cancer unscaled: 0.37 test accuracy, 0.94 after min-max scaling).

    ``largest`` is the largest |x_ij| seen."""

    def __init__(self, message: str, largest: float = float("nan")) -> None:
        super().__init__(message)
        self.largest = largest


def check_feature_scale(X) -> None:
    """Warn (FeatureScaleWarning) if some feature value is far outside [0, 1]."""
    values = X.data if sparse.issparse(X) else X
    # max |x| without |X| formed: a copy of the data (17 ms of a fresh 100k x 2,000 fit)
    largest = float(max(values.max(), -values.min())) if values.size else 0.0
    if largest > FEATURE_SCALE_LIMIT:
        warnings.warn(FeatureScaleWarning(
            f"X: features are far outside [0, 1] (max |x| = {largest:.4g} > "
            f"{FEATURE_SCALE_LIMIT:g}); MSVMAv assumes min-max scaled features and can fail "
            "silently on raw ones. Scale them, e.g. "
            "make_pipeline(MinMaxScaler(), MSVMAv())", largest), stacklevel=4)


def low_rank_threads():
    """One BLAS thread for the low-rank kernel path: its products are n x (tens to hundreds)
    and its systems r x r, too small to gain from a second thread, and an idle pool's spinning
    threads (or another process's) cost more than they give (measured: a 179 x 179 inverse
    took 0.36 s with threads on a busy two-core machine, milliseconds on one)."""
    return THREADPOOLS.limit(limits=1, user_api="blas")


def low_rank_solver(rank: int) -> str:
    """The low-rank kernel path's step solver: the dense r x r system while r is small,
    conjugate gradients above (the same crossover as the linear path's "auto")."""
    return "dense" if rank <= DENSE_MAX_DIM else "cg"


def with_intercept_room(n: int, d: int) -> np.ndarray:
    """An (n, d) float64 array to fill, laid out as the first d columns of an (n, d + 1) one
    whose last column holds 1: ``augment`` of it (or of a block of its rows) is that wider
    array, read-only, without a copy."""
    wide = np.empty((n, d + 1))
    wide[:, d] = 1.0
    return wide[:, :d]


def _intercept_beside(X: np.ndarray) -> np.ndarray | None:
    """X with the column of ones stored right after its rows (``with_intercept_room``'s
    layout, or storage.read_arrays's ``pads``), as a read-only view; None when X is not so."""
    n, d = X.shape
    if X.dtype != np.float64 or n == 0 or X.strides != ((d + 1) * 8, 8):
        return None
    root = X
    while isinstance(root.base, np.ndarray):
        root = root.base
    first, base = X.__array_interface__["data"][0], root.__array_interface__["data"][0]
    # the widened rows end n strides after the first: inside the memory X lives in
    if not root.flags.c_contiguous or first < base or first + X.strides[0] * n > base + root.nbytes:
        return None
    wide = np.lib.stride_tricks.as_strided(X, shape=(n, d + 1), strides=X.strides,
                                           writeable=False)
    return wide if np.all(wide[:, d] == 1.0) else None


def augment(X):
    """Append the paper's constant-1 feature (the bias is a coordinate of w, inside ||w|| = 1).

    CSR input stays CSR: the 1 is written as the last entry of each row directly (scipy's
    hstack costs several passes over the data). Dense input laid out with the ones already
    beside its rows (``with_intercept_room``) is returned widened, without a copy."""
    n, d = X.shape
    if not sparse.issparse(X):
        wide = _intercept_beside(X)
        return wide if wide is not None else np.hstack([X, np.ones((n, 1))])
    X = X.tocsr()
    indptr = X.indptr + np.arange(n + 1, dtype=X.indptr.dtype)
    bias = indptr[1:] - 1
    keep = np.ones(X.nnz + n, dtype=bool)
    keep[bias] = False
    indices = np.empty(X.nnz + n, dtype=X.indices.dtype)
    data = np.empty(X.nnz + n)
    indices[keep], data[keep] = X.indices, X.data
    indices[bias], data[bias] = d, 1.0
    return sparse.csr_matrix((data, indices, indptr), shape=(n, d + 1))


def not_converged_warning(stop: str, tol: float, max_iter: int,
                          window: int = OBJECTIVE_WINDOW) -> str:
    """The words of a fit that stopped at ``max_iter`` without meeting its stopping rule."""
    rule = (f"the objective SV/theta^2 changing by at most {tol:g} per iteration "
            f"(relative, over the last {window})" if stop == "objective"
            else f"a step ||w_k - w_(k-1)||/sqrt(dim) below {tol:g}")
    return (f"the fit did not converge: it stopped at max_iter={max_iter} before meeting its "
            f"stopping rule ({rule}); the model is the last iterate. Raise max_iter, or "
            "choose other alpha, beta (a search)")


class WarmStart:
    """A space (``solver._msvmav_core``) whose iteration starts from ``init`` (scaled to the
    space's unit norm) instead of its MAMC direction: ``warm_start=True``'s start, and the
    auto search's start from a neighbouring (alpha, beta) setting's solution. Every other
    attribute is the wrapped space's. A start with no norm (zero, non-finite) falls back to
    the MAMC direction."""

    def __init__(self, space, init: np.ndarray) -> None:
        self._space = space
        self._init = np.array(init, dtype=np.float64)

    def __getattr__(self, name: str):
        return getattr(self._space, name)

    def initial(self) -> np.ndarray:
        space = self._space
        try:
            nrm = space.norm(self._init, space.margins_of(self._init))
        except ValueError:  # a^T K a = 0
            nrm = 0.0
        if not (nrm > 0 and math.isfinite(nrm)):
            return space.initial()
        return self._init / nrm


class _LastRecord:
    """The fit's callback, passed each iteration's record; ``check(done)`` (for an inverse
    taken in blocks during the iterations) calls it again with the last record plus
    {"stage": "active_set", "done": pivots swept}, its return value ignored."""

    def __init__(self, callback: Callback) -> None:
        self.callback = callback
        self.last: dict = {"iteration": 0}

    def __call__(self, info: dict):
        self.last = info
        return self.callback(info)

    def check(self, done: int) -> None:
        self.callback({**self.last, "stage": "active_set", "done": done})


class MSVMAv(IncrementalFit, WeightedFit, MarginClassifier):
    """Margin distribution machine: maximise the average margin, minimise its semi-variance.

    The method assumes features scaled to [0, 1] (the paper's protocol): fitting on features
    far outside that range (some |x| > 10) emits a ``FeatureScaleWarning``. Scale in a
    pipeline, which also scales the rows given to ``predict``::

        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import MinMaxScaler
        clf = make_pipeline(MinMaxScaler(), MSVMAv()).fit(X_train, y_train)
        clf.score(X_test, y_test)

    {parameters}

    Attributes
    ----------
    classes_ : (k,) array of the class labels; for two classes classes_[1] is the positive one.
    coef_ : (1, d) or (k, d)   — linear kernel; intercept_ : (1,) or (k,)
    dual_coef_ : (m,) or (m, k) — kernels: f(x) = K(x, X_fit_) @ dual_coef_
    X_fit_ : (m, d) training rows (exact) or landmarks (Nystroem); None for "precomputed"
    n_iter_ : int, iterations run (max over one-vs-rest tasks)
    history_ : list of dicts, one per iteration and task: theta, semivariance, objective
        (= SV / theta^2), active (|A_k|), flipped (sign safeguard fired), step.
    kernel_approximation_ : "exact", "low_rank" or "nystroem" (kernels), None for linear
    linear_solver_ : "dense", "woodbury", "cg" or "gram": the linear step's solver (linear
        kernel), None for kernels
    rank_ : int, rank of the kernel matrix used (n for exact, r for low-rank); None for linear
    kernel_error_ : float, relative trace error trace(K - K_r) / trace(K) of the kernel
        matrix used (0.0 for exact); None for linear and "precomputed"
    stopped_early_ : bool, True if the callback stopped the fit
    converged_ : bool, every one-vs-rest task met its stopping rule (``stop``, ``tol``) within
        ``max_iter``; otherwise ``fit_info_["warning"]`` says so in words
        (``fit_info_["last_relative_change"]`` is the largest task's last step)
    calibrator_ : ``solver.calibration.Calibrator`` or None (calibration="none")
    feature_means_ : (d,) the training rows' column means (None for "precomputed")
    """

    _parameter_constraints: dict = constraints_of(PARAMETERS)
    _array_attrs = ("coef_", "intercept_", "dual_coef_", "X_fit_")
    _json_attrs = ("n_iter_", "history_", "kernel_approximation_", "gamma_", "fit_info_",
                   "rank_", "kernel_error_", "linear_solver_", "converged_")

    def __init__(self, alpha: float = 16.0, beta: float = 0.25, *, kernel: str = "linear",
                 gamma: float | str | None = "scale", degree: int = 3, coef0: float = 1.0,
                 max_iter: int = 100, tol: float = DEFAULT_TOL, stop: str = "objective",
                 acceleration: str = "none", fit_intercept: bool = True,
                 update: str = "incremental", linear_solver: str = "auto",
                 approximation: str = "auto",
                 kernel_tol: float = 1e-6, n_components: int = 1000,
                 kernel_memory_mb: float = 8192, random_state: int | None = None,
                 calibration: str = "none", class_weight: str | dict | None = None,
                 warm_start: bool = False) -> None:
        self.alpha = alpha
        self.beta = beta
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.max_iter = max_iter
        self.tol = tol
        self.stop = stop
        self.acceleration = acceleration
        self.fit_intercept = fit_intercept
        self.update = update
        self.linear_solver = linear_solver
        self.approximation = approximation
        self.kernel_tol = kernel_tol
        self.n_components = n_components
        self.kernel_memory_mb = kernel_memory_mb
        self.random_state = random_state
        self.calibration = calibration
        self.class_weight = class_weight
        self.warm_start = warm_start

    # -- fitting ---------------------------------------------------------------------------
    def _fit_targets(self, X, Y: np.ndarray, callback: Callback | None,
                     weights: np.ndarray | None = None) -> None:
        """``weights``: the rows' weights (``solver.weights.fit_weights``), None unweighted;
        rows of weight 0 take no part in the weighted sums and are left out. ``fit_info_``
        also says how many rows the fit had (``rows``) and its seconds (``seconds``)."""
        start = time.perf_counter()
        self._fit_on_path(X, Y, callback, weights)
        self.fit_info_["rows"] = int(X.shape[0])
        self.fit_info_["seconds"] = time.perf_counter() - start

    def _fit_on_path(self, X, Y: np.ndarray, callback: Callback | None,
                     weights: np.ndarray | None = None) -> None:
        # an update's start, width, tolerance and factorisation (update_fit), taken once
        pending = self.__dict__.pop("_pending_update", None) or {}
        self._factorisation = None  # a kept one is not held through another fit's peak
        kind = self.kernel_kind
        if kind.on_features:
            check_feature_scale(X)
        # warm_start's start, taken (and dropped) by the first _run_tasks
        init = pending.get("init") if pending else (
            self._warm_init(X.shape, Y.shape[1]) if self.warm_start else None)
        if weights is not None and not np.all(weights > 0):
            keep = np.flatnonzero(weights > 0)
            if not kind.on_features:  # the model's columns stay every training row
                self._fit_targets(X[keep][:, keep], np.ascontiguousarray(Y[keep]), callback,
                                  weights[keep])
                dual = np.zeros((X.shape[0], *np.shape(self.dual_coef_)[1:]))
                dual[keep] = self.dual_coef_
                self.dual_coef_ = dual
                return
            X, Y, weights = X[keep], np.ascontiguousarray(Y[keep]), weights[keep]
            pending = {**pending, "pair": None}  # the bordered pair is all the rows'
            if init is not None and not kind.primal:  # the kept rows' coefficients
                init = init[keep]
        self._warm_start_init = init
        self._fit_tol = pending.get("tol", self.tol)
        self._fit_window = pending.get("window")
        if pending.get("pair") is not None:
            self._exact_pair = pending["pair"]
        self._keep_factorisation = bool(pending) or self.warm_start
        self.history_ = []
        self.coef_ = self.intercept_ = self.dual_coef_ = self.X_fit_ = None
        self.kernel_approximation_ = None
        self.gamma_ = None
        self.rank_ = self.kernel_error_ = self.linear_solver_ = None
        self.converged_ = False
        if kind.primal:
            with small_pages():  # see solver._huge_pages
                self._fit_linear(X, Y, callback, weights)
            return
        self.gamma_ = pending.get("gamma") or resolve_gamma(self.gamma, X)
        if pending.get("landmarks") is not None:  # an update on the parent's feature map
            self._fit_fixed_map(X, Y, callback, weights, pending["landmarks"])
            return
        n = X.shape[0]
        method = pending.get("path") or self.kernel_path(n)
        reason = choice = None
        if method == "low_rank":
            method, reason, choice = self._fit_low_rank_path(X, Y, callback, weights)
        elif method == "nystroem":
            self._fit_nystroem(X, Y, callback, weights)
        if method == "exact":
            with small_pages():
                self._fit_exact_kernel(X, Y, callback, weights)
            if reason:
                self.fit_info_["fallback"] = reason
        if choice is not None:
            self.fit_info_["rank_choice"], self.fit_info_["rank_reason"] = choice

    def _warm_init(self, shape: tuple[int, int], n_tasks: int) -> np.ndarray | None:
        """``warm_start``'s start, (dim, n_tasks): the previous fit's solution where it lives
        in the coordinates this fit iterates in, else None (the MAMC start). Linear: the
        previous coef_ and intercept_ for as many features and tasks (and fit_intercept as
        now). Exact kernel: the previous exact fit's dual_coef_ on as many rows (the same rows
        are assumed, as scikit-learn's warm_start assumes the same data); a width changed
        in between still starts there. The low-rank and Nystroem paths start afresh (their
        coordinates are each factorisation's own)."""
        n, d = shape
        if self.kernel_kind.primal:
            coef = getattr(self, "coef_", None)
            if coef is None or coef.shape != (n_tasks, d):
                return None
            if not self.fit_intercept:
                return coef.T.copy()
            return np.vstack([coef.T, np.asarray(self.intercept_)[None, :]])
        dual = getattr(self, "dual_coef_", None)
        if (dual is None or getattr(self, "kernel_approximation_", None) != "exact"
                or self.kernel_path(n) != "exact"):
            return None
        dual = dual[:, None] if dual.ndim == 1 else dual
        return dual if dual.shape == (n, n_tasks) else None

    def _fit_low_rank_path(self, X, Y, callback, weights=None
                           ) -> tuple[str, str | None, tuple | None]:
        """Factor K by pivoted Cholesky and fit on it, or stop and return "exact" for the
        caller to fit the exact kernel. "auto" stops where the cost model says
        (``solver.fit_cost.RankChooser``). Returns (path, fallback reason, (auto's decision,
        its reason) or None)."""
        n = X.shape[0]
        max_rank = self._max_rank(n)
        chooser = None
        if self.approximation == "auto":
            chooser = RankChooser(n, X.shape[1], self.kernel_tol, self.max_iter, Y.shape[1],
                                  exact_fits=self._exact_fits(n))
        with low_rank_threads():
            factor = pivoted_cholesky(X, **self._kernel_args(), tol=self.kernel_tol,
                                      max_rank=max_rank, random_state=self.random_state,
                                      stop=chooser)
        choice = None
        if chooser is not None:
            chooser.finish(factor.rank, factor.error)
            choice = (chooser.decision, chooser.reason)
            if chooser.decision == "exact":
                return "exact", chooser.reason, choice
        capped = factor.error > self.kernel_tol and factor.rank >= max_rank < n
        # an explicit "low_rank" falls back to the exact kernel at its cap; "auto" only when
        # its cost model says so (above)
        if capped and self.approximation == "low_rank" and self._exact_fits(n):
            return "exact", (f"rank {factor.rank} reached its cap (min of n_components and "
                             f"{LOW_RANK_SHARE:g} n) before the trace error {factor.error:.3g} "
                             "met kernel_tol"), None
        if capped:
            knob = ("kernel_memory_mb" if self.approximation == "auto"
                    else "n_components (and kernel_memory_mb if it binds)")
            warnings.warn(
                f"kernel_tol: the low-rank kernel stopped at rank {factor.rank} "
                f"with relative trace error {factor.error:.3g} > kernel_tol "
                f"{self.kernel_tol:g}; raise {knob} for a closer fit",
                UserWarning, stacklevel=4)
        self._fit_low_rank(X, Y, callback, factor, weights)
        return "low_rank", None, choice

    def _exact_fits(self, n: int) -> bool:
        return EXACT_KERNEL_ARRAYS * 8.0 * n * n / 2**20 <= self.kernel_memory_mb

    def _max_rank(self, n: int) -> int:
        """Largest rank the low-rank path may reach. "auto": as large as the data need within
        the memory budget (its n x r arrays and r x r system fit ``kernel_memory_mb``).
        "low_rank": also n_components (its cost grows as n r^2), and below LOW_RANK_SHARE n
        while the exact kernel is there to fall back on."""
        # LOW_RANK_ARRAYS n x r arrays (the r x r system is dense only up to DENSE_MAX_DIM)
        by_memory = int(self.kernel_memory_mb * 2**20 / (LOW_RANK_ARRAYS * 8.0 * max(n, 1)))
        if self.approximation == "auto":
            return min(n, max(1, by_memory))
        rank = min(n, self.n_components, max(1, by_memory))
        if self._exact_fits(n):
            rank = min(rank, math.ceil(LOW_RANK_SHARE * n))
        return rank

    def kernel_path(self, n: int) -> str:
        """The path a kernel fit on n rows starts on: "exact", "low_rank" or "nystroem" (a
        low-rank start may still end exact: see ``fit_info_["fallback"]``). For callers that
        share exact Gram matrices across fits (cross-validation) and must agree with fit."""
        if not self.kernel_kind.on_features:
            if self.approximation in ("low_rank", "nystroem"):
                raise ValueError(f"approximation: {self.approximation!r} needs feature rows, "
                                 "not a precomputed kernel")
            return "exact"
        if self.approximation == "auto":
            small = n <= AUTO_EXACT_ROWS and self._exact_fits(n)
            return "exact" if small else "low_rank"
        if self.approximation == "nystroem" and self._exact_fits(n) and (
                min(self.n_components, n) >= LOW_RANK_SHARE * n):
            return "exact"  # as many landmarks as this cost more than the exact kernel
        return self.approximation

    # -- memory ----------------------------------------------------------------------------
    def fit_estimate(self, n_samples: int, n_features: int, nnz: int | None,
                     n_classes: int = 2) -> FitEstimate:
        n, d = n_samples, n_features
        fixed = labels_bytes(n, n_classes) + FLOAT * 12 * n  # iterate's n-vectors
        if self.kernel_kind.primal:
            return self._linear_estimate(n, d, nnz, fixed)
        method = self.kernel_path(n)
        rows = dense_rows_bytes(n, d) if self.kernel_kind.on_features else 0
        to_dense = 0 if nnz is None else dense_rows_bytes(n, d)  # kernels densify CSR rows
        if method == "exact":
            # K, (I + K)^{-1}, the packed rows of A (two n-wide rows each) and S
            peak = (EXACT_KERNEL_ARRAYS + 1) * FLOAT * n * n + rows + fixed
            return FitEstimate(int(peak), "exact-kernel",
                               "use approximation='auto' or 'low_rank' (memory n x rank) or "
                               "fewer training rows")
        if method == "nystroem":
            m = min(self.n_components, n)
            peak = 4 * FLOAT * n * m + 2 * dense_rows_bytes(m, d) + to_dense + fixed
            return FitEstimate(int(peak), "nystroem",
                               "use fewer n_components or fewer training rows")
        r = self._max_rank(n)
        system = (3 * FLOAT * r * r if low_rank_solver(r) == "dense"
                  else linear_system_bytes("cg", n, r, n * r))
        block = 2 * FLOAT * MAX_BLOCK * n  # the candidates' kernel columns and their residual
        peak = (LOW_RANK_ARRAYS * FLOAT * n * r + system + block + dense_rows_bytes(r, d)
                + to_dense + fixed)
        return FitEstimate(int(peak), "low-rank",
                           "lower kernel_memory_mb (it caps the rank) or use fewer rows")

    def _linear_estimate(self, n: int, d: int, nnz: int | None, fixed: int) -> FitEstimate:
        path = self.linear_path(n, d, nnz)
        D = d + (1 if self.fit_intercept else 0)
        stored = None if nnz is None else nnz + (n if self.fit_intercept else 0)
        # augment: a copy of X with the constant column (CSR: and a byte mask per entry)
        copy = 0 if not self.fit_intercept else (
            copy_bytes(n, D, stored) + (0 if stored is None else stored))
        system = linear_system_bytes(path, n, D, stored)
        peak = copy + system + FLOAT * 8 * D + fixed
        advice = linear_step_class(path).advice
        return FitEstimate(int(peak), path, advice)

    def _run_tasks(self, Y: np.ndarray, callback, make_space, dim: int,
                   info: dict | None = None) -> tuple[np.ndarray, dict]:
        """Run ``iterate`` on each one-vs-rest target; returns the (dim, T) coefficients and
        ``info``: the step's named counters summed over the tasks, besides the given entries.
        Stops after a task the callback stopped."""
        T = Y.shape[1]
        coefs = np.zeros((dim, T))
        info = dict(info or {})
        last: list[float | None] = []  # each task's last relative change
        init = self.__dict__.pop("_warm_start_init", None)
        tol = self.__dict__.pop("_fit_tol", self.tol)
        window = self.__dict__.pop("_fit_window", None)  # an update's (UPDATE_WINDOW)
        rule = {"window": window or OBJECTIVE_WINDOW, "from_start": window is not None}
        if init is not None and init.shape != (dim, T):  # another path than the start's
            init = None
        for t in range(T):
            y = Y[:, t]
            space = make_space(y)
            if init is not None:
                space = WarmStart(space, init[:, t])
            coefs[:, t], n_iter, history, stopped = iterate(
                space, y, alpha=self.alpha, max_iter=self.max_iter, tol=tol,
                callback=callback, task=t, n_tasks=T, stop=self.stop,
                accelerate=self.accelerated, **rule)
            self.history_.extend(history)
            last.append((history[-1]["step"], bool(history[-1]["converged"]))
                        if history else None)
            self.n_iter_ = max(self.n_iter_, n_iter) if t else n_iter
            for key, count in space.counters().items():
                info[key] = info.get(key, 0) + count
            del space  # one task's system at a time
            if stopped:
                self.stopped_early_ = True
                break
        self._record_convergence(last, T, info, tol, rule["window"])
        return coefs, info

    @property
    def accelerated(self) -> bool:
        """Whether fit() runs Anderson-accelerated iterations: ``acceleration="anderson"`` on
        the "objective" rule (the "step" rule, the paper's, always iterates plainly)."""
        return self.acceleration == "anderson" and self.stop == "objective"

    def _record_convergence(self, last: list[tuple[float, bool] | None], n_tasks: int,
                            info: dict, tol: float, window: int = OBJECTIVE_WINDOW) -> None:
        """``converged_``: every one-vs-rest task ran and met its stopping rule (``stop``,
        ``tol``: ``_msvmav_core.StoppingRule``) within ``max_iter``;
        ``fit_info_["last_relative_change"]``: the largest of the tasks' last steps
        ||w_k - w_{k-1}|| / sqrt(dim) (None with max_iter=0, where no step is taken);
        ``fit_info_["warning"]``: what a fit that ran out of iterations means, in words, also
        issued as a ``ConvergenceWarning`` (scikit-learn's, which its searches silence)."""
        ran = [s for s in last if s is not None]
        done = len(ran) == len(last) and bool(ran)
        info["last_relative_change"] = max(s for s, _ in ran) if done else None
        self.converged_ = bool(len(ran) == n_tasks and all(met for _, met in ran))
        info["stop"] = self.stop
        if not self.converged_ and done and not self.stopped_early_:
            info["warning"] = not_converged_warning(self.stop, tol, self.max_iter, window)
            warnings.warn(ConvergenceWarning(info["warning"]), stacklevel=6)

    def linear_path(self, n: int, n_features: int, nnz: int | None = None) -> str:
        """The linear step's solver ("dense", "woodbury", "cg" or "gram") fit() uses on n rows
        of n_features features holding nnz stored values (None: dense input)
        (``linear_solver``, or the automatic choice)."""
        D = n_features + (1 if self.fit_intercept else 0)
        stored = None if nnz is None else nnz + (n if self.fit_intercept else 0)
        return choose_linear_solver(self.linear_solver, n, D, stored)

    def _fit_linear(self, X, Y, callback, weights: np.ndarray | None = None) -> None:
        d, T = X.shape[1], Y.shape[1]
        self.linear_solver_ = path = self.linear_path(
            X.shape[0], d, X.nnz if sparse.issparse(X) else None)
        Xa = augment(X) if self.fit_intercept else X
        threads = fit_threads()  # the limit in force here, before the one below
        # D x D systems this small run faster on one BLAS thread than on several, and the
        # matrix-free paths make no BLAS calls worth a second thread
        small = Xa.shape[1] < SMALL_SYSTEM or path != "dense"
        with THREADPOOLS.limit(limits=1 if small else None, user_api="blas"):
            W, self.fit_info_ = self._run_tasks(
                Y, callback, lambda y: PrimalSpace(Xa, y, self.beta,
                                                   shift=np.asarray(Xa.T @ y).ravel(),
                                                   update=self.update, solver=path,
                                                   threads=threads, bias=self.fit_intercept)
                if weights is None else WeightedPrimalSpace(
                    Xa, y, weights, self.beta, shift=np.asarray(Xa.T @ (weights * y)).ravel(),
                    update=self.update, solver=path, threads=threads),
                Xa.shape[1])
        self.coef_ = W[:d].T.copy()
        self.intercept_ = W[d].copy() if self.fit_intercept else np.zeros(T)

    def _kernel_key(self) -> tuple:
        """The fitted kernel (name, width, degree, coef0): a kept factorisation's."""
        return (self.kernel, self.gamma_, self.degree, self.coef0)

    def _kernel_args(self) -> dict:
        return {"kernel": self.kernel, "gamma": self.gamma_, "degree": self.degree,
                "coef0": self.coef0}

    def _fit_exact_kernel(self, X, Y, callback, weights: np.ndarray | None = None) -> None:
        n = X.shape[0]
        check = None if callback is None else self._inverse_reporter(callback, n, Y.shape[1])
        pair = self.__dict__.pop("_exact_pair", None)  # an update's, bordered (update_fit)
        if pair is None or pair[0].shape[0] != n:
            with kernel_threads(n):
                K = self.kernel_.gram(X, None if check is None else lambda rows: check(0))
            # K and (I + K)^{-1}, shared by every one-vs-rest task; with a callback the
            # inverse is taken in blocks that report to it, so that a raised exception (a
            # cancelled job) stops it within a block
            pair = DualSystem.pair(K, check)
        # the active-set refactorisations (|A| x |A|, up to about n / 2) report too
        relay = None if callback is None else _LastRecord(callback)
        with kernel_threads(n), inverse_checks(None if relay is None else relay.check):
            A, self.fit_info_ = self._run_tasks(
                Y, relay, lambda y: DualSpace(pair, y, self.beta) if weights is None
                else WeightedDualSpace(pair, y, weights, self.beta), n)
        self.dual_coef_ = A[:, 0].copy() if A.shape[1] == 1 else A
        self.X_fit_ = to_dense_rows(X) if self.kernel_kind.on_features else None
        self.kernel_approximation_ = "exact"
        self.rank_, self.kernel_error_ = n, 0.0
        # kept in memory (never persisted) for the next update_fit or warm fit to update
        keep = self.__dict__.pop("_keep_factorisation", False)
        self._factorisation = (*pair, self._kernel_key()) if keep else None

    def _inverse_reporter(self, callback: Callback, n: int, n_tasks: int):
        """``check`` for the blocked Gram matrix and inverse: the callback sees {"stage":
        "kernel_inverse", "done": pivots swept (0 while the Gram matrix is computed), "of":
        n} at iteration 0. Its return value is ignored there
        (the iteration has not started: there is no iterate to stop at); its exceptions
        propagate."""
        def check(done: int) -> None:
            callback({"stage": "kernel_inverse", "done": done, "of": n, "iteration": 0,
                      "max_iter": self.max_iter, "task": 0, "n_tasks": n_tasks})
        return check

    def _fit_features(self, Lt: np.ndarray, Y: np.ndarray, callback, info: dict,
                      weights: np.ndarray | None = None) -> np.ndarray:
        """MSVMAv on K ~ L L^T, given L^T (r, n). Returns the feature-space weights W (r, T):
        f(x_i) = L_i W.

        The iteration runs exactly on the approximate kernel, in the eigenbasis of L^T L
        (L V = U Sigma) with coordinates u (f = U Sigma^2 u, ||f||_H = ||Sigma u||), where
        the proximal metric I + K of the kernel step is diagonal (I + Sigma^2 on span U).
        Each iteration costs O(n r) plus the active-set updates of an r x r system."""
        with low_rank_threads():
            lam, V = linalg.eigh(Lt @ Lt.T, check_finite=False)
            keep = lam > 1e-12 * max(lam.max(initial=0.0), 1e-300)
            lam, V = lam[keep], V[:, keep]
            sig = np.sqrt(lam)
            PV = np.ascontiguousarray((V.T @ Lt).T)  # = L V = U Sigma, (n, r')
            Xr = PV * sig
            start = self.__dict__.pop("_feature_start", None)  # feature weights W: f = L W
            if start is not None:  # u = Sigma^{-1} V^T W (f = Xr u)
                self._warm_start_init = (V.T @ start) / sig[:, None]
            U, self.fit_info_ = self._run_tasks(
                Y, callback,
                lambda y: PrimalSpace(Xr, y, self.beta, shift=(PV.T @ y) / sig,  # U^T y
                                      base_extra=lam, mu=lam, update=self.update,
                                      solver=low_rank_solver(Xr.shape[1]))
                if weights is None else WeightedPrimalSpace(
                    Xr, y, weights, self.beta, shift=(PV.T @ (weights * y)) / sig,  # U^T V y
                    base_extra=lam, mu=lam, update=self.update,
                    solver=low_rank_solver(Xr.shape[1])),
                V.shape[1], {**info, "n_components": int(keep.sum())})
        self.rank_ = int(keep.sum())
        return V @ (sig[:, None] * U)

    def _fit_low_rank(self, X, Y, callback, factor, weights=None) -> None:
        W = self._fit_features(factor.factor, Y, callback, {"pivots": factor.rank}, weights)
        # f(x) = phi(x)^T W with phi(x) = L_PP^{-1} k(X_P, x): dual = L_PP^{-T} W
        dual = linalg.solve_triangular(factor.pivot_block(), W, lower=True, trans="T",
                                       check_finite=False)
        self.dual_coef_ = dual[:, 0].copy() if dual.shape[1] == 1 else dual
        self.X_fit_ = to_dense_rows(X[factor.pivots])
        self.kernel_approximation_ = "low_rank"
        self.kernel_error_ = factor.error

    def _fit_fixed_map(self, X, Y, callback, weights, landmarks: tuple) -> None:
        """The low-rank path on a given feature map: the parent's pivot rows X_P and their
        block L_PP (phi(x) = L_PP^{-1} k(X_P, x)), started from its feature weights W
        (``update_fit``): no pivoted Cholesky."""
        rows, block, start = landmarks
        with low_rank_threads():
            Lt = np.ascontiguousarray(landmark_features(X, rows, block, **self._kernel_args()))
        self._feature_start = start
        W = self._fit_features(Lt, Y, callback, {"pivots": rows.shape[0], "fixed_map": True},
                               weights)
        dual = linalg.solve_triangular(block, W, lower=True, trans="T", check_finite=False)
        self.dual_coef_ = dual[:, 0].copy() if dual.shape[1] == 1 else dual
        self.X_fit_ = np.array(rows, dtype=np.float64)
        self.kernel_approximation_ = "low_rank"
        trace = float(self.kernel_.diagonal(X).sum())
        self.kernel_error_ = max(0.0, trace - float(np.einsum("ij,ij->", Lt, Lt))) / trace

    def _fit_nystroem(self, X, Y, callback, weights=None) -> None:
        n = X.shape[0]
        ny = Nystroem(kernel=self.kernel, gamma=self.gamma_, degree=self.degree,
                      coef0=self.coef0, n_components=min(self.n_components, n),
                      random_state=self.random_state).fit(X)
        Lt = np.ascontiguousarray(ny.transform(X).T)
        trace = float(self.kernel_.diagonal(X).sum())
        W = self._fit_features(Lt, Y, callback, {}, weights)
        dual = ny.normalization_.T @ W
        self.dual_coef_ = dual[:, 0].copy() if dual.shape[1] == 1 else dual
        self.X_fit_ = to_dense_rows(ny.components_)
        self.kernel_approximation_ = "nystroem"
        self.kernel_error_ = max(0.0, trace - float(np.einsum("ij,ij->", Lt, Lt))) / trace

    def _fit_path(self) -> dict:
        """How the fit was computed: the linear step's solver (linear kernel) or the kernel
        matrix's approximation, and the fit's counters (``fit_info_``)."""
        return {"linear_solver": self._fitted("linear_solver_"),
                "kernel_approximation": self._fitted("kernel_approximation_"),
                "fit_info": self._fitted("fit_info_")}

    def describe(self) -> str:
        """'MSVMAv (kernel rbf, nystroem)': the kernel and the path the fit took."""
        approx = getattr(self, "kernel_approximation_", None)
        return f"MSVMAv (kernel {self.kernel}" + (f", {approx})" if approx else ")")

    # -- prediction ------------------------------------------------------------------------
    def _decision(self, X) -> np.ndarray:
        if self.kernel_kind.primal:
            return np.asarray(X @ self.coef_.T) + self.intercept_
        D = np.asarray(self.kernel_.matrix(X, self.X_fit_) @ self.dual_coef_)
        return D[:, None] if D.ndim == 1 else D

    def _theorem_terms(self, X) -> dict:
        kind = self.kernel_kind
        if kind.primal:
            Xa = augment(X) if self.fit_intercept else X
            sq = Linear().diagonal(Xa)  # ||x_i||^2
            return linear_rademacher_terms(np.sqrt(sq), X.shape[0])
        if not kind.on_features:
            return {}
        return kernel_rademacher_terms(self.kernel_.diagonal(X))


# The Parameters section of the docstring is the declaration's (solver.msvmav_parameters).
MSVMAv.__doc__ = MSVMAv.__doc__.replace(
    "{parameters}",
    parameters_section(PARAMETERS, MSVMAv().get_params()).replace("\n", "\n    "))
