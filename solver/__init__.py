"""msvmav.solver — margin-distribution learning in pure numpy/scipy/scikit-learn.

This module is the package's public surface: the service (``app``) imports ``solver`` and
nothing below it (an import-linter contract in pyproject.toml keeps it so); the submodules are
its implementation (a library user may still import them, as the tests of each one do).

* ``MSVMAv``: the classifier of Qian, Ai, Zhang, Gao (IJCAI 2022), linear and kernel.
* ``SVM``, ``SVR``, ``LSSVM``, ``MAMC``, ``ODM``, ``FMM``: the paper's comparators, same API;
  ``ALGORITHMS`` and ``estimator_class``: the one table of algorithms.
* Kernels as types (``Kernel``, ``Linear``, ``RBF``, ``Poly``, ``Precomputed``;
  ``kernel_type``, ``make_kernel``); a fitted model as an ``Expansion``.
* Incremental updates: ``MSVMAv.update_fit((X_fit, y_fit), add=(X, y), remove=...)`` (the
  warm-started fit of the updated rows; ``fit_report().warm_start`` says what it reused and
  saved) and ``updated_rows`` (the rows it fits, in its order).
* What an estimator declares: ``fit_report()`` (``FitReport``), ``model_summary()``,
  ``out_of_fold()``, ``expansion()``, ``describe()``, ``kernel_kind``, ``calibrated``.
* ``model_from_dict``: restore any estimator of this package from ``est.to_dict()``
  (``array_problem``, ``attributes_problem``: what it refuses).
* One fit (``Plan``, ``fit_plan``, ``Fit``: scale, optional search, refit, score), the searches
  (``cross_validate_grid``, ``auto_search``'s results), the paper's protocol
  (``run_experiment``), decision rules, metrics, explanations, time and memory estimates, the
  cluster fit (dask and distributed are imported only when it runs) and
  ``plot_margin_cdf`` (matplotlib is imported only when a plot is asked for).

This package never imports the web service or the database layer.
"""

from ._base import MarginClassifier, array_problem, attributes_problem, model_from_dict
from .algorithms import (
    ALGORITHMS,
    PAPER_ORDER,
    appends_ones,
    display_name,
    estimator_class,
    param_names,
)
from .auto_search import AUTO_CV, AutoResult, default_budget, exact_kernel, rbf_path
from .auto_search import KERNELS as AUTO_KERNELS
from .calibration import CALIBRATION_FOLDS, CALIBRATIONS, cross_validated_decisions
from .comparators import FMM, LSSVM, MAMC, ODM, SVM, SVR
from .comparators.grids import iter_configs
from .decision import (
    MAX_COST_CLASSES,
    Objective,
    RuleError,
    apply_rule,
    check_objective,
    check_rule,
    cost_curve,
    fit_rule,
    mean_cost,
    rate_counts,
    rates,
)
from .decision import describe as describe_rule
from .distributed import (
    DistributedFitError,
    check_cluster_params,
    cluster_margin_statistics,
    fit_on_cluster,
    plan_memory,
)
from .evaluation import curves, evaluate
from .expansion import Expansion, NoExpansionError, as_tasks
from .experiments import (
    ExperimentResult,
    compare,
    run_experiment,
    table_columns,
    win_tie_loss,
)
from .explain import contributions, explain_work, permutation_importance
from .fit_report import FitReport
from .fit_time import estimate_seconds, search_seconds
from .incremental import updated_rows
from .kernels import RBF, Kernel, Linear, Poly, Precomputed, kernel_type, make_kernel
from .margins import QUANTILE_LEVELS, label_margins, margin_statistics
from .memory import FitEstimate, estimate_fit, gib
from .model_selection import (
    SearchResult,
    cross_validate_grid,
    kfold_indices,
    make_estimator,
    n_cells,
    resolve_grid,
)
from .msvmav import MSVMAv
from .msvmav_parameters import DEFAULT_TOL, KERNEL_APPROXIMATIONS, LINEAR_SOLVERS, PARAMETERS
from .parallel import SchedulerUnreachableError, dask_cluster
from .params import Interval, InvalidParameterError, Param, StrOptions, check_estimator_param
from .performance_estimate import expected_accuracy
from .protocol import (
    MIN_HOLDOUT_ROWS,
    Fit,
    Plan,
    default_test_fraction,
    holdout_sizes,
    split_indices,
    split_rows,
)
from .protocol import fit as fit_plan
from .scaling import MinMaxScaling
from .sparse import int32_csr
from .weights import fit_weights

__all__ = [
    "ALGORITHMS", "AUTO_CV", "AUTO_KERNELS", "CALIBRATIONS", "CALIBRATION_FOLDS", "DEFAULT_TOL",
    "FMM",
    "KERNEL_APPROXIMATIONS", "LINEAR_SOLVERS", "LSSVM", "MAMC", "MAX_COST_CLASSES",
    "MIN_HOLDOUT_ROWS", "MSVMAv", "ODM", "PAPER_ORDER", "PARAMETERS", "QUANTILE_LEVELS", "RBF",
    "SVM", "SVR", "AutoResult", "DistributedFitError", "Expansion", "ExperimentResult", "Fit",
    "FitEstimate", "FitReport", "Interval", "InvalidParameterError", "Kernel", "Linear",
    "MarginClassifier", "MinMaxScaling", "NoExpansionError", "Objective", "Param", "Plan",
    "Poly", "Precomputed", "RuleError", "SchedulerUnreachableError", "SearchResult",
    "StrOptions", "appends_ones", "apply_rule", "array_problem", "as_tasks",
    "attributes_problem", "check_cluster_params", "check_estimator_param", "check_objective",
    "check_rule", "cluster_margin_statistics", "compare", "contributions",
    "cost_curve", "cross_validate_grid", "cross_validated_decisions", "curves", "dask_cluster",
    "default_budget", "default_test_fraction", "describe_rule", "display_name",
    "estimate_fit", "estimate_seconds", "estimator_class", "evaluate", "exact_kernel",
    "expected_accuracy", "explain_work", "fit_on_cluster", "fit_plan", "fit_rule",
    "fit_weights", "gib", "holdout_sizes", "int32_csr", "iter_configs", "kernel_type",
    "kfold_indices", "label_margins", "make_estimator", "make_kernel", "margin_statistics",
    "mean_cost",
    "model_from_dict", "n_cells", "param_names", "permutation_importance", "plan_memory",
    "plot_margin_cdf",
    "rate_counts", "rates", "rbf_path", "resolve_grid", "run_experiment", "search_seconds",
    "split_indices", "split_rows", "table_columns", "updated_rows", "win_tie_loss",
]


def __getattr__(name: str):
    # matplotlib is imported only when a plot is asked for (it costs ~0.5 s at start-up)
    if name == "plot_margin_cdf":
        from .plots import plot_margin_cdf

        return plot_margin_cdf
    raise AttributeError(f"module 'solver' has no attribute {name!r}")
