"""Every file in ../shared/datasets parses to the shape its README states."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from app.ingest import IngestError, encode_rows, parse_dataset, parse_feature_file

DATASETS = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not DATASETS.is_dir(), reason=f"{DATASETS} is absent"),
]

EMOTIONS_LABELS = ["amazed-suprised", "happy-pleased", "relaxing-calm", "quiet-still",
                   "sad-lonely", "angry-aggresive"]

# file, options, (rows, features), sparse output, {class: count} (None: not checked)
CASES = [
    ("a9a", {}, (32561, 123), True, {-1: 24720, 1: 7841}),
    ("a9a.t", {"n_features": 123}, (16281, 123), True, {-1: 12435, 1: 3846}),
    ("bank-full.csv", {}, (45211, 51), True, {"no": 39922, "yes": 5289}),  # one-hot: CSR
    ("bibtex.arff", {"label": "TAG_2005", "drop": ["TAG_*"]}, (7395, 1836), True, None),
    ("qsar-biodeg.arff", {}, (1055, 41), False, {1: 699, 2: 356}),
    ("keel_wisconsin.dat", {}, (683, 9), False, {2: 444, 4: 239}),
    ("breast-w.arff", {"missing": "drop"}, (683, 9), False, {"benign": 444, "malignant": 239}),
    ("diabetes.arff", {}, (768, 8), False, {"tested_negative": 500, "tested_positive": 268}),
    ("emotions.arff", {"label": EMOTIONS_LABELS[0], "drop": EMOTIONS_LABELS[1:]}, (593, 72),
     False, {0: 420, 1: 173}),
    ("german.numer_scale.txt", {}, (1000, 24), True, {-1: 700, 1: 300}),
    ("kc1.arff", {}, (2109, 21), False, {"false": 1783, "true": 326}),
    ("magic04.data", {}, (19020, 10), False, {"g": 12332, "h": 6688}),
    ("phishing_TrainingDataset.arff", {}, (11055, 68), False, {-1: 4898, 1: 6157}),
    ("titanic.tsv", {}, (2201, 3), False, {-1: 1490, 1: 711}),
    ("tokyo1.tsv", {}, (959, 44), False, {0: 346, 1: 613}),
    ("wdbc.arff", {}, (569, 30), False, {1: 357, 2: 212}),
]


def load(name: str, **kw):
    return parse_dataset((DATASETS / name).read_bytes(), name, **kw)


@pytest.mark.parametrize(("name", "opts", "shape", "sparse", "counts"), CASES,
                         ids=[c[0] for c in CASES])
def test_dataset_shape_and_classes(name, opts, shape, sparse, counts) -> None:
    p = load(name, **opts)
    assert p.X.shape == shape
    assert len(p.y) == shape[0] and len(p.feature_names) == shape[1]
    assert p.encoding["n_output_features"] == shape[1]
    assert sp.issparse(p.X) == sparse
    if sparse:
        assert p.X.indices.dtype == np.int32 and p.X.indptr.dtype == np.int32
    else:
        assert isinstance(p.X, np.ndarray)
    assert p.X.dtype == np.float64
    data = p.X.data if sparse else p.X
    assert np.isfinite(data).all()
    if counts is not None:
        assert dict(zip(p.classes, p.class_counts, strict=True)) == counts
    assert sum(p.class_counts) == shape[0]


def test_every_file_in_the_folder_is_covered() -> None:
    covered = {c[0] for c in CASES} | {"README.md", "bank-names.txt"}
    assert {f.name for f in DATASETS.iterdir()} <= covered


def test_formats_are_sniffed() -> None:
    assert load("a9a").format == "svmlight"
    assert load("german.numer_scale.txt").format == "svmlight"
    assert load("keel_wisconsin.dat").format == "csv"
    assert load("magic04.data").encoding["header"] is False
    bank = load("bank-full.csv")
    assert (bank.encoding["delimiter"], bank.encoding["header"]) == (";", True)
    assert load("titanic.tsv").encoding["delimiter"] == "\t"


def test_breast_w_missing_values_error_by_default() -> None:
    with pytest.raises(IngestError) as err:
        load("breast-w.arff")
    e = err.value
    assert (e.field, e.row, e.column) == ("missing", 40, "Bare_Nuclei")
    assert str(e).startswith("16 rows have missing values")
    assert load("breast-w.arff", missing="drop").n_rows_dropped == 16


def test_bank_one_hot_arithmetic() -> None:
    # 7 numeric columns + 9 categorical ones with 12+3+4+2+2+2+3+12+4 = 44 categories = 51.
    p = load("bank-full.csv")
    kinds = [c["kind"] for c in p.encoding["columns"]]
    assert kinds.count("numeric") == 7 and kinds.count("categorical") == 9
    cats = {c["name"]: len(c["categories"]) for c in p.encoding["columns"]
            if c["kind"] == "categorical"}
    assert cats == {"job": 12, "marital": 3, "education": 4, "default": 2, "housing": 2,
                    "loan": 2, "contact": 3, "month": 12, "poutcome": 4}
    assert p.feature_names[:3] == ["age", "job=admin.", "job=blue-collar"]
    # First data row: 58;"management";"married";"tertiary";"no";2143;...
    assert sp.issparse(p.X) and p.X.nnz < 0.33 * p.X.shape[0] * p.X.shape[1]
    X = p.X.toarray()
    row0 = dict(zip(p.feature_names, X[0], strict=True))
    assert row0["age"] == 58 and row0["balance"] == 2143
    assert row0["job=management"] == 1 and row0["job=admin."] == 0
    record = {"age": 58, "job": "management", "marital": "married", "education": "tertiary",
              "default": "no", "balance": 2143, "housing": "yes", "loan": "no",
              "contact": "unknown", "day": 5, "month": "may", "duration": 261, "campaign": 1,
              "pdays": -1, "previous": 0, "poutcome": "unknown"}
    np.testing.assert_array_equal(encode_rows(p.encoding, [record]), X[:1])


def test_phishing_one_hot_of_numeric_nominals() -> None:
    # 22 two-valued + 8 three-valued nominal attributes: 22*2 + 8*3 = 68.
    p = load("phishing_TrainingDataset.arff")
    widths = [len(c["categories"]) for c in p.encoding["columns"]]
    assert len(widths) == 30 and widths.count(2) == 22 and widths.count(3) == 8
    assert p.feature_names[:2] == ["having_IP_Address=-1", "having_IP_Address=1"]
    assert p.feature_names[2:5] == ["URL_Length=1", "URL_Length=0", "URL_Length=-1"]
    assert p.y.dtype == np.int64
    # Each original attribute contributes exactly one 1 per row.
    np.testing.assert_array_equal(p.X.sum(axis=1), np.full(11055, 30.0))


def test_bibtex_stays_sparse() -> None:
    p = load("bibtex.arff", label="TAG_2005", drop=["TAG_*"])
    assert p.encoding["label"] == "TAG_2005"
    assert len(p.encoding["dropped"]) == 158
    assert not any(n.startswith("TAG_") for n in p.feature_names)
    assert p.y.dtype == np.int64 and set(p.classes) == {0, 1}
    assert p.X.nnz < 0.05 * p.X.shape[0] * p.X.shape[1]
    assert set(np.unique(p.X.data)) == {1.0}
    # First row "{44 1,51 1,...}" sets attribute 44 (i.e. feature 44, all features precede
    # the tags) to 1.
    assert p.X[0, 44] == 1.0 and p.X[0, 43] == 0.0


def test_a9a_test_file_encodes_like_training() -> None:
    train = load("a9a")
    X, y = parse_feature_file(train.encoding, (DATASETS / "a9a.t").read_bytes(), "a9a.t")
    assert X.shape == (16281, 123) and X.indices.dtype == np.int32
    assert y.tolist()[:3] == [-1, -1, 1]


def test_wdbc_prediction_file_round_trip() -> None:
    p = load("wdbc.arff")
    X, y = parse_feature_file(p.encoding, (DATASETS / "wdbc.arff").read_bytes(), "wdbc.arff")
    np.testing.assert_array_equal(X, p.X)
    np.testing.assert_array_equal(y, p.y)
