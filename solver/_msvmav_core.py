"""MSVMAv's alternating iteration (docs/algorithm.md, "The iteration" and "Kernels"), written
once for every representation.

A *space* supplies the representation-specific linear algebra; ``iterate`` is the algorithm:

    for k = 1..T:
        theta = mean(m);  A = {i : m_i < theta}                    (strict <, never divide by theta)
        semi-variance step on A      -> coef', f'                  (space.prox_step)
        if mean(y f') < 0: coef', f' = -coef', -f'                  (sign safeguard, between steps)
        coef = coef' + shift / (2 alpha n);  f likewise             (average-margin step)
        coef, f = coef / ||coef||, f / ||coef||                     (unit norm)
        stop when ||coef_k - coef_{k-1}|| / sqrt(dim) < tol

The space interface ``iterate`` uses: ``initial()``, ``margins_of(coef)``, ``summary(coef, f)``,
``prox_step(coef, f, mask, theta)``, ``signed_sum(coef, f)``, ``norm(coef, f)``,
``distance(a, b)``, ``shift``, ``shift_f``, and ``decision(coef)``; the estimator also reads
``counters()`` (the linear step's named counters).

The same loop runs a *stack* of B settings in lockstep where ``initial()`` returns B rows
(``alpha`` then has shape (B, 1)): the space's methods take and return one row, number or mask
per live setting, ``keep(rows)`` drops the settings that stopped, and ``iterate`` keeps each
setting's last iterate and iteration count.

Spaces:
* ``PrimalSpace`` — linear MSVMAv on augmented rows (coef = w, metric I, shift s = X^T y; the
  step solved by one of ``_linear_step.LINEAR_STEPS``), and
  the low-rank (Nystroem) kernel path in rotated coordinates (coef = u, f = X u with
  X = U Sigma^2, RKHS norm ||Sigma u||, prox metric I + Sigma^2, shift U^T y).
* ``DualSpace`` — exact kernel MSVMAv in coefficient space
  (coef = a, f = K a, ||f|| = sqrt(a^T K a)).
* ``_batched_msvmav.StackSpace`` — linear MSVMAv for a stack of (alpha, beta) settings
  (model selection); the cluster's spaces are in ``solver.distributed._space``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse

from ._acceleration import ANDERSON_MAX_DIM, Anderson
from ._active_set import DualSystem
from ._base import Callback, FitStopped, report
from ._linear_step import make_linear_step
from ._margin_bounds import MarginBounds, below
from ._row_blocks import RowBlocks

# Recompute f = K a (kernel path) or f = X w ("cg" path) from scratch this often: both are
# otherwise updated incrementally.
F_REFRESH = 50
# "dense" summarises its margins from bounds from this many values of X on (``bounded``).
DENSE_BOUNDS_VALUES = 2**18
# The stopping rules (``StoppingRule``) and the window of the "objective" rule, in iterations.
STOPPING_RULES = ("objective", "step")
OBJECTIVE_WINDOW = 5
# The window of an update's "objective" rule (MSVMAv.update_fit, issue 48): a warm fit starts
# where its parent's rule was met, so it is judged from its start (J_0, the parent's solution
# on the updated rows) over 2 iterations instead of a fresh window of 5, which held every
# update to 6 iterations at least.
UPDATE_WINDOW = 2
# The default tolerance of the "objective" rule (MSVMAv() and /train; issue 49): J moving by at
# most 0.1 % an iteration over the window. Measured on the 10 sets of bench/convergence.py
# (docs/performance.md, "The default stopping rule"): 18 of 20 default fits meet it (median 45
# iterations) with the hold-out accuracy of the 100-iteration iterate (mean +0.001); at 1e-4,
# 7 of 20 did (median 100). Past it the fits drift towards a fixed point that is often a worse
# model (the paper's T = 100 acts as early stopping): this rule stops them near where they are
# accurate, and says so in converged_.
DEFAULT_TOL = 1e-3


def bounded(solver: str, X) -> bool:
    """Whether linear MSVMAv on the step ``solver`` summarises its margins from bounds
    (``_margin_bounds``) rather than from a pass over X every iteration. "gram" and "dense"
    keep G_A, from which the semi-variance follows. On "dense" (tall data, few features) a
    pass is the fit's main cost (800,000 x 29 read from memory each iteration), but below
    DENSE_BOUNDS_VALUES values of X it is cheaper than the bounds' bookkeeping: in-process fits
    of 500 x 10 took 4.0 ms with a pass and 6.1 ms with the bounds; 5,000 x 20 9.3 and
    10.7 ms; 50,000 x 28 65 and 45 ms."""
    if solver == "dense":
        return (X.nnz if sparse.issparse(X) else X.size) >= DENSE_BOUNDS_VALUES
    return solver == "gram"


def undefined_direction() -> ValueError:
    """The error of a zero signed class sum s = X^T y (the start s / ||s|| is undefined)."""
    return ValueError("X, y: the signed class sum X^T y is zero, so the average-margin "
                      "direction is undefined (perfectly balanced, symmetric data)")


def safeguard(coef: np.ndarray, signed_sum) -> tuple[np.ndarray, np.ndarray | bool]:
    """The sign safeguard: -coef where the average margin of coef, y . f (``signed_sum``, a
    number or one per row of a stack of coefficients), is negative; and whether it flipped."""
    flipped = np.asarray(signed_sum) < 0
    if flipped.ndim == 0:
        return (-coef if flipped else coef), bool(flipped)
    return np.where(flipped[:, None], -coef, coef), flipped


def summarise(y: np.ndarray, f: np.ndarray) -> tuple[float, np.ndarray, float]:
    """(theta, the mask of A = {i : m_i < theta}, the semi-variance) of the margins m = y f."""
    m = y * f
    theta = float(m.mean())
    return (theta, *below(m, theta))


class PrimalSpace:
    """coef in R^D, f = X coef, ||coef||_mu = sqrt(sum mu coef^2). On the "gram" and "dense"
    paths of linear MSVMAv f is not formed: ``MarginBounds`` summarises the margins from few
    passes over X (f is None)."""

    bounds: MarginBounds | None = None
    combines_f = False  # Anderson: the extrapolation's f from X (``_acceleration``)
    known: tuple[np.ndarray, np.ndarray] | None = None  # (coef, G_A coef) from the summary

    def __init__(self, X, y: np.ndarray, beta: float, *, shift: np.ndarray,
                 base_extra: np.ndarray | None = None, mu: np.ndarray | None = None,
                 update: str = "incremental", solver: str = "dense", threads: int = 1,
                 bias: bool = False) -> None:
        n, D = X.shape
        c = n * beta
        base = np.full(D, c) if base_extra is None else c * (1.0 + base_extra)
        self.X, self.y, self.dim = X, y, D
        self.mu = np.ones(D) if mu is None else mu
        self.sqrt_mu = np.sqrt(self.mu)
        self.shift = shift
        self.steps = 0
        self.rows = RowBlocks(X, threads)
        self.shift_f = self.rows.matvec(shift)
        self.system = make_linear_step(solver, X, y, base, rows=self.rows, bias=bias,
                                       update=update)
        if base_extra is None and bounded(solver, X):
            # shift = X^T y: theta and the flip test need no margins
            self.bounds = MarginBounds(X, y, self.rows, shift)

    def counters(self) -> dict[str, int]:
        """The linear step's named counters, and with ``bounds`` the margins' passes over X
        (``margin_passes``) and rows computed one by one (``margin_rows_exact``)."""
        if self.bounds is None:
            return self.system.counters
        return {**self.system.counters, "margin_passes": self.bounds.passes,
                "margin_rows_exact": self.bounds.exact_rows}

    def norm(self, coef: np.ndarray, f: np.ndarray) -> float:
        return float(np.sqrt(coef @ (self.mu * coef)))

    def initial(self) -> np.ndarray:
        nrm = self.norm(self.shift, self.shift_f)
        if not nrm > 0:
            raise undefined_direction()
        return self.shift / nrm

    def decision(self, coef: np.ndarray) -> np.ndarray:
        return self.rows.matvec(coef)

    def margins_of(self, coef: np.ndarray) -> np.ndarray | None:
        """f = X coef, or None where ``bounds`` summarises the margins."""
        return None if self.bounds else self.decision(coef)

    def signed_sum(self, coef: np.ndarray, f: np.ndarray | None) -> float:
        """y . f (= s . coef, s = X^T y the shift, with ``bounds``)."""
        return float(self.y @ f) if f is not None else float(self.shift @ coef)

    def summary(self, coef: np.ndarray, f: np.ndarray | None) -> tuple[float, np.ndarray, float]:
        if not self.bounds:
            return summarise(self.y, f)
        found, product = self.bounds.summary(coef, self.system.moments)
        # G_A coef, handed to the step from this coef on this A (passed, not shared)
        self.known = None if product is None else (coef, product)
        return found

    def prox_step(self, coef, f, mask, theta):
        self.system.set_active(mask)
        if not mask.any():
            return coef.copy(), None if f is None else f.copy()
        known, self.known = self.known, None
        gram_w = known[1] if known is not None and known[0] is coef else None
        new = coef + self.system.step(coef, theta, f, gram_w)
        self.steps += 1
        if self.bounds:
            return new, None
        moved = self.system.followed()  # X delta, where the step followed it
        if moved is None or self.steps % F_REFRESH == 0:
            return new, self.decision(new)
        return new, f + moved

    def distance(self, a: np.ndarray, b: np.ndarray) -> float:
        return float(np.linalg.norm(self.sqrt_mu * (a - b)) / math.sqrt(self.dim))

    def inner(self, U: np.ndarray, FU, V: np.ndarray, FV) -> np.ndarray:
        """The inner products of the rows of U and V in the norm's metric diag(mu) (the
        rows' f, FU and FV, are not needed); ``_acceleration.Anderson``'s."""
        return U @ (self.mu * V).T


class DualSpace:
    """Exact kernel: coef = a in R^n, f = K a; one (I + K)^{-1} shared by all one-vs-rest tasks."""

    combines_f = True  # Anderson: the extrapolation's f combines the kept f's (``_acceleration``)

    def __init__(self, pair: tuple[np.ndarray, np.ndarray], y: np.ndarray, beta: float) -> None:
        K = pair[0]
        n = K.shape[0]
        self.K, self.y, self.dim = K, y, n
        self.shift = y
        self.shift_f = K @ y
        self.system = DualSystem(pair, n * beta)
        self.steps = 0

    def counters(self) -> dict[str, int]:
        """The kernel step's named counters."""
        return self.system.counters

    def norm(self, coef: np.ndarray, f: np.ndarray) -> float:
        sq = float(coef @ f)
        if not sq > 1e-300:
            raise ValueError("kernel: a^T K a is zero; the kernel matrix is numerically constant "
                             "(increase gamma or rescale the features)")
        return math.sqrt(sq)

    def initial(self) -> np.ndarray:
        return self.shift / self.norm(self.shift, self.shift_f)

    def decision(self, coef: np.ndarray) -> np.ndarray:
        return self.K @ coef

    margins_of = decision

    def signed_sum(self, coef: np.ndarray, f: np.ndarray) -> float:
        return float(self.y @ f)

    def summary(self, coef: np.ndarray, f: np.ndarray) -> tuple[float, np.ndarray, float]:
        return summarise(self.y, f)

    def prox_step(self, coef, f, mask, theta):
        self.steps += 1
        if not mask.any():
            return coef.copy(), f.copy()
        self.system.set_active(mask)
        delta, Kdelta = self.system.solve(np.where(mask, theta * self.y - f, 0.0))
        new = coef + delta
        fnew = self.decision(new) if self.steps % F_REFRESH == 0 else f + Kdelta
        return new, fnew

    def distance(self, a: np.ndarray, b: np.ndarray) -> float:
        return float(np.linalg.norm(a - b) / math.sqrt(self.dim))

    def inner(self, U: np.ndarray, FU: np.ndarray, V: np.ndarray, FV: np.ndarray) -> np.ndarray:
        """The RKHS inner products a^T K b of the rows of U and V, from V's f = K b (FV);
        ``_acceleration.Anderson``'s."""
        return U @ FV.T


class StoppingRule:
    """When a fit has converged (docs/solver.md, "Convergence").

    ``"objective"`` (the default): the objective J = SV / theta^2 changed by at most ``tol``
    per iteration, relatively, on average over the last OBJECTIVE_WINDOW iterations:
    |J_k - J_{k-W}| <= W tol J_k, and with ``band`` (accelerated iterations) every
    J_{k-W}, ..., J_k within W tol J_k (max - min). A window, not one step, because J moves
    unevenly (the active set enters and leaves in bursts); with acceleration its range, not
    its two ends, because accelerated iterates' J oscillates (a
    500-row RBF fit met |J_k - J_{k-5}| <= 5e-4 J_k by chance at iteration 30, 0.32 away
    (relative, decision values) from its fixed point). ``"step"``: the authors' rule,
    ||w_k - w_{k-1}|| / sqrt(dim) < tol (with tol = 1e-8 and T = 100, the paper's setting:
    ``PAPER_STOPPING``). ``met`` takes a number or, for a lockstep stack, one per live
    setting; ``keep(rows)`` follows the stack's settings.

    ``window`` (W; OBJECTIVE_WINDOW unless given) and ``start`` (the objective J_0 of the
    iteration's start, or None): an update (``MSVMAv.update_fit``) judges its iterates over
    UPDATE_WINDOW iterations counted from its start, |J_k - J_{k-W}| <= W tol J_k with J_0
    the parent's solution's objective on the updated rows, so it can stop after W
    iterations; a cold fit's J_0 (the MAMC start) is not counted."""

    def __init__(self, stop: str, tol: float, band: bool = False,
                 window: int = OBJECTIVE_WINDOW, start: float | None = None) -> None:
        if stop not in STOPPING_RULES:
            raise ValueError(f"stop: use one of {STOPPING_RULES}, got {stop!r}")
        self.stop, self.tol, self.band, self.window = stop, tol, band, int(window)
        # the last W + 1 objectives (NaN: undefined), from J_0 where ``start`` is given
        self.recent: list[np.ndarray] = ([] if start is None
                                         else [np.asarray(start, dtype=np.float64)])

    def met(self, step, objective):
        if self.stop == "step":
            return step < self.tol
        W = self.window
        J = np.asarray(np.nan if objective is None else objective, dtype=np.float64)
        self.recent = [*self.recent[-W:], J]
        if len(self.recent) <= W:
            return np.zeros(J.shape, dtype=bool) if J.ndim else False
        window = np.stack(self.recent)
        with np.errstate(invalid="ignore"):
            moved = (window.max(axis=0) - window.min(axis=0) if self.band
                     else np.abs(J - window[0]))
            done = moved <= W * self.tol * np.abs(J)
        return done if J.ndim else bool(done)

    def keep(self, rows: np.ndarray) -> None:
        self.recent = [J[rows] for J in self.recent]


def iterate(space, y: np.ndarray, *, alpha: float | np.ndarray, max_iter: int, tol: float,
            callback: Callback | None = None, task: int = 0, n_tasks: int = 1,
            stop: str = "step", accelerate: bool = False,
            window: int = OBJECTIVE_WINDOW, from_start: bool = False):
    """Run MSVMAv on one +-1 target. Returns (coef, n_iter, history, stopped_by_callback).
    Each record says whether the stopping rule (``StoppingRule(stop, tol, window=window)``;
    ``from_start``: J_0 of the start opens it) was met (``converged``), the step (``step``),
    the fixed-point residual ||T(x) - x|| / sqrt(dim) of the plain map at the previous
    iterate (``residual``) and how it was found (``accelerated``: "plain", "accelerated" or
    "rejected", ``_acceleration.Anderson.advance``).

    ``accelerate`` (``MSVMAv(acceleration="anderson")`` on the "objective" rule): Anderson
    acceleration of the fixed-point map (``_acceleration.Anderson``) for a single space that
    defines ``inner``, of at most ``ANDERSON_MAX_DIM`` coefficients; an extrapolation stands
    only where the plain map's residual at it is at most RESIDUAL_SLACK times the one it
    replaced. The "step" rule (the paper's) runs the plain iteration.

    A space whose ``initial()`` is a stack of B coefficient vectors (B, dim), with ``alpha`` of
    shape (B, 1), runs B settings in lockstep (never accelerated): theta, |A|, the flips and
    the steps are then (B,) arrays, a setting leaves the stack once it meets the rule or
    reached ``max_iter`` (``space.keep(rows)`` drops it from the space's state), the loop ends
    when none is left, and coef (B, dim) and n_iter (B,) hold each setting's last iterate."""
    n = y.size
    coef = space.initial()
    stack = _Stack(coef) if coef.ndim == 2 else None
    accel = _accelerator(space, stack, accelerate)
    f = space.margins_of(coef)  # None where the space summarises the margins itself
    theta, mask, sv0 = space.summary(coef, f)
    rule = StoppingRule(stop, tol, band=accel is not None, window=window,
                        start=_objective(sv0, theta) if from_start and stack is None else None)
    history: list[dict] = []
    shift = (space.shift / (2.0 * alpha * n), space.shift_f / (2.0 * alpha * n))
    k, stopped = 0, False
    for k in range(1, max_iter + 1):
        n_active = _active(mask, stack)
        cn, fn, flipped = _mapped(space, coef, f, mask, theta, shift)
        found = space.summary(cn, fn)
        residual = space.distance(cn, coef)
        how = "plain"
        if accel is not None:
            cn, fn, found, how = accel.advance(coef, f, cn, fn, found, residual)
        step = space.distance(cn, coef) if how != "plain" else residual
        coef, f = cn, fn
        theta, mask, sv = found
        objective = _objective(sv, theta)
        met = rule.met(step, objective)
        if stack is not None:  # the settings that stopped leave the stack
            coef, theta, mask, shift = _leave(stack, space, rule, met | (k == max_iter), k,
                                              (coef, theta, mask, shift))
        record = {"iteration": k, "max_iter": max_iter, "task": task, "n_tasks": n_tasks,
                  "theta": theta, "semivariance": sv, "objective": objective,
                  "active": n_active, "flipped": flipped, "step": step, "residual": residual,
                  "accelerated": how, "converged": met}
        history.append(record)
        try:
            report(callback, record)
        except FitStopped:
            stopped = True
            break
        if np.all(met):
            break
    if stack is not None:
        return stack.coef, stack.n_iter, history, stopped
    return coef, k, history, stopped


def _leave(stack: _Stack, space, rule: StoppingRule, done: np.ndarray, k: int, state: tuple
           ) -> tuple:
    """The lockstep stack after iteration k: the settings ``done`` leave it (their last
    iterate kept by ``stack``, dropped from the space and the rule); (coef, theta, mask,
    shift) of those that go on."""
    coef, theta, mask, shift = state
    rows = stack.leave(coef, done, k)
    space.keep(rows)
    rule.keep(rows)
    return coef[rows], theta[rows], mask[rows], (shift[0][rows], shift[1])


def _accelerator(space, stack: _Stack | None, accelerate: bool) -> Anderson | None:
    """Anderson's state where ``accelerate`` and the space allows it (a single space defining
    ``inner``, of at most ANDERSON_MAX_DIM coefficients), else None."""
    if not accelerate or stack is not None or not hasattr(space, "inner"):
        return None
    return Anderson(space) if space.dim <= ANDERSON_MAX_DIM else None


def _mapped(space, coef, f, mask, theta, shift):
    """One plain iteration T(coef): (coef', f', flipped) after the semi-variance step, the sign
    safeguard, the average-margin step (``shift``: its coef and f parts) and the unit norm."""
    cp, f = space.prox_step(coef, f, mask, theta)  # f is a fresh array: updated in place
    cp, flipped = safeguard(cp, space.signed_sum(cp, f))
    cn = cp + shift[0]
    f = _shifted(f, flipped, shift[1])
    nrm = space.norm(cn, f)
    cn /= nrm
    if f is not None:
        f /= nrm
    return cn, f, flipped


class _Stack:
    """A lockstep stack's results: each setting's last coefficients (``coef``, (B, dim)) and
    iterations (``n_iter``); ``live`` the settings (rows) still iterating, in stack order."""

    def __init__(self, coef: np.ndarray) -> None:
        self.coef = coef.copy()
        self.n_iter = np.zeros(coef.shape[0], dtype=np.int64)
        self.live = np.arange(coef.shape[0])

    def leave(self, coef: np.ndarray, done: np.ndarray, k: int) -> np.ndarray:
        """Record iteration k's coef of the live settings; the mask of those that go on."""
        self.coef[self.live] = coef
        self.n_iter[self.live] = k
        rows = ~done
        self.live = self.live[rows]
        return rows


def _active(mask, stack: _Stack | None):
    """|A| (an int; for a stack, one per setting)."""
    if stack is not None:
        return np.count_nonzero(mask, axis=1)
    return int(np.count_nonzero(mask))


def _objective(sv, theta):
    """The semi-variance over theta^2 (None where theta <= 0, or with no semi-variance; for a
    stack, one per setting, NaN where theta <= 0)."""
    if sv is None:
        return None
    if np.ndim(theta):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(theta > 0, sv / np.square(theta), np.nan)
    return sv / theta**2 if theta > 0 else None


def _shifted(f: np.ndarray | None, flipped: bool, shift_f: np.ndarray) -> np.ndarray | None:
    """f of the flipped (if so) and shifted coefficients, in place (None stays None)."""
    if f is not None:
        if flipped:
            np.negative(f, out=f)
        f += shift_f
    return f
