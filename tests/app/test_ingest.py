"""Unit tests of app.ingest on small inputs built here."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from app.ingest import (
    IngestError,
    IngestLimitError,
    encode_rows,
    encoding_feature_names,
    parse_dataset,
    parse_feature_file,
)


def parse(text: str, filename: str = "data.csv", **kw):
    return parse_dataset(text.encode("utf-8"), filename, **kw)


# --- CSV: delimiters, header sniffing, quoting -------------------------------------------

@pytest.mark.parametrize("delim", [",", ";", "\t"])
def test_each_delimiter_is_sniffed(delim: str) -> None:
    text = delim.join(["a", "b", "cls"]) + "\n" + "\n".join(
        delim.join(r) for r in (["1", "2.5", "x"], ["3", "4", "y"], ["5", "6", "x"]))
    p = parse(text + "\n", "data.txt")
    assert p.format == "csv"
    assert p.encoding["delimiter"] == delim
    assert p.feature_names == ["a", "b"]
    np.testing.assert_array_equal(p.X, [[1, 2.5], [3, 4], [5, 6]])
    assert p.y.tolist() == ["x", "y", "x"]
    assert p.classes == ["x", "y"] and p.class_counts == [2, 1]


def test_explicit_delimiter_and_tab_alias() -> None:
    p = parse("1|2|0\n3|4|1\n", delimiter="|")
    np.testing.assert_array_equal(p.X, [[1, 2], [3, 4]])
    p = parse("1\t2\t0\n3\t4\t1\n", delimiter="\\t")
    assert p.encoding["delimiter"] == "\t"
    with pytest.raises(IngestError) as err:
        parse("1,2\n", delimiter="ab")
    assert err.value.field == "delimiter"


def test_header_sniffed_from_text_over_numbers() -> None:
    p = parse("age,income,label\n30,1000,0\n40,2000,1\n")
    assert p.encoding["header"] is True
    assert p.feature_names == ["age", "income"]
    assert p.encoding["label"] == "label"
    assert p.X.shape == (2, 2)


def test_headerless_numeric_gets_x_names() -> None:
    p = parse("30,1000,0\n40,2000,1\n")
    assert p.encoding["header"] is False
    assert p.encoding["input_columns"] == ["x0", "x1", "x2"]
    assert p.feature_names == ["x0", "x1"]
    assert p.y.tolist() == [0, 1] and p.y.dtype == np.int64


def test_headerless_categorical_first_row_is_data() -> None:
    # First row is text, but its values reappear below: it is data, not a header.
    p = parse("red,big,yes\nblue,small,no\nred,small,yes\n")
    assert p.encoding["header"] is False
    assert p.X.shape == (3, 4)
    assert p.feature_names == ["x0=blue", "x0=red", "x1=big", "x1=small"]


def test_header_option_overrides_sniffing() -> None:
    p = parse("1,2,3\n4,5,6\n", header=True)
    assert p.encoding["input_columns"] == ["1", "2", "3"]
    assert p.X.tolist() == [[4.0, 5.0]]


def test_quoted_fields_with_delimiters_inside() -> None:
    text = ('"name";"note";"y"\n'
            '"Smith; John";"a, b";1\n'
            '"Doe";"c";0\n'
            '"Smith; John";"c";1\n')
    p = parse(text)
    assert p.encoding["delimiter"] == ";"
    assert p.feature_names == ["name=Doe", "name=Smith; John", "note=a, b", "note=c"]
    np.testing.assert_array_equal(p.X, [[0, 1, 1, 0], [1, 0, 0, 1], [0, 1, 0, 1]])


def test_crlf_blank_lines_and_trailing_delimiter() -> None:
    text = "a,b,y,\r\n1,2,0,\r\n\r\n3,4,1,\r\n\r\n"
    p = parse(text)
    assert p.encoding["input_columns"] == ["a", "b", "y"]
    np.testing.assert_array_equal(p.X, [[1, 2], [3, 4]])
    assert p.y.tolist() == [0, 1]


def test_trailing_delimiter_on_some_lines_only() -> None:
    p = parse("a,b,y\n1,2,0,\n3,4,1\n")
    np.testing.assert_array_equal(p.X, [[1, 2], [3, 4]])


def test_ragged_row_names_the_line() -> None:
    with pytest.raises(IngestError) as err:
        parse("a,b,y\n1,2,0\n\n3,4\n5,6,1\n")
    assert err.value.row == 4
    assert "Line 4 has 2 fields" in str(err.value)


def test_duplicate_header_name_is_an_error() -> None:
    with pytest.raises(IngestError) as err:
        parse("a,a,y\nu,1,0\nv,2,1\n")
    assert err.value.column == "a"


# --- one-hot encoding and the prediction-time round trip ----------------------------------

BANKISH = ("age;job;married;y\n"
           "30;admin.;yes;no\n"
           "40;technician;no;yes\n"
           "50;admin.;no;no\n")


def test_one_hot_and_encode_rows_round_trip() -> None:
    p = parse(BANKISH)
    assert p.feature_names == ["age", "job=admin.", "job=technician", "married=no",
                               "married=yes"]
    expected = np.array([[30, 1, 0, 0, 1], [40, 0, 1, 1, 0], [50, 1, 0, 1, 0]], dtype=float)
    np.testing.assert_array_equal(p.X, expected)
    enc = json.loads(json.dumps(p.encoding))  # must survive storage as JSON
    assert enc["columns"] == [
        {"name": "age", "kind": "numeric"},
        {"name": "job", "kind": "categorical", "categories": ["admin.", "technician"]},
        {"name": "married", "kind": "categorical", "categories": ["no", "yes"]},
    ]
    assert enc["label"] == "y" and enc["dropped"] == [] and enc["format"] == "csv"
    assert encoding_feature_names(enc) == p.feature_names
    lists = [["30", "admin.", "yes"], [40, "technician", "no"], [50.0, " admin. ", "no"]]
    np.testing.assert_array_equal(encode_rows(enc, lists), expected)
    records = [{"age": 30, "job": "admin.", "married": "yes", "y": "ignored", "id": 7},
               {"married": "no", "job": "technician", "age": "40"},
               {"age": 50, "job": "admin.", "married": "no"}]
    out = encode_rows(enc, records)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, expected)
    assert encode_rows(enc, []).shape == (0, 5)


def test_encode_rows_accepts_rows_with_dropped_columns() -> None:
    p = parse("id,a,b,y\n1,0.5,u,0\n2,1.5,v,1\n", drop=["id"])
    assert p.encoding["dropped"] == ["id"]
    assert p.feature_names == ["a", "b=u", "b=v"]
    np.testing.assert_array_equal(encode_rows(p.encoding, [[99, 2.0, "v"]]), [[2.0, 0, 1]])
    np.testing.assert_array_equal(encode_rows(p.encoding, [[2.0, "u"]]), [[2.0, 1, 0]])


def test_numeric_categories_match_by_value() -> None:
    p = parse("c,y\n1,a\n0,b\n-1,a\n", format="csv")
    assert p.encoding["columns"][0]["kind"] == "numeric"
    p = parse_dataset(ARFF_NOMINAL.encode(), "x.arff", missing="drop")
    enc = p.encoding
    # sign's categories are the strings "-1", "0", "1": numbers match them by value.
    np.testing.assert_array_equal(encode_rows(enc, [[1.0, "red", 2], ["-1.0", "blue", 0]]),
                                  [[0, 0, 1, 0, 1, 0, 2.0], [1, 0, 0, 0, 0, 1, 0]])


def test_encode_rows_unknown_category_error() -> None:
    p = parse(BANKISH)
    with pytest.raises(IngestError) as err:
        encode_rows(p.encoding, [[30, "admin.", "yes"], [31, "astronaut", "no"]])
    e = err.value
    assert (e.row, e.column, e.field) == (1, "job", "rows")
    assert "astronaut" in str(e) and "'admin.', 'technician'" in str(e)


@pytest.mark.parametrize(("rows", "column", "fragment"), [
    ([[30, "admin."]], None, "has 2 values; expected 3"),
    ([{"age": 30, "job": "admin."}], "married", "missing key 'married'"),
    ([["abc", "admin.", "no"]], "age", "'abc' is not a number"),
    ([[float("nan"), "admin.", "no"]], "age", "missing value"),
    ([[None, "admin.", "no"]], "age", "missing value"),
    ([["inf", "admin.", "no"]], "age", "infinite"),
    ([[30, None, "no"]], "job", "missing value"),
])
def test_encode_rows_errors(rows, column, fragment) -> None:
    p = parse(BANKISH)
    with pytest.raises(IngestError) as err:
        encode_rows(p.encoding, rows)
    assert err.value.row == 0
    assert err.value.column == column
    assert fragment in str(err.value)


def test_encode_rows_rejects_non_list() -> None:
    p = parse(BANKISH)
    with pytest.raises(IngestError):
        encode_rows(p.encoding, [42])
    with pytest.raises(IngestError):
        encode_rows({"nothing": 1}, [[1]])


# --- missing values, inf, labels ------------------------------------------------------------

MISSING = ("a,b,y\n"
           "1,2,0\n"
           "?,2,1\n"
           "3,NA,0\n"
           "4,5,1\n"
           "5,6,\n"
           "nan,1,0\n")


def test_missing_error_names_rows() -> None:
    with pytest.raises(IngestError) as err:
        parse(MISSING)
    e = err.value
    assert e.field == "missing" and e.row == 3 and e.column == "a"
    msg = str(e)
    assert msg.startswith("4 rows have missing values")
    for part in ("line 3 ('a')", "line 4 ('b')", "line 6 ('y')", "line 7 ('a')"):
        assert part in msg
    assert "missing='drop'" in msg


def test_missing_error_lists_at_most_ten_rows() -> None:
    text = "a,y\n" + "".join(f"?,{i % 2}\n" for i in range(12)) + "1,0\n"
    with pytest.raises(IngestError) as err:
        parse(text)
    msg = str(err.value)
    assert "line 11 " in msg and "line 12 " not in msg and "and 2 more" in msg


def test_missing_drop_policy() -> None:
    p = parse(MISSING, missing="drop")
    assert p.n_rows_dropped == 4
    np.testing.assert_array_equal(p.X, [[1, 2], [4, 5]])
    assert p.y.tolist() == [0, 1]
    with pytest.raises(IngestError) as err:
        parse(MISSING, missing="skip")
    assert err.value.field == "missing"


def test_missing_in_dropped_column_does_not_count() -> None:
    p = parse("a,junk,y\n1,?,0\n2,,1\n", drop=["junk"])
    assert p.n_rows_dropped == 0 and p.X.shape == (2, 1)


def test_categories_come_from_kept_rows_only() -> None:
    p = parse("a,c,y\n1,u,0\n?,w,1\n2,v,1\n", missing="drop")
    assert p.encoding["columns"][1]["categories"] == ["u", "v"]


def test_inf_in_numeric_column_names_row_and_column() -> None:
    with pytest.raises(IngestError) as err:
        parse("a,b,y\n1,2,0\n3,-inf,1\n")
    assert (err.value.row, err.value.column) == (3, "b")
    assert "infinite" in str(err.value)


def test_empty_file_and_header_only() -> None:
    for content in (b"", b"  \n\n", "\ufeff".encode()):
        with pytest.raises(IngestError) as err:
            parse_dataset(content, "x.csv")
        assert "empty" in str(err.value)
    with pytest.raises(IngestError, match="no data rows"):
        parse("a,b,y\n", header=True)


def test_label_not_found_lists_columns() -> None:
    with pytest.raises(IngestError) as err:
        parse(BANKISH, label="target")
    assert err.value.field == "label"
    assert "'age', 'job', 'married', 'y'" in str(err.value)


def test_label_by_name_index_and_digit_string() -> None:
    for lab in ("job", 1, "1", -3, "JOB"):
        p = parse(BANKISH, label=lab)
        assert p.encoding["label"] == "job"
        assert p.y.tolist() == ["admin.", "technician", "admin."]
        assert p.feature_names == ["age", "married=no", "married=yes", "y=no", "y=yes"]
    with pytest.raises(IngestError) as err:
        parse(BANKISH, label=9)
    assert err.value.field == "label"


def test_drop_rules() -> None:
    text = "TAG_a,TAG_b,f,y\n1,0,5,0\n0,1,6,1\n"
    p = parse(text, label="TAG_a", drop=["TAG_*"])
    assert p.feature_names == ["f", "y"]  # the label survives its own glob
    assert p.y.tolist() == [1, 0]
    assert p.encoding["dropped"] == ["TAG_b"]
    assert parse(text, drop=["nomatch*"]).X.shape == (2, 3)
    with pytest.raises(IngestError) as err:
        parse(text, drop=["nope"])
    assert err.value.field == "drop" and "'TAG_a'" in str(err.value)
    with pytest.raises(IngestError) as err:
        parse(text, drop=["y"])
    assert err.value.field == "drop"
    with pytest.raises(IngestError) as err:
        parse(text, drop=["TAG_a", "TAG_b", "f"])
    assert "No feature columns" in str(err.value)


def test_label_dtypes() -> None:
    assert parse("a,y\n1,-1.0\n2,1.0\n").y.dtype == np.int64
    y = parse("a,y\n1,0.5\n2,1.5\n").y
    assert y.dtype == np.float64 and y.tolist() == [0.5, 1.5]
    y = parse("a,y\n1,cat\n2,1\n").y
    assert y.dtype.kind == "U" and y.tolist() == ["cat", "1"]


def test_single_class_is_not_an_error_here() -> None:
    p = parse("a,y\n1,1\n2,1\n")
    assert p.classes == [1] and p.class_counts == [2]


def test_option_for_other_format_is_rejected() -> None:
    with pytest.raises(IngestError) as err:
        parse("a,y\n1,0\n", n_features=3)
    assert err.value.field == "n_features"
    with pytest.raises(IngestError) as err:
        parse("a,y\n1,0\n", format="excel")
    assert err.value.field == "format"


# --- encodings of the bytes -----------------------------------------------------------------

def test_non_utf8_latin1_is_read() -> None:
    content = "city,y\nMünchen,1\nSão Paulo,0\nMünchen,0\n".encode("latin-1")
    p = parse_dataset(content, "x.csv")
    assert p.feature_names == ["city=München", "city=São Paulo"]


def test_utf8_bom_and_utf16() -> None:
    p = parse_dataset("\ufeffa,y\n1,0\n2,1\n".encode(), "x.csv")
    assert p.encoding["input_columns"] == ["a", "y"]
    p = parse_dataset("a,y\n1,0\n2,1\n".encode("utf-16"), "x.csv")
    assert p.X.tolist() == [[1.0], [2.0]]


def test_binary_content_is_an_ingest_error() -> None:
    for content in (b"\x1f\x8b\x08\x00rest", b"PK\x03\x04zip", b"a,b\n\x00\x01,2\n"):
        with pytest.raises(IngestError) as err:
            parse_dataset(content, "x.csv")
        assert err.value.field == "file"


# --- svmlight -------------------------------------------------------------------------------

def test_svmlight_one_based_with_comments_and_n_features() -> None:
    text = "# comment\n+1 1:0.5 3:2 # tail\n-1 2:1\n\n+1 qid:3 1:1\n"
    p = parse(text, "d.svm", n_features=5)
    assert p.format == "svmlight"
    assert sp.isspmatrix_csr(p.X) or isinstance(p.X, sp.csr_matrix)
    assert p.X.indices.dtype == np.int32 and p.X.indptr.dtype == np.int32
    np.testing.assert_array_equal(p.X.toarray(), [[0.5, 0, 2, 0, 0], [0, 1, 0, 0, 0],
                                                  [1, 0, 0, 0, 0]])
    assert p.y.tolist() == [1, -1, 1] and p.y.dtype == np.int64
    assert p.feature_names == ["f1", "f2", "f3", "f4", "f5"]
    assert p.encoding["zero_based"] is False and p.encoding["n_features"] == 5


def test_svmlight_zero_based_detected() -> None:
    p = parse("1 0:7 2:1\n0 1:3\n", "d")  # content sniffing, no extension
    assert p.format == "svmlight"
    assert p.encoding["zero_based"] is True
    np.testing.assert_array_equal(p.X.toarray(), [[7, 0, 1], [0, 3, 0]])


def test_svmlight_errors_name_the_line() -> None:
    with pytest.raises(IngestError) as err:
        parse("1 1:2\n# c\n1 3:x\n", "d.svm")
    assert err.value.row == 3 and "'x'" in str(err.value)
    with pytest.raises(IngestError) as err:
        parse("1 1:2\n1 7:1\n", "d.svm", n_features=3)
    assert err.value.row == 2 and err.value.field == "n_features"
    with pytest.raises(IngestError) as err:
        parse("1 1:2\n", "d.svm", label="y")
    assert err.value.field == "label"


def test_svmlight_unsorted_indices_are_accepted() -> None:
    p = parse("1 3:1 1:2\n-1 2:5\n", "d.svm")
    np.testing.assert_array_equal(p.X.toarray(), [[2, 0, 1], [0, 5, 0]])


def test_svmlight_unsorted_pairs_keep_every_value_exactly() -> None:
    """The loader refuses pairs out of order; it then reads the lines rewritten in order, with
    every value and label as written (repr round-trips each double)."""
    rng = np.random.default_rng(3)
    values = rng.normal(size=(50, 4)) * 10.0 ** rng.integers(-300, 300, size=(50, 4))
    labels = rng.normal(size=50)
    text = "".join(f"{lab!r} 4:{r[3]!r} 2:{r[1]!r} 1:{r[0]!r} 3:{r[2]!r} # c\n"
                   for lab, r in zip(labels.tolist(), values.tolist(), strict=True))
    p = parse_dataset(text.encode(), "d.svm")
    assert (p.X.toarray() == values).all() and (p.y == labels).all()


def test_svmlight_index_the_loader_cannot_take_is_a_limit_error() -> None:
    with pytest.raises(IngestLimitError) as err:
        parse("1 1:1\n-1 2147483648:1\n", "d.svm")
    assert err.value.row == 2 and "too large" in str(err.value)


def test_svmlight_missing_and_infinite_values_in_training_and_prediction() -> None:
    """One check for both: inf names its line; NaN is the missing-value error, with the
    columns, and for training the missing='drop' way out."""
    with pytest.raises(IngestError) as err:
        parse("1 1:1 2:nan\n-1 1:2\n1 3:nan 1:nan\n", "d.svm")
    e = err.value
    assert (e.field, e.row, e.column) == ("missing", 1, "f2")
    assert str(e).startswith("2 rows have missing values (NaN): line 1 ('f2'); line 3 ('f1', 'f3')")
    assert "missing='drop'" in str(e)
    p = parse("1 1:1 2:3\n-1 1:2 3:1\n", "d.svm")
    with pytest.raises(IngestError) as err:
        parse_feature_file(p.encoding, b"1 1:1\n1 1:1 2:nan\n", "t.svm")
    e = err.value
    assert (e.field, e.row, e.column) == ("missing", 2, "f2") and "predicted" in str(e)
    for text in ("1 1:1 2:inf\n-1 1:2\n", "1 1:1\n-1 1:-inf\n"):
        row = 1 if "2:inf" in text else 2
        for call in (lambda t: parse(t, "d.svm"),
                     lambda t: parse_feature_file(p.encoding, t.encode(), "t.svm")):
            with pytest.raises(IngestError) as err:
                call(text)
            assert (err.value.field, err.value.row) == ("file", row)
            assert "infinite" in str(err.value)


def test_svmlight_drop_and_missing() -> None:
    p = parse("1 1:1 2:2 3:3\n-1 1:4 3:nan\n", "d.svm", drop=["f2"], missing="drop")
    np.testing.assert_array_equal(p.X.toarray(), [[1, 3]])
    assert p.feature_names == ["f1", "f3"] and p.n_rows_dropped == 1


# --- ARFF -----------------------------------------------------------------------------------

ARFF_NOMINAL = """% comment line
% another
@RELATION 'test rel'

@attribute sign {-1,0,1}
@Attribute 'colour' {'dark red', red, "blue"}
@ATTRIBUTE "n val" REAL
% comment between attributes
@attribute class {neg,pos}

@DATA
1,red,2,pos
-1,'dark red',3.5,neg
% a comment row
0,"blue",?,pos
"""


def test_arff_nominal_one_hot_in_declared_order() -> None:
    p = parse_dataset(ARFF_NOMINAL.replace("\n", "\r\n").encode(), "x.arff", missing="drop")
    assert p.format == "arff"
    assert p.feature_names == ["sign=-1", "sign=0", "sign=1", "colour=dark red", "colour=red",
                               "colour=blue", "n val"]
    np.testing.assert_array_equal(p.X, [[0, 0, 1, 0, 1, 0, 2], [1, 0, 0, 1, 0, 0, 3.5]])
    assert p.y.tolist() == ["pos", "neg"] and p.n_rows_dropped == 1
    assert p.encoding["columns"][0] == {"name": "sign", "kind": "categorical",
                                        "categories": ["-1", "0", "1"]}


def test_arff_missing_error_names_file_line() -> None:
    with pytest.raises(IngestError) as err:
        parse_dataset(ARFF_NOMINAL.encode(), "x.arff")
    assert err.value.row == 15 and err.value.column == "n val"


def test_arff_undeclared_value_and_bad_number() -> None:
    bad = ARFF_NOMINAL.replace("1,red,2,pos", "1,green,2,pos")
    with pytest.raises(IngestError) as err:
        parse_dataset(bad.encode(), "x.arff", missing="drop")
    assert (err.value.row, err.value.column) == (12, "colour") and "'green'" in str(err.value)
    bad = ARFF_NOMINAL.replace("1,red,2,pos", "1,red,two,pos")
    with pytest.raises(IngestError) as err:
        parse_dataset(bad.encode(), "x.arff", missing="drop")
    assert (err.value.row, err.value.column) == (12, "n val")
    bad = ARFF_NOMINAL.replace("1,red,2,pos", "1,red,2,maybe")
    with pytest.raises(IngestError) as err:
        parse_dataset(bad.encode(), "x.arff", missing="drop")
    assert err.value.row == 12 and err.value.column == "class"


def test_arff_numeric_nominal_label_is_int() -> None:
    text = "@relation r\n@attribute a numeric\n@attribute c {1,2}\n@data\n0.5,2\n1.5,1\n"
    p = parse_dataset(text.encode(), "r.arff")
    assert p.y.dtype == np.int64 and p.y.tolist() == [2, 1]
    assert p.classes == [1, 2] and p.class_counts == [1, 1]


def test_arff_header_errors() -> None:
    with pytest.raises(IngestError) as err:
        parse_dataset(b"@relation r\n@attribute a numeric\n@attribute b numeric\n@data\n1\n",
                      "r.arff")
    assert err.value.row == 5 and "1 values" in str(err.value)
    with pytest.raises(IngestError) as err:
        parse_dataset(b"@relation r\n@attribute a blob\n@data\n1\n", "r.arff")
    assert err.value.row == 2
    with pytest.raises(IngestError, match="no data rows"):
        parse_dataset(b"@relation r\n@attribute a numeric\n@attribute b numeric\n@data\n",
                      "r.arff")


SPARSE_ARFF = """@relation sparse
@attribute w1 numeric
@attribute w2 {0,1}
@attribute w3 {1,0}
@attribute kind {a,b}
@attribute t1 {0,1}
@attribute t2 {0,1}
@data
{0 2.5,1 1,5 1}
{2 0,3 b}
{1 1,4 1,5 1}
{}
"""


def test_sparse_arff_gives_csr_with_arff_defaults() -> None:
    p = parse_dataset(SPARSE_ARFF.encode(), "s.arff", label="t1", drop=["t*"])
    assert isinstance(p.X, sp.csr_matrix)
    assert p.X.indices.dtype == np.int32
    assert p.feature_names == ["w1", "w2", "w3", "kind=a", "kind=b"]
    # Omitted: numeric -> 0, nominal -> first declared category (w3's is "1", kind's is "a").
    np.testing.assert_array_equal(p.X.toarray(), [
        [2.5, 1, 1, 1, 0],
        [0, 0, 0, 0, 1],
        [0, 1, 1, 1, 0],
        [0, 0, 1, 1, 0],
    ])
    assert p.y.tolist() == [0, 0, 1, 0] and p.y.dtype == np.int64
    assert p.encoding["sparse"] is True
    assert p.encoding["columns"][1] == {"name": "w2", "kind": "numeric", "values": [0.0, 1.0]}
    assert p.encoding["dropped"] == ["t2"]
    # The {0,1} attributes stay sparse: only stored entries for non-zero values.
    assert p.X.nnz == 10


def test_sparse_arff_value_outside_declared_values() -> None:
    bad = SPARSE_ARFF.replace("{0 2.5,1 1,5 1}", "{0 2.5,1 7,5 1}")
    with pytest.raises(IngestError) as err:
        parse_dataset(bad.encode(), "s.arff", label="t1", drop=["t*"])
    assert (err.value.row, err.value.column) == (9, "w2")
    bad = SPARSE_ARFF.replace("{2 0,3 b}", "{2 0,9 b}")
    with pytest.raises(IngestError) as err:
        parse_dataset(bad.encode(), "s.arff")
    assert err.value.row == 10 and "out of range" in str(err.value)


def test_encode_rows_for_sparse_arff_encoding() -> None:
    p = parse_dataset(SPARSE_ARFF.encode(), "s.arff", label="t1", drop=["t*"])
    out = encode_rows(p.encoding, [{"w1": 1, "w2": 1, "w3": "0", "kind": "b"}])
    np.testing.assert_array_equal(out, [[1, 1, 0, 0, 1]])
    with pytest.raises(IngestError) as err:
        encode_rows(p.encoding, [[1, 2, 0, "a"]])
    assert err.value.column == "w2" and "allowed values" in str(err.value)


# --- prediction-time files ------------------------------------------------------------------

def test_parse_feature_file_csv_with_header_and_label() -> None:
    p = parse(BANKISH)
    content = b"married;id;job;age;y\nno;1;technician;41;yes\nyes;2;admin.;31;no\n"
    X, y = parse_feature_file(p.encoding, content, "new.csv")
    np.testing.assert_array_equal(X, [[41, 0, 1, 1, 0], [31, 1, 0, 0, 1]])
    assert y.tolist() == ["yes", "no"]


def test_parse_feature_file_csv_without_label_or_header() -> None:
    p = parse(BANKISH)
    X, y = parse_feature_file(p.encoding, b"41;technician;no\n31;admin.;yes\n", "new.csv")
    assert y is None
    np.testing.assert_array_equal(X, [[41, 0, 1, 1, 0], [31, 1, 0, 0, 1]])
    X, y = parse_feature_file(p.encoding, b"41;technician;no;yes\n", "new.csv")
    assert y.tolist() == ["yes"] and X.shape == (1, 5)


def test_parse_feature_file_errors() -> None:
    p = parse(BANKISH)
    with pytest.raises(IngestError) as err:
        parse_feature_file(p.encoding, b"age;job;married\n41;pilot;no\n", "new.csv")
    assert (err.value.row, err.value.column) == (2, "job") and "pilot" in str(err.value)
    with pytest.raises(IngestError) as err:
        parse_feature_file(p.encoding, b"age;married\n41;no\n", "new.csv")
    assert "job" in str(err.value)
    with pytest.raises(IngestError) as err:
        parse_feature_file(p.encoding, b"age;job;married\n41;;no\n", "new.csv")
    assert err.value.field == "missing" and err.value.row == 2
    with pytest.raises(IngestError) as err:
        parse_feature_file(p.encoding, b"1 1:2\n", "new.svm")
    assert err.value.field == "format"


def test_parse_feature_file_svmlight_and_sparse_arff() -> None:
    p = parse("1 1:1 3:2\n-1 2:1\n", "d.svm", drop=["f2"])
    X, y = parse_feature_file(p.encoding, b"-1 3:5\n1 2:9 1:1\n", "t.svm")
    assert X.indices.dtype == np.int32
    np.testing.assert_array_equal(X.toarray(), [[0, 5], [1, 0]])
    assert y.tolist() == [-1, 1]
    p = parse_dataset(SPARSE_ARFF.encode(), "s.arff", label="t1", drop=["t*"])
    X, y = parse_feature_file(p.encoding, SPARSE_ARFF.encode(), "s.arff")
    assert isinstance(X, sp.csr_matrix)
    np.testing.assert_array_equal(X.toarray(), p.X.toarray())
    np.testing.assert_array_equal(y, p.y)


def test_space_separated_text_is_sniffed_and_read() -> None:
    # (issue 29: it used to be refused, the error explaining the delimiter)
    p = parse("1.0 2.0 3.0\n4.0  5.0\t6.0\n")
    assert p.X.shape == (2, 2) and p.y.tolist() == [3, 6]


def test_svmlight_without_any_feature() -> None:
    with pytest.raises(IngestError, match="index:value"):
        parse("1\n-1\n", "x.svm")
    p = parse("1\n-1\n", "x.svm", n_features=2)
    assert p.X.shape == (2, 2) and p.X.nnz == 0


def test_arff_string_date_and_keel_header() -> None:
    text = ("@relation r\n@attribute s string\n@attribute d date 'yyyy-MM-dd'\n"
            "@attribute c {x,y}\n@data\n'foo bar',2020-01-01,x\nbaz,2020-01-02,y\n")
    with pytest.raises(IngestError) as err:
        parse_dataset(text.encode(), "r.arff")
    assert (err.value.field, err.value.column) == ("drop", "d")
    p = parse_dataset(text.encode(), "r.arff", drop=["d"])
    assert p.feature_names == ["s=baz", "s=foo bar"]
    keel = ("@relation w\n@attribute A integer [1, 10]\n@attribute B real [0.0, 1.0]\n"
            "@attribute Class {2, 4}\n@inputs A, B\n@outputs Class\n@data\n1, 0.5, 2\n"
            "10, 0.25, 4\n")
    p = parse_dataset(keel.encode(), "w.dat")
    assert p.format == "arff"
    np.testing.assert_array_equal(p.X, [[1, 0.5], [10, 0.25]])
    assert p.y.tolist() == [2, 4]


def test_svmlight_encoding_needs_no_column_coders() -> None:
    """transform_sparse reads only the feature names: a 200,000-column encoding builds no
    per-column coder (what made a wide svmlight file's encoder cost seconds)."""
    from app.ingest import Encoder

    p = parse("1 1:1 3:2\n-1 200000:1\n", "d.svm", drop=["f2"])
    encoder = Encoder.from_dict(p.encoding)
    X = encoder.transform_sparse(sp.csr_matrix(([5.0, 7.0], ([0, 1], [2, 199_999])),
                                               shape=(2, 200_000)))
    assert "coders" not in encoder.__dict__
    assert X.shape == (2, 199_999) and X.indices.dtype == np.int32
    assert X[0, 1] == 5.0 and X[1, 199_998] == 7.0 and X.nnz == 2
    assert encoder.width == 199_999 and "coders" in encoder.__dict__
