"""Streaming ingest (issue 20): a CSV upload is parsed in chunks from its spooled file and its
matrix stored a block of rows at a time; the stored dataset equals what ``parse_dataset`` makes
of the whole file."""

from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.sparse as sp
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core import storage
from app.core.config import Settings
from app.datasets import service as datasets
from app.datasets.orm import Dataset, DatasetArray
from app.ingest import csv_stream, parse_dataset, parse_upload_stream
from app.main import create_app
from tests.app.support import upload


def _mixed_csv(n: int, seed: int = 0, wide: int = 5) -> bytes:
    rng = np.random.default_rng(seed)
    x = np.round(rng.normal(size=n), 4)
    k = rng.integers(0, 2, n)
    city = rng.choice([f"city{i}" for i in range(wide)], n)
    y = np.where(x + rng.normal(scale=0.3, size=n) > 0, "pos", "neg")
    lines = ["x,k,city,y"] + [f"{a},{b},{c},{d}" for a, b, c, d in zip(x, k, city, y,
                                                                       strict=True)]
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(csv_stream, "CHUNK_BYTES", 1)
    monkeypatch.setattr(csv_stream, "MIN_CHUNK_ROWS", 37)


@pytest.mark.parametrize("wide", [5, 60])  # dense, and one-hot wide enough for CSR
def test_streamed_upload_stores_what_parse_dataset_reads(settings, engine, small_chunks,
                                                          monkeypatch, wide):
    content = _mixed_csv(500, wide=wide)
    want = parse_dataset(content, "m.csv")

    def whole_file_parse(*args, **kwargs):
        raise AssertionError("a plain CSV upload must not be parsed whole")

    monkeypatch.setattr(datasets, "parse_dataset", whole_file_parse)
    tiny = Settings(**{**settings.model_dump(), "array_chunk_bytes": 4096}, _env_file=None)
    from fastapi.testclient import TestClient

    with TestClient(create_app(tiny)) as client:
        body = upload(client, content, "m.csv")
    with Session(engine) as session:
        dataset = session.get(Dataset, body["id"])
        X, y = datasets.load_arrays(session, dataset)
        n_chunks = session.scalar(select(func.count()).select_from(DatasetArray).where(
            DatasetArray.dataset_id == dataset.id, DatasetArray.name.like("X%")))
    assert n_chunks > 4
    assert sp.issparse(X) == sp.issparse(want.X) == (wide == 60)
    np.testing.assert_array_equal(X.toarray() if sp.issparse(X) else X,
                                  want.X.toarray() if sp.issparse(want.X) else want.X)
    np.testing.assert_array_equal(y, want.y)
    assert body["feature_names"] == want.feature_names
    assert dataset.encoding == want.encoding
    assert (body["n_rows"], body["n_features"]) == want.X.shape


def test_the_stream_path_hands_anything_else_to_the_whole_file_parser():
    """None (the caller then parses the whole file) for what the fast path does not read."""
    for content, name in [
        (b"a,b,y\n1,,x\n3,4,z\n", "f.csv"),  # a missing value
        (b"1 1:0.5\n-1 2:1\n", "f.svm"),
        (b"@relation r\n@attribute a numeric\n@attribute y {p,q}\n@data\n1,p\n", "f.arff"),
        (b'{"a": 1}', "f.csv"),
        (b"\x1f\x8b\x08\x00", "f.csv"),
        ("a;b;y\n1;é;x\n".encode("cp1252"), "f.csv"),
    ]:
        assert parse_upload_stream(io.BytesIO(content), name) is None, content


def test_a_bad_option_is_refused_by_the_stream_path_too():
    from app.ingest import IngestError

    with pytest.raises(IngestError) as exc:
        parse_upload_stream(io.BytesIO(b"a,b,y\n1,2,x\n3,4,z\n"), "f.csv", n_features=3)
    assert exc.value.field == "n_features"
    with pytest.raises(IngestError) as exc:
        parse_upload_stream(io.BytesIO(b"a,b,y\n1,2,x\n3,4,z\n"), "f.csv", label="nope")
    assert exc.value.field == "label"


def test_spilled_values_keep_their_exact_value():
    values = np.array([0.0, 1.0, -0.0, 127.0, -128.0, 3.5, 1e300])
    for part in (values[:2], values[:3], values[:5], values[3:5], values):
        back = csv_stream._narrow(part)
        np.testing.assert_array_equal(back.astype(np.float64), part)
        assert np.array_equal(np.signbit(back.astype(np.float64)), np.signbit(part))
    assert csv_stream._narrow(np.array([0.0, 1.0])).dtype == np.int8


@pytest.mark.parametrize(("cells", "stored"), [
    (["0", "1", "1", "0"], np.int8),  # 0/1 features: a byte per value
    (["0", "1", "-3", "120"], np.int8),
    (["0", "1", "200", "0"], np.float64),  # beyond int8
    (["0", "1", "0.5", "0"], np.float64),
    (["0", "1", "-0.0", "0"], np.float64),  # int8 has no negative zero
])
def test_a_dense_upload_is_stored_in_its_narrowest_exact_dtype(client, engine, small_chunks,
                                                               cells, stored):
    rows = [f"{c},{1 - i % 2},{'ab'[i % 2]},{'pq'[i % 2]}" for i, c in enumerate(cells * 20)]
    content = ("k,b,c,y\n" + "\n".join(rows) + "\n").encode()
    want = parse_dataset(content, "n.csv")
    body = upload(client, content, "n.csv")
    with Session(engine) as session:
        arrays = storage.read_arrays(session, DatasetArray, body["id"])
        X, _ = datasets.load_arrays(session, session.get(Dataset, body["id"]))
    assert arrays["X"].dtype == stored
    assert X.dtype == np.float64
    np.testing.assert_array_equal(X, want.X)
    assert np.array_equal(np.signbit(X), np.signbit(want.X))
