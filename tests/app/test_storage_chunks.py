"""Arrays larger than one chunk: stored as rows of at most ``array_chunk_bytes`` and read back
exactly, on every backend (issue 20: one value per array could not be read back on PostgreSQL
beyond ~512 MiB, nor written on SQLite beyond 1e9 bytes)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core import storage
from app.core.config import Settings
from app.datasets.orm import Dataset, DatasetArray
from app.jobs.worker import Worker
from app.main import create_app
from app.models.orm import ModelArray
from tests.app.support import blobs, run_jobs, submit, to_csv, upload

CHUNK = 1000  # bytes: every array of these tests spans many chunks


def _dataset_row(session: Session) -> Dataset:
    row = Dataset(name="d", filename="d.csv", format="csv", n_rows=1, n_features=1,
                  feature_names=[], classes=[], class_counts=[], encoding={}, options={},
                  sha256="0" * 64, size_bytes=1)
    session.add(row)
    session.flush()
    return row


def _chunk_sizes(session: Session, table, owner_column, owner_id: int) -> dict[str, list[int]]:
    rows = session.execute(
        select(table.name, table.chunk, func.length(table.data))
        .where(owner_column == owner_id).order_by(table.name, table.chunk)
    ).all()
    out: dict[str, list[int]] = {}
    for name, chunk, size in rows:
        assert chunk == len(out.setdefault(name, []))  # numbered 0, 1, 2, ... without gaps
        out[name].append(size)
    return out


@pytest.mark.parametrize("layout", ["dense", "fortran", "csr", "labels", "empty", "scalar"])
def test_an_array_larger_than_a_chunk_round_trips(engine, layout):
    rng = np.random.default_rng(0)
    arrays = {
        "dense": rng.normal(size=(301, 7)),
        "fortran": np.asfortranarray(rng.normal(size=(50, 40))),
        "csr": sp.random(400, 90, density=0.2, format="csr", random_state=0),
        "labels": np.array([f"class-ü-{i % 7}" for i in range(500)]),
        "empty": np.zeros((0, 5)),
        "scalar": np.float64(2.5),
    }
    X = arrays[layout]
    with Session(engine) as session:
        owner = _dataset_row(session).id
        storage.write_matrix(session, DatasetArray, owner, "X", X, CHUNK)
        session.commit()
        sizes = _chunk_sizes(session, DatasetArray, DatasetArray.dataset_id, owner)
        back = storage.arrays_to_matrix("X", storage.read_arrays(session, DatasetArray, owner))
    assert all(s <= CHUNK for parts in sizes.values() for s in parts)
    if layout in ("dense", "fortran", "csr", "labels"):
        assert max(len(parts) for parts in sizes.values()) > 3
    if sp.issparse(X):
        assert sp.issparse(back) and back.shape == X.shape
        np.testing.assert_array_equal(back.toarray(), X.toarray())
    else:
        assert back.dtype == X.dtype and back.shape == np.shape(X)
        np.testing.assert_array_equal(back, X)


def test_a_whole_npy_file_at_chunk_0_is_read_as_before(engine):
    """Rows written before revision 0006 hold the whole npy file: still readable."""
    X = np.arange(5000, dtype=np.float64).reshape(1000, 5)
    with Session(engine) as session:
        owner = _dataset_row(session).id
        session.add(DatasetArray(dataset_id=owner, name="X", chunk=0,
                                 data=storage.array_to_bytes(X)))
        session.commit()
        back = storage.read_arrays(session, DatasetArray, owner)["X"]
    np.testing.assert_array_equal(back, X)


def test_a_missing_chunk_is_an_error_not_a_short_array(engine):
    X = np.arange(1000, dtype=np.float64)
    with Session(engine) as session:
        owner = _dataset_row(session).id
        storage.write_array(session, DatasetArray, owner, "X", X, CHUNK)
        session.execute(DatasetArray.__table__.delete().where(DatasetArray.chunk == 3))
        session.commit()
        with pytest.raises(ValueError, match="missing chunk 3"):
            storage.read_arrays(session, DatasetArray, owner)


def test_upload_train_predict_with_tiny_chunks(settings, engine):
    """The whole path (upload, the train job's load, the model's arrays, /predict) through
    arrays that span many chunks gives the same predictions as with one chunk per array."""
    from fastapi.testclient import TestClient

    X, y = blobs(n=300, d=4)
    results = []
    for chunk in (CHUNK, storage.DEFAULT_CHUNK_BYTES):
        tiny = Settings(**{**settings.model_dump(), "array_chunk_bytes": chunk}, _env_file=None)
        with TestClient(create_app(tiny)) as client:
            ds = upload(client, to_csv(X, y))
            submit(client, ds["id"], max_iter=30, seed=0)
            assert run_jobs(Worker(tiny, engine=engine)) == ["succeeded"]
            with Session(engine) as session:
                sizes = _chunk_sizes(session, DatasetArray, DatasetArray.dataset_id, ds["id"])
                model_id = session.scalar(select(func.max(ModelArray.model_id)))
                model_sizes = _chunk_sizes(session, ModelArray, ModelArray.model_id, model_id)
            assert max(len(v) for v in sizes.values()) == (10 if chunk == CHUNK else 1)
            assert all(s <= chunk for v in (*sizes.values(), *model_sizes.values()) for s in v)
            r = client.post(
                "/predict",
                json={"model_id": model_id, "instances": X[:50].tolist()},
                headers={"X-Request-ID": "same"},  # the same default ids in both answers
            )
            assert r.status_code == 200, r.text
            results.append(r.json())
    assert results[0]["n"] == 50
    assert results[0]["predictions"] == results[1]["predictions"]


def test_postgresql_sends_the_chunks_in_binary(engine):
    """Not as hex text (twice the size: what made a ~512 MiB array unreadable)."""
    from sqlalchemy import event

    if engine.dialect.driver != "psycopg":
        pytest.skip("PostgreSQL (psycopg) only")
    X = np.arange(2000, dtype=np.float64)
    formats: list[int] = []

    def record(_conn, cursor, statement, *_args) -> None:
        if "dataset_arrays" in statement:
            formats.append(cursor.pgresult.fformat(1))  # column "data": 1 is binary

    with Session(engine) as session:
        owner = _dataset_row(session).id
        storage.write_array(session, DatasetArray, owner, "X", X, CHUNK)
        session.commit()
        event.listen(engine, "after_cursor_execute", record)
        try:
            back = storage.read_arrays(session, DatasetArray, owner)["X"]
        finally:
            event.remove(engine, "after_cursor_execute", record)
    np.testing.assert_array_equal(back, X)
    assert len(formats) == 17  # the first chunk, then 16 more, one query each
    assert set(formats) == {1}


def test_postgresql_compresses_the_chunks_with_lz4(engine):
    """pglz (PostgreSQL's default) took ~5 s per 64 MiB chunk of 0/1 bytes: most of a 1M-row
    upload's time; lz4, where the server has it, is set for the writing transaction only."""
    from sqlalchemy import text

    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL only")
    with Session(engine) as session:
        offered = session.scalar(text(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings "
            "WHERE name = 'default_toast_compression'"))
        before = session.scalar(text("SHOW default_toast_compression"))
        owner = _dataset_row(session).id
        X = np.tile(np.arange(2, dtype=np.int8), 20_000)  # compressible, past TOAST's 2 kB
        storage.write_array(session, DatasetArray, owner, "X", X, 16_384)
        session.commit()
        methods = session.scalars(
            select(func.pg_column_compression(DatasetArray.data))
            .where(DatasetArray.dataset_id == owner)
        ).all()
        after = session.scalar(text("SHOW default_toast_compression"))
        back = storage.read_arrays(session, DatasetArray, owner)["X"]
    np.testing.assert_array_equal(back, X)
    assert len(methods) == 3
    assert set(methods) == {"lz4" if offered else "pglz"}
    assert after == before  # SET LOCAL: the connection's setting is left as it was


@pytest.mark.parametrize("stored", [np.int8, np.int16, np.float64])
def test_an_array_is_read_into_another_dtype_chunk_by_chunk(engine, stored):
    """``read_arrays(dtypes=...)`` converts while copying; with an odd chunk size values are
    cut between chunks and still read whole."""
    rng = np.random.default_rng(5)
    X = rng.integers(-100, 100, size=(301, 9)).astype(stored)
    with Session(engine) as session:
        owner = _dataset_row(session).id
        storage.write_array(session, DatasetArray, owner, "X", X, 997)
        storage.write_array(session, DatasetArray, owner, "y", X[:, 0], 997)
        session.commit()
        sizes = _chunk_sizes(session, DatasetArray, DatasetArray.dataset_id, owner)
        back = storage.read_arrays(session, DatasetArray, owner, dtypes={"X": np.float64})
    assert len(sizes["X"]) == -(-(128 + X.nbytes) // 997)
    assert back["X"].dtype == np.float64 and back["X"].flags.c_contiguous
    np.testing.assert_array_equal(back["X"], X.astype(np.float64))
    assert back["y"].dtype == stored  # not named: as stored
    np.testing.assert_array_equal(back["y"], X[:, 0])


def test_a_chunk_longer_than_the_header_says_is_an_error(engine):
    X = np.arange(100, dtype=np.float64)
    with Session(engine) as session:
        owner = _dataset_row(session).id
        session.add(DatasetArray(dataset_id=owner, name="X", chunk=0,
                                 data=storage.array_to_bytes(X) + b"\0" * 8))
        session.commit()
        with pytest.raises(ValueError, match="longer than its npy header"):
            storage.read_arrays(session, DatasetArray, owner)


def test_postgresql_sets_lz4_once_per_transaction(engine):
    from sqlalchemy import event

    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL only")
    statements: list[str] = []

    def record(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    event.listen(engine, "after_cursor_execute", record)
    try:
        with Session(engine) as session:
            owner = _dataset_row(session).id
            for name in ("a", "b", "c"):
                storage.write_array(session, DatasetArray, owner, name, np.arange(10), CHUNK)
            session.commit()
            storage.write_array(session, DatasetArray, owner, "d", np.arange(10), CHUNK)
            session.commit()
            back = storage.read_arrays(session, DatasetArray, owner)
    finally:
        event.remove(engine, "after_cursor_execute", record)
    assert sorted(back) == ["a", "b", "c", "d"]
    assert sum("default_toast_compression" in s for s in statements) == 2


@pytest.mark.parametrize("stored,chunk", [(np.int8, 997), (np.float64, 997), (np.float64, 203),
                                          (np.float64, 10_000)])
def test_an_array_is_read_beside_a_column_of_ones(engine, stored, chunk):
    """``read_arrays(pads=...)``: the rows land in the first columns of an array one column
    wider, its last column the pad value, whatever the chunks cut (mid-value, mid-row, several
    rows at once), and the linear fit widens it without a copy."""
    from solver.msvmav import augment

    rng = np.random.default_rng(6)
    X = rng.integers(-100, 100, size=(301, 9)).astype(stored)
    with Session(engine) as session:
        owner = _dataset_row(session).id
        storage.write_array(session, DatasetArray, owner, "X", X, chunk)
        storage.write_array(session, DatasetArray, owner, "Z", X, chunk)
        session.commit()
        back = storage.read_arrays(session, DatasetArray, owner, dtypes={"X": np.float64},
                                   pads={"X": 1.0})
    got = back["X"]
    assert got.shape == (301, 9) and got.dtype == np.float64
    np.testing.assert_array_equal(got, X.astype(np.float64))
    wide = augment(got)
    assert np.shares_memory(wide, got) and not wide.flags.writeable
    np.testing.assert_array_equal(wide, np.hstack([X, np.ones((301, 1))]))
    assert back["Z"].flags.c_contiguous  # not named: as before
    np.testing.assert_array_equal(back["Z"], X)
