"""Models persisted before the kernel types still load and predict as they did (issue 43: the
kernel parameter stays a string and a model's kernel is derived from its parameters, never
stored). tests/solver/data/models_v1/ was written by the solver of commit 16beafb
(tests/solver/data/write_models_v1.py): each model's meta as JSON, its arrays as .npy, sample
rows and the decision values that code gave them."""

import json
import pathlib

import numpy as np
import pytest

from solver import NoExpansionError, model_from_dict

DATA = pathlib.Path(__file__).with_name("data") / "models_v1"
MODELS = sorted(p.name for p in DATA.iterdir())


def _load(folder: pathlib.Path) -> tuple[dict, np.ndarray, np.ndarray]:
    meta = json.loads((folder / "meta.json").read_text())
    arrays = {p.stem: np.load(p, allow_pickle=False) for p in folder.glob("*.npy")}
    rows, decision = arrays.pop("rows"), arrays.pop("decision")
    return {"meta": meta, "arrays": arrays}, rows, decision


def test_every_kernel_and_kind_is_there():
    assert len(MODELS) == 8
    kernels = {json.loads((DATA / m / "meta.json").read_text())["params"]["kernel"]
               for m in MODELS}
    assert kernels == {"linear", "rbf", "poly", "precomputed"}


@pytest.mark.parametrize("name", MODELS)
def test_an_old_model_predicts_what_it_predicted(name):
    data, rows, decision = _load(DATA / name)
    est = model_from_dict(data)
    assert est.kernel == data["meta"]["params"]["kernel"]  # the parameter stays its name
    assert est.kernel_.name == est.kernel
    assert np.allclose(est.decision_function(rows), decision, rtol=1e-12, atol=1e-12)
    # written again, it is the same model
    again = model_from_dict(est.to_dict())
    assert np.array_equal(again.decision_function(rows), est.decision_function(rows))


@pytest.mark.parametrize("name", MODELS)
def test_an_old_model_is_the_expansion_of_its_attributes(name):
    """``expansion()`` (what the ONNX export writes) computes the model's decision values from
    the kernel's formula; a precomputed kernel's model has no expansion over feature rows."""
    data, rows, decision = _load(DATA / name)
    est = model_from_dict(data)
    if not est.kernel_kind.on_features:
        with pytest.raises(NoExpansionError, match="precomputed"):
            est.expansion()
        return
    exp = est.expansion()
    D = decision[:, None] if decision.ndim == 1 else decision
    assert exp.kernel == est.kernel_ and exp.n_tasks == D.shape[1]
    assert np.allclose(exp.decision(rows), D, rtol=1e-9, atol=1e-9)
