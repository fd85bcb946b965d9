"""A linear MSVMAv fitted on a Dask cluster, where its rows lie (issue 32).

    from solver.distributed import fit_on_cluster, DistributedFitError
    fit_on_cluster(MSVMAv(...), X, y, client=client, callback=None) -> the fitted MSVMAv

X: a dask array chunked along rows only, its blocks dense float or CSR; y: its labels, with
X's row chunks. The iteration is the shared one (``solver._msvmav_core.iterate``); its sums
over rows are map-reduce passes over the blocks (``_cluster``), the D-sized step is solved
here (``_space``: one D x D reduce an iteration, or matrix-free conjugate gradients for wide
data). dask and distributed are imported only by the functions that use them.
"""

from ._cluster import DistributedFitError
from ._fit import check_cluster_params, fit_on_cluster

__all__ = ["DistributedFitError", "check_cluster_params", "fit_on_cluster"]
