"""Issue 45: ``GET /keys/6%0A`` answered 200 with key 6 (an id with a trailing newline was
taken for the id: the id check's ``$`` matched before the newline, and pydantic strips
whitespace from an integer's text). An id in a path or a query is decimal digits only."""

from __future__ import annotations

import pytest

from tests.app.auth_support import ADMIN, bearer
from tests.app.support import assert_problem


@pytest.mark.parametrize("suffix", ["%0A", "%20", "%0D%0A", "%09"])
def test_a_path_id_with_whitespace_is_422_not_the_key(keyed, suffix):
    admin = bearer(ADMIN)
    created = keyed.post("/keys", json={"name": "k", "scope": "read"}, headers=admin).json()
    key_id = created["id"]
    assert keyed.get(f"/keys/{key_id}", headers=admin).status_code == 200
    r = keyed.get(f"/keys/{key_id}{suffix}", headers=admin)
    assert_problem(r, 422, "key_id")
    r = keyed.get(f"/keys/%20{key_id}", headers=admin)
    assert_problem(r, 422, "key_id")
    assert keyed.delete(f"/keys/{key_id}{suffix}", headers=admin).status_code == 422
    assert keyed.get(f"/keys/{key_id}", headers=admin).json()["revoked_at"] is None


def test_a_query_id_with_whitespace_is_422(client):
    assert client.get("/models", params={"dataset_id": "1"}).status_code == 200
    assert_problem(client.get("/models", params={"dataset_id": "1\n"}), 422, "dataset_id")


def test_an_id_with_a_zero_fraction_is_that_integer(client):
    """The OpenAPI document says ``integer``; JSON Schema's integers include 30.0, and pydantic
    reads "30.0" as 30 for every other integer parameter: GET /models?dataset_id=30.0 was a 422
    (issue 45, schemathesis' positive_data_acceptance). In a body too (``"dataset_id": 5.0``)."""
    assert client.get("/models", params={"dataset_id": "1.0"}).status_code == 200
    assert client.get("/models", params={"dataset_id": "1.00"}).status_code == 200
    for bad in ("1.5", "1.", "1e0", "1.0\n"):
        assert_problem(client.get("/models", params={"dataset_id": bad}), 422, "dataset_id")
    assert_problem(client.get("/jobs/999.0"), 404)
    assert_problem(client.post("/train", json={"dataset_id": 999.0}), 404, "dataset_id")
    assert_problem(client.post("/train", json={"dataset_id": "5"}), 422, "dataset_id")
    assert_problem(client.post("/train", json={"dataset_id": 5.5}), 422, "dataset_id")
