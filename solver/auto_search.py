"""``search: "auto"``: choose MSVMAv's kernel (linear or RBF) and alpha, beta, gamma by
stratified cross-validation within a time budget, by successive halving over the folds.

The candidates (``candidates``), cheapest first:

* linear MSVMAv on alpha in ``ALPHAS`` x beta in ``BETAS`` (9 settings);
* RBF MSVMAv on ``RBF_PAIRS`` of (alpha, beta) for gamma in ``GAMMA_FACTORS`` x "scale"
  (1 / (d Var X) on the scaled rows; 1/4 to 16 times it, i.e. about 1/d to 200/d on min-max
  scaled data, beyond the paper's grid {2^j / d, j <= 4});
* with ``algorithms``, each named comparator's "quick" grid (``solver.comparators``).

The race (``auto_search``), folds ``StratifiedKFold(cv, shuffle=True, random_state=seed)``.
The **budget** is the whole job's: the race, the winner's final fit on every training row and
its calibration (fitted on the race's out-of-fold values: no fit). Every decision to start
work is taken on a predicted cost: ``solver.fit_time.msvmav_seconds`` (the cost model of the
path the fit will take) scaled by what the race measured (a candidate's own rung-0 time times
the model's ratio between the two sizes; before it ran, the model times the measured/modelled
ratio of the cells of its kernel that ran, 1 before any did). Every RBF fit of the race and
the winner's final fit take one kernel path (``rbf_path``): the exact kernel up to
``EXACT_SEARCH_ROWS`` training rows, above it Nystroem at one rank (at most ``RACE_RANK``,
from the cost model and the budget), so the time a fit measured predicts the others' on the
same path (before, rung 0 ran a sample's exact kernel and the final fit every row's low-rank
path, whose rank and time the race never measured: magic's took 155 s against 61 s
predicted).

1. **rung 0**: every candidate on the first fold (above 1.5 x ``rung0_rows`` training rows, of
   a stratified sample of ``rung0_rows``: ``RUNG0_ROWS``, or more where the Nystroem rank
   needs it to stay on its path); the linear ones first (always), then one RBF width
   at a time, a width started only when its predicted cost fits ``RUNG0_SHARE`` of the budget
   ("skipped: budget"); a fit still running at that point stops and does not count
   ("stopped: budget");
2. **rung 1**: the best ``1/ETA`` of them, in score order, as long as their remaining folds
   (on every training row) and the largest of their final fits (predicted) fit the rest of
   the budget; when none of them does, the best-scoring other candidate that does. They run
   group by group (a width's settings share a fold's kernel), every fit stopping at the
   budget less the reserved final fit; one stopped drops out ("stopped: budget");
3. the winner is the highest mean score over all folds among the finalists that ran every
   fold (a tie: the earlier, cheaper candidate). Its out-of-fold decision values (``oof``:
   every training row scored by a model that did not see it) are what a calibrator is fitted
   on (``calibrate_from_oof``): no second round of folds. When no finalist could be afforded
   (or none finished), the winner is the best rung-0 candidate whose final fit fits what is
   left (else the best of the cheapest kind), its ``oof`` only its rung-0 fold's rows (the
   others NaN; the calibrator is fitted on those rows); only candidates whose final fit takes
   their rung-0 path (``_same_path``). After rung 1 the finalists' final fits are predicted
   again from their full-fold fits, and the winner's must fit what is left (``_winner``).

With exact predictions the job then ends within the budget, or, when even the cheapest
completion does not fit, within the budget plus one fit of the cheapest candidate (the linear
rung-0 batch always runs); with measured times it is off by the final fit's prediction error
(the race's fits stop at their deadlines). ``CostClock`` replays a race on a cost model
instead of the wall clock (tests/solver/test_auto_search.py checks the bound with it).

**Score** (``scoring``): accuracy; balanced accuracy (the mean of the classes' recalls) when
the fits are class-weighted (``params["class_weight"]`` set), or as asked.

Work shared: the linear settings of a fold run in one lockstep batch per one-vs-rest class
(``solver._batched_msvmav``); for an RBF width and a fold the Gram matrix and [K | (I + K)^-1]
are computed once and shared by every (alpha, beta) and every one-vs-rest class, where the
fold's fit takes the exact-kernel path (``MSVMAv.kernel_path``); above it each setting is a
plain fit on the Nystroem path (its landmarks drawn with the race's seed). **Warm starts**
(``warm_start``, on by default): an exact-kernel setting starts from the solution of the
nearest (in log alpha, log beta) setting of its width already fitted on the same fold
(``msvmav.WarmStart``; the row's ``warm_from``), a plain MSVMAv fit from the previous setting
of its group on the same fold (``MSVMAv(warm_start=True)``: linear and exact paths); the
lockstep linear batch starts every setting from the MAMC direction. Every cell's decision
values are those of the same chain of ``MSVMAv`` fits (``warm_start=True`` after
``set_params``) on the fold's rows (tests/solver/test_auto_search.py compares them).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import StratifiedKFold, train_test_split

from ._active_set import DualSystem
from ._base import to_dense_rows
from ._batched_msvmav import fit_linear_batch
from ._linear_step import DENSE_MAX_DIM
from ._msvmav_core import DualSpace, iterate
from .algorithms import estimator_class, takes_seed
from .calibration import fit_calibrator
from .comparators import iter_configs, param_grid
from .fit_cost import low_rank_seconds
from .fit_time import msvmav_seconds
from .kernels import RBF, gram_matrix, kernel_matrix, kernel_type, resolve_gamma
from .msvmav import MSVMAv, WarmStart, kernel_threads
from .msvmav_parameters import LOW_RANK_SHARE
from .weights import fit_weights

ALPHAS = (1.0, 16.0, 256.0)
BETAS = (2.0**-6, 0.25, 4.0)
# the (alpha, beta) pairs tried with each RBF width (a kernel cell costs far more than a linear
# one, so fewer of them)
RBF_PAIRS = ((1.0, 2.0**-6), (16.0, 2.0**-6), (16.0, 0.25), (256.0, 4.0))
# the race's RBF fits, and the winner's final fit, use the exact kernel up to this many
# training rows (shared by every setting of a fold and width); above, all of them take the
# Nystroem path at one rank (``rbf_path``), so that a fit's time measured in the race
# predicts the others' on the same path
EXACT_SEARCH_ROWS = 3000
# the Nystroem rank of the race above EXACT_SEARCH_ROWS: at most the largest dimension whose
# kernel step is solved densely (DENSE_MAX_DIM; above, by conjugate gradients: 6-8x slower
# at rank 1024 on magic's 9,600 rows), halved while the final fit's predicted time exceeds
# FINAL_SHARE of the budget, never below MIN_RACE_RANK
RACE_RANK = DENSE_MAX_DIM
MIN_RACE_RANK = 128
FINAL_SHARE = 0.25
# in the order rung 0 tries them (the widths that won most often first)
GAMMA_FACTORS = (4.0, 1.0, 16.0, 0.25)
AUTO_CV = 3
ETA = 3
# rung 0 may spend this share of the budget; the rest is for rung 1 and the final fit
RUNG0_SHARE = 0.6
# above 1.5 times this many training rows rung 0 runs on a stratified sample of this many
RUNG0_ROWS = 2000
# what the race ranks by: accuracy, or balanced accuracy (the default with class weights)
SCORINGS = ("accuracy", "balanced_accuracy")
# seconds of a default budget: BUDGET_SHARE times a low estimate of the time of
# GridSearchCV(SVC(), {C: 4 values, gamma: 3}, cv=3) on n training rows of d features,
# GRID_BASE + GRID_PER_CELL * n^2 * (1 + d / GRID_WIDTH) (bench/default_model.py's
# --grid-scaling on this project's busy 2-core machine: the grid's time grows about as
# n^2, faster with d; the constants sit near the lower envelope of its measured times), at
# most BUDGET_MAX
GRID_BASE = 0.3
GRID_PER_CELL = 7e-7
GRID_WIDTH = 40.0
BUDGET_SHARE = 1.6
BUDGET_MAX = 900.0
KERNELS = ("linear", "rbf")

ProgressCallback = Callable[[int, int], Any]


def default_budget(n_train: int, n_features: int) -> float:
    """The default ``budget_seconds`` of an auto search on n_train rows of n_features
    columns: BUDGET_SHARE times a low estimate of an SVC grid search's time on them (see
    the constants), so that the whole job, which overruns its budget by at most a fit's
    prediction error, stays within about twice that grid's; at most BUDGET_MAX."""
    n, d = float(n_train), float(n_features)
    grid = GRID_BASE + GRID_PER_CELL * n * n * (1.0 + d / GRID_WIDTH)
    return float(round(min(BUDGET_MAX, BUDGET_SHARE * grid), 1))


def exact_kernel(n_train: int) -> str:
    """The ``approximation`` of the race's RBF fits on a part of n_train rows and of the
    winner's final fit: "exact" up to EXACT_SEARCH_ROWS, else "nystroem" (``rbf_path``
    gives its rank)."""
    return "exact" if n_train <= EXACT_SEARCH_ROWS else "nystroem"


def rung0_rows(n_train: int, rank: int = 0, cv: int = AUTO_CV) -> int:
    """The rows rung 0 runs on: all n_train, or above 1.5 times the sample a stratified
    sample of at least RUNG0_ROWS, and enough that a Nystroem fit of ``rank`` landmarks on a
    fold of it stays on the Nystroem path (rank < LOW_RANK_SHARE of the fold's rows: MSVMAv
    takes the exact kernel below that)."""
    need = math.ceil((rank / LOW_RANK_SHARE + 1) * cv / max(1, cv - 1)) + cv
    sample = max(RUNG0_ROWS, need)
    return n_train if n_train <= 1.5 * sample else sample


def rbf_path(n_train: int, n_features: int, n_classes: int = 2, *,
             budget_seconds: float | None = None, max_iter: int = 100,
             cv: int = AUTO_CV) -> dict[str, Any]:
    """The kernel-path parameters of every RBF fit of the race on n_train training rows and
    of the winner's final fit (one path for all, so a time measured in the race predicts
    the final fit's): ``{"approximation": "exact"}`` up to EXACT_SEARCH_ROWS; above,
    ``{"approximation": "nystroem", "n_components": r}`` with r from the cost model
    (RACE_RANK, halved while the final fit's predicted time exceeds FINAL_SHARE of the budget,
    at least MIN_RACE_RANK) and below LOW_RANK_SHARE of rung 0's fold rows (every fit of the
    race then takes the Nystroem path)."""
    if n_train <= EXACT_SEARCH_ROWS:
        return {"approximation": "exact"}
    budget = (default_budget(n_train, n_features) if budget_seconds is None
              else float(budget_seconds))
    tasks = 1 if n_classes <= 2 else n_classes
    rank = RACE_RANK
    while (rank > MIN_RACE_RANK and low_rank_seconds(n_train, n_features, rank, max_iter, tasks)
           > FINAL_SHARE * budget):
        rank //= 2
    fold = rung0_rows(n_train, rank, cv) * (cv - 1) // cv
    rank = max(1, min(rank, math.ceil(LOW_RANK_SHARE * fold) - 1))
    return {"approximation": "nystroem", "n_components": int(rank)}


@dataclass
class Setting:
    """One candidate: an algorithm, its kernel and its searched parameters."""

    algorithm: str
    kernel: str
    params: dict[str, Any]

    def label(self) -> str:
        inner = ", ".join(f"{k}={_short(v)}" for k, v in self.params.items())
        return f"{self.algorithm} {self.kernel} ({inner})"


def _short(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def candidates(X, *, kernels: tuple[str, ...] = KERNELS,
               algorithms: tuple[str, ...] = ("msvmav",),
               fixed: dict | None = None) -> list[Setting]:
    """The race's candidates, cheapest first (see the module docstring). ``fixed``: MSVMAv
    parameters the request set (alpha, beta, gamma): not searched."""
    fixed = fixed or {}
    out: list[Setting] = []
    if "msvmav" in algorithms:
        alphas = [fixed["alpha"]] if "alpha" in fixed else list(ALPHAS)
        betas = [fixed["beta"]] if "beta" in fixed else list(BETAS)
        pairs = [{"alpha": float(a), "beta": float(b)} for a in alphas for b in betas]
        if "linear" in kernels:
            out += [Setting("msvmav", "linear", dict(p)) for p in pairs]
        if not ({"alpha", "beta"} & set(fixed)):
            pairs = [{"alpha": a, "beta": b} for a, b in RBF_PAIRS]
        if "rbf" in kernels:
            scale = resolve_gamma("scale", X)
            gammas = ([resolve_gamma(fixed["gamma"], X)] if "gamma" in fixed
                      else [scale * f for f in GAMMA_FACTORS])
            out += [Setting("msvmav", "rbf", {"gamma": float(g), **p})
                    for g in gammas for p in pairs]
    for name in algorithms:
        if name == "msvmav":
            continue
        for kernel in kernels:
            grid = param_grid(name, kernel=kernel, n_features=X.shape[1], quick=True)
            out += [Setting(name, kernel, dict(c)) for c in iter_configs(grid)]
    return out


@dataclass
class AutoResult:
    """What ``auto_search`` tried and chose.

    ``table``: one row per candidate, in candidate order: ``setting`` (label),
    ``algorithm``, ``kernel``, ``params``, ``folds`` (folds scored), ``scores`` (per fold,
    fold order, by ``scoring``), ``mean_score`` and ``mean_accuracy`` (None when not run),
    ``iterations`` (summed over its fits and one-vs-rest tasks), ``warm_from`` (per fold, the
    label of the setting its fit there started from; None: the MAMC direction, or not
    fitted), ``seconds`` (its fits, shared work split evenly), ``status`` ("finalist",
    "finalist: final fit over budget", "dropped at rung 0", "skipped: budget", "stopped:
    budget", "winner at rung 0: budget", "failed: ..."). ``oof``: the winner's out-of-fold
    decision values (n,) or (n, k) (rows it has none for, NaN: see the module docstring).
    ``final_fit_seconds``: the winner's final fit on every training row as predicted.
    ``kernel_params``: the kernel path every RBF fit of the race took (``rbf_path``; empty
    when the request fixed ``approximation``), which the winner's final fit takes too."""

    table: list[dict]
    best_index: int
    reason: str
    cv: int
    random_state: int | None
    budget_seconds: float
    seconds: float
    oof: np.ndarray
    fixed_params: dict = field(default_factory=dict)
    scoring: str = "accuracy"
    final_fit_seconds: float = 0.0
    kernel_params: dict = field(default_factory=dict)

    @property
    def oof_rows(self) -> np.ndarray:
        """The training rows ``oof`` holds values for (all of them unless the winner was
        chosen at rung 0)."""
        finite = np.isfinite(self.oof)
        return np.flatnonzero(finite if finite.ndim == 1 else finite.all(axis=1))

    @property
    def best(self) -> dict:
        return self.table[self.best_index]

    @property
    def best_params(self) -> dict:
        return dict(self.best["params"])

    @property
    def best_score(self) -> float:
        return float(self.best["mean_score"])

    @property
    def algorithm(self) -> str:
        return str(self.best["algorithm"])

    @property
    def kernel(self) -> str:
        return str(self.best["kernel"])

    def to_dict(self) -> dict:
        return {"mode": "auto", "algorithm": self.algorithm, "kernel": self.kernel,
                "best_params": self.best_params, "best_score": self.best_score,
                "best_index": self.best_index, "reason": self.reason, "cv": self.cv,
                "random_state": self.random_state, "budget_seconds": self.budget_seconds,
                "seconds": self.seconds, "fixed_params": dict(self.fixed_params),
                "n_configs": len(self.table), "table": [dict(r) for r in self.table],
                "scoring": self.scoring, "final_fit_seconds": self.final_fit_seconds,
                "kernel_params": dict(self.kernel_params)}


# -- the race's clock ------------------------------------------------------------------------


class Clock(Protocol):
    """What the race reads the time from: ``now()`` in seconds, ``fitted(setting, n_rows)``
    told whenever one of its fits (of ``n_rows`` training rows) ends."""

    def now(self) -> float: ...

    def fitted(self, setting: Setting, n_rows: int) -> None: ...


class WallClock:
    """The race's clock by default: wall time (``time.perf_counter``)."""

    def now(self) -> float:
        return time.perf_counter()

    def fitted(self, setting: Setting, n_rows: int) -> None:
        return None


@dataclass
class CostClock:
    """A clock on which time passes only when a fit ends, by ``cost(setting, n_rows)``
    seconds: the race's budget decisions replayed on a cost model, deterministically (tests;
    a dry run). ``fits``: (label, n_rows) of every fit, in the order they ended."""

    cost: Callable[[Setting, int], float]
    t: float = 0.0
    fits: list[tuple[str, int]] = field(default_factory=list)

    def now(self) -> float:
        return self.t

    def fitted(self, setting: Setting, n_rows: int) -> None:
        self.t += float(self.cost(setting, n_rows))
        self.fits.append((setting.label(), int(n_rows)))


# -- one fold's cells -----------------------------------------------------------------------


def _predicted(classes_n: int, D: np.ndarray) -> np.ndarray:
    return (D > 0).astype(np.intp) if classes_n == 2 else np.argmax(D, axis=1)


def _nearest(settings: list[Setting], i: int, done: dict[int, Any]) -> int | None:
    """The setting of ``done`` nearest to setting i in (log alpha, log beta); ties: the
    earlier one; None when ``done`` is empty."""
    def gap(j: int) -> float:
        a, b = settings[i].params, settings[j].params
        return (abs(math.log2(a["alpha"] / b["alpha"]))
                + abs(math.log2(a["beta"] / b["beta"])))
    return min(done, key=lambda j: (gap(j), j)) if done else None


class _Race:
    """The data, folds and per-candidate state of one auto search."""

    def __init__(self, X, y: np.ndarray, settings: list[Setting], folds: list[tuple],
                 fixed: dict, seed: int | None, tick: Callable[[], None], *,
                 clock: Clock, scoring: str, warm: bool, path: dict) -> None:
        self.X, self.settings, self.folds, self.fixed = X, settings, folds, fixed
        self.path = path  # every width fit's kernel path (``rbf_path``)
        self.classes, self.yi = np.unique(y, return_inverse=True)
        self.y, self.seed, self.tick = y, seed, tick
        self.clock, self.scoring, self.warm = clock, scoring, warm
        self.k = self.classes.size
        self.scores = np.full((len(settings), len(folds)), np.nan)  # by ``scoring``
        self.accuracy = np.full((len(settings), len(folds)), np.nan)
        self.seconds = np.zeros(len(settings))
        self.cells = np.zeros(len(settings), dtype=np.intp)  # fits measured to the end
        self.iterations = np.zeros(len(settings), dtype=np.intp)
        # (i, fold) -> the setting its fit on the fold started from
        self.warm_from: dict[tuple[int, int], int] = {}
        self.oof: dict[int, np.ndarray] = {}
        self.errors: dict[int, str] = {}  # a candidate whose fit failed: why (it has no score)
        # no setting starts after this (clock) time, and a running fit stops at it (its cell
        # then does not count)
        self.deadline = math.inf

    @property
    def fold_rows(self) -> int:
        return len(self.folds[0][0])

    def late(self, done_in_group: int) -> bool:
        """A group's next setting is skipped once the deadline passed (its first never)."""
        return done_in_group > 0 and self.clock.now() > self.deadline

    def stop(self, _info: dict) -> bool:
        """The fits' callback: progress, and stop once the deadline passed."""
        self.tick()
        return self.clock.now() > self.deadline

    def record(self, i: int, fold: int, D: np.ndarray, seconds: float, n_iter: int) -> None:
        _, test = self.folds[fold]
        self.seconds[i] += seconds
        self.cells[i] += 1
        self.iterations[i] += n_iter
        if not np.all(np.isfinite(D)):  # e.g. features of 1e308 without scaling
            self.errors.setdefault(i, "non-finite decision values (infs or NaNs)")
            return
        pred, truth = _predicted(self.k, D), self.yi[test]
        self.accuracy[i, fold] = float(np.mean(pred == truth))
        self.scores[i, fold] = (self.accuracy[i, fold] if self.scoring == "accuracy"
                                else float(balanced_accuracy_score(truth, pred)))
        shape = (len(self.y),) if self.k == 2 else (len(self.y), self.k)
        self.oof.setdefault(i, np.full(shape, np.nan))[test] = D

    def msvmav(self, params: dict, kernel: str) -> MSVMAv:
        width = kernel_type(kernel).takes_gamma
        extra = self.path if width else {}
        return MSVMAv(kernel=kernel, **{**self.fixed, **extra, **params, "calibration": "none"})

    def model_seconds(self, i: int, n: int) -> float | None:
        """The cost model's seconds of candidate i's fit on n of these rows (None: not an
        MSVMAv, not modelled)."""
        s = self.settings[i]
        if s.algorithm != "msvmav":
            return None
        nnz = (int(self.X.nnz * n / max(1, self.X.shape[0])) if sparse.issparse(self.X)
               else None)
        return msvmav_seconds(self.msvmav(s.params, s.kernel), n, self.X.shape[1], nnz, self.k)

    def run(self, idx: list[int], fold: int) -> None:
        """Score the candidates ``idx`` (all of one kernel and width, or any plain ones) on
        ``fold``, sharing what they share. A group whose fit raises a ValueError (a constant
        kernel matrix, say) is left without scores, the reason kept in ``errors``; the race
        goes on without it."""
        idx = [i for i in idx if i not in self.errors]
        if not idx:
            return None
        try:
            return self._run(idx, fold)
        except ValueError as exc:
            for i in idx:
                self.errors.setdefault(i, str(exc))
            return None

    def _run(self, idx: list[int], fold: int) -> None:
        first = self.settings[idx[0]]
        train, _ = self.folds[fold]
        msvmav, kind = first.algorithm == "msvmav", kernel_type(first.kernel)
        if msvmav and kind.primal and self._batchable(train):
            return self._linear_batch(idx, fold)
        # the race's exact RBF cells share one Gram matrix and inverse per fold and width
        if (msvmav and issubclass(kind, RBF)
                and self.fixed.get("class_weight") is None  # weighted: MSVMAv.fit's own
                and self.msvmav(first.params, "rbf").kernel_path(len(train)) == "exact"):
            return self._exact_kernel(idx, fold)
        previous = None
        for n, i in enumerate(idx):
            if self.late(n):
                break
            previous = self._plain(i, fold, previous)
        return None

    def _batchable(self, train: np.ndarray) -> bool:
        est = self.msvmav({}, "linear")
        plain = set(self.fixed) <= {"max_iter", "tol", "stop", "fit_intercept", "alpha", "beta",
                                    "gamma", "random_state", "degree", "coef0"}
        return (plain and est.linear_path(len(train), self.X.shape[1]) == "dense")

    def _plain(self, i: int, fold: int, previous: tuple[int, Any] | None
               ) -> tuple[int, Any] | None:
        """Candidate i's own fit on the fold; an MSVMAv fit continues from ``previous`` (the
        group's last fit on this fold: (its index, estimator)) with ``warm_start``. Returns
        (i, its estimator) for the next, or None when it stopped."""
        s = self.settings[i]
        train, test = self.folds[fold]
        self.tick()
        t = self.clock.now()
        if self.warm and previous is not None and isinstance(previous[1], MSVMAv):
            self.warm_from[i, fold] = previous[0]
            est = previous[1].set_params(**s.params, warm_start=True)
        elif s.algorithm == "msvmav":
            est = self.msvmav(s.params, s.kernel)
        else:
            extra = {"random_state": self.seed} if takes_seed(s.algorithm) else {}
            est = estimator_class(s.algorithm)(kernel=s.kernel, **extra, **s.params)
        est.fit(self.X[train], self.y[train], callback=self.stop)
        self.clock.fitted(s, len(train))
        if getattr(est, "stopped_early_", False):  # the deadline: the cell does not count
            self.seconds[i] += self.clock.now() - t
            return None
        iterations = len(getattr(est, "history_", ()) or ())
        self.record(i, fold, est.decision_function(self.X[test]), self.clock.now() - t,
                    iterations)
        return i, est

    def _linear_batch(self, idx: list[int], fold: int) -> None:
        """The fold's linear settings in one lockstep batch per one-vs-rest class."""
        train, test = self.folds[fold]
        t = self.clock.now()
        est = self.msvmav({}, "linear")
        yi, d = self.yi[train], self.X.shape[1]
        Xtr, Xte = self.X[train], self.X[test]
        D = np.zeros((len(test), len(idx), 1 if self.k == 2 else self.k))
        work = np.zeros(len(idx))
        for c in range(D.shape[2]):
            ypm = 2.0 * (yi == (1 if self.k == 2 else c)) - 1.0
            W, n_iter = fit_linear_batch(
                Xtr, ypm, [self.settings[i].params["alpha"] for i in idx],
                [self.settings[i].params["beta"] for i in idx], max_iter=est.max_iter,
                tol=est.tol, stop=est.stop, fit_intercept=est.fit_intercept,
                callback=lambda _k: self.tick())
            coef, bias = (W[:, :d], W[:, d]) if est.fit_intercept else (W, 0.0)
            D[:, :, c] = np.asarray(Xte @ coef.T) + bias
            work += n_iter
        total = self.clock.now() - t  # split by work; a clock's own charge is each fit's
        for j, i in enumerate(idx):
            t = self.clock.now()
            self.clock.fitted(self.settings[i], len(train))
            self.record(i, fold, D[:, j, 0] if self.k == 2 else D[:, j],
                        self.clock.now() - t + total * float(work[j] / max(work.sum(), 1)),
                        int(work[j]))

    def _exact_kernel(self, idx: list[int], fold: int) -> None:
        """One Gram matrix and [K | (I + K)^-1] for the fold and width, every (alpha, beta)
        and every one-vs-rest class iterated on it, as ``MSVMAv._fit_exact_kernel`` does; with
        ``warm``, each setting from the nearest one already fitted (``_nearest``)."""
        train, test = self.folds[fold]
        t = self.clock.now()
        gamma = self.settings[idx[0]].params["gamma"]
        Xtr = self.X[train]
        with kernel_threads(len(train)):
            K = gram_matrix(Xtr, kernel="rbf", gamma=gamma)
            Kte = kernel_matrix(self.X[test], to_dense_rows(Xtr), kernel="rbf", gamma=gamma)
            pair = DualSystem.pair(K)
        del K
        prep = (self.clock.now() - t) / len(idx)
        yi = self.yi[train]
        Y = ((2.0 * yi - 1.0)[:, None] if self.k == 2
             else np.where(yi[:, None] == np.arange(self.k)[None, :], 1.0, -1.0))
        done: dict[int, np.ndarray] = {}
        with kernel_threads(len(train)):
            for n, i in enumerate(idx):
                if self.late(n):
                    break
                t = self.clock.now()
                near = _nearest(self.settings, i, done) if self.warm else None
                A, iterations, stopped = self._dual_cell(
                    i, pair, Y, None if near is None else done[near])
                self.clock.fitted(self.settings[i], len(train))
                if stopped:  # the deadline: the cell does not count
                    self.seconds[i] += self.clock.now() - t + prep
                    continue
                done[i] = A
                if near is not None:
                    self.warm_from[i, fold] = near
                D = Kte @ A
                self.record(i, fold, D[:, 0] if self.k == 2 else D,
                            self.clock.now() - t + prep, iterations)

    def _dual_cell(self, i: int, pair: tuple, Y: np.ndarray, init: np.ndarray | None
                   ) -> tuple[np.ndarray, int, bool]:
        """Setting i's exact-kernel iterations on a fold's ``pair``, each one-vs-rest class
        from ``init``'s column (None: the MAMC direction). Returns (A, iterations, stopped)."""
        est = self.msvmav(self.settings[i].params, "rbf")
        A = np.zeros((Y.shape[0], Y.shape[1]))
        iterations = 0
        for c in range(Y.shape[1]):
            space = DualSpace(pair, Y[:, c], est.beta)
            if init is not None:
                space = WarmStart(space, init[:, c])
            A[:, c], n_iter, _, stopped = iterate(
                space, Y[:, c], alpha=est.alpha, max_iter=est.max_iter, tol=est.tol,
                stop=est.stop, callback=self.stop)
            iterations += n_iter
            if stopped:
                return A, iterations, True
        return A, iterations, False


# -- predicted costs ------------------------------------------------------------------------


def _per_fit(race: _Race, i: int) -> float | None:
    """Candidate i's measured seconds per fold fit on ``race``, None before one ended."""
    return float(race.seconds[i] / race.cells[i]) if race.cells[i] else None


def _ratio(race: _Race, kernel: str) -> float:
    """Measured over modelled seconds of the ``kernel`` fits that ended (median; 1, the cost
    model's own, before any did). Not another kernel's ratio: the linear model counts the
    arithmetic only, so its ratio (about 40 on magic's 2,051-row folds) is no guide to a
    kernel path's, whose model includes each iteration's overhead; taking it skipped every
    RBF width of magic's race."""
    found, kind = [], kernel_type(kernel)
    for i, s in enumerate(race.settings):
        model = race.model_seconds(i, race.fold_rows) if race.cells[i] else None
        if kernel_type(s.kernel) is kind and model:
            found.append(_per_fit(race, i) / model)
    return float(np.median(found)) if found else 1.0


def predict(small: _Race, race: _Race, i: int, n: int) -> float:
    """Predicted seconds of candidate i's fit on n rows of ``race``: a time it measured (on
    ``race``, else on ``small``, rung 0's) times the cost model's ratio between the sizes;
    before any, the model times the measured/modelled ratio of its kernel (``_ratio``); a
    comparator (not modelled): linear (kernel: quadratic) in the rows."""
    src = race if race.cells[i] else small
    measured = _per_fit(src, i)
    target = race.model_seconds(i, n)
    if measured is None:
        if target is not None:
            return target * _ratio(small, race.settings[i].kernel)
        ended = [_per_fit(small, j) for j in range(len(small.settings)) if small.cells[j]]
        return float(np.mean(ended)) * n / small.fold_rows if ended else 0.0
    base = src.model_seconds(i, src.fold_rows)
    if target and base:
        return measured * target / base
    power = 1.0 if kernel_type(race.settings[i].kernel).primal else 2.0
    return measured * (n / max(1, src.fold_rows)) ** power


@dataclass
class _Budget:
    """The job's budget: ``seconds`` from ``start`` on ``clock``."""

    clock: Clock
    start: float
    seconds: float

    def left(self) -> float:
        return self.seconds - (self.clock.now() - self.start)


# -- the race -------------------------------------------------------------------------------


def _groups(settings: list[Setting], idx: list[int]) -> list[list[int]]:
    """``idx`` grouped by what a fold's cells share: (algorithm, kernel, gamma), in order."""
    groups: dict[tuple, list[int]] = {}
    for i in idx:
        s = settings[i]
        key = (s.algorithm, s.kernel, s.params.get("gamma") if s.algorithm == "msvmav" else i)
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def _rung0(small: _Race, budget: _Budget, status: list[str]) -> None:
    """Every candidate on fold 0 of ``small``, group by group: the first group (the linear
    settings) always, every other one when its predicted cost fits the budget's RUNG0_SHARE
    (within a group, no setting starts after that point, and a running fit stops there)."""
    end = budget.start + RUNG0_SHARE * budget.seconds
    small.deadline = end
    for n, group in enumerate(_groups(small.settings, list(range(len(small.settings))))):
        cost = sum(predict(small, small, i, small.fold_rows) for i in group)
        if n and small.clock.now() + cost > end:
            continue
        small.run(group, 0)
    small.deadline = math.inf
    for i in range(len(small.settings)):
        status[i] = (f"failed: {small.errors[i]}" if i in small.errors
                     else "dropped at rung 0" if not np.isnan(small.scores[i, 0])
                     else "stopped: budget" if small.seconds[i] > 0 else "skipped: budget")
    if np.isnan(small.scores[:, 0]).all() and small.errors:
        first = min(small.errors)  # the cheapest candidate's reason (they come cheapest first)
        raise ValueError(f"no setting of the search could be fitted: {small.errors[first]} "
                         f"({len(small.errors)} of {len(small.settings)} failed)")


def _completion(small: _Race, race: _Race, i: int) -> tuple[float, float]:
    """Candidate i's predicted (remaining folds on ``race``, final fit on all its rows)."""
    rest = len(race.folds) - (1 if small is race else 0)
    return (rest * predict(small, race, i, race.fold_rows),
            predict(small, race, i, len(race.y)))


def _finalists(small: _Race, race: _Race, budget: _Budget,
               status: list[str]) -> tuple[list[int], float]:
    """The best 1/ETA of rung 0's candidates, in score order, while their remaining folds and
    the largest of their final fits (``_completion``) fit what is left of the budget (when
    none does, the best-scoring other candidate that does). When the best rung-0 candidate is
    not among them and one whose final fit alone fits scored clearly better than the first
    of them (``_clearly``), or when none is affordable: no finalist (``_rung0_winner``
    chooses). Returns them and the final fit's reserve."""
    ran = [i for i in range(len(status)) if not np.isnan(small.scores[i, 0])]
    order = sorted(ran, key=lambda i: (-small.scores[i, 0], i))
    n_keep = max(1, math.ceil(len(order) / ETA))
    left = budget.left()
    chosen, cost, reserve = [], 0.0, 0.0
    for n, i in enumerate(order):
        if len(chosen) == n_keep or (n >= n_keep and chosen):
            break
        more, final = _completion(small, race, i)
        if cost + more + max(reserve, final) <= left:
            chosen.append(i)
            cost, reserve = cost + more, max(reserve, final)
    if chosen and chosen[0] != order[0]:  # the best could not be afforded
        # a candidate whose final fit takes another path has no trusted prediction: it
        # competes on its score (``_rung0_winner``)
        alone = [i for i in order if not _same_path(small, race, i)
                 or _completion(small, race, i)[1] <= left]
        if alone and _clearly(small, alone[0], chosen[0]):
            chosen, reserve = [], 0.0
    for i in chosen:
        status[i] = "finalist"
    return chosen, reserve


def _clearly(small: _Race, a: int, b: int) -> bool:
    """Candidate a's rung-0 score beats b's by more than two binomial standard errors of
    b's on the rung-0 fold's test rows."""
    p, n_test = float(small.scores[b, 0]), len(small.folds[0][1])
    return float(small.scores[a, 0]) > p + 2.0 * math.sqrt(max(p * (1 - p), 1e-4) / n_test)


def _rung1(race: _Race, finalists: list[int], folds: range, deadline: float,
           status: list[str]) -> list[int]:
    """The finalists on the remaining folds, group by group in score order (a group's
    settings share each fold's kernel), every fit stopping at ``deadline`` (the budget less
    the reserved final fit; none starts after it); a finalist stopped (or failed) on a fold
    drops out. Returns those that ran every fold, in finalist order."""
    race.deadline = deadline
    for group in _groups(race.settings, finalists):
        for fold in folds:
            group = [i for i in group if i not in race.errors
                     and not np.isnan(race.scores[i, :fold]).any()]
            if not group or race.clock.now() > deadline:
                break
            race.run(group, fold)
    race.deadline = math.inf
    done = [i for i in finalists if not np.isnan(race.scores[i]).any()]
    for i in set(finalists) - set(done):
        status[i] = f"failed: {race.errors[i]}" if i in race.errors else "stopped: budget"
    return done


def _same_path(small: _Race, race: _Race, i: int) -> bool:
    """Whether candidate i's final fit takes the path its rung-0 fit took (the cost model's
    ratio between them is then trusted; a kernel fit measured on the exact path of a sample
    and predicted on the low-rank one of every row is not: its rank, and so its time,
    depends on the width's spectrum)."""
    s = race.settings[i]
    if small is race or s.algorithm != "msvmav" or kernel_type(s.kernel).primal:
        return True
    return (small.msvmav(s.params, s.kernel).kernel_path(small.fold_rows)
            == race.msvmav(s.params, s.kernel).kernel_path(len(race.y)))


def _kind(s: Setting) -> tuple[str, str]:
    return s.algorithm, s.kernel


def _rung0_winner(small: _Race, race: _Race, budget: _Budget, status: list[str]) -> int:
    """No finalist finished: the best rung-0 candidate whose final fit (predicted) fits what
    is left of the budget, else the best of the algorithm and kernel whose final fit is
    cheapest (their fits differ in iterations only); among the candidates whose final fit
    takes their rung-0 path when there are any (``_same_path``), unless the best rung-0
    candidate of all takes another path and scored clearly better (``_clearly``): then it
    (an RBF width on a sample's exact kernel, fitted low-rank on every row), its final fit's
    time unpredicted (magic: linear 0.762 chosen over RBF widths 0.83 at rung 0)."""
    ran = [i for i in range(len(status)) if not np.isnan(small.scores[i, 0])]
    if not ran:
        raise ValueError("no finalist of the search could be fitted on every fold: "
                         + "; ".join(sorted(set(race.errors.values()) or {"stopped"})))
    top = min(ran, key=lambda i: (-small.scores[i, 0], i))
    ran = [i for i in ran if _same_path(small, race, i)] or ran
    final = {i: _completion(small, race, i)[1] for i in ran}
    kind = _kind(race.settings[min(ran, key=lambda i: (final[i], i))])
    fits = ([i for i in ran if final[i] <= budget.left()]
            or [i for i in ran if _kind(race.settings[i]) == kind])
    best = min(fits, key=lambda i: (-small.scores[i, 0], i))
    if top not in ran and _clearly(small, top, best):
        # its final fit takes another path than its rung-0 fit (the low-rank one of every
        # row): its time is not predicted, but a clearly better model is worth it
        status[top] = "winner at rung 0: budget; final fit on another path (not predicted)"
        return top
    status[best] = "winner at rung 0: budget"
    return best


def _winner(small: _Race, race: _Race, done: list[int], budget: _Budget,
            status: list[str]) -> int:
    """The best mean score of the finalists that ran every fold (ties: the first in rung-0
    order) whose final fit, predicted again from its fits on the full folds, fits what is
    left of the budget; when none does, the one whose final fit is cheapest."""
    final = {i: _completion(small, race, i)[1] for i in done}
    fits = [i for i in done if final[i] <= budget.left()]
    if not fits:
        return min(done, key=lambda i: (final[i], i))
    means = race.scores[fits].mean(axis=1)
    best = fits[int(np.argmax(means))]
    for i in set(done) - set(fits):
        status[i] = "finalist: final fit over budget"
    return best


def _reason(race: _Race, best: int, finalists: list[int], top: int,
            small: _Race) -> str:
    name = race.scoring.replace("_", " ")
    if best not in finalists:
        return (f"chosen at rung 0: the best rung-0 {name} ({small.scores[best, 0]:.4f} on "
                f"one fold of {len(small.folds[0][1])} rows) among the candidates whose final "
                "fit fitted what was left of the budget (if none: of the cheapest kind); no "
                "candidate's remaining folds "
                "fitted it, or only those of one that scored clearly worse at rung 0")
    means = np.nanmean(race.scores[finalists], axis=1)
    order = [finalists[j] for j in np.argsort(-means, kind="stable")]
    text = (f"highest mean {name} over {len(race.folds)} stratified folds "
            f"({np.nanmean(race.scores[best]):.4f}) among {len(finalists)} finalists of "
            f"{len(race.settings)} candidates")
    if len(order) > 1:
        nxt = order[1] if order[0] == best else order[0]
        text += (f"; runner-up {race.settings[nxt].label()} "
                 f"{np.nanmean(race.scores[nxt]):.4f}")
    if order[0] != best:
        final = _completion(small, race, order[0])[1]
        text += (f"; {race.settings[order[0]].label()} scored higher but its final fit "
                 f"(predicted {final:.1f} s from its folds) did not fit the rest of the budget")
    if top not in finalists:
        more, final = _completion(small, race, top)
        text += (f"; {race.settings[top].label()} scored best at rung 0 but its folds and "
                 f"final fit (predicted {more + final:.1f} s) did not fit the rest of the "
                 "budget")
    return text


def _folds(y: np.ndarray, cv: int, seed: int | None) -> list[tuple]:
    return list(StratifiedKFold(n_splits=cv, shuffle=True,
                                random_state=seed).split(np.zeros(len(y)), y))


def _subsample(y: np.ndarray, seed: int | None, rows: int) -> np.ndarray | None:
    """Rung 0's rows (``rung0_rows``): a stratified sample of ``rows`` training rows (sorted
    indices), or None when that is all of them (rung 0 on the first fold of all)."""
    if rows >= len(y):
        return None
    keep, _ = train_test_split(np.arange(len(y)), train_size=rows, stratify=y,
                               random_state=seed)
    return np.sort(keep)


def _path(X, y: np.ndarray, fixed: dict, budget: float, cv: int, seed: int | None) -> dict:
    """``rbf_path`` for these rows and the fixed parameters (none when the request fixed
    ``approximation``); the Nystroem landmarks drawn with the race's seed unless fixed."""
    if "approximation" in fixed:
        return {}
    path = rbf_path(X.shape[0], X.shape[1], np.unique(y).size, budget_seconds=budget,
                    max_iter=int(fixed.get("max_iter", 100)), cv=cv)
    if path["approximation"] == "nystroem" and "random_state" not in fixed:
        path["random_state"] = 0 if seed is None else int(seed)
    return path


def _scoring(scoring: str | None, fixed: dict) -> str:
    if scoring is None:
        return "accuracy" if fixed.get("class_weight") is None else "balanced_accuracy"
    if scoring not in SCORINGS:
        raise ValueError(f"scoring: use one of {SCORINGS}, got {scoring!r}")
    return scoring


def auto_search(X, y, *, budget_seconds: float | None = None, cv: int = AUTO_CV,
                random_state: int | None = 0, kernels: tuple[str, ...] = KERNELS,
                algorithms: tuple[str, ...] = ("msvmav",), params: dict | None = None,
                callback: ProgressCallback | None = None, scoring: str | None = None,
                warm_start: bool = True, clock: Clock | None = None) -> AutoResult:
    """Choose a setting by successive halving over ``cv`` stratified folds within
    ``budget_seconds`` (None: ``default_budget``), the winner's final fit included (see the
    module docstring). X: (n, d) scaled rows (dense or CSR); ``params``: fixed MSVMAv
    parameters of every fit (max_iter, tol, stop, ...; alpha, beta or gamma given here are
    not searched). ``scoring``: "accuracy" or "balanced_accuracy" (None: balanced with a
    ``class_weight``). ``warm_start``: start kernel fits from a neighbouring setting's
    solution. ``clock``: the time the budget is read from (``WallClock()``; ``CostClock``
    replays a cost model). ``callback(done_cells, total_cells)`` is called between fits; an
    exception it raises aborts the search."""
    clock = clock or WallClock()
    y = np.asarray(y)
    fixed = {k: v for k, v in (params or {}).items() if k not in ("calibration", "kernel")}
    budget = default_budget(X.shape[0], X.shape[1]) if budget_seconds is None else budget_seconds
    plan = _Budget(clock, clock.now(), float(budget))
    settings = candidates(X, kernels=kernels, algorithms=algorithms, fixed=fixed)
    searched = {k for s in settings if s.algorithm == "msvmav" for k in s.params}
    fixed = {k: v for k, v in fixed.items() if k not in searched}
    cv = max(2, min(cv, int(np.unique(y, return_counts=True)[1].min())))
    total = len(settings) * cv
    path = _path(X, y, fixed, budget, cv, random_state)
    how = {"clock": clock, "scoring": _scoring(scoring, fixed), "warm": warm_start,
           "path": path}
    race = _Race(X, y, settings, _folds(y, cv, random_state), fixed, random_state,
                 lambda: callback(int(np.sum(~np.isnan(race.scores))), total)
                 if callback else None, **how)
    sub = _subsample(y, random_state, rung0_rows(len(y), path.get("n_components", 0), cv))
    small = race if sub is None else _Race(
        X[sub], y[sub], settings, _folds(y[sub], cv, random_state), fixed, random_state,
        race.tick, **how)
    status = [""] * len(settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        best, finalists, reserve = _race(small, race, plan, status)
    return _result(small, race, sub, plan, status, best, finalists, reserve)


def _race(small: _Race, race: _Race, plan: _Budget, status: list[str]
          ) -> tuple[int, list[int], float]:
    """Rung 0, the finalists, rung 1, the winner: (winner, finalists, final-fit reserve)."""
    _rung0(small, plan, status)
    finalists, reserve = _finalists(small, race, plan, status)
    folds = range(1 if small is race else 0, len(race.folds))
    done = (_rung1(race, finalists, folds, plan.start + plan.seconds - reserve, status)
            if finalists else [])
    if done:
        best = _winner(small, race, done, plan, status)
        return best, done, _completion(small, race, best)[1]
    best = _rung0_winner(small, race, plan, status)
    return best, [], _completion(small, race, best)[1]


def _result(small: _Race, race: _Race, sub: np.ndarray | None, plan: _Budget,
            status: list[str], best: int, finalists: list[int], reserve: float) -> AutoResult:
    settings = race.settings
    top = min(range(len(settings)),
              key=lambda i: (-np.nan_to_num(small.scores[i, 0], nan=-1), i))
    table = [_row(race, small, i, status[i]) for i in range(len(settings))]
    reason = _reason(race, best, finalists, top, small)
    if "another path" in status[best]:
        reason += ("; it scored clearly better than every candidate whose final fit takes "
                   "its rung-0 path, so it was chosen though its final fit (on every row, "
                   "another path) is not predicted and may overrun the budget")
    if sub is not None:
        reason += f"; rung 0 on a stratified sample of {len(sub)} of the {len(race.y)} rows"
    if best in finalists:
        oof = race.oof[best]
    elif sub is None:
        oof = small.oof[best]
    else:  # its rung-0 fold's rows of the sample, in the training rows' order
        part = small.oof[best]
        oof = np.full((len(race.y), *part.shape[1:]), np.nan)
        oof[sub] = part
    return AutoResult(table=table, best_index=best, reason=reason, cv=len(race.folds),
                      random_state=race.seed, budget_seconds=plan.seconds,
                      seconds=plan.clock.now() - plan.start, oof=oof,
                      fixed_params=race.fixed, scoring=race.scoring,
                      final_fit_seconds=float(_completion(small, race, best)[1]),
                      kernel_params=dict(race.path))


def calibrate_from_oof(est: Any, method: str, oof: np.ndarray, y: np.ndarray) -> None:
    """Give ``est`` (fitted with calibration="none" on the rows the race scored) the
    ``method`` calibrator fitted on the race's out-of-fold decision values ``oof`` of the same
    rows: what ``MarginClassifier.fit`` computes with a second round of folds, here from the
    race's folds; rows without a value (NaN: a winner chosen at rung 0) are left out. The
    values used are kept as ``oof_decision_`` and ``oof_index_``, as ``fit`` keeps its own.
    Nothing is fitted when the fit was stopped."""
    if getattr(est, "stopped_early_", False):
        return
    y = np.asarray(y)
    oof = np.asarray(oof, dtype=np.float64)
    finite = np.isfinite(oof) if oof.ndim == 1 else np.isfinite(oof).all(axis=1)
    if not finite.all():
        oof, y = oof[finite], y[finite]
    est.set_params(calibration=method)
    # the fit's class weights, as MarginClassifier.fit's calibrator takes them
    weights = fit_weights(getattr(est, "class_weight", None), None, y)
    est.calibrator_ = fit_calibrator(oof, y, est.classes_, method, sample_weight=weights)
    est.oof_decision_ = oof
    est.oof_index_ = np.searchsorted(est.classes_, y)


def _label(race: _Race, i: int | None) -> str | None:
    return None if i is None else race.settings[i].label()


def _row(race: _Race, small: _Race, i: int, status: str) -> dict:
    """A candidate's table row: its scores on the full folds when it ran them (a finalist),
    else its rung-0 score (on the subsample when rung 0 ran on one)."""
    s = race.settings[i]
    src = race if status.startswith("finalist") else small
    scores, acc = src.scores[i], src.accuracy[i]
    done = ~np.isnan(scores)
    seconds = race.seconds[i] + (small.seconds[i] if small is not race else 0.0)
    iterations = race.iterations[i] + (small.iterations[i] if small is not race else 0)
    return {"setting": s.label(), "algorithm": s.algorithm, "kernel": s.kernel,
            "params": dict(s.params), "folds": int(done.sum()),
            "scores": [float(v) for v in scores[done]],
            "mean_score": float(scores[done].mean()) if done.any() else None,
            "mean_accuracy": float(acc[done].mean()) if done.any() else None,
            "rung0_accuracy": None if np.isnan(small.scores[i, 0]) else float(small.scores[i, 0]),
            "iterations": int(iterations),
            "warm_from": [_label(race, src.warm_from.get((i, f)))
                          for f in range(len(src.folds))],
            "seconds": float(seconds), "status": status}


__all__ = ["ALPHAS", "AUTO_CV", "SCORINGS", "AutoResult", "BETAS", "GAMMA_FACTORS", "Clock",
           "CostClock", "Setting", "WallClock", "auto_search", "calibrate_from_oof",
           "candidates", "default_budget", "exact_kernel", "predict", "rbf_path", "rung0_rows"]
