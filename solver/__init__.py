"""msvmav.solver — margin-distribution learning in pure numpy/scipy/scikit-learn.

* ``MSVMAv``: the classifier of Qian, Ai, Zhang, Gao (IJCAI 2022), linear and kernel.
* ``margin_statistics``: the margin-distribution statistics of any classifier's margins.
* ``SVM``, ``SVR``, ``LSSVM``, ``MAMC``, ``ODM``, ``FMM``: the paper's comparators, same API.
* ``model_from_dict``: restore any estimator of this package from ``est.to_dict()``.

This package never imports the web service or the database layer.
"""

from ._base import MarginClassifier, model_from_dict
from .comparators import ALGORITHMS as _COMPARATORS
from .comparators import FMM, LSSVM, MAMC, ODM, SVM, SVR
from .margins import margin_statistics
from .msvmav import MSVMAv

#: every algorithm by its short name, MSVMAv first
ALGORITHMS = {"msvmav": MSVMAv, **_COMPARATORS}

__all__ = ["ALGORITHMS", "FMM", "LSSVM", "MAMC", "MSVMAv", "MarginClassifier", "ODM", "SVM",
           "SVR", "margin_statistics", "model_from_dict"]
