"""Issue 15, point 2 (disk): a full disk is a 507 problem naming the cause, not a 500.

SQLite's SQLITE_FULL is provoked with ``PRAGMA max_page_count`` on the API's connections (a
loop-mounted or tmpfs file system needs privileges this test does not have): the database file
cannot grow, exactly as on a full disk."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import event

from app.core.config import Settings
from app.core.db import upgrade_to_head
from app.main import create_app
from tests.app.support import assert_problem, blobs, to_csv


def test_upload_on_a_full_sqlite_database_is_507(tmp_path):
    url = f"sqlite:///{tmp_path / 'full.db'}"
    upgrade_to_head(url)
    app = create_app(Settings(database_url=url, _env_file=None))

    @event.listens_for(app.state.engine, "connect")
    def _no_room(dbapi_connection, _record):  # noqa: ANN001
        pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
        dbapi_connection.execute(f"PRAGMA max_page_count={pages + 2}")

    content = to_csv(*blobs(n=4000, d=20))
    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.post("/datasets", files={"file": ("big.csv", content)})
        body = assert_problem(r, 507)
        assert "full" in body["detail"] and "INSERT" not in r.text, body
        # Nothing half-written: the failed upload left no dataset behind.
        assert client.get("/datasets").json()["items"] == []
