"""What every classifier in the package shares: input validation, labels, one-vs-rest, margins,
and persistence without pickle.

A subclass implements two hooks on +-1 targets:

* ``_fit_targets(X, Y, callback)`` with ``Y`` of shape (n, T), T = 1 for two classes and
  T = k (one-vs-rest) otherwise, setting its fitted attributes;
* ``_decision(X)`` returning decision values of shape (n, T).

and lists the fitted attributes to persist in ``_array_attrs`` (numpy arrays) and
``_json_attrs`` (JSON values).

Every subclass takes ``calibration`` ("none", "sigmoid" or "isotonic"; its constraint is added
here): when not "none", ``fit`` also fits ``calibrator_`` (``solver.calibration``) on
cross-validated decision values of the training rows, and ``predict_proba`` is available.
``fit`` also keeps the training rows' column means (``feature_means_``, the default baseline
of ``solver.explain``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._footprint import FitEstimate, FitTooLarge, fit_memory_limit
from .calibration import (
    CALIBRATIONS,
    Calibrator,
    cross_validated_decisions,
    fit_calibrator,
    most_probable,
)
from .expansion import Expansion, NoExpansionError, as_tasks
from .fit_report import FitReport, expansion_summary, iterations, weights_summary
from .kernels import KERNEL_TYPES, Kernel, kernel_type, make_kernel
from .margins import label_margins, margin_statistics
from .params import StrOptions, validate_params
from .plain_values import plain
from .weights import fit_weights

Callback = Callable[[dict], Any]

MODEL_FORMAT = "msvmav.model"
MODEL_FORMAT_VERSION = 1

_REGISTRY: dict[str, type[MarginClassifier]] = {}


def column_means(X) -> np.ndarray:
    """X's column means, (d,) float64. A sparse X's are its column sums over n: scipy's
    ``mean`` first multiplies every stored value by 1/n, a copy of the data (45 ms against
    2.8 ms at 100,000 x 2,000 with 50 values a row, more in a fresh process)."""
    if sparse.issparse(X):
        return np.asarray(X.sum(axis=0), dtype=np.float64).ravel() / X.shape[0]
    return np.asarray(X.mean(axis=0), dtype=np.float64).ravel()


class FitStopped(Exception):  # noqa: N818 - a signal, not an error
    """Raised inside a fitting loop when the callback asked to stop; caught by ``fit``."""


def report(callback: Callback | None, info: dict) -> None:
    """Call the user's per-iteration callback; a truthy return value stops the fit."""
    if callback is not None and callback(info):
        raise FitStopped


def canonical(X):
    """X itself, or for CSR with duplicate entries (legal) a copy with them summed.

    Matrix products sum duplicates, but the active-set row gathers and scikit-learn's sparse
    row norms (the RBF kernel) do not; the caller's matrix is never modified."""
    if sparse.issparse(X) and not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X


#: What a persisted array may be, by name: its dtype kinds (``"f8"``: float64 only) and its
#: numbers of dimensions. ``model_from_dict`` refuses any other (``array_problem``).
ARRAY_SPECS: dict[str, tuple[str, tuple[int, ...]]] = {
    "classes_": ("biufU", (1,)),
    "coef_": ("f8", (2,)),
    "intercept_": ("f8", (1,)),
    "dual_coef_": ("f8", (1, 2)),
    "X_fit_": ("f8", (2,)),
    "support_": ("i", (1,)),
    "feature_means_": ("f8", (1,)),  # every estimator's, kept by fit (the explanations' baseline)
}


class MarginClassifier(ClassifierMixin, BaseEstimator):
    """Base class: binary labels map to -1/+1 by sorted order (first class -> -1)."""

    _array_attrs: ClassVar[tuple[str, ...]] = ()
    _json_attrs: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _REGISTRY[cls.__name__] = cls
        own = cls.__dict__.get("_parameter_constraints")
        if own is not None:
            own.setdefault("calibration", [StrOptions(set(CALIBRATIONS))])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        # a precomputed kernel's X is its values, rows against rows (scikit-learn's pairwise)
        # (an unknown name is the parameter check's to refuse, at fit)
        kind = KERNEL_TYPES.get(getattr(self, "kernel", "linear"))
        tags.input_tags.pairwise = kind is not None and not kind.on_features
        return tags

    # -- the kernel ----------------------------------------------------------------------------
    @property
    def kernel_kind(self) -> type[Kernel]:
        """The class of the ``kernel`` parameter's kernel (``solver.kernels``): what a fit
        with it does, known before any width is (an estimator without the parameter is
        linear)."""
        return kernel_type(getattr(self, "kernel", "linear"))

    @property
    def kernel_(self) -> Kernel:
        """The fitted model's kernel with its parameters (its width ``gamma_``, ``degree``,
        ``coef0``): the one the model's decision function computes."""
        return make_kernel(getattr(self, "kernel", "linear"), gamma=getattr(self, "gamma_", None),
                           degree=getattr(self, "degree", 3), coef0=getattr(self, "coef0", 1.0))

    # -- fitting ---------------------------------------------------------------------------
    def fit(self, X, y, callback: Callback | None = None):
        """Fit on X (n, d) dense or CSR and labels y (n,) with at least two distinct values.

        ``callback(info)`` is called once per iteration by iterative solvers; returning a true
        value stops the fit and keeps the current iterate (``stopped_early_`` is then True).
        An exception raised by the callback propagates.
        """
        return self._fit_rows(X, y, callback, None)

    def _fit_rows(self, X, y, callback: Callback | None, sample_weight):
        """``fit``; ``sample_weight`` for the estimators that take it (``WeightedFit``)."""
        validate_params(self)
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64,
                             y_numeric=False, ensure_min_samples=2)
        check_classification_targets(y)
        weights = fit_weights(getattr(self, "class_weight", None), sample_weight, y)
        X = canonical(X)
        classes, y_idx = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(
                f"y: needs at least two classes, got a single class {classes.tolist()!r}")
        self.check_fit_memory(X.shape[0], X.shape[1], X.nnz if sparse.issparse(X) else None,
                              classes.size)
        self.classes_ = classes
        if classes.size == 2:
            Y = (2.0 * y_idx - 1.0)[:, None]
        else:
            Y = np.where(y_idx[:, None] == np.arange(classes.size)[None, :], 1.0, -1.0)
        self.stopped_early_ = False
        self.calibrator_ = None
        self.oof_decision_ = self.oof_index_ = None
        self.feature_means_ = column_means(X) if self.kernel_kind.on_features else None
        if weights is None:
            self._fit_targets(X, np.ascontiguousarray(Y), callback)
        else:
            self._fit_targets(X, np.ascontiguousarray(Y), callback, weights=weights)
        method = getattr(self, "calibration", "none")
        if method != "none" and not self.stopped_early_:
            self._fit_calibrator(X, y, method, callback, sample_weight=sample_weight,
                                 weights=weights)
        return self

    def _fit_calibrator(self, X, y: np.ndarray, method: str, callback: Callback | None, *,
                        sample_weight=None, weights: np.ndarray | None = None) -> None:
        """``calibrator_`` from out-of-fold decision values (``solver.calibration``); the folds
        are seeded by ``random_state`` (0 when the estimator has none or it is None). Each
        fold's fit takes its rows' ``sample_weight`` (its clone keeps ``class_weight``), and
        the calibrator the fit's row ``weights``."""
        seed = getattr(self, "random_state", None)
        seed = seed if isinstance(seed, int | np.integer) else 0

        def tagged(info: dict) -> Any:
            return callback({**info, "phase": "calibration"}) if callback else None

        D = cross_validated_decisions(self, X, y, random_state=int(seed),
                                      callback=tagged if callback else None,
                                      sample_weight=sample_weight,
                                      prepare=self.__dict__.get("_prepare_fold"))
        if D is None:  # the callback stopped a fold's fit: no probabilities
            self.stopped_early_ = True
            return
        self.calibrator_ = fit_calibrator(D, y, self.classes_, method, sample_weight=weights)
        # kept for decision rules fitted later without the hold-out (solver.decision):
        # out-of-fold probabilities = calibrator_.predict_proba(oof_decision_)
        self.oof_decision_ = D
        self.oof_index_ = np.searchsorted(self.classes_, y)

    def _fit_targets(self, X, Y: np.ndarray, callback: Callback | None) -> None:
        raise NotImplementedError


    def fit_estimate(self, n_samples: int, n_features: int, nnz: int | None,
                     n_classes: int = 2) -> FitEstimate:
        """Predicted peak extra memory of ``fit`` on an (n_samples, n_features) input with
        ``nnz`` stored values (None: dense) and ``n_classes`` labels, on the path fit would
        take with these parameters (see ``solver.memory``)."""
        raise NotImplementedError

    def check_fit_memory(self, n_samples: int, n_features: int, nnz: int | None,
                         n_classes: int = 2) -> FitEstimate | None:
        """Raise FitTooLarge if the fit's estimate exceeds ``solver.memory``'s limit (the
        machine's physical memory unless ``memory_limit`` set another); else the estimate
        (None for a subclass that does not implement ``fit_estimate``)."""
        try:
            estimate = self.fit_estimate(n_samples, n_features, nnz, n_classes)
        except NotImplementedError:
            return None
        limit = fit_memory_limit()
        if limit and estimate.peak_bytes > limit:
            raise FitTooLarge(estimate, limit, f"{type(self).__name__}.fit")
        return estimate

    def _decision(self, X) -> np.ndarray:
        raise NotImplementedError

    # -- prediction ------------------------------------------------------------------------
    def _validated(self, X):
        check_is_fitted(self)
        return canonical(validate_data(self, X, reset=False, accept_sparse="csr",
                                       dtype=np.float64))

    def decision_function(self, X) -> np.ndarray:
        """Signed decision values: shape (n,) for two classes (> 0 means classes_[1]),
        (n, k) one-vs-rest scores for k > 2 classes."""
        D = self._decision(self._validated(X))
        return D[:, 0] if D.shape[1] == 1 else D

    def decision_values(self, X) -> np.ndarray:
        """``decision_function(X)`` for rows the caller has already checked — 2-D float64
        (ndarray or CSR), finite, ``n_features_in_`` columns — without scikit-learn's input
        validation again (for one row it costs more than the prediction itself). The model
        must be fitted."""
        D = self._decision(canonical(X))
        return D[:, 0] if D.shape[1] == 1 else D

    def predicted_index(self, D: np.ndarray, proba: np.ndarray | None = None) -> np.ndarray:
        """Indices into ``classes_`` of the labels that decision values D predict. A calibrated
        model: the most probable class of ``probabilities(D)`` (``proba`` when the caller has
        them already), as ``CalibratedClassifierCV.predict``; otherwise D > 0 means
        classes_[1] (two classes, so exactly 0 predicts classes_[0]), else the highest score."""
        if self.calibrated:
            return most_probable(self.probabilities(D) if proba is None else proba)
        D = np.asarray(D)
        return (D > 0).astype(np.intp) if D.ndim == 1 else np.argmax(D, axis=1)

    def predict(self, X) -> np.ndarray:
        """Labels from ``classes_``: a calibrated model's most probable class (the argmax of
        ``predict_proba``), else the decision's (exactly 0 predicts classes_[0])."""
        D = self.decision_function(X)  # (checks the model is fitted first)
        return self.classes_[self.predicted_index(D)]

    def _has_calibration(self) -> bool:
        return getattr(self, "calibration", "none") != "none"

    @available_if(_has_calibration)
    def predict_proba(self, X) -> np.ndarray:
        """(n, k) calibrated class probabilities, columns in ``classes_`` order (available when
        ``calibration`` is not "none")."""
        D = self.decision_function(X)
        return self.probabilities(D)

    @property
    def calibrated(self) -> bool:
        """Whether the fitted model has a probability calibrator (``calibrator_``): the one
        test of whether it gives probabilities, for its callers too."""
        return getattr(self, "calibrator_", None) is not None

    def probabilities(self, D: np.ndarray) -> np.ndarray:
        """``predict_proba`` from decision values D already computed (``decision_function``'s
        shape). ValueError when the model has no calibrator."""
        if not self.calibrated:
            raise ValueError("model: has no probability calibration (fitted with "
                             "calibration='none', or its fit was stopped)")
        return self.calibrator_.predict_proba(D)

    def margin_vector(self, X, y) -> np.ndarray:
        """m_i = y_i f(x_i) (binary, y in +-1 by classes_); for k > 2 classes the multi-class
        margin f_{y_i}(x_i) - max_{j != y_i} f_j(x_i)."""
        return self._margins_of(self.decision_function(X), y)

    def _margins_of(self, D: np.ndarray, y) -> np.ndarray:
        y = np.asarray(y)
        if y.shape[0] != D.shape[0]:
            raise ValueError(f"y: has {y.shape[0]} labels for {D.shape[0]} rows")
        idx = np.searchsorted(self.classes_, y)
        idx = np.clip(idx, 0, self.classes_.size - 1)
        unknown = self.classes_[idx] != y
        if np.any(unknown):
            bad = np.unique(y[unknown])[:5].tolist()
            raise ValueError(f"y: labels {bad!r} are not among the model's classes "
                             f"{self.classes_.tolist()!r}")
        return label_margins(D, idx)

    def margins(self, X, y, *, decision: np.ndarray | None = None, **kwargs: Any) -> dict:
        """Margin-distribution statistics (see ``solver.margins.margin_statistics``) of this
        model on (X, y), plus its accuracy and Theorem 1's data-dependent terms where
        computable. The decision function is computed once, or not at all when the caller
        passes ``decision_function(X)`` as ``decision``."""
        Xv = self._validated(X)
        if decision is None:
            D = self._decision(Xv)
            D = D[:, 0] if D.shape[1] == 1 else D
        else:
            D = np.asarray(decision, dtype=np.float64)
        stats = margin_statistics(self._margins_of(D, y), **kwargs)
        predicted = self.classes_[self.predicted_index(D)]
        stats["accuracy"] = float(np.mean(predicted == np.asarray(y)))
        stats.update(self._theorem_terms(Xv))
        return stats

    def _theorem_terms(self, X) -> dict:
        return {}

    # -- what the fit did ----------------------------------------------------------------------
    def _fitted(self, name: str) -> Any:
        """A fitted attribute the class declares (``_json_attrs``), None when not set."""
        return getattr(self, name, None) if name in self._json_attrs else None

    def fit_report(self) -> FitReport:
        """What the fit did (``solver.fit_report.FitReport``): iterations, history,
        convergence against the ``stop``/``tol`` rule where the class reports it."""
        check_is_fitted(self)
        params = self.get_params(deep=False)
        converged = self._fitted("converged_")
        info = self._fitted("fit_info_") or {}
        return FitReport(
            n_iter=iterations(self._fitted("n_iter_")),
            history=list(self._fitted("history_") or ()),
            stopped_early=bool(getattr(self, "stopped_early_", False)),
            converged=None if converged is None else bool(converged),
            stop=params.get("stop") if converged is not None else None,
            tol=params.get("tol") if converged is not None else None,
            last_relative_change=info.get("last_relative_change"),
            warning=info.get("warning"),
            path=self._fit_path(),
            warm_start=info.get("warm_start"))

    def _fit_path(self) -> dict | None:
        return None

    def model_summary(self) -> dict:
        """The fitted model in numbers: a linear model's weights ({"weights": ...}), a kernel
        model's expansion ({"kernel_summary": ...}; ``solver.fit_report``)."""
        check_is_fitted(self)
        if self.kernel_kind.primal and getattr(self, "coef_", None) is not None:
            return weights_summary(self)
        return expansion_summary(self)

    def out_of_fold(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(decision values, class indices) of the training rows out of fold, kept by a
        calibrated fit for decision rules fitted later; None when the model has none (not
        calibrated, or restored from a file: they are not persisted)."""
        D, idx = getattr(self, "oof_decision_", None), getattr(self, "oof_index_", None)
        return None if D is None or idx is None or not self.calibrated else (D, idx)

    # -- the model as an expansion -----------------------------------------------------------
    def describe(self) -> str:
        """The model's kind in words, for messages: 'MSVMAv (kernel rbf)'."""
        return f"{type(self).__name__} (kernel {getattr(self, 'kernel', 'linear')})"

    def expansion(self) -> Expansion:
        """The fitted model as a plain expansion (``solver.expansion``) of its fitted
        attributes: ``coef_``, ``intercept_`` (primal) or ``dual_coef_``, ``X_fit_``,
        ``intercept_`` (0 when the model has none), with ``kernel_``. NoExpansionError for a
        model of a precomputed kernel."""
        check_is_fitted(self)
        kind = self.kernel_kind
        classes = np.asarray(self.classes_)
        intercept = getattr(self, "intercept_", None)
        if kind.primal:
            coef = np.atleast_2d(np.asarray(self.coef_, dtype=np.float64))
            b = np.zeros(coef.shape[0]) if intercept is None else np.asarray(intercept, float)
            return Expansion(classes, self.kernel_, np.ascontiguousarray(coef.T), b.reshape(-1))
        if not kind.on_features or getattr(self, "X_fit_", None) is None:
            raise NoExpansionError(f"{self.describe()} is not an expansion over feature rows")
        weights = as_tasks(self.dual_coef_)
        T = weights.shape[1]
        b = np.zeros(T) if intercept is None else np.asarray(intercept, float).reshape(-1)
        return Expansion(classes, self.kernel_, weights, np.broadcast_to(b, (T,)).copy(),
                         np.asarray(self.X_fit_, dtype=np.float64))

    # -- persistence -----------------------------------------------------------------------
    def to_dict(self) -> dict:
        """{"meta": JSON-able dict, "arrays": {name: ndarray}} — no pickle anywhere.

        ``solver.model_from_dict`` restores a model whose decision_function is identical."""
        check_is_fitted(self)
        arrays: dict[str, np.ndarray] = {"classes_": np.asarray(self.classes_)}
        for name in self._array_attrs:
            value = getattr(self, name, None)
            if value is not None:
                arrays[name] = np.asarray(value)
        if arrays["classes_"].dtype == object:
            arrays["classes_"] = arrays["classes_"].astype(str)
        if getattr(self, "feature_means_", None) is not None:
            arrays["feature_means_"] = np.asarray(self.feature_means_)
        calibrator = getattr(self, "calibrator_", None)
        meta = {
            "format": MODEL_FORMAT,
            "version": MODEL_FORMAT_VERSION,
            "estimator": type(self).__name__,
            "params": _persistable(self.get_params(deep=False)),
            "n_features_in": int(self.n_features_in_),
            "stopped_early": bool(getattr(self, "stopped_early_", False)),
            "attributes": {name: _persistable(getattr(self, name)) for name in self._json_attrs
                           if hasattr(self, name)},
            "calibrator": None if calibrator is None else calibrator.to_dict(),
        }
        return {"meta": meta, "arrays": arrays}

    @classmethod
    def from_dict(cls, data: dict) -> MarginClassifier:
        return model_from_dict(data)


class WeightedFit:
    """Mixin (before ``MarginClassifier``) of the estimators whose solvers have a weighted
    form: ``fit`` takes ``sample_weight`` and ``_fit_targets`` a ``weights`` keyword. The
    others' ``fit`` has no ``sample_weight`` (scikit-learn's ``has_fit_parameter`` says so)."""

    def fit(self, X, y, callback: Callback | None = None, sample_weight=None):
        """Fit on X (n, d) dense or CSR and labels y (n,) with at least two distinct values.

        ``sample_weight`` (n,) non-negative, finite: the rows' weights, times the class
        weights of ``class_weight`` (``solver.weights``; a row of weight 0 takes no part).
        ``callback(info)`` is called once per iteration by iterative solvers; returning a true
        value stops the fit and keeps the current iterate (``stopped_early_`` is then True).
        An exception raised by the callback propagates.
        """
        return self._fit_rows(X, y, callback, sample_weight)


def array_problem(klass: type[MarginClassifier], name: str, value: Any) -> str | None:
    """Why ``value`` cannot be ``klass``'s persisted array ``name`` (not one of its arrays, or
    not the dtype kind or number of dimensions ``ARRAY_SPECS`` declares), or None if it can."""
    if name not in ("classes_", "feature_means_") and name not in klass._array_attrs:
        return f"{name} is not an array of {klass.__name__}"
    if not isinstance(value, np.ndarray):
        return f"{name} must be a numpy array, not {type(value).__name__}"
    kinds, ndims = ARRAY_SPECS.get(name, ("f8", (1, 2)))
    dtype = value.dtype
    ok = (dtype.kind == "f" and dtype.itemsize == 8) if kinds == "f8" else dtype.kind in kinds
    if not ok or dtype.fields is not None:
        wanted = "float64" if kinds == "f8" else f"of kind {'/'.join(kinds)}"
        return f"{name} must be {wanted}, not {dtype}"
    if value.ndim not in ndims:
        wanted = " or ".join(map(str, ndims))
        return f"{name} must have {wanted} dimension(s), not {value.ndim}"
    return None


def attributes_problem(klass: type[MarginClassifier], attributes: Any) -> str | None:
    """Why ``attributes`` cannot be ``klass``'s persisted JSON attributes (not an object, or
    naming one the class does not persist: ``_json_attrs``), or None if they can."""
    if not isinstance(attributes, dict) or set(attributes) - set(klass._json_attrs):
        return (f"attributes must be among {klass.__name__}'s "
                f"{sorted(klass._json_attrs)}")
    return None


def params_problem(klass: type[MarginClassifier], params: dict) -> str | None:
    """Why ``params`` cannot be ``klass``'s constructor parameters (naming one its
    ``get_params`` does not have), or None if they can."""
    unknown = set(params) - set(klass._get_param_names())
    if unknown:
        return f"params {sorted(unknown)} are not parameters of {klass.__name__}"
    return None


def model_from_dict(data: dict) -> MarginClassifier:
    """Rebuild a fitted estimator from ``to_dict()`` output; ValueError for arrays that are not
    the estimator's own, in dtype kind and dimensions (``array_problem``), and for attributes or
    parameters it does not persist (``attributes_problem``, ``params_problem``): a stored or
    imported model can set nothing else on the estimator."""
    meta, arrays = data["meta"], data["arrays"]
    if meta.get("format") != MODEL_FORMAT or meta.get("version") != MODEL_FORMAT_VERSION:
        raise ValueError(f"model: unsupported format {meta.get('format')!r} "
                         f"version {meta.get('version')!r}")
    try:
        klass = _REGISTRY[meta["estimator"]]
    except KeyError:
        raise ValueError(f"model: unknown estimator {meta['estimator']!r}") from None
    for name, value in arrays.items():
        problem = array_problem(klass, name, value)
        if problem is not None:
            raise ValueError(f"model: {problem}")
    if not isinstance(meta["params"], dict) or not isinstance(meta["attributes"], dict):
        raise ValueError("model: params and attributes must be objects")
    problem = attributes_problem(klass, meta["attributes"]) or params_problem(klass, meta["params"])
    if problem is not None:
        raise ValueError(f"model: {problem}")
    est = klass(**meta["params"])
    est.n_features_in_ = meta["n_features_in"]
    est.stopped_early_ = meta.get("stopped_early", False)
    for name, value in meta["attributes"].items():
        setattr(est, name, copy.deepcopy(value))
    for name in (*klass._array_attrs, "feature_means_"):  # arrays that were None: not stored
        setattr(est, name, None)
    calibrator = meta.get("calibrator")
    est.calibrator_ = None if calibrator is None else Calibrator.from_dict(calibrator)
    for name, value in arrays.items():
        setattr(est, name, np.array(value, copy=True))
    return est


def _persistable(value: Any) -> Any:
    if isinstance(value, np.random.RandomState):
        raise ValueError("random_state: pass an int or None to make the model persistable")
    return plain(value)


def to_dense_rows(X) -> np.ndarray:
    """Dense float64 copy of X (used where a kernel model keeps its training rows). Always a
    copy: the model must not alias, and change with, the caller's array."""
    return X.toarray() if sparse.issparse(X) else np.array(X, dtype=np.float64, order="C")
