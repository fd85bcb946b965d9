"""``search: "auto"``: choose MSVMAv's kernel (linear or RBF) and alpha, beta, gamma by
stratified cross-validation within a time budget, by successive halving over the folds.

The candidates (``candidates``), cheapest first:

* linear MSVMAv on alpha in ``ALPHAS`` x beta in ``BETAS`` (9 settings);
* RBF MSVMAv on the same (alpha, beta) for gamma in ``GAMMA_FACTORS`` x "scale"
  (1 / (d Var X) on the scaled rows; 1/4 to 16 times it, i.e. about 1/d to 200/d on min-max
  scaled data, beyond the paper's grid {2^j / d, j <= 4});
* with ``algorithms``, each named comparator's "quick" grid (``solver.comparators``).

The race (``auto_search``), folds ``StratifiedKFold(cv, shuffle=True, random_state=seed)``:

1. **rung 0**: every candidate is fitted on the first fold's training rows and scored on its
   test rows (accuracy); the linear ones first, then one RBF width at a time; a width whose
   predicted cost (the last width's measured time) no longer fits ``RUNG0_SHARE`` of the budget
   is skipped, and the table says so;
2. **rung 1**: the best ``1/ETA`` of them (fewer when their predicted cost, from their rung-0
   time, does not fit the rest of the budget; at least one) are fitted on the other folds;
3. the winner is the highest mean accuracy over all folds among the settings that ran every
   fold (a tie: the earlier, cheaper candidate). Its out-of-fold decision values (``oof``:
   every training row scored by a model that did not see it) are what a calibrator is fitted
   on (``MarginClassifier.fit(..., oof_decision=...)``): no second round of folds.

Work shared: the linear settings of a fold run in one lockstep batch per one-vs-rest class
(``solver._batched_msvmav``); for an RBF width and a fold the Gram matrix and [K | (I + K)^-1]
are computed once and shared by every (alpha, beta) and every one-vs-rest class, where the
fold's fit takes the exact-kernel path (``MSVMAv.kernel_path``); above it each setting is a
plain fit (the low-rank path factors per fit). Iterates are not warm-started across (alpha,
beta): ``solver._msvmav_core.iterate`` starts from the MAMC direction. Every cell's decision
values are those of ``MSVMAv(**setting).fit(X[train], y[train]).decision_function(X[test])``
(tests/solver/test_auto_search.py compares them).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold

from ._active_set import DualSystem
from ._base import to_dense_rows
from ._batched_msvmav import fit_linear_batch
from ._msvmav_core import DualSpace, iterate
from .algorithms import estimator_class, takes_seed
from .calibration import fit_calibrator
from .comparators import iter_configs, param_grid
from .kernels import gram_matrix, kernel_matrix, resolve_gamma
from .msvmav import MSVMAv, kernel_threads
from .weights import fit_weights

ALPHAS = (1.0, 16.0, 256.0)
BETAS = (2.0**-6, 0.25, 4.0)
# the (alpha, beta) pairs tried with each RBF width (a kernel cell costs far more than a linear
# one, so fewer of them)
RBF_PAIRS = ((1.0, 2.0**-6), (16.0, 2.0**-6), (16.0, 0.25), (256.0, 4.0))
# the race's RBF fits, and the winner's final fit, use the exact kernel up to this many
# training rows (shared by every setting of a fold and width; above, approximation "auto")
EXACT_SEARCH_ROWS = 3000
# in the order rung 0 tries them (the widths that won most often first)
GAMMA_FACTORS = (4.0, 1.0, 16.0, 0.25)
AUTO_CV = 3
ETA = 3
# rung 0 may spend this share of the budget; the rest is for rung 1 and the final fit
RUNG0_SHARE = 0.6
# above 1.5 times this many training rows rung 0 runs on a stratified sample of this many
RUNG0_ROWS = 2000
ALWAYS_GROUPS = 2
# seconds of a default budget: BUDGET_BASE + BUDGET_PER_ROW * n * (1 + n / BUDGET_KNEE)
BUDGET_BASE = 2.0
BUDGET_PER_ROW = 2e-3
BUDGET_KNEE = 4000.0
BUDGET_MAX = 900.0
KERNELS = ("linear", "rbf")

ProgressCallback = Callable[[int, int], Any]


def default_budget(n_train: int, n_features: int) -> float:
    """The default ``budget_seconds`` of an auto search on n_train rows: a few seconds for a
    few hundred rows, growing a little faster than linearly (as an SVC grid search's time
    does), at most BUDGET_MAX. ``n_features`` is part of the signature for a later refinement
    and does not change the value now."""
    del n_features
    seconds = BUDGET_BASE + BUDGET_PER_ROW * n_train * (1.0 + n_train / BUDGET_KNEE)
    return float(round(min(BUDGET_MAX, seconds), 1))


def exact_kernel(n_train: int) -> str:
    """The ``approximation`` of the race's RBF fits on a part of n_train rows and of the
    winner's final fit: "exact" up to EXACT_SEARCH_ROWS, else "auto"."""
    return "exact" if n_train <= EXACT_SEARCH_ROWS else "auto"


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

    ``table``: one row per candidate, in candidate order: ``setting`` (label), ``algorithm``,
    ``kernel``, ``params``, ``folds`` (folds scored), ``scores`` (per fold, fold order),
    ``mean_accuracy`` (None when not run), ``seconds`` (its fits, shared work split evenly),
    ``status`` ("finalist", "dropped at rung 0", "skipped: budget"). ``oof``: the winner's
    out-of-fold decision values (n,) or (n, k)."""

    table: list[dict]
    best_index: int
    reason: str
    cv: int
    random_state: int | None
    budget_seconds: float
    seconds: float
    oof: np.ndarray
    fixed_params: dict = field(default_factory=dict)

    @property
    def best(self) -> dict:
        return self.table[self.best_index]

    @property
    def best_params(self) -> dict:
        return dict(self.best["params"])

    @property
    def best_score(self) -> float:
        return float(self.best["mean_accuracy"])

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
                "n_configs": len(self.table), "table": [dict(r) for r in self.table]}


# -- one fold's cells -----------------------------------------------------------------------


def _predicted(classes_n: int, D: np.ndarray) -> np.ndarray:
    return (D > 0).astype(np.intp) if classes_n == 2 else np.argmax(D, axis=1)


class _Race:
    """The data, folds and per-candidate state of one auto search."""

    def __init__(self, X, y: np.ndarray, settings: list[Setting], folds: list[tuple],
                 fixed: dict, seed: int | None, tick: Callable[[], None]) -> None:
        self.X, self.settings, self.folds, self.fixed = X, settings, folds, fixed
        self.classes, self.yi = np.unique(y, return_inverse=True)
        self.y, self.seed, self.tick = y, seed, tick
        self.k = self.classes.size
        self.scores = np.full((len(settings), len(folds)), np.nan)
        self.seconds = np.zeros(len(settings))
        self.oof: dict[int, np.ndarray] = {}
        self.errors: dict[int, str] = {}  # a candidate whose fit failed: why (it has no score)
        # no setting starts after this (perf_counter) time, and a running fit stops at it
        # (its cell then does not count)
        self.deadline = math.inf

    def late(self, done_in_group: int) -> bool:
        """A group's next setting is skipped once the deadline passed (its first never)."""
        return done_in_group > 0 and time.perf_counter() > self.deadline

    def stop(self, _info: dict) -> bool:
        """The fits' callback: progress, and stop once the deadline passed."""
        self.tick()
        return time.perf_counter() > self.deadline

    def record(self, i: int, fold: int, D: np.ndarray, seconds: float) -> None:
        _, test = self.folds[fold]
        self.seconds[i] += seconds
        if not np.all(np.isfinite(D)):  # e.g. features of 1e308 without scaling
            self.errors.setdefault(i, "non-finite decision values (infs or NaNs)")
            return
        self.scores[i, fold] = float(np.mean(_predicted(self.k, D) == self.yi[test]))
        shape = (len(self.y),) if self.k == 2 else (len(self.y), self.k)
        self.oof.setdefault(i, np.full(shape, np.nan))[test] = D

    def msvmav(self, params: dict, kernel: str) -> MSVMAv:
        extra = {"approximation": exact_kernel(len(self.y))} if kernel == "rbf" else {}
        return MSVMAv(kernel=kernel, **{**self.fixed, **extra, **params, "calibration": "none"})

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
        if first.algorithm == "msvmav" and first.kernel == "linear" and self._batchable(train):
            return self._linear_batch(idx, fold)
        if (first.algorithm == "msvmav" and first.kernel == "rbf"
                and self.fixed.get("class_weight") is None  # weighted: MSVMAv.fit's own
                and self.msvmav(first.params, "rbf").kernel_path(len(train)) == "exact"):
            return self._exact_kernel(idx, fold)
        for n, i in enumerate(idx):
            if self.late(n):
                break
            self._plain(i, fold)
        return None

    def _batchable(self, train: np.ndarray) -> bool:
        est = self.msvmav({}, "linear")
        plain = set(self.fixed) <= {"max_iter", "tol", "stop", "fit_intercept", "alpha", "beta",
                                    "gamma", "random_state", "degree", "coef0"}
        return (plain and est.linear_path(len(train), self.X.shape[1]) == "dense")

    def _plain(self, i: int, fold: int) -> None:
        s = self.settings[i]
        train, test = self.folds[fold]
        self.tick()
        t = time.perf_counter()
        if s.algorithm == "msvmav":
            est = self.msvmav(s.params, s.kernel)
        else:
            extra = {"random_state": self.seed} if takes_seed(s.algorithm) else {}
            est = estimator_class(s.algorithm)(kernel=s.kernel, **extra, **s.params)
        est.fit(self.X[train], self.y[train], callback=self.stop)
        if getattr(est, "stopped_early_", False):  # the deadline: the cell does not count
            self.seconds[i] += time.perf_counter() - t
            return
        self.record(i, fold, est.decision_function(self.X[test]), time.perf_counter() - t)

    def _linear_batch(self, idx: list[int], fold: int) -> None:
        """The fold's linear settings in one lockstep batch per one-vs-rest class."""
        train, test = self.folds[fold]
        t = time.perf_counter()
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
            work += n_iter + 1
        total = time.perf_counter() - t
        for j, i in enumerate(idx):
            self.record(i, fold, D[:, j, 0] if self.k == 2 else D[:, j],
                        total * float(work[j] / work.sum()))

    def _exact_kernel(self, idx: list[int], fold: int) -> None:
        """One Gram matrix and [K | (I + K)^-1] for the fold and width, every (alpha, beta)
        and every one-vs-rest class iterated on it, as ``MSVMAv._fit_exact_kernel`` does."""
        train, test = self.folds[fold]
        t = time.perf_counter()
        gamma = self.settings[idx[0]].params["gamma"]
        Xtr = self.X[train]
        with kernel_threads(len(train)):
            K = gram_matrix(Xtr, kernel="rbf", gamma=gamma)
            Kte = kernel_matrix(self.X[test], to_dense_rows(Xtr), kernel="rbf", gamma=gamma)
            pair = DualSystem.pair(K)
        del K
        prep = (time.perf_counter() - t) / len(idx)
        yi = self.yi[train]
        Y = ((2.0 * yi - 1.0)[:, None] if self.k == 2
             else np.where(yi[:, None] == np.arange(self.k)[None, :], 1.0, -1.0))
        with kernel_threads(len(train)):
            for n, i in enumerate(idx):
                if self.late(n):
                    break
                t = time.perf_counter()
                est = self.msvmav(self.settings[i].params, "rbf")
                A = np.zeros((len(train), Y.shape[1]))
                stopped = False
                for c in range(Y.shape[1]):
                    A[:, c], _, _, stopped = iterate(
                        DualSpace(pair, Y[:, c], est.beta), Y[:, c], alpha=est.alpha,
                        max_iter=est.max_iter, tol=est.tol, stop=est.stop, callback=self.stop)
                    if stopped:  # the deadline: the cell does not count
                        break
                if stopped:
                    self.seconds[i] += time.perf_counter() - t + prep
                    continue
                D = Kte @ A
                self.record(i, fold, D[:, 0] if self.k == 2 else D,
                            time.perf_counter() - t + prep)


# -- the race -------------------------------------------------------------------------------


def _groups(settings: list[Setting], idx: list[int]) -> list[list[int]]:
    """``idx`` grouped by what a fold's cells share: (algorithm, kernel, gamma), in order."""
    groups: dict[tuple, list[int]] = {}
    for i in idx:
        s = settings[i]
        key = (s.algorithm, s.kernel, s.params.get("gamma") if s.algorithm == "msvmav" else i)
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def _rung0(race: _Race, budget: float, start: float, status: list[str]) -> None:
    """Every candidate on fold 0, group by group, while the predicted cost fits the budget's
    RUNG0_SHARE (within a group, no setting starts after it); the first ALWAYS_GROUPS groups
    (the linear settings and the first RBF width) always start."""
    race.deadline = start + RUNG0_SHARE * budget
    last = 0.0
    for n, group in enumerate(_groups(race.settings, list(range(len(race.settings))))):
        elapsed = time.perf_counter() - start
        if n >= ALWAYS_GROUPS and elapsed + last > RUNG0_SHARE * budget:
            continue
        t = time.perf_counter()
        race.run(group, 0)
        last = time.perf_counter() - t
    race.deadline = math.inf
    for i in range(len(race.settings)):
        status[i] = (f"failed: {race.errors[i]}" if i in race.errors
                     else "dropped at rung 0" if not np.isnan(race.scores[i, 0])
                     else "stopped: budget" if race.seconds[i] > 0 else "skipped: budget")
    if np.isnan(race.scores[:, 0]).all() and race.errors:
        first = min(race.errors)  # the cheapest candidate's reason (candidates come cheapest first)
        raise ValueError(f"no setting of the search could be fitted: {race.errors[first]} "
                         f"({len(race.errors)} of {len(race.settings)} failed)")


def _finalists(race: _Race, cost_of: np.ndarray, budget: float, start: float,
               status: list[str]) -> list[int]:
    """The best 1/ETA of rung 0's candidates, in score order, whose predicted cost (the rest
    of the folds and the final fit on every row, from their rung-0 time) fits the rest of the
    budget; when none does, the cheapest of them."""
    ran = [i for i in range(len(status)) if not np.isnan(race.scores[i, 0])]
    order = sorted(ran, key=lambda i: (-race.scores[i, 0], i))
    keep = order[: max(1, math.ceil(len(order) / ETA))]
    # rung 0 ran fold 0 of these folds (no subsample) or of a subsample's (cost_of scaled)
    rest = len(race.folds) - (1 if cost_of is race.seconds else 0)
    final = len(race.folds) / max(1, len(race.folds) - 1)  # the final fit's rows over a fold's
    left = budget - (time.perf_counter() - start)
    chosen, cost = [], 0.0
    for i in keep:
        more = cost_of[i] * rest
        if cost + more + cost_of[i] * final * (not chosen) <= left:
            chosen.append(i)
            cost += more
    if not chosen:
        chosen = [min(keep, key=lambda i: (cost_of[i], i))]
    for i in chosen:
        status[i] = "finalist"
    return chosen


def _rung1(race: _Race, finalists: list[int], folds: range, deadline: float,
           status: list[str]) -> list[int]:
    """The finalists on the remaining folds: one of them runs them all whatever the time (the
    best linear finalist, whose cost is predictable, else the first); the others stop at
    ``deadline`` (the budget less the first's final fit), and a finalist stopped on a fold
    drops out ("stopped: budget"). Returns those that ran every fold, in order."""
    linear = [i for i in finalists if race.settings[i].kernel == "linear"]
    sure = linear[0] if linear else finalists[0]
    for fold in folds:
        race.run([sure], fold)
    race.deadline = deadline
    for fold in folds:
        for group in _groups(race.settings, [i for i in finalists if i != sure]):
            race.run(group, fold)
    race.deadline = math.inf
    done = [i for i in finalists if not np.isnan(race.scores[i]).any()]
    for i in set(finalists) - set(done):
        status[i] = f"failed: {race.errors[i]}" if i in race.errors else "stopped: budget"
    if not done:
        raise ValueError("no finalist of the search could be fitted on every fold: "
                         + "; ".join(sorted({race.errors.get(i, "stopped") for i in finalists})))
    return done


def _reason(race: _Race, best: int, finalists: list[int], top: int,
            cost_of: np.ndarray) -> str:
    means = np.nanmean(race.scores[finalists], axis=1)
    order = [finalists[j] for j in np.argsort(-means, kind="stable")]
    text = (f"highest mean accuracy over {len(race.folds)} stratified folds "
            f"({np.nanmean(race.scores[best]):.4f}) among {len(finalists)} finalists of "
            f"{len(race.settings)} candidates")
    if len(order) > 1:
        nxt = order[1] if order[0] == best else order[0]
        text += (f"; runner-up {race.settings[nxt].label()} "
                 f"{np.nanmean(race.scores[nxt]):.4f}")
    if top not in finalists:
        text += (f"; {race.settings[top].label()} scored best at rung 0 but its folds and "
                 f"final fit (predicted {cost_of[top] * (len(race.folds) + 1.5):.1f} s) did "
                 "not fit the rest of the budget")
    return text


def _folds(y: np.ndarray, cv: int, seed: int | None) -> list[tuple]:
    return list(StratifiedKFold(n_splits=cv, shuffle=True,
                                random_state=seed).split(np.zeros(len(y)), y))


def _subsample(y: np.ndarray, seed: int | None) -> np.ndarray | None:
    """Rung 0's rows: a stratified sample of RUNG0_ROWS training rows when there are more
    than 1.5 times that many (sorted indices), else None (rung 0 on the first fold of all)."""
    if len(y) <= 1.5 * RUNG0_ROWS:
        return None
    from sklearn.model_selection import train_test_split

    keep, _ = train_test_split(np.arange(len(y)), train_size=RUNG0_ROWS, stratify=y,
                               random_state=seed)
    return np.sort(keep)


def _scaled_cost(small: _Race, full: _Race) -> np.ndarray:
    """Predicted seconds of each candidate's fold on the full rows from its rung-0 fold on a
    subsample: linear in the rows for linear fits, quadratic for kernel fits."""
    ratio = len(full.folds[0][0]) / max(1, len(small.folds[0][0]))
    power = np.array([1.0 if s.kernel == "linear" else 2.0 for s in small.settings])
    return small.seconds * ratio**power


def auto_search(X, y, *, budget_seconds: float | None = None, cv: int = AUTO_CV,
                random_state: int | None = 0, kernels: tuple[str, ...] = KERNELS,
                algorithms: tuple[str, ...] = ("msvmav",), params: dict | None = None,
                callback: ProgressCallback | None = None) -> AutoResult:
    """Choose a setting by successive halving over ``cv`` stratified folds within
    ``budget_seconds`` (None: ``default_budget``). X: (n, d) scaled rows (dense or CSR);
    ``params``: fixed MSVMAv parameters of every fit (max_iter, tol, stop, ...; alpha, beta or
    gamma given here are not searched). ``callback(done_cells, total_cells)`` is called
    between fits; an exception it raises aborts the search."""
    start = time.perf_counter()
    y = np.asarray(y)
    fixed = {k: v for k, v in (params or {}).items() if k not in ("calibration", "kernel")}
    budget = default_budget(X.shape[0], X.shape[1]) if budget_seconds is None else budget_seconds
    settings = candidates(X, kernels=kernels, algorithms=algorithms, fixed=fixed)
    searched = {k for s in settings if s.algorithm == "msvmav" for k in s.params}
    fixed = {k: v for k, v in fixed.items() if k not in searched}
    cv = max(2, min(cv, int(np.unique(y, return_counts=True)[1].min())))
    total = len(settings) * cv
    race = _Race(X, y, settings, _folds(y, cv, random_state), fixed, random_state,
                 lambda: callback(int(np.sum(~np.isnan(race.scores))), total)
                 if callback else None)
    sub = _subsample(y, random_state)
    small = race if sub is None else _Race(
        X[sub], y[sub], settings, _folds(y[sub], cv, random_state), fixed, random_state,
        race.tick)
    status = [""] * len(settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _rung0(small, budget, start, status)
        cost = small.seconds if small is race else _scaled_cost(small, race)
        finalists = _finalists(small, cost, budget, start, status)
        finalists = _rung1(race, finalists, range(1 if small is race else 0, cv),
                           start + budget - cost[finalists[0]] * 1.5, status)
    means = race.scores[finalists].mean(axis=1)
    best = finalists[int(np.argmax(means))]  # ties: the first finalist in rung-0 order
    top = min(range(len(settings)),
              key=lambda i: (-np.nan_to_num(small.scores[i, 0], nan=-1), i))
    table = [_row(race, small, i, status[i]) for i in range(len(settings))]
    reason = _reason(race, best, finalists, top, cost)
    if sub is not None:
        reason += f"; rung 0 on a stratified sample of {len(sub)} of the {len(y)} rows"
    return AutoResult(table=table, best_index=best, reason=reason,
                      cv=cv, random_state=random_state, budget_seconds=float(budget),
                      seconds=time.perf_counter() - start, oof=race.oof[best],
                      fixed_params=fixed)


def calibrate_from_oof(est: Any, method: str, oof: np.ndarray, y: np.ndarray) -> None:
    """Give ``est`` (fitted with calibration="none" on the rows the race scored) the
    ``method`` calibrator fitted on the race's out-of-fold decision values ``oof`` of the same
    rows: what ``MarginClassifier.fit`` computes with a second round of folds, here from the
    race's folds. The out-of-fold values are kept as ``oof_decision_`` and ``oof_index_``, as
    ``fit`` keeps its own. Nothing is fitted when the fit was stopped."""
    if getattr(est, "stopped_early_", False):
        return
    y = np.asarray(y)
    est.set_params(calibration=method)
    # the fit's class weights, as MarginClassifier.fit's calibrator takes them
    weights = fit_weights(getattr(est, "class_weight", None), None, y)
    est.calibrator_ = fit_calibrator(oof, y, est.classes_, method, sample_weight=weights)
    est.oof_decision_ = np.asarray(oof, dtype=np.float64)
    est.oof_index_ = np.searchsorted(est.classes_, y)


def _row(race: _Race, small: _Race, i: int, status: str) -> dict:
    """A candidate's table row: its scores on the full folds when it ran them (a finalist),
    else its rung-0 score (on the subsample when rung 0 ran on one)."""
    s = race.settings[i]
    scores = race.scores[i] if status == "finalist" else small.scores[i]
    done = ~np.isnan(scores)
    seconds = race.seconds[i] + (small.seconds[i] if small is not race else 0.0)
    return {"setting": s.label(), "algorithm": s.algorithm, "kernel": s.kernel,
            "params": dict(s.params), "folds": int(done.sum()),
            "scores": [float(v) for v in scores[done]],
            "mean_accuracy": float(scores[done].mean()) if done.any() else None,
            "rung0_accuracy": None if np.isnan(small.scores[i, 0]) else float(small.scores[i, 0]),
            "seconds": float(seconds), "status": status}


__all__ = ["ALPHAS", "AUTO_CV", "AutoResult", "BETAS", "GAMMA_FACTORS", "Setting",
           "auto_search", "calibrate_from_oof", "candidates", "default_budget", "exact_kernel"]
