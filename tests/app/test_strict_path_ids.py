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
