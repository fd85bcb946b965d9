"""Hyper-parameter grids of the paper's protocol (docs/algorithm.md, "Conventions") and small
"quick" grids.

The paper writes C in {2^-10, ..., 2^10}; the configuration counts of its grids table (SVM 11
linear / 121 kernel, ODM 176 = 11 x 4 x 4, MSVMAv 121 = 11 x 11) fix the exponent step at 2,
i.e. 11 values,
as for alpha, beta, eta and gamma. The kernel width grid is separate because it depends on the
feature count: ``gamma_grid(d)`` = {2^j / d : j = -10, -8, ..., 10}.

Values are plain floats and ints (JSON-able). Keys are the estimators' parameter names; "C" of
LSSVM is LS-SVMlab's gam and "C" of ODM is its lambda.
"""

from __future__ import annotations

import itertools
from typing import Any

from ..kernels import kernel_type


def powers_of_two(lo: int, hi: int, step: int = 2) -> list[float]:
    """[2^lo, 2^(lo+step), ..., 2^hi] as floats."""
    return [2.0**j for j in range(lo, hi + 1, step)]


PAPER_EXPONENTS = powers_of_two(-10, 10)  # 11 values, shared by C, alpha, beta
QUICK_EXPONENTS = [2.0**-4, 1.0, 2.0**4]

PAPER_GRIDS: dict[str, dict[str, list]] = {
    "msvmav": {"alpha": PAPER_EXPONENTS, "beta": PAPER_EXPONENTS},
    "svm": {"C": PAPER_EXPONENTS},
    "svr": {"C": PAPER_EXPONENTS},  # epsilon is not tuned (library default 0.1)
    "lssvm": {"C": PAPER_EXPONENTS},
    "odm": {"C": PAPER_EXPONENTS, "mu": [0.2, 0.4, 0.6, 0.8], "theta": [0.2, 0.4, 0.6, 0.8]},
    "mamc": {},  # no hyper-parameter (linear); only gamma for kernels
    "fmm": {"eta": powers_of_two(-10, 0), "n_iter": [50, 100, 200, 400, 800, 1600]},
}

QUICK_GRIDS: dict[str, dict[str, list]] = {
    "msvmav": {"alpha": QUICK_EXPONENTS, "beta": QUICK_EXPONENTS},
    "svm": {"C": QUICK_EXPONENTS},
    "svr": {"C": QUICK_EXPONENTS},
    "lssvm": {"C": QUICK_EXPONENTS},
    "odm": {"C": QUICK_EXPONENTS, "mu": [0.2, 0.8], "theta": [0.2, 0.8]},
    "mamc": {},
    "fmm": {"eta": [2.0**-8, 2.0**-4, 1.0], "n_iter": [100, 400]},
}

PAPER_GAMMA_EXPONENTS = list(range(-10, 11, 2))
QUICK_GAMMA_EXPONENTS = [-4, 0, 4]


def gamma_grid(d: int, *, quick: bool = False) -> list[float]:
    """RBF widths {2^j / d}: j = -10, -8, ..., 10 (paper), or j = -4, 0, 4 (quick).

    Parameters
    ----------
    d : int >= 1
        Number of original (unaugmented) features.
    quick : bool
        Return the small grid.
    """
    if d < 1:
        raise ValueError(f"d: needs at least one feature, got {d}")
    exps = QUICK_GAMMA_EXPONENTS if quick else PAPER_GAMMA_EXPONENTS
    return [2.0**j / d for j in exps]


def param_grid(name: str, *, kernel: str = "linear", n_features: int | None = None,
               quick: bool = False) -> dict[str, list]:
    """The grid of one method, with ``gamma`` added for the "rbf" and "poly" kernels.

    Parameters
    ----------
    name : str
        A key of PAPER_GRIDS ("msvmav", "svm", "svr", "lssvm", "odm", "mamc", "fmm").
    kernel : str
        "linear", "precomputed" (no gamma) or "rbf"/"poly" (needs n_features).
    n_features : int or None
        d, for the gamma grid.
    quick : bool
        Use QUICK_GRIDS and the quick gamma grid.
    """
    grids = QUICK_GRIDS if quick else PAPER_GRIDS
    if name not in grids:
        raise ValueError(f"name: unknown method {name!r}; use one of {sorted(grids)}")
    grid = {k: list(v) for k, v in grids[name].items()}
    if kernel_type(kernel).takes_gamma:
        if n_features is None:
            raise ValueError(f"n_features: needed for the gamma grid of kernel={kernel!r}")
        grid["gamma"] = gamma_grid(n_features, quick=quick)
    return grid


def iter_configs(grid: dict[str, list]) -> list[dict[str, Any]]:
    """All combinations of a grid, in a fixed order (one {} for an empty grid)."""
    keys = list(grid)
    return [dict(zip(keys, values, strict=True))
            for values in itertools.product(*(grid[k] for k in keys))]
