"""The algorithms of this package, in one table: short name, estimator class, display name, in
the column order of the paper's Table 1 (MSVMAv, then its comparators). Every list of
algorithms elsewhere — the service's request schemas, the experiment tables, the command line,
the plots' legends — derives from ``TABLE``."""

from __future__ import annotations

from dataclasses import dataclass

from .comparators import FMM, LSSVM, MAMC, ODM, SVM, SVR
from .kernels import kernel_type
from .msvmav import MSVMAv


@dataclass(frozen=True)
class Algorithm:
    name: str  # the short name used by the API, the command line and the grids
    estimator: type  # a solver._base.MarginClassifier
    display: str  # as in the paper's tables
    # linear fits append the intercept's column of ones to the rows (solver.msvmav.augment)
    appends_ones: bool = False


#: the paper's Table 1 order (table1_linear.csv / table2_rbf.csv columns)
TABLE: tuple[Algorithm, ...] = (
    Algorithm("msvmav", MSVMAv, "MSVMAv", appends_ones=True),
    Algorithm("svm", SVM, "SVM"),
    Algorithm("svr", SVR, "SVR"),
    Algorithm("lssvm", LSSVM, "LSSVM"),
    Algorithm("odm", ODM, "ODM", appends_ones=True),
    Algorithm("mamc", MAMC, "MAMC", appends_ones=True),
    Algorithm("fmm", FMM, "FMM", appends_ones=True),
)

PAPER_ORDER: tuple[str, ...] = tuple(a.name for a in TABLE)
ALGORITHMS: dict[str, type] = {a.name: a.estimator for a in TABLE}
COMPARATORS: dict[str, type] = {a.name: a.estimator for a in TABLE if a.name != "msvmav"}
DISPLAY_NAMES: dict[str, str] = {a.name: a.display for a in TABLE}


def estimator_class(algorithm: str) -> type:
    """The estimator class of an algorithm name; ValueError naming the known ones."""
    try:
        return ALGORITHMS[algorithm]
    except KeyError:
        raise ValueError(f"algorithm: unknown {algorithm!r}; use one of "
                         f"{list(PAPER_ORDER)}") from None


def param_names(algorithm: str) -> list[str]:
    """The estimator's hyper-parameter names (its ``get_params()`` keys), sorted."""
    return sorted(estimator_class(algorithm)().get_params())


def appends_ones(algorithm: str, kernel: str) -> bool:
    """Whether a fit with this kernel appends a column of ones to the rows: then dense rows
    laid out beside one (``solver.msvmav.with_intercept_room``) are not copied for it."""
    return kernel_type(kernel).primal and any(a.appends_ones for a in TABLE if a.name == algorithm)


def takes_seed(algorithm: str) -> bool:
    """Whether the estimator has a ``random_state`` (which the fit's seed then sets)."""
    return "random_state" in estimator_class(algorithm)().get_params()


def display_name(algorithm: str) -> str:
    """The paper's name of an algorithm (the short name itself for one this table lacks)."""
    return DISPLAY_NAMES.get(algorithm, algorithm)


__all__ = ["ALGORITHMS", "COMPARATORS", "DISPLAY_NAMES", "PAPER_ORDER", "TABLE", "Algorithm",
           "appends_ones", "display_name", "estimator_class", "param_names", "takes_seed"]
