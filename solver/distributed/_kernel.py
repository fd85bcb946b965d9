"""RBF and polynomial MSVMAv on a Dask cluster: the low-rank (Nystroem) kernel path of
``MSVMAv`` with its rows on the workers (issue 46).

1. The rows are computed into the cluster's memory (``ClusterRows.load``); one pass gives the
   classes, column means and scale check (as the linear fit), and with ``gamma="scale"`` two
   more give Var(X) over every entry (the local ``resolve_gamma``).
2. Landmarks: up to ``sample_rows`` rows drawn uniformly without replacement (seeded by
   ``random_state``; every row, in order, when there are no more) are gathered here and the
   local path's pivoted Cholesky (``solver.low_rank.pivoted_cholesky``) runs on them with the
   local path's rank rule: ``approximation="auto"``'s cost model (``RankChooser``) or
   ``"low_rank"``'s ``n_components``, both capped by what a worker's memory holds
   (``largest_rank``). Its pivots are the landmarks X_P and L_PP their block.
3. One pass sums phi_b^T phi_b over the blocks (phi(x) = L_PP^{-1} k(X_P, x)) and the kernel's
   trace; the eigen-decomposition of the sum gives the rotation V Sigma of
   ``MSVMAv._fit_features``, and one more pass maps every block to its rotated features
   phi(X_b) V Sigma on the worker that holds it (the raw rows are then let go).
4. Each one-vs-rest task runs the shared iteration on those features with the kernel path's
   metric (``_space.GramSpace`` with ``metric``: one r x r reduce an iteration); the model is
   the local path's: dual_coef_ = L_PP^{-T} V Sigma U over the landmarks.

Given every row as the sample this is the local fit (the same pivots, the same iterates up to
summation order); ``fit_on_landmarks`` is the local fit on any landmarks (the comparator of a
fit whose landmarks came from a sample).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import linalg

from .._base import to_dense_rows
from ..fit_cost import RankChooser
from ..low_rank import LowRankFactor, landmark_features, pivoted_cholesky
from ..msvmav import MSVMAv
from . import _blocks, _kernel_blocks, _memory
from ._cluster import ClusterRows
from ._kernel_blocks import Landmarks
from ._memory import MemoryPlan
from ._space import GramSpace
from ._tasks import Relay, Targets, start_fit

#: rows gathered into this process to choose the landmarks from (at most)
SAMPLE_ROWS = 10_000
#: the largest rank of a cluster kernel fit (its r x r sums are reduced every iteration)
MAX_RANK = 2048
#: the kernels the cluster fits (positive semi-definite: a Nystroem factor exists)
CLUSTER_KERNELS = ("rbf", "poly")


def hold_rows(client: Any, X: Any, y: Any, bias: bool, memory: MemoryPlan) -> ClusterRows:
    """The rows as the plan holds them: loaded into the workers' memory, each worker its
    dealt blocks (``"features"``, ``"rows"``), or streamed from their graph (``"nothing"``)."""
    if memory.way == "nothing":
        return ClusterRows.stream(client, X, y, bias)
    return ClusterRows.load(client, X, y, bias, dealt=memory.dealt)


def planned_rank(estimator: MSVMAv, n: int, workers: list, sizes: list[int], d: int,
                 keep: str) -> int:
    """The largest rank the fit may take: ``n_components`` (``"low_rank"``, refused by the
    plan when it does not fit) or what the workers hold (``"auto"``, at most
    ``n_components``, the sample's rows and MAX_RANK)."""
    rank = min(int(estimator.n_components), n, MAX_RANK)
    if estimator.approximation == "low_rank":
        return rank
    return max(1, _memory.largest_rank(workers, sizes, d, rank, keep))


def cluster_gamma(estimator: MSVMAv, rows: ClusterRows, d: int) -> float:
    """``resolve_gamma`` over the cluster's rows (Var(X) over every entry in two passes)."""
    gamma = estimator.gamma
    if gamma is None or gamma == "auto":
        return 1.0 / max(d, 1)
    if gamma != "scale":
        return float(gamma)
    sums = rows.reduce(_kernel_blocks.entry_sums)
    if sums["size"] == 0:
        return 1.0
    mean = sums["sum"] / sums["size"]
    var = max(rows.reduce(_kernel_blocks.squared_deviations, mean=mean), 0.0) / sums["size"]
    return 1.0 / (max(d, 1) * var) if var > 0 else 1.0


def sample_rows(rows: ClusterRows, sizes: list[int], count: int,
                seed: int | None) -> np.ndarray:
    """``count`` rows drawn uniformly without replacement, in row order (every row when
    there are no more), gathered here."""
    n = sum(sizes)
    if count >= n:
        picks = [np.arange(size) for size in sizes]
    else:
        chosen = np.sort(np.random.default_rng(seed).choice(n, size=count, replace=False))
        edges = np.cumsum([0, *sizes])
        picks = [chosen[(chosen >= lo) & (chosen < hi)] - lo
                 for lo, hi in zip(edges[:-1], edges[1:], strict=True)]

    def run() -> list:
        futures = rows.map(_kernel_blocks.sample, blocks=picks)
        rows.wait(futures)
        return rows.client.gather(futures)

    parts = rows.again(run)
    return np.concatenate([X for X, _ in parts])


def choose_landmarks(estimator: MSVMAv, Xs: np.ndarray, n: int, n_tasks: int,
                     cap: int) -> tuple[LowRankFactor, tuple | None]:
    """The local path's pivoted Cholesky on the sample ``Xs`` with its rank rule, at most
    ``cap`` pivots. Returns (the factor, (auto's decision, its reason) or None)."""
    chooser = None
    if estimator.approximation == "auto":
        chooser = RankChooser(n, Xs.shape[1], estimator.kernel_tol, estimator.max_iter,
                              n_tasks, exact_fits=estimator._exact_fits(n))
        max_rank = min(cap, Xs.shape[0], estimator._max_rank(n))
    else:
        max_rank = min(cap, Xs.shape[0], estimator._max_rank(n))
    factor = pivoted_cholesky(Xs, **estimator._kernel_args(), tol=estimator.kernel_tol,
                              max_rank=max_rank, random_state=estimator.random_state,
                              stop=chooser)
    if chooser is None:
        return factor, None
    chooser.finish(factor.rank, factor.error)
    reason = chooser.reason
    if chooser.decision == "exact":  # the exact kernel does not run on the cluster
        reason = (f"{reason}; the exact kernel does not run on the cluster: kept rank "
                  f"{factor.rank}")
    return factor, (chooser.decision, reason)


def rotation(G: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lam, V, V Sigma) of L^T L = G kept as ``MSVMAv._fit_features`` keeps them."""
    lam, V = linalg.eigh(G, check_finite=False)
    keep = lam > 1e-12 * max(lam.max(initial=0.0), 1e-300)
    lam, V = lam[keep], V[:, keep]
    return lam, V, V * np.sqrt(lam)


def finish(estimator: MSVMAv, coefs: np.ndarray, V: np.ndarray, lam: np.ndarray,
           landmarks: Landmarks) -> None:
    """dual_coef_ over the landmarks from the tasks' coefficients U (r', T), as
    ``MSVMAv._fit_low_rank``: W = V Sigma U, dual = L_PP^{-T} W."""
    W = V @ (np.sqrt(lam)[:, None] * coefs)
    dual = linalg.solve_triangular(landmarks.block, W, lower=True, trans="T",
                                   check_finite=False)
    estimator.dual_coef_ = dual[:, 0].copy() if dual.shape[1] == 1 else dual
    estimator.X_fit_ = to_dense_rows(landmarks.rows)
    estimator.kernel_approximation_ = "low_rank"
    estimator.rank_ = int(lam.size)
    estimator.coef_ = estimator.intercept_ = None
    estimator.linear_solver_ = None


def fit_on_landmarks(estimator: MSVMAv, X, y, landmarks: np.ndarray,
                     pivot_block: np.ndarray) -> MSVMAv:
    """The local low-rank fit of the unfitted kernel ``estimator`` on X, y with the given
    landmarks (rows X_P and their block L_PP, e.g. a cluster fit's ``fit_info_`` choice):
    ``MSVMAv._fit_features`` on phi(X) = L_PP^{-1} k(X_P, X). ``estimator.gamma`` must be a
    number (the landmarks' block was computed with it)."""
    from sklearn.utils.validation import check_array

    X = check_array(X, accept_sparse="csr", dtype=np.float64)
    classes, index = np.unique(np.asarray(y), return_inverse=True)
    Y = ((2.0 * index - 1.0)[:, None] if classes.size == 2
         else np.where(index[:, None] == np.arange(classes.size)[None, :], 1.0, -1.0))
    estimator.classes_, estimator.n_features_in_ = classes, X.shape[1]
    estimator.feature_means_ = np.asarray(X.mean(axis=0)).ravel()
    estimator.stopped_early_, estimator.calibrator_ = False, None
    estimator.history_, estimator.gamma_ = [], float(estimator.gamma)
    mapping = Landmarks(np.asarray(landmarks, dtype=np.float64), pivot_block,
                        estimator._kernel_args())
    Lt = landmark_features(X, mapping.rows, pivot_block, **mapping.args)
    W = estimator._fit_features(np.ascontiguousarray(Lt), np.ascontiguousarray(Y), None,
                                {"pivots": mapping.rank})
    dual = linalg.solve_triangular(pivot_block, W, lower=True, trans="T", check_finite=False)
    estimator.dual_coef_ = dual[:, 0].copy() if dual.shape[1] == 1 else dual
    estimator.X_fit_ = to_dense_rows(mapping.rows)
    estimator.kernel_approximation_ = "low_rank"
    estimator.coef_ = estimator.intercept_ = estimator.linear_solver_ = None
    return estimator


class PerPassFeatures(ClusterRows):
    """The features computed on every pass from the raw blocks, kept (``"rows"``) or
    streamed from their graph (``"nothing"``): each task maps its block
    (``_kernel_blocks.on_features``) and lets the features go when it ends, so that a worker
    holds its raw rows (or none) and its threads' blocks' features. The same features as
    ``mapped_rows`` gives (the same function of the same block), so the same fit."""

    def __init__(self, rows: ClusterRows, landmarks: Any, rotation: Any, rank: int) -> None:
        super().__init__(rows.client, rows.parts, rows.n, rank, rows.tick,
                         sources=rows.sources)
        self.mapping = {"landmarks_": landmarks, "rotation_": rotation}
        rows.parts, rows.sources = [], None  # owned here from now on

    def map(self, fn: Any, *, blocks: list | None = None, keep: bool = False,
            **kwargs: Any) -> list:
        return super().map(_kernel_blocks.on_features, blocks=blocks, keep=keep, fn_=fn,
                           **self.mapping, **kwargs)

    def release(self) -> None:
        super().release()
        for future in self.mapping.values():
            future.release()
        self.mapping = {}


def feature_rotation(rows: ClusterRows, held: Any) -> tuple[np.ndarray, np.ndarray,
                                                             np.ndarray, float]:
    """(lam, V, V Sigma, the factor's relative trace error over every row) from one pass."""
    sums = rows.reduce(_kernel_blocks.feature_gram, landmarks=held)
    lam, V, R = rotation(sums["G"])
    trace = sums["trace"]
    error = max(0.0, trace - float(np.trace(sums["G"]))) / trace if trace > 0 else 0.0
    return lam, V, R, error


def mapped_rows(rows: ClusterRows, landmarks: Landmarks, keep: bool = True
                ) -> tuple[ClusterRows, np.ndarray, np.ndarray, float]:
    """The blocks' rotated features, each on the worker of its raw block: (their rows,
    lam, V, the relative trace error of the factor over every row). ``keep`` False: the
    raw blocks, mapped on every pass (``PerPassFeatures``; ``rows`` is emptied)."""
    client = rows.client
    held = client.submit(_blocks.identity, landmarks, pure=False)
    try:
        lam, V, R, error = feature_rotation(rows, held)
        if not keep:
            turn = client.submit(_blocks.identity, R, pure=False)
            return PerPassFeatures(rows, held, turn, int(lam.size)), lam, V, error

        def run() -> list:
            futures = rows.map(_kernel_blocks.mapped, keep=True, landmarks=held,
                               rotation=R)
            rows.wait(futures)
            return futures

        parts = rows.again(run)
    except BaseException:
        held.release()
        raise
    held.release()
    features = ClusterRows(client, parts, rows.n, int(lam.size), rows.tick)
    rows.release()  # the mapped features are what the iterations read
    return features, lam, V, error


def kernel_space_factory(estimator: MSVMAv, features: ClusterRows, lam: np.ndarray,
                         relay: Any):
    """``make_space`` of ``MSVMAv._run_tasks`` for the kernel's cluster features."""
    def make_space(target: Any) -> GramSpace:
        if relay is not None:
            relay.start(target.task)
        return GramSpace(features, target.positive, estimator.beta,
                         direct=estimator.update == "rebuild", metric=lam)
    return make_space


def sample_size(n: int, requested: int | None) -> int:
    return min(n, SAMPLE_ROWS if requested is None else max(2, int(requested)))


def choice_info(factor: LowRankFactor, n: int, count: int) -> dict[str, Any]:
    return {"sample_rows": count, "sample_kernel_error": factor.error,
            "sample_share": count / n if n else math.nan}


def fit_kernel_on_cluster(estimator: MSVMAv, X: Any, y: Any, *, client: Any,
                          callback: Any = None, sample: int | None = None,
                          keep: str = "auto") -> MSVMAv:
    """``fit_on_cluster`` for kernel="rbf" or "poly" (the module's steps 1-4); ``sample``:
    the rows the landmarks are chosen from (SAMPLE_ROWS; every row when there are no more);
    ``keep``: what the workers hold between passes (``_memory``: "features", "rows",
    "nothing", or "auto", the fastest way every worker's memory holds). The estimator ends
    with a local low-rank fit's attributes, ``landmark_block_`` (L_PP, for
    ``fit_on_landmarks``) and ``fit_info_["cluster"]``."""
    sizes, d = [int(c) for c in X.chunks[0]], int(X.shape[1])
    workers = _memory.read_workers(client)
    cap = planned_rank(estimator, sum(sizes), workers, sizes, d, keep)
    memory = _memory.plan(workers, sizes, d, cap, keep)  # (a given rank refused here)
    rows = hold_rows(client, X, y, False, memory)
    features = None
    try:
        summary = rows.reduce(_blocks.summarise_block, combine=_blocks.merge_summaries, d=d)
        start_fit(estimator, rows, summary)
        classes = summary["labels"]
        positives = [classes[1]] if classes.size == 2 else list(classes)
        estimator.gamma_ = cluster_gamma(estimator, rows, d)
        landmarks, factor, choice, count = _landmarks(estimator, rows, sizes, cap, sample,
                                                      len(positives))
        if memory.way == "features" or (keep == "auto" and memory.way == "rows"):
            memory = _memory.plan(workers, sizes, d, landmarks.rank,
                                  "features" if memory.way == "features" else "auto")
        features, lam, V, error = mapped_rows(rows, landmarks, memory.way == "features")
        coefs, info = _iterate(estimator, features, lam, positives, callback,
                               {"pivots": landmarks.rank, "n_components": int(lam.size),
                                **choice_info(factor, rows.n, count)})
        info["cluster"] = {"blocks": features.blocks, "passes": rows.passes + features.passes,
                           "space": "gram", "rank_cap": cap, **memory.info()}
        if choice is not None:
            info["rank_choice"], info["rank_reason"] = choice
        estimator.fit_info_ = info
        finish(estimator, coefs, V, lam, landmarks)
        estimator.kernel_error_ = error
        estimator.landmark_block_ = landmarks.block
    finally:
        rows.release()
        if features is not None:
            features.release()
    return estimator


def _landmarks(estimator: MSVMAv, rows: ClusterRows, sizes: list[int], cap: int,
               sample: int | None, n_tasks: int
               ) -> tuple[Landmarks, LowRankFactor, tuple | None, int]:
    """(the landmarks, their factor on the sample, auto's choice, the sample's rows), the
    rank at most ``cap`` (what the workers' memory holds, ``planned_rank``)."""
    count = sample_size(rows.n, sample)
    Xs = sample_rows(rows, sizes, count, estimator.random_state)
    factor, choice = choose_landmarks(estimator, Xs, rows.n, n_tasks, cap)
    landmarks = Landmarks(Xs[factor.pivots], factor.pivot_block(), estimator._kernel_args())
    return landmarks, factor, choice, count


def _iterate(estimator: MSVMAv, features: ClusterRows, lam: np.ndarray, positives: list,
             callback: Any, info: dict) -> tuple[np.ndarray, dict]:
    """The one-vs-rest tasks' iterations on the features: (their coefficients, fit info)."""
    relay = None if callback is None else Relay(callback, estimator.max_iter, len(positives))
    features.tick = None if relay is None else relay.tick
    return estimator._run_tasks(
        Targets(features.n, positives), relay,
        kernel_space_factory(estimator, features, lam, relay), int(lam.size), info)
