"""Issue 15, point 2 (disk): a full disk is a 507 problem naming the cause, not a 500.

SQLite's SQLITE_FULL is provoked with ``PRAGMA max_page_count`` on the API's connections (a
loop-mounted or tmpfs file system needs privileges this test does not have): the database file
cannot grow, exactly as on a full disk."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from app.core import reserve
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


@contextmanager
def small_tmpfs(directory: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``directory``: a file system that really fills up (the
    WAL, which page-count limits do not bound, included). Needs the right to mount."""
    directory.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
        capture_output=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def test_delete_frees_space_on_a_really_full_disk(tmp_path, database_url):
    """Issue 28, point 9: with the disk full, DELETE /datasets/{id} was a 507 too (the WAL could
    not take the delete), so space could not be freed through the API. SQLite only (a
    PostgreSQL server manages its own disk): the test's own database on a small tmpfs."""
    if not database_url.startswith("sqlite"):
        pytest.skip("the reserve is SQLite's; a PostgreSQL server keeps its own disk")
    with small_tmpfs(tmp_path / "fs", "16m") as fs:
        url = f"sqlite:///{fs / 'full.db'}"
        upgrade_to_head(url)
        app = create_app(Settings(database_url=url, _env_file=None, prediction_log=False))
        assert (fs / "full.db.reserve").stat().st_size == reserve.RESERVE_BYTES
        with TestClient(app, raise_server_exceptions=False) as client:
            ids, status = [], 201
            for seed in range(200):
                content = to_csv(*blobs(n=800, d=20, seed=seed))
                r = client.post("/datasets", files={"file": ("d.csv", content)})
                if r.status_code != 201:
                    status = r.status_code
                    break
                ids.append(r.json()["id"])
            assert status == 507 and len(ids) >= 2, (status, len(ids))
            assert os.statvfs(fs).f_bavail * os.statvfs(fs).f_frsize < 64 * 1024  # full
            assert client.delete(f"/datasets/{ids[0]}").status_code == 204
            assert client.delete(f"/datasets/{ids[1]}").status_code == 204
            assert [client.get(f"/datasets/{i}").status_code for i in ids[:3]] == [404, 404, 200]
            # the freed pages hold a new upload
            content = to_csv(*blobs(n=800, d=20, seed=999))
            r = client.post("/datasets", files={"file": ("d.csv", content)})
            assert r.status_code == 201, r.text
        app.state.engine.dispose()
