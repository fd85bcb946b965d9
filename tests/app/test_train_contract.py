"""/train's hyper-parameter fields are MSVMAv's declaration (solver.msvmav_parameters): the
OpenAPI document shows the estimator's names, enums, defaults and descriptions, and a value the
declaration offers is accepted while one outside it answers 422 naming the field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import app.ui
from app.training.msvmav_fields import HYPER_PARAMETERS, NOT_OFFERED, SERVICE_DEFAULTS
from solver import MSVMAv
from solver.msvmav_parameters import APPROXIMATIONS, PARAMETERS
from solver.params import StrOptions
from tests.app.support import blobs, run_jobs, submit, to_csv, upload


@pytest.fixture
def train_schema(client) -> dict:
    return client.get("/openapi.json").json()["components"]["schemas"]["TrainRequest"]


def test_every_estimator_parameter_is_declared_once():
    """A parameter added to MSVMAv's signature without a declaration fails here."""
    assert set(PARAMETERS) == set(MSVMAv().get_params())
    assert MSVMAv._parameter_constraints == {n: p.constraints for n, p in PARAMETERS.items()}
    # the docstring's Parameters section is the declaration's text
    for name, p in PARAMETERS.items():
        assert f"{name} : " in MSVMAv.__doc__
        assert " ".join(p.doc.split()[:6]) in " ".join(MSVMAv.__doc__.split())


def test_the_request_fields_are_the_declaration(train_schema):
    props = train_schema["properties"]
    defaults = {**MSVMAv().get_params(), **SERVICE_DEFAULTS}
    # calibration and class_weight are fields of every algorithm (their own text and
    # default), not of these
    own = ("calibration", "class_weight")
    assert [k for k in props if k in PARAMETERS and k not in own] == list(HYPER_PARAMETERS)
    knobs = {n for n, p in PARAMETERS.items() if p.knob}
    assert knobs == {"update", "linear_solver", "kernel_memory_mb", "warm_start", "acceleration"}
    assert not knobs & set(props)
    for name in HYPER_PARAMETERS:
        assert props[name]["description"] == PARAMETERS[name].doc, name
        assert props[name].get("default") == defaults[name], name  # (null defaults are left out)
        (options,) = [c for c in PARAMETERS[name].constraints if isinstance(c, StrOptions)] or [
            None
        ]
        if options is not None:
            offered = [v for v in options.values if v not in NOT_OFFERED.get(name, ())]
            # a field of names beside a number (gamma: "scale", "auto" or a width) is a union
            enums = [a["enum"] for a in props[name].get("anyOf", []) if "enum" in a]
            assert (enums[0] if enums else props[name]["enum"]) == offered, name


def test_gamma_takes_scikit_learns_names_or_a_number(train_schema):
    gamma = train_schema["properties"]["gamma"]
    assert gamma["default"] == "scale"
    kinds = {a.get("type") for a in gamma["anyOf"]}
    assert kinds == {"string", "number", "null"}


def test_every_approximation_is_offered(train_schema):
    """The request offers all five values (docs listed three once)."""
    assert train_schema["properties"]["approximation"]["enum"] == list(APPROXIMATIONS)
    assert APPROXIMATIONS == ("auto", "exact", "low_rank", "nystroem")
    assert train_schema["properties"]["kernel"]["enum"] == ["linear", "rbf", "poly"]


def test_the_texts_say_what_the_solver_does(train_schema):
    props = train_schema["properties"]
    tol = props["tol"]["description"]
    assert "||w_k - w_{k-1}|| / √dim" in tol and "J = SV / θ²" in tol
    assert props["stop"]["default"] == "objective" and props["tol"]["default"] == 1e-3
    auto = props["approximation"]["description"]
    assert "RankChooser" in auto and "exact kernel once the pivots cost as much" in auto
    assert "1,024" in auto


@pytest.mark.parametrize("approximation", APPROXIMATIONS)
def test_each_declared_approximation_trains(client, worker, approximation):
    ds = upload(client, to_csv(*blobs(n=60)))
    submit(client, ds["id"], kernel="rbf", approximation=approximation, n_components=20,
           max_iter=5)
    assert run_jobs(worker) == ["succeeded"]


def test_a_value_outside_the_declaration_names_the_field(client):
    ds = upload(client, to_csv(*blobs(n=40)))
    for field, value in [("approximation", "fast"), ("kernel", "precomputed"), ("alpha", 0),
                         ("kernel_tol", 1.0), ("degree", 21)]:
        r = client.post("/train", json={"dataset_id": ds["id"], field: value})
        assert r.status_code == 422, (field, r.text)
        assert field in r.text


def test_the_web_form_offers_the_request_schemas_kernels(client, train_schema):
    """The interface's train form lists the kernels /train's schema does (no copy of its own)."""
    page = client.get("/ui/datasets/1")
    assert page.status_code == 200
    kernels = re.search(r'data-kernels="([^"]*)"', page.text).group(1).split()
    assert kernels == train_schema["properties"]["kernel"]["enum"]
    script = (Path(app.ui.__file__).parent / "static" / "pages" / "datasets.js").read_text()
    assert "dataset.kernels" in script and '"rbf"' not in script
