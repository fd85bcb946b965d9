"""Issue 45: a timestamp whose offset carries it past year 9999 (or before year 1) once turned
to UTC was an OverflowError, a 500, on every timestamp input (``expires_at`` of ``POST /keys``,
``since``/``until`` of the monitoring reports with a read key). It is a 422 naming the field;
the last and first representable instants are still accepted."""

from __future__ import annotations

import pytest

from tests.app.auth_support import ADMIN, bearer, make_key
from tests.app.support import assert_problem, trained_model

OUT_OF_RANGE = ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", "9999-12-31T23:00-01:00"]


@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_an_expiry_past_year_9999_in_utc_is_422_naming_expires_at(keyed, value):
    r = keyed.post(
        "/keys", json={"name": "x", "scope": "read", "expires_at": value}, headers=bearer(ADMIN)
    )
    body = assert_problem(r, 422, "expires_at")
    assert "out of range" in body["detail"], body
    assert keyed.get("/keys", headers=bearer(ADMIN)).json()["items"] == []


def test_the_last_instant_of_year_9999_is_a_valid_expiry(keyed):
    r = keyed.post(
        "/keys",
        json={"name": "x", "scope": "read", "expires_at": "9999-12-31T23:59:59.999999Z"},
        headers=bearer(ADMIN),
    )
    assert r.status_code == 201, r.text
    assert r.json()["expires_at"].startswith("9999-12-31T23:59:59.999999")
    assert keyed.get("/datasets", headers=bearer(r.json()["key"])).status_code == 200


@pytest.mark.parametrize("field", ["since", "until"])
@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_a_window_bound_past_year_9999_in_utc_is_422_naming_it(keyed, engine, field, value):
    read = bearer(make_key(engine, "read"))
    for path in ("/models/1/monitoring", "/registered-models/m/monitoring.png"):
        r = keyed.get(path, params={field: value}, headers=read)
        body = assert_problem(r, 422, field)
        assert "out of range" in body["detail"], body


def test_the_extreme_valid_window_bounds_answer_a_report(client, worker):
    model = trained_model(client, worker)
    for params in (
        {"since": "9999-12-31T23:59:59.999999Z"},
        {"until": "0001-01-01T00:00:00Z"},
        {"since": "0001-01-01", "until": "9999-12-31T23:59:59.999999+00:00"},
    ):
        r = client.get(f"/models/{model['id']}/monitoring", params=params)
        assert r.status_code == 200, (params, r.text)
        png = client.get(f"/models/{model['id']}/monitoring.png", params=params)
        assert png.status_code == 200, (params, png.text)
