"""msvmav.solver — margin-distribution learning in pure numpy/scipy/scikit-learn.

* ``MSVMAv``: the classifier of Qian, Ai, Zhang, Gao (IJCAI 2022), linear and kernel.
* ``margin_statistics``: the margin-distribution statistics of any classifier's margins.
* ``SVM``, ``SVR``, ``LSSVM``, ``MAMC``, ``ODM``, ``FMM``: the paper's comparators, same API.
* ``model_from_dict``: restore any estimator of this package from ``est.to_dict()``.
* ``cross_validate_grid``: k-fold model selection over the paper's grids, for any algorithm.
* ``solver.algorithms``: the one table of algorithms (name, class, display name, paper order).
* ``solver.protocol``: one fit — scale, optional search, refit, score (the service's /train and
  the experiments both use it).
* ``run_experiment``: the paper's protocol (its Table-1 layout is the service's:
  ``app.experiments.tables``).
* ``plot_margin_cdf``: the cumulative margin distribution of several models (the paper's Fig. 1).
* ``solver.calibration``: probabilities (every estimator's ``calibration`` parameter,
  ``predict_proba``); ``solver.explain``: per-row contributions and permutation importance;
  ``solver.evaluation``: metrics and curves; ``solver.performance_estimate``: the label-free
  expected accuracy.

This package never imports the web service or the database layer.
"""

from ._base import MarginClassifier, array_problem, attributes_problem, model_from_dict
from .algorithms import ALGORITHMS
from .comparators import FMM, LSSVM, MAMC, ODM, SVM, SVR
from .expansion import Expansion, NoExpansionError, as_tasks
from .experiments import ExperimentResult, compare, run_experiment
from .fit_report import FitReport
from .kernels import RBF, Kernel, Linear, Poly, Precomputed, kernel_type, make_kernel
from .margins import margin_statistics
from .model_selection import SearchResult, cross_validate_grid, kfold_indices, make_estimator
from .msvmav import MSVMAv

__all__ = ["ALGORITHMS", "Expansion", "NoExpansionError", "as_tasks", "Kernel", "Linear", "Poly",
           "Precomputed", "RBF", "kernel_type", "make_kernel", "FitReport",
           "FMM", "LSSVM", "MAMC", "MSVMAv", "ExperimentResult", "MarginClassifier",
           "ODM", "SVM", "SVR", "SearchResult", "compare", "cross_validate_grid", "kfold_indices",
           "make_estimator", "margin_statistics", "array_problem", "attributes_problem",
           "model_from_dict",
           "plot_margin_cdf", "run_experiment"]


def __getattr__(name: str):
    # matplotlib is imported only when a plot is asked for (it costs ~0.5 s at start-up)
    if name == "plot_margin_cdf":
        from .plots import plot_margin_cdf

        return plot_margin_cdf
    raise AttributeError(f"module 'solver' has no attribute {name!r}")
