"""solver.model_from_dict sets only what the estimator persists: an attribute outside its
``_json_attrs`` or a parameter outside its ``get_params`` is a ValueError naming it (before,
any attribute name was set on the estimator with setattr, e.g. one shadowing a method)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from solver import MSVMAv, model_from_dict


@pytest.fixture(scope="module")
def fitted() -> MSVMAv:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=60) > 0, 1, -1)
    return MSVMAv(max_iter=5).fit(X, y)


def test_round_trip_still_restores_the_same_decision(fitted: MSVMAv) -> None:
    X = np.random.default_rng(1).normal(size=(10, 3))
    restored = model_from_dict(fitted.to_dict())
    np.testing.assert_array_equal(restored.decision_function(X), fitted.decision_function(X))


def test_an_attribute_the_estimator_does_not_persist_is_refused(fitted: MSVMAv) -> None:
    data = fitted.to_dict()
    data = {"meta": copy.deepcopy(data["meta"]), "arrays": data["arrays"]}
    data["meta"]["attributes"]["decision_function"] = 1
    with pytest.raises(ValueError, match="attributes must be among MSVMAv"):
        model_from_dict(data)


def test_a_parameter_the_estimator_does_not_have_is_refused(fitted: MSVMAv) -> None:
    data = fitted.to_dict()
    data = {"meta": copy.deepcopy(data["meta"]), "arrays": data["arrays"]}
    data["meta"]["params"]["no_such_param"] = 3
    with pytest.raises(ValueError, match=r"\[.no_such_param.\] are not parameters of MSVMAv"):
        model_from_dict(data)
