"""Issue 8 (defects 1 and 2) and issue 10 (item 8): size limits checked before allocating,
wide one-hot stored as CSR, identifier columns, and uploads that are not datasets."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.datasets import service
from app.datasets.orm import Dataset, DatasetArray
from app.ingest import IngestLimitError, Limits, parse_dataset
from app.main import create_app
from tests.app.support import assert_problem, run_jobs, submit, upload


def _counts(engine) -> tuple[int, int]:
    with Session(engine) as s:
        return (s.scalar(select(func.count()).select_from(Dataset)),
                s.scalar(select(func.count()).select_from(DatasetArray)))


@pytest.fixture
def limited_client(settings, engine):
    """A client whose limits are small enough to reach with small files."""
    small = settings.model_copy(update={"max_features": 1000, "max_encoded_bytes": 200_000})
    with TestClient(create_app(small)) as c:
        yield c


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


# -- defect 1: sizes from indices are checked before anything proportional to them ----------

def test_svmlight_index_beyond_max_features_is_refused_before_allocating() -> None:
    # The file used index 2**40 and took 22.9 GB; 3,000,000 keeps a regression cheap
    # (the per-index name list alone would be ~200 MB) while proving the check comes first.
    content = b"1 3000000:1\n-1 1:1\n"
    caught = []

    def parse() -> None:
        try:
            parse_dataset(content, "b.svm", limits=Limits(max_features=1000))
        except IngestLimitError as exc:
            caught.append(exc)

    peak = _peak_bytes(parse)
    assert len(caught) == 1, "no IngestLimitError"
    exc = caught[0]
    assert exc.row == 1 and exc.setting == "max_features"
    assert "Line 1" in str(exc) and "3000000" in str(exc) and "1000" in str(exc)
    assert peak < 5_000_000, f"{peak} bytes allocated before refusing"


def test_svmlight_huge_index_upload_is_413_naming_line_and_limit(limited_client, engine) -> None:
    r = limited_client.post("/datasets", files={"file": ("b.svm", b"-1 1:1\n1 3000000:1\n")})
    body = assert_problem(r, 413, "file")
    assert "Line 2" in body["detail"] and "3000000" in body["detail"]
    assert "MSVMAV_MAX_FEATURES" in body["detail"] and body["row"] == 2
    assert _counts(engine) == (0, 0)


def test_svmlight_index_beyond_int64_is_413(limited_client, engine) -> None:
    content = b"1 1:1\n-1 123456789012345678901234567890:1\n"
    body = assert_problem(limited_client.post("/datasets", files={"file": ("b.svm", content)}),
                          413, "file")
    assert "Line 2" in body["detail"]
    assert _counts(engine) == (0, 0)


def test_n_features_option_beyond_max_features_is_413(limited_client, engine) -> None:
    r = limited_client.post("/datasets", files={"file": ("b.svm", b"1 1:1\n-1 2:1\n")},
                            data={"n_features": "5000000"})
    body = assert_problem(r, 413, "n_features")
    assert "5000000" in body["detail"] and "MSVMAV_MAX_FEATURES" in body["detail"]
    assert _counts(engine) == (0, 0)


def test_arff_nominal_wider_than_max_features_is_413(limited_client, engine) -> None:
    cats = ",".join(f"v{k}" for k in range(1500))
    rows = "\n".join(f"v{k % 1500},{k % 2}" for k in range(3000))
    content = f"@relation r\n@attribute a {{{cats}}}\n@attribute y {{0,1}}\n@data\n{rows}\n"
    body = assert_problem(limited_client.post(
        "/datasets", files={"file": ("w.arff", content.encode())}), 413, "file")
    assert "1500 features" in body["detail"] and "MSVMAV_MAX_FEATURES" in body["detail"]
    assert _counts(engine) == (0, 0)


# -- defect 2: identifier columns, the encoded-size budget, CSR storage -----------------------

def _id_csv(n: int = 5000) -> bytes:
    return ("id,x,y\n" + "".join(f"user{i:05d},{i % 13},{'ab'[i % 2]}\n" for i in range(n))
            ).encode()


def test_identifier_column_is_422_naming_it_and_suggesting_drop(client, engine) -> None:
    body = assert_problem(client.post("/datasets", files={"file": ("ids.csv", _id_csv())}),
                          422, "drop")
    assert "'id'" in body["detail"] and "drop" in body["detail"] and body["column"] == "id"
    assert "5000 of its 5000" in body["detail"]
    assert _counts(engine) == (0, 0)
    ds = upload(client, _id_csv(), "ids.csv", drop="id")
    assert (ds["n_rows"], ds["n_features"], ds["sparse"]) == (5000, 1, False)


def test_identifier_check_applies_to_the_careful_reader_too(client) -> None:
    # a missing value sends the file to the careful reader (missing=drop)
    content = _id_csv(400).replace(b"user00007,7,b", b"user00007,,b")
    body = assert_problem(client.post("/datasets", files={"file": ("ids.csv", content)},
                                      data={"missing": "drop"}), 422, "drop")
    assert "'id'" in body["detail"] and "399 of its 399" in body["detail"]


def test_encoded_matrix_over_budget_is_413_before_encoding(limited_client, engine) -> None:
    # 1,000 rows x 30 numeric features x 8 bytes = 240,000 > 200,000
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 30))
    lines = [",".join([*(f"x{j}" for j in range(30)), "y"])]
    lines += [",".join([*(f"{v:.4f}" for v in row), "ab"[i % 2]]) for i, row in enumerate(X)]
    body = assert_problem(limited_client.post(
        "/datasets", files={"file": ("d.csv", ("\n".join(lines) + "\n").encode())}), 413, "file")
    assert "240000 bytes" in body["detail"] and "MSVMAV_MAX_ENCODED_BYTES" in body["detail"]
    assert _counts(engine) == (0, 0)


def test_budget_is_checked_before_the_matrix_is_built() -> None:
    # 20,000 rows x 2,000 one-hot columns would be 320 MB dense; CSR needs ~240 KB per 10k rows
    n = 20_000
    text = "c,y\n" + "".join(f"k{i % 2000},{i % 2}\n" for i in range(n))
    caught = []

    def parse() -> None:
        try:
            parse_dataset(text.encode(), "w.csv", limits=Limits(max_encoded_bytes=100_000))
        except IngestLimitError as exc:
            caught.append(exc)

    peak = _peak_bytes(parse)
    assert caught and caught[0].setting == "max_encoded_bytes"
    assert "sparse" in str(caught[0]) and "20000 rows x 2000 features" in str(caught[0])
    assert peak < 20_000_000


def _wide_csv(n: int = 600, k: int = 150, seed: int = 0) -> tuple[bytes, np.ndarray, list]:
    rng = np.random.default_rng(seed)
    city = [f"city{v:03d}" for v in np.arange(n) % k]
    x = rng.normal(size=n)
    y = np.where(x + 0.1 * rng.normal(size=n) > 0, "pos", "neg")
    lines = ["x,city,y"] + [f"{a:.6f},{c},{b}" for a, c, b in zip(x, city, y, strict=True)]
    return ("\n".join(lines) + "\n").encode(), np.round(x, 6), city


def test_wide_one_hot_is_stored_as_csr_and_trains(client, engine, worker) -> None:
    content, x, city = _wide_csv()
    ds = upload(client, content, "wide.csv")
    assert ds["sparse"] is True and ds["n_features"] == 151
    with Session(engine) as s:
        X, _ = service.load_arrays(s, s.get(Dataset, ds["id"]))
        names = {n for (n,) in s.execute(select(DatasetArray.name).where(
            DatasetArray.dataset_id == ds["id"]))}
    assert names == {"X.data", "X.indices", "X.indptr", "X.shape", "y"}
    assert sp.issparse(X) and X.nnz <= 2 * 600
    cats = sorted(set(city))
    expected = np.zeros((600, 151))
    expected[:, 0] = x
    expected[np.arange(600), 1 + np.searchsorted(cats, city)] = 1.0
    np.testing.assert_array_equal(X.toarray(), expected)
    job = submit(client, ds["id"], max_iter=30)
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{job['id']}").json()
    model_id = client.get(f"/jobs/{job['id']}").json()["model_id"]
    r = client.post("/predict", json={"model_id": model_id,
                                      "instances": [{"x": 1.5, "city": "city007"}]})
    assert r.status_code == 200, r.text


def test_narrow_one_hot_stays_dense(client) -> None:
    content, _, _ = _wide_csv(n=200, k=10)
    ds = upload(client, content, "narrow.csv")
    assert ds["sparse"] is False and ds["n_features"] == 11


# -- issue 10 item 8: uploads that are not datasets -------------------------------------------

@pytest.mark.parametrize("doc", [
    {"rows": [[1, 2, 3]], "model_id": 1},
    [{"a": 1, "y": "x"}, {"a": 2, "y": "z"}],
])
def test_json_file_is_422(client, engine, doc) -> None:
    for text in (json.dumps(doc), json.dumps(doc, indent=2)):
        r = client.post("/datasets", files={"file": ("data.json", text.encode())})
        body = assert_problem(r, 422, "file")
        assert "JSON" in body["detail"]
    assert _counts(engine) == (0, 0)


def test_single_class_svmlight_is_422(client, engine) -> None:
    r = client.post("/datasets", files={"file": ("one.svm", b"1 1:0.5\n1 2:1\n1 1:2\n")})
    body = assert_problem(r, 422, "label")
    assert "single class" in body["detail"] and "first field" in body["detail"]
    assert _counts(engine) == (0, 0)


def test_label_name_matches_ignoring_case_and_the_response_says_which(client) -> None:
    content = b"a,Class\n1,x\n2,z\n3,x\n4,z\n"  # (a class needs 2 rows)
    ds = client.get(f"/datasets/{upload(client, content, label='class')['id']}").json()
    assert ds["encoding"]["label"] == "Class" and ds["options"]["label"] == "class"
    body = assert_problem(client.post("/datasets", files={"file": ("d.csv", content)},
                                      data={"label": "klass"}), 422, "label")
    assert "ignoring case" in body["detail"]


def test_sparse_arff_with_many_omitted_cells_is_413_before_reading_rows() -> None:
    # an omitted string entry is a missing cell: 2,000 rows x 800 attributes would list 1.6
    # million missing cells (from a 30 KB file) before anything else is looked at
    attrs = "".join(f"@attribute a{k} string\n" for k in range(800))
    content = f"@relation r\n{attrs}@attribute y {{0,1}}\n@data\n" + "{800 1}\n{}\n" * 1000
    caught = []

    def parse() -> None:
        try:
            parse_dataset(content.encode(), "s.arff", limits=Limits(max_encoded_bytes=1_000_000))
        except IngestLimitError as exc:
            caught.append(exc)

    peak = _peak_bytes(parse)
    assert caught and caught[0].setting == "max_encoded_bytes"
    assert "2000 rows" in str(caught[0])
    assert peak < 10_000_000


def test_predict_file_encoded_beyond_the_budget_is_413_before_encoding(
    client, limited_client, worker
) -> None:
    """/predict/file of a wide one-hot model: the dense matrix a file would encode to is
    checked against MSVMAV_MAX_ENCODED_BYTES before it is built (it was built, whatever its
    size); a file within the budget is answered."""
    content, _, _ = _wide_csv()
    ds = upload(client, content, "wide.csv")
    job = submit(client, ds["id"], max_iter=30)
    assert run_jobs(worker) == ["succeeded"]
    model_id = client.get(f"/jobs/{job['id']}").json()["model_id"]
    rows = content.decode().splitlines()

    def predict(n: int):
        part = ("\n".join(rows[: n + 1]) + "\n").encode()
        return limited_client.post(
            "/predict/file", files={"file": ("p.csv", part)}, data={"model_id": str(model_id)}
        )

    # 400 rows x 151 features x 8 bytes = 483,200 > 200,000
    body = assert_problem(predict(400), 413, "file")
    assert "483200 bytes" in body["detail"] and "MSVMAV_MAX_ENCODED_BYTES" in body["detail"]
    assert body["setting"] == "max_encoded_bytes"
    ok = predict(100)  # 120,800 bytes
    assert ok.status_code == 200 and ok.json()["n"] == 100, ok.text
