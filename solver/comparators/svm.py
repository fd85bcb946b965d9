"""Soft-margin SVM (docs/algorithm.md, "SVM"): LIBLINEAR for the linear kernel, LIBSVM otherwise,
both through scikit-learn, with the fitted model copied into plain arrays."""

from __future__ import annotations

from numbers import Real

from sklearn import svm as sk_svm

from solver.params import Interval, StrOptions

from ._common import KERNEL_CONSTRAINTS
from ._library import LIBRARY_CONSTRAINTS, LibraryClassifier


class SVM(LibraryClassifier):
    """Support vector machine; bias as in docs/algorithm.md, "Bias by method".

    Linear kernel: scikit-learn ``LinearSVC`` (LIBLINEAR) with ``fit_intercept=True,
    intercept_scaling=1``, i.e. LIBLINEAR ``-B 1``: the bias is the weight of a constant-1
    feature and is regularised. Other kernels: ``SVC`` (LIBSVM C-SVC) with a free, unregularised
    bias and an explicit gamma. More than two classes: one binary machine per class
    (one-vs-rest), on the package's +-1 targets.

    Parameters
    ----------
    C : float > 0
        Penalty of the training loss.
    kernel : {"linear", "rbf", "poly", "precomputed"}
    gamma : float > 0, "scale" (default), "auto" or None
        Kernel width for "rbf"/"poly", as scikit-learn's SVC: "scale" 1 / (d Var(X)), "auto"
        (and None, the default before "scale") 1 / d.
    degree, coef0 : polynomial kernel (gamma <x, z> + coef0) ** degree.
    loss : {"squared_hinge", "hinge"}
        Linear kernel only: LIBLINEAR's default L2-loss (``-s 1``/``-s 2``) or the L1-loss
        (``-s 3``). The kernel machine always uses the hinge loss.
    tol : float > 0
        Stopping tolerance passed to LIBLINEAR and to LIBSVM.
    max_iter : int >= 1
        Linear kernel only: LIBLINEAR's iteration cap. LIBSVM runs to its tolerance.
    dual : bool or "auto"
        Linear kernel only, passed to ``LinearSVC`` ("auto": the primal Newton solver when
        n_samples > n_features and the loss allows it, the dual coordinate descent otherwise).
    cache_size : float
        LIBSVM kernel cache in MB.
    random_state : int or None
        Seed of LIBLINEAR's coordinate order (dual solver).
    class_weight : None, "balanced" or a mapping class -> weight
        Weights of the classes (``solver.weights``, scikit-learn's semantics), times
        ``fit``'s ``sample_weight``: each machine is fitted with ``sample_weight`` = the rows'
        weights, which LIBLINEAR and LIBSVM apply to the row's C.

    Attributes
    ----------
    classes_, coef_, intercept_, dual_coef_, X_fit_ : the expansion ``ExpansionClassifier``
        describes; here X_fit_ (m, d) holds the union of the one-vs-rest machines' support
        vectors (dual_coef_ is zero where a row is not a support vector of that machine).
    support_ : (m,) training-row indices of the support vectors (kernels).
    gamma_ : float or None, the gamma actually used.
    n_iter_ : int, LIBLINEAR / LIBSVM iterations (max over the one-vs-rest machines).
    """

    _parameter_constraints: dict = {
        "C": [Interval(Real, 0, None, closed="neither")],
        **KERNEL_CONSTRAINTS,
        "loss": [StrOptions({"squared_hinge", "hinge"})],
        **LIBRARY_CONSTRAINTS,
    }

    def __init__(self, C: float = 1.0, *, kernel: str = "linear",
                 gamma: float | str | None = "scale",
                 degree: int = 3, coef0: float = 1.0, loss: str = "squared_hinge",
                 tol: float = 1e-4, max_iter: int = 1000, dual: bool | str = "auto",
                 cache_size: float = 200, random_state: int | None = None,
                 calibration: str = "none",
                 class_weight: str | dict | None = None) -> None:
        super().__init__(C, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0, loss=loss,
                         tol=tol, max_iter=max_iter, dual=dual, cache_size=cache_size,
                         random_state=random_state, calibration=calibration,
                         class_weight=class_weight)

    def _linear_machine(self) -> sk_svm.LinearSVC:
        return sk_svm.LinearSVC(
            C=self.C, loss=self.loss, penalty="l2", dual=self.dual, tol=self.tol,
            max_iter=self.max_iter, fit_intercept=True, intercept_scaling=1.0,
            random_state=self.random_state)

    def _kernel_machine(self) -> sk_svm.SVC:
        return sk_svm.SVC(
            C=self.C, kernel=self.kernel, gamma=self.gamma_, degree=self.degree,
            coef0=self.coef0, tol=self.tol, cache_size=self.cache_size, shrinking=True)
