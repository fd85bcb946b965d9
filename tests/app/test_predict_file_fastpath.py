"""/predict/file's plain-CSV path (the pandas reader of training's chunks) against the careful
parser: where it answers, the same X and y; everything else (and every error) is left to the
careful parser."""

from __future__ import annotations

import pytest

from app.ingest import IngestError, parse_dataset, parse_feature_file
from app.ingest import prediction_file as predict_module
from app.ingest.prediction_file import _plain_csv_features

TRAIN = "a,b,c,y\n1.5,2,3,pos\n-4,5.25,6,neg\n7,8,9e-3,pos\n0,1,2,neg\n"


def _encoding(text: str = TRAIN, filename: str = "train.csv", **kwargs) -> dict:
    return parse_dataset(text.encode(), filename, label="y", **kwargs).encoding


def _outcome(encoding, text, label, monkeypatch, careful: bool):
    with monkeypatch.context() as m:
        if careful:
            m.setattr(predict_module, "_plain_csv_features", lambda *a, **k: None)
        try:
            return "ok", parse_feature_file(encoding, text.encode(), "p.csv", label=label)
        except IngestError as exc:
            return "error", (str(exc), exc.row, exc.column, exc.field)


def _check(encoding, text, label, monkeypatch) -> bool:
    """Same answer both ways; True when the fast path answered."""
    fast = _outcome(encoding, text, label, monkeypatch, careful=False)
    careful = _outcome(encoding, text, label, monkeypatch, careful=True)
    assert fast[0] == careful[0], (text, fast, careful)
    if careful[0] == "ok":
        (Xf, yf), (Xc, yc) = fast[1], careful[1]
        assert Xf.dtype == Xc.dtype and Xf.flags.c_contiguous
        assert (Xf == Xc).all() and Xf.shape == Xc.shape
        assert (yf is None) == (yc is None)
        if yc is not None:
            assert yf.dtype == yc.dtype and yf.tolist() == yc.tolist()
    else:
        assert fast[1] == careful[1]
    return _plain_csv_features(encoding, text, label) is not None


@pytest.mark.parametrize(
    ("text", "label", "fast"),
    [
        ("a,b,c\n1,2,3\n4.5,-5,6e2\n", None, True),
        ("c,x,a,b\n3,zzz,1,2\n6,yyy,4,5\n", None, True),  # reordered, an extra column
        ("a,b,c,y\n1,2,3,pos\n4,5,6,neg\n", None, True),  # the training label
        ("a,b,c,y\n1,2,3,1\n4,5,6,-1\n", None, True),  # numeric labels
        ("a,b,c,truth\n1,2,3,x\n4,5,6,y\n", "truth", True),
        ("a,b,c,truth\n1,2,3,x\n4,5,6,y\n", "3", True),  # the label by index
        ("a,b,c\r\n1,2,3\r\n4,5,6\r\n", None, True),
        ("a,b,c\n1,2,3\n4,5,6", None, True),  # no final newline
        (" a , b ,c\n 1 , 2,3\n4,5 ,6\n", None, True),
        ("a,b,c\n1,2,3\n\n4,5,6\n", None, False),  # a blank line
        ('a,b,c\n"1",2,3\n4,5,6\n', None, False),  # quotes
        ("a,b,c\n1,2,3\n4,5\n", None, False),  # ragged: the careful error
        ("a,b,c\n1,?,3\n4,5,6\n", None, False),
        ("a,b,c\n1,NA,3\n4,5,6\n", None, False),
        ("a,b,c\n1,nan,3\n4,5,6\n", None, False),
        ("a,b,c\n1,inf,3\n4,5,6\n", None, False),
        ("a,b,c\n1,1_000,3\n4,5,6\n", None, False),
        ("a,b,c\n1,x,3\n4,5,6\n", None, False),
        ("a,b,c\n1,,3\n4,5,6\n", None, False),
        ("a,b,c,y\n1,2,3,pos\n4,5,6,\n", None, False),  # a label missing in one row
        ("a,b,c,y\n1,2,3,\n4,5,6,\n", None, False),  # no labels at all: y is None
        ("a,b,c\n1,2,3\n4,5,6\n", "b", False),  # a feature as the label
        ("a,b,c\n1,2,3\n4,5,6\n", "nope", False),
        ("a,a,b,c\n0,1,2,3\n", None, False),  # a duplicated header name
        ("1,2,3\n4,5,6\n", None, False),  # no header
        ("a,b\n1,2\n", None, False),  # a training column absent
        ("a;b;c\n1;2;3\n", None, True),  # another delimiter, sniffed the same way
        ("a,b,c,\n1,2,3,\n4,5,6,\n", None, False),  # trailing delimiters
        ("a,b,c\n", None, False),  # a header, no rows
        # what a CSV reader might take for a number (the plain path reads with pandas)
        ("a,b,c\n1,True,3\n4,False,6\n", None, False),
        # > 64 bits: typed as training's chunked reader types it (float() per cell), the same X
        ("a,b,c\n1,123456789012345678901234567890,3\n4,5,6\n", None, True),
        ("a,b,c\n+1,2,3\n4,-5,6.\n", None, True),
        ("a,b,c\n1,1e400,3\n4,5,6\n", None, False),
        ("a,b,c\n1,0x10,3\n4,5,6\n", None, False),
        ("a,b,c\n1,1.5.2,3\n4,5,6\n", None, False),
        ("a,b,c\n1,-nan,3\n4,5,6\n", None, False),
        ("a,b,c\n1,2,3\n4,5,6 #x\n", None, False),
        ("a,b,c\n1,0.1000000000000000055511151231257827,3\n4,5,6\n", None, True),
    ],
)
def test_plain_csv_path_agrees_with_the_careful_parser(text, label, fast, monkeypatch):
    assert _check(_encoding(), text, label, monkeypatch) is fast


def test_categorical_models_use_the_careful_parser(monkeypatch):
    enc = _encoding("a,colour,y\n1,red,p\n2,blue,q\n3,red,p\n")
    assert not _check(enc, "a,colour\n1,red\n2,blue\n", None, monkeypatch)


def test_semicolon_training_delimiter_is_used_by_the_plain_path(monkeypatch):
    enc = _encoding(TRAIN.replace(",", ";"))
    assert enc.get("delimiter") == ";"
    assert _check(enc, "a;b;c\n1;2;3\n4;5;6\n", None, monkeypatch)


def test_plain_path_reads_every_double_exactly(monkeypatch):
    """Shortest repr of random doubles over many magnitudes: the same floats as float()."""
    import numpy as np

    rng = np.random.default_rng(4)
    X = rng.normal(size=(3000, 3)) * 10.0 ** rng.integers(-300, 300, size=(3000, 3))
    text = "c,a,b\n" + "".join(f"{r[2]!r},{r[0]!r},{r[1]!r}\n" for r in X.tolist())
    assert _check(_encoding(), text, None, monkeypatch)
    got, _ = _plain_csv_features(_encoding(), text, None)
    assert (got == X).all()


@pytest.mark.parametrize(
    ("text", "fast"),
    [
        ("a,b,c,x\n1,2,3,z\n4,5,6\n", False),  # a short row, in an unused column only
        ("a,b,c,x\n1,2,3,z\n4,5,6,\n", False),  # an empty unused cell
        ("a,b,c\n1,2,3\n4,5,6,7\n", False),  # a long row
        ("a,b,c\n1,2,3,7\n4,5,6,7\n", False),  # every row long (pandas: an index of 1, 4)
        ("a,b,c\n0,1,2,3\n1,4,5,6\n", False),  # every row long, pandas' index 0, 1
        ("a,b,c\n1,2,3\n4,5\n7,8,9\n", False),  # a short row in the middle
        ("a,b,c\n1,2,3\n   \n4,5,6\n", True),  # a line of spaces: skipped both ways
        ("a,b,c\n1,2,3\r4,5,6\n", False),  # a lone carriage return
        ("\na,b,c\n1,2,3\n", False),  # a blank first line
        ("a,b,c\n1,2,3\n\n", True),  # blank last lines: skipped both ways
        ("a,b,c\r\n1,2,3\r\n\r\n", True),
        ("a,b,c\n1,2,3", True),  # one row, no final newline
        ("a,b,c\n1,2", False),
    ],
)
def test_short_long_and_blank_rows(text, fast, monkeypatch):
    """Rows are not counted line by line: a short row shows as a missing cell, a long one as
    pandas' refusal (or, when every row is long, a first row longer than the header); either
    way the careful parser answers, or words the error."""
    assert _check(_encoding(), text, None, monkeypatch) is fast
