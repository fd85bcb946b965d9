"""MSVMAv's hyper-parameters, declared once: what values each takes and what it means.

``PARAMETERS`` is the one source: the estimator's ``_parameter_constraints`` and the
Parameters section of its docstring are built from it, and so are the service's ``/train``
request fields (their types, enums, bounds and descriptions; ``app.training``). Defaults are
the estimator's ``__init__`` signature (scikit-learn's convention), read by ``get_params()``.
"""

from __future__ import annotations

from numbers import Integral, Real

from ._acceleration import ACCELERATIONS, ANDERSON_MAX_DIM, ANDERSON_MEMORY
from ._linear_step import DENSE_MAX_DIM, DENSE_UPDATES, LINEAR_SOLVERS
from ._msvmav_core import DEFAULT_TOL, OBJECTIVE_WINDOW, STOPPING_RULES
from .calibration import CALIBRATION_FOLDS, CALIBRATIONS
from .fit_cost import METRIC_TOL
from .kernels import GAMMA_NAMES, KERNELS
from .params import Interval, Param, StrOptions
from .weights import CLASS_WEIGHTS

# The kernel matrices a kernel fit may use (kernel_approximation_), "auto" choosing among them.
KERNEL_APPROXIMATIONS = ("exact", "low_rank", "nystroem")
# The values of ``approximation``: "auto" and the matrices it chooses among.
APPROXIMATIONS = ("auto", *KERNEL_APPROXIMATIONS)
# approximation="auto": the exact kernel up to this many training rows, the adaptive low-rank
# path above it. Measured on magic subsets (gamma = 1/d): exact 0.023 s / low-rank 0.039 s at
# 500 rows, 0.21 s / 0.031 s at 1,000, 2.4 s / 0.061 s at 4,000 (docs/performance.md).
AUTO_EXACT_ROWS = 1024
# A low-rank path whose rank would reach this share of n is slower than the exact kernel (its
# O(n r^2) work passes the exact path's O(n^3 / 3)): fall back to the exact kernel when it fits.
LOW_RANK_SHARE = 0.25

# The paper's stopping: a fixed T = 100 (the authors' code also stops on a step below 1e-8,
# which a fit hardly ever meets); ``solver.experiments`` reproduces the paper with it.
PAPER_STOPPING = {"stop": "step", "tol": 1e-8, "max_iter": 100}

_POSITIVE = Interval(Real, 0, None, closed="neither")

_APPROXIMATION = (
    "Kernels only: the kernel matrix the fit uses. `exact`: the n x n Gram matrix. `low_rank`: "
    "K ~ L L^T by randomly pivoted Cholesky, then the same iteration on the rank-r features "
    "(the model is an expansion over the r pivot rows); its rank stops where the relative "
    "trace error trace(K - L L^T) / trace(K) <= `kernel_tol`, capped by `n_components`, "
    f"{LOW_RANK_SHARE:g} n and `kernel_memory_mb`; at that cap it falls back to the exact "
    "kernel when the Gram matrix fits `kernel_memory_mb` (else it warns and reports the "
    "error reached). `nystroem`: `n_components` uniformly sampled landmarks (the exact kernel "
    f"instead when they are {LOW_RANK_SHARE:g} n or more and the Gram matrix fits). `auto` "
    f"(default): the exact kernel up to {AUTO_EXACT_ROWS:,} training rows (when it fits "
    "`kernel_memory_mb`); above, pivoted Cholesky whose rank a cost model chooses "
    "(`solver.fit_cost.RankChooser`, reported as `fit_info_` `rank_choice` and "
    "`rank_reason`): it pivots on while the rank that meets `kernel_tol` is predicted "
    "affordable (`tol`); otherwise it keeps the first rank whose residual's spectral-norm "
    f"estimate is at most {METRIC_TOL:g} (`fixed_rank`), or takes the exact kernel once the "
    "pivots cost as much as the exact fit and its Gram matrix fits (`exact`); the rank is "
    "otherwise capped only by `kernel_memory_mb` (`capped`, with a warning). `auto` does "
    f"not use `n_components`. Above rank {DENSE_MAX_DIM} the low-rank step is solved by "
    "conjugate gradients instead of an r x r system"
)

#: name -> declaration, in the order of the estimator's signature
PARAMETERS: dict[str, Param] = {
    "alpha": Param([_POSITIVE], "α > 0: weight of the proximal term of the average-margin "
                   "step (large α = small step). The default 16 is the authors' demo value, "
                   "on the paper's grid"),
    "beta": Param([_POSITIVE], "β > 0: weight of the proximal term of the semi-variance "
                  "step (large β = small step; β → ∞ keeps the initial MAMC direction). The "
                  "default 0.25 is the authors' demo value"),
    "kernel": Param([StrOptions(KERNELS)], "Kernel: `linear`, `rbf` "
                    "exp(-γ ||x - z||^2), `poly` (γ <x, z> + coef0)^degree, or `precomputed` "
                    "(a kernel matrix in place of the rows; the library only)"),
    "gamma": Param([None, StrOptions(GAMMA_NAMES), _POSITIVE],
                   "rbf/poly kernel width γ, as scikit-learn's SVC spells it: `scale` "
                   "(default) 1 / (n_features · Var(X)), Var over every entry of the training "
                   "rows (after scaling; 1 when they are constant); `auto` 1 / n_features, the "
                   "centre of the paper's grid {2^j / d}; null (None) the same as `auto` (the "
                   "default before `scale`); or a number. The width used is the model's "
                   "`gamma_`"),
    "degree": Param([Interval(Integral, 0, None, closed="left")], "poly kernel degree"),
    "coef0": Param([Real], "poly kernel constant term"),
    "max_iter": Param([Interval(Integral, 0, None, closed="left")],
                      "Iteration cap T per one-vs-rest task (the paper uses 100); 0 returns the "
                      "MAMC initialisation"),
    "tol": Param([Interval(Real, 0, None, closed="left")],
                 "Tolerance of the stopping rule `stop`. `objective` (the default, with "
                 f"{DEFAULT_TOL:g}): stop a task when the objective J = SV / θ² changed by at "
                 "most `tol` per iteration, relatively, on average over the last "
                 f"{OBJECTIVE_WINDOW} iterations, a rule most fits meet near where their "
                 "hold-out accuracy is that of the paper's 100 iterations (1e-4, the default "
                 "before, was met by few RBF fits). `step` (with 1e-8: "
                 "the paper authors' code): when the step between successive unit-norm "
                 "iterates, ||w_k - w_{k-1}|| / √dim, falls below `tol`; with max_iter 100 "
                 "this is the paper's setting (`PAPER_STOPPING`, which the paper's "
                 "reproduction uses), which most fits never meet. A fit that reaches "
                 "`max_iter` first ends with `converged_` false, a warning in "
                 "`fit_info_[\"warning\"]` and a `ConvergenceWarning`"),
    "stop": Param([StrOptions(STOPPING_RULES)],
                  "The stopping rule `tol` applies to: `objective` (the relative change of "
                  "SV / θ², a rule a fit can meet; the default, as /train's) or `step` (the "
                  "step size of the iterates, the authors' code; the paper's reproduction)"),
    "acceleration": Param([StrOptions(ACCELERATIONS)],
                          "How the `objective` rule's iteration approaches its fixed point: "
                          "`none` (the default) iterates plainly; `anderson` (opt-in, "
                          "experimental) extrapolates from the last "
                          f"{ANDERSON_MEMORY} + 1 iterates (type-II Anderson acceleration, "
                          "safeguarded by the fixed-point residual; docs/solver.md, "
                          "\"Convergence\"), which on real data meets the rule in tens of "
                          "iterations instead of hundreds. The `step` rule (the paper's) always "
                          f"iterates plainly; fits of more than {ANDERSON_MAX_DIM:,} "
                          "coefficients and the lockstep batches of a search too", knob=True),
    "fit_intercept": Param(["boolean"], "Linear kernel: append the constant-1 feature (the "
                           "paper's protocol; the bias is a coordinate of w, inside ||w|| = 1). "
                           "Kernels have no bias"),
    "update": Param([StrOptions(DENSE_UPDATES)],
                    "How the dense linear step (`linear_solver=\"dense\"` only) follows the "
                    "active set: `incremental` edits its D x D inverse by Woodbury updates for "
                    "the rows that entered and left A; `rebuild` forms and inverts it afresh "
                    "every iteration (the reference path; the same result). Not a "
                    "`linear_solver`", knob=True),
    "linear_solver": Param([StrOptions(("auto", *LINEAR_SOLVERS))],
                           "How the linear step (I + X_A^T X_A / (n β)) w = r is solved (same "
                           "iterates up to rounding): `dense` keeps the D x D system; "
                           "`woodbury` solves the |A| x |A| system from the row Gram matrix; "
                           "`cg` is matrix-free preconditioned conjugate gradients; `gram` "
                           "runs them on X_A^T X_A kept current. `auto` chooses by shape "
                           "(`solver._linear_step.choose_linear_solver`)", knob=True),
    "approximation": Param([StrOptions(APPROXIMATIONS)], _APPROXIMATION),
    "kernel_tol": Param([Interval(Real, 0, 1, closed="left")],
                        "Largest relative trace error trace(K - L L^T) / trace(K) of the "
                        "low-rank kernel factor (approximation `auto`/`low_rank`; the model "
                        "reports the rank and error reached)"),
    "n_components": Param([Interval(Integral, 1, None, closed="left")],
                          "Nyström landmarks (approximation=`nystroem`); the largest rank of "
                          "approximation=`low_rank` (its cost grows as n r^2)"),
    "kernel_memory_mb": Param([_POSITIVE], "Memory budget (MiB) of a kernel fit: the exact "
                              "path needs about four n x n float64 arrays; the low-rank "
                              "path's rank is capped so that its n x r arrays fit", knob=True),
    "random_state": Param(["random_state"], "Seed of the pivot or landmark sample"),
    "calibration": Param([StrOptions(CALIBRATIONS)],
                         "`sigmoid` (Platt) or `isotonic`: also fit `calibrator_` on "
                         f"{CALIBRATION_FOLDS}-fold cross-validated decision values of the "
                         "training rows and offer `predict_proba`; `none`: no probabilities, "
                         "no extra fits"),
    "class_weight": Param([None, StrOptions(CLASS_WEIGHTS), dict],
                          "Weights of the classes, scikit-learn's semantics: `balanced` (class "
                          "c weighs n / (k n_c)), a mapping class -> weight >= 0 (classes left "
                          "out weigh 1; keys the labels or their strings), or null (None, every "
                          "class weighs 1). A row's weight is its class's times its "
                          "`sample_weight` (fit's argument); the fit then maximises the "
                          "weighted average margin and minimises the weighted semi-variance "
                          "(docs/algorithm.md, \"Weights\"), and the calibration's folds and "
                          "calibrator use the same weights"),
    "warm_start": Param(["boolean"],
                        "As scikit-learn's: when true, `fit` starts the iteration from the "
                        "previous fit's solution (linear: `coef_`, `intercept_` of as many "
                        "features and classes; exact kernel: `dual_coef_` of an exact fit on "
                        "as many rows, which are assumed to be the same) instead of the MAMC "
                        "direction, e.g. after `set_params(alpha=..., beta=...)` for a "
                        "neighbouring setting: the iterates of neighbouring settings are "
                        "close, so the stopping rule is met sooner. The low-rank and Nystroem "
                        "paths, and a first fit, start from the MAMC direction", knob=True),
}

__all__ = ["APPROXIMATIONS", "AUTO_EXACT_ROWS", "DEFAULT_TOL", "KERNEL_APPROXIMATIONS",
           "LINEAR_SOLVERS", "LOW_RANK_SHARE", "PAPER_STOPPING", "PARAMETERS"]
