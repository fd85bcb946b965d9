"""A linear MSVMAv fitted on a Dask cluster, where its rows lie (issue 32).

    from solver.distributed import fit_on_cluster, DistributedFitError
    fit_on_cluster(MSVMAv(...), X, y, client=client, callback=None) -> the fitted MSVMAv

X: a dask array chunked along rows only, its blocks dense float or CSR; y: its labels, with
X's row chunks. The iteration is the shared one (``solver._msvmav_core.iterate``); its sums
over rows are map-reduce passes over the blocks (``_cluster``), the D-sized step is solved
here (``_space``: one D x D reduce an iteration, or matrix-free conjugate gradients for wide
data). dask and distributed are imported only by the functions that use them.

kernel="rbf" or "poly" fits the low-rank kernel path there (``_kernel``: Nystroem landmarks
chosen from a sample of the rows, each block mapped to its features on its worker);
``fit_on_landmarks`` is the local fit on given landmarks. ``cluster_margin_statistics``
(``_summary``) is a fitted model's training-margin summary reduced over the blocks (exact sums
and counts; quantiles from a mergeable KLL sketch). calibration="sigmoid" or "isotonic" fits
the calibrator on out-of-fold decision values of folds of blocks, and ``cluster_evaluation``
scores a model on blocks it did not train on (``_calibration``).
"""

from ._calibration import cluster_evaluation
from ._cluster import DistributedFitError
from ._fit import check_cluster_params, fit_on_cluster
from ._kernel import fit_on_landmarks
from ._memory import plan_memory
from ._summary import cluster_margin_statistics

__all__ = ["DistributedFitError", "check_cluster_params", "cluster_evaluation",
           "cluster_margin_statistics", "fit_on_cluster", "fit_on_landmarks", "plan_memory"]
