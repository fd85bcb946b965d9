"""msvmav.solver — margin-distribution learning in pure numpy/scipy/scikit-learn.

* ``MSVMAv``: the classifier of Qian, Ai, Zhang, Gao (IJCAI 2022), linear and kernel.
* ``margin_statistics``: the margin-distribution statistics of any classifier's margins.
* ``model_from_dict``: restore any estimator of this package from ``est.to_dict()``.

This package never imports the web service or the database layer.
"""

from ._base import MarginClassifier, model_from_dict
from .margins import margin_statistics
from .msvmav import MSVMAv

__all__ = ["MSVMAv", "MarginClassifier", "margin_statistics", "model_from_dict"]
