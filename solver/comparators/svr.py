"""Support vector regression on +-1 targets used as a classifier (docs/algorithm.md, "SVR")."""

from __future__ import annotations

from numbers import Real

from sklearn import svm as sk_svm

from solver.params import Interval, StrOptions

from ._common import KERNEL_CONSTRAINTS
from ._library import LIBRARY_CONSTRAINTS, LibraryClassifier


class SVR(LibraryClassifier):
    """epsilon-SVR regressing the +-1 labels; predict the sign (ties -> classes_[0]).

    Linear kernel: scikit-learn ``LinearSVR`` (LIBLINEAR) with ``fit_intercept=True,
    intercept_scaling=1`` (``-B 1``: regularised bias). Other kernels: ``SVR`` (LIBSVM) with a
    free bias. ``epsilon`` is always passed explicitly: LinearSVR's own default is 0, LIBLINEAR's
    and LIBSVM's is 0.1. One-vs-rest for more than two classes.

    Parameters
    ----------
    C : float > 0
        Penalty of the training loss.
    epsilon : float >= 0
        Width of the insensitive tube (not tuned in the paper; library default 0.1).
    kernel : {"linear", "rbf", "poly", "precomputed"}
    gamma : float > 0, "scale" (default), "auto" or None
        Kernel width for "rbf"/"poly", as scikit-learn's SVC: "scale" 1 / (d Var(X)), "auto"
        (and None, the default before "scale") 1 / d.
    degree, coef0 : polynomial kernel (gamma <x, z> + coef0) ** degree.
    loss : {"epsilon_insensitive", "squared_epsilon_insensitive"}
        Linear kernel: LIBLINEAR ``-s 13`` (L1, the appendix's loss, default) or the L2 loss
        (``-s 11``/``-s 12``). Kernels support only "epsilon_insensitive".
    tol : float > 0
        Stopping tolerance passed to LIBLINEAR and to LIBSVM.
    max_iter : int >= 1
        Linear kernel only: LIBLINEAR's iteration cap.
    dual : bool or "auto"
        Linear kernel only, passed to ``LinearSVR``.
    cache_size : float
        LIBSVM kernel cache in MB.
    random_state : int or None
        Seed of LIBLINEAR's coordinate order.
    class_weight : None, "balanced" or a mapping class -> weight
        Weights of the classes (``solver.weights``, scikit-learn's semantics), times
        ``fit``'s ``sample_weight``: each machine is fitted with ``sample_weight`` = the rows'
        weights, which LIBLINEAR and LIBSVM apply to the row's C.

    Attributes
    ----------
    classes_, coef_, intercept_, dual_coef_, X_fit_ : the expansion ``ExpansionClassifier``
        describes; here X_fit_ (m, d) holds the support vectors.
    support_ : (m,) their training-row indices (kernels).
    gamma_ : float or None, the gamma actually used.
    n_iter_ : int, library iterations (max over the one-vs-rest machines).
    """

    _parameter_constraints: dict = {
        "C": [Interval(Real, 0, None, closed="neither")],
        "epsilon": [Interval(Real, 0, None, closed="left")],
        **KERNEL_CONSTRAINTS,
        "loss": [StrOptions({"epsilon_insensitive", "squared_epsilon_insensitive"})],
        **LIBRARY_CONSTRAINTS,
    }

    def __init__(self, C: float = 1.0, *, epsilon: float = 0.1, kernel: str = "linear",
                 gamma: float | str | None = "scale", degree: int = 3, coef0: float = 1.0,
                 loss: str = "epsilon_insensitive", tol: float = 1e-4, max_iter: int = 1000,
                 dual: bool | str = "auto", cache_size: float = 200,
                 random_state: int | None = None,
                 calibration: str = "none",
                 class_weight: str | dict | None = None) -> None:
        super().__init__(C, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0, loss=loss,
                         tol=tol, max_iter=max_iter, dual=dual, cache_size=cache_size,
                         random_state=random_state, calibration=calibration,
                         class_weight=class_weight)
        self.epsilon = epsilon

    def _check_kernel_params(self) -> None:
        if self.loss != "epsilon_insensitive":
            raise ValueError(f"loss: {self.loss!r} is only available with kernel='linear' "
                             "(LIBSVM's epsilon-SVR uses the epsilon-insensitive loss)")

    def _linear_machine(self) -> sk_svm.LinearSVR:
        return sk_svm.LinearSVR(
            C=self.C, epsilon=self.epsilon, loss=self.loss, dual=self.dual, tol=self.tol,
            max_iter=self.max_iter, fit_intercept=True, intercept_scaling=1.0,
            random_state=self.random_state)

    def _kernel_machine(self) -> sk_svm.SVR:
        return sk_svm.SVR(
            C=self.C, epsilon=self.epsilon, kernel=self.kernel, gamma=self.gamma_,
            degree=self.degree, coef0=self.coef0, tol=self.tol, cache_size=self.cache_size,
            shrinking=True)
