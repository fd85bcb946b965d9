"""The six comparators of the MSVMAv paper (docs/algorithm.md, "The comparators"), with
MSVMAv's API.

* ``SVM`` — LIBLINEAR (linear, regularised bias) / LIBSVM (kernels, free bias) via scikit-learn.
* ``SVR`` — epsilon-SVR on the +-1 labels, same libraries.
* ``LSSVM`` — least-squares SVM, closed form, free unregularised bias.
* ``MAMC`` — maximal average margin classifier, closed form (MSVMAv's initial point).
* ``ODM`` — optimal margin distribution machine, dual coordinate descent (libodm).
* ``FMM`` — fast margin maximisation by dual acceleration (momentum method).

``solver.algorithms`` lists them by name with MSVMAv; ``grids`` holds the paper's and the
quick hyper-parameter grids (including MSVMAv's).
"""

from .fmm import FMM
from .grids import PAPER_GRIDS, QUICK_GRIDS, gamma_grid, iter_configs, param_grid
from .lssvm import LSSVM
from .mamc import MAMC
from .odm import ODM
from .svm import SVM
from .svr import SVR

__all__ = [
    "FMM",
    "LSSVM",
    "MAMC",
    "ODM",
    "PAPER_GRIDS",
    "QUICK_GRIDS",
    "SVM",
    "SVR",
    "gamma_grid",
    "iter_configs",
    "param_grid",
]
