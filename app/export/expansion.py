"""Every model the service trains, as one of two plain expansions over scaled features
(``solver.Expansion``, read by the estimator's own ``expansion()``):

* linear:  f(x) = x @ weights + intercept                       weights (D, T)
* kernel:  f(x) = k(x, centres) @ weights + intercept            centres (m, D), weights (m, T)

with k the model's kernel (``solver.Kernel``: its ``formula`` is what the ONNX graph writes),
T = 1 for two classes and T = k (one-vs-rest) otherwise. ``expansion`` checks on sample rows
that the expansion computes what the estimator's ``decision_function`` does (MSVMAv's linear,
exact, low-rank and Nystroem kernels and the comparators') before anything is exported.
"""

from __future__ import annotations

import numpy as np

from solver import Expansion, MarginClassifier, NoExpansionError, as_tasks

# Relative agreement the expansion must reach with the estimator's own decision_function.
CHECK_RTOL = 1e-9
CHECK_ROWS = 16

__all__ = ["CHECK_ROWS", "CHECK_RTOL", "Expansion", "UnsupportedModelError", "expansion"]


class UnsupportedModelError(ValueError):
    """The estimator is not a linear or kernel expansion over feature rows."""


def expansion(est: MarginClassifier) -> Expansion:
    """The estimator as an Expansion, checked against its own ``decision_function`` on
    sample rows in [0, 1]^D (where scaled rows live); UnsupportedModelError naming the kind when it
    is not one (e.g. a model whose solver adds a term the expansion does not know)."""
    try:
        exp = est.expansion()
    except NoExpansionError:
        raise UnsupportedModelError(
            f"{est.describe()} cannot be exported: only linear, rbf and poly models are"
        ) from None
    d = int(est.n_features_in_)
    rng = np.random.default_rng(0)
    X = np.vstack([np.zeros(d), np.ones(d), rng.random((CHECK_ROWS, d))])
    ours = exp.decision(X)
    theirs = as_tasks(est.decision_function(X))
    scale = max(float(np.abs(theirs).max()), 1e-300)
    if ours.shape != theirs.shape or not np.allclose(
        ours, theirs, rtol=CHECK_RTOL, atol=CHECK_RTOL * scale
    ):
        raise UnsupportedModelError(
            f"{est.describe()} cannot be exported: its decision function is "
            "not the linear or kernel expansion of its fitted attributes"
        )
    return exp
