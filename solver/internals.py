"""The solver's declared internal surface: the building blocks below the estimators (the
active-set systems, the linear steps, the Gram matrices, the blocked inverse, the row blocks,
the huge-page switch, the memory footprint, the cluster fits' memory plan), for the package's
own tests and benchmarks. It promises no stability; the service imports ``solver`` only (an
import-linter contract), never this. The modules whose constants a test changes are here as
modules too (``linalg``, ``batched_msvmav``, ``gram_step``, ``msvmav_core``, ``active_set``,
``gram_matrix``, ``linear_step``, ``margin_bounds``, ``row_blocks``, ``symmetric_product``,
the modules their own tests test and patch, and the cluster
fits' ``cluster_memory``, ``cluster_blocks``, ``cluster_kernel``, ``cluster_kernel_blocks``,
``cluster_rows``, whose parts bench/cluster_pass.py times and swaps). Tests and benches
import no ``_private`` solver module but through here (tests/test_structure.py)."""

from . import _active_set as active_set
from . import _batched_msvmav as batched_msvmav
from . import _gram_matrix as gram_matrix
from . import _linalg as linalg
from . import _linear_step as linear_step
from . import _margin_bounds as margin_bounds
from . import _msvmav_core as msvmav_core
from . import _row_blocks as row_blocks
from . import _symmetric_product as symmetric_product
from ._active_set import DualSystem
from ._base import FitStopped
from ._footprint import BASE_BYTES
from ._gram_matrix import fold, fold_pairs, rows_gram
from ._huge_pages import _set_madvise_hugepage, huge_pages_enabled, small_pages
from ._linalg import spd_inverse_blocked, sweep_block
from ._linear_step import (
    DENSE_MAX_DIM,
    GRAM_MAX_DIM,
    LINEAR_STEPS,
    WOODBURY_MAX_ROWS,
    ConjugateGradientSystem,
    GramSystem,
    PrimalSystem,
    choose_linear_solver,
    linear_system_bytes,
    make_linear_step,
)
from ._linear_step import gram as gram_step
from ._linear_step.dense import MOMENTS_ROWS
from ._msvmav_core import OBJECTIVE_WINDOW, UPDATE_WINDOW, DualSpace, PrimalSpace, iterate
from ._row_blocks import RowBlocks, fit_threads, run_parallel
from ._row_blocks import split_rows as split_row_blocks
from ._symmetric_product import (
    PROBES,
    RECHECK,
    THREADED_MIN_DIM,
    SymmetricProduct,
    spare_cores,
)
from ._weighted import WeightedDualSpace, WeightedPrimalSpace
from .comparators._common import cholesky_solve_inplace
from .distributed import _blocks as cluster_blocks
from .distributed import _cluster as cluster_rows
from .distributed import _kernel as cluster_kernel
from .distributed import _kernel_blocks as cluster_kernel_blocks
from .distributed import _memory as cluster_memory
from .distributed._memory import largest_rank
from .model_selection import _chunks as setting_chunks

__all__ = [
    "BASE_BYTES", "DENSE_MAX_DIM", "GRAM_MAX_DIM", "LINEAR_STEPS", "MOMENTS_ROWS",
    "OBJECTIVE_WINDOW", "PROBES", "RECHECK", "THREADED_MIN_DIM", "UPDATE_WINDOW",
    "WOODBURY_MAX_ROWS",
    "ConjugateGradientSystem", "DualSpace", "DualSystem", "FitStopped", "GramSystem",
    "PrimalSpace", "PrimalSystem", "RowBlocks", "SymmetricProduct", "WeightedDualSpace",
    "WeightedPrimalSpace", "_set_madvise_hugepage", "batched_msvmav", "choose_linear_solver",
    "active_set", "gram_matrix", "linear_step", "margin_bounds", "row_blocks", "setting_chunks",
    "symmetric_product", "cluster_blocks", "cluster_kernel", "cluster_kernel_blocks",
    "cluster_memory", "cluster_rows",
    "cholesky_solve_inplace", "fit_threads", "fold", "fold_pairs", "gram_step",
    "huge_pages_enabled", "iterate", "largest_rank", "linalg", "linear_system_bytes",
    "make_linear_step", "msvmav_core", "run_parallel", "rows_gram", "small_pages", "spare_cores",
    "spd_inverse_blocked", "split_row_blocks", "sweep_block",
]
