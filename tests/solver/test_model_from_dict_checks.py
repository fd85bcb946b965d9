"""model_from_dict refuses arrays that are not what the estimator persists (issue 28, point 7):
the dtype kind and dimensions of ``ARRAY_SPECS``, and only the class's own array names."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification

from solver import MSVMAv, model_from_dict


@pytest.fixture(scope="module")
def fitted() -> tuple[dict, np.ndarray, MSVMAv]:
    X, y = make_classification(n_samples=60, n_features=4, random_state=0)
    est = MSVMAv().fit(X, y)
    return est.to_dict(), X, est


@pytest.mark.parametrize(
    ("name", "convert", "words"),
    [
        ("coef_", lambda a: a.astype(np.complex128), "float64"),
        ("coef_", lambda a: a.astype(np.float16), "float64"),
        ("coef_", lambda a: a != 0, "float64"),
        ("coef_", lambda a: np.abs(a).astype(np.uint64), "float64"),
        ("coef_", lambda a: a[None], "dimension"),
        ("intercept_", lambda a: a[:, None], "dimension"),
        ("classes_", lambda a: a.astype(np.complex64), "kind"),
        ("support_", lambda a: np.zeros(3, dtype=np.int64), "not an array of MSVMAv"),
    ],
)
def test_arrays_of_the_wrong_kind_are_refused(fitted, name, convert, words):
    d, _, _ = fitted
    source = d["arrays"].get(name, d["arrays"]["classes_"])
    arrays = {**d["arrays"], name: convert(source)}
    with pytest.raises(ValueError, match=words):
        model_from_dict({"meta": d["meta"], "arrays": arrays})


def test_the_arrays_as_written_are_accepted(fitted):
    d, X, est = fitted
    again = model_from_dict(d)
    np.testing.assert_array_equal(again.decision_function(X), est.decision_function(X))
    assert again.coef_.dtype == np.float64 and again.coef_.ndim == 2
