"""Dataset upload parsing: uploaded bytes -> feature matrix, labels and a stored encoding.

Pure functions (numpy, scipy, scikit-learn, pandas, standard library); no DB or web framework.

Public API
----------
``parse_dataset(content, filename="", *, format=None, label=None, drop=None,
missing="error", n_features=None, header=None, delimiter=None, limits=NO_LIMITS)
-> ParsedDataset``
    Training upload. ``limits`` (``Limits(max_rows, max_features, max_encoded_bytes)``) are
    checked before anything proportional to them is allocated: ``IngestLimitError`` (a
    subclass of IngestError; HTTP 413) names the line, e.g. an svmlight index beyond
    max_features. A JSON document is refused. A categorical column with more than 90 % distinct
    values over >= 50 rows is refused as an identifier (field "drop"). CSV is read by pandas'
    C parser when the file has no missing value and no irregular row; anything else goes to
    the careful reader, which gives the same result or the precise line/column error.
    ``format``: a name or alias of the one format registry (``formats``: csv, tsv,
    whitespace, svmlight, arff, parquet, jsonl; libsvm, ndjson, ...); None detects it by
    extension, else by content (Parquet's PAR1 magic, an ARFF "@"/"%" header, a JSON object
    per line, svmlight "label idx:val" lines, else delimited text). Parquet and JSON Lines
    (``columnar``) give the dataset the CSV of the same rows gives (columns by name; only the
    label and feature columns decoded, after the metadata's rows and columns are checked).
    ``label``: column name or 0-based index (negative from the end; a digit string works);
    default last column (CSV/ARFF); svmlight always uses the first field. A name matches
    exactly, else ignoring case when exactly one column fits; ``encoding["label"]`` is the
    column chosen.
    ``drop``: names, 0-based indexes or fnmatch globs ("TAG_*"); a glob never takes the
    label and may match nothing; a plain name must exist. svmlight columns are "f1".."fd".
    ``missing``: "error" (IngestError naming up to 10 rows) or "drop" (drop those rows;
    only label and feature columns count), or "mean" | "median" | "most_frequent" |
    "constant" (``fill_value``): the rows are kept, missing feature cells stored as NaN for
    training to impute (``imputation``; docs/ingest.md). ``n_features``: svmlight only.
    ``header`` / ``delimiter``: CSV only; None sniffs (delimiter among tab, ";", ",").

``parse_upload_stream(source, filename="", **the same options) -> StreamedDataset | None``
    The same for an upload held in a binary file, without reading it whole: a CSV the fast
    path reads is parsed in chunks twice (``csv_stream``: types and categories first, then
    the encoded rows, ``StreamedDataset.blocks()``, which the caller stores as they come);
    None for anything else (the caller then uses ``parse_dataset``).

``ParsedDataset`` (dataclass): ``X`` float64, dense ndarray (CSV, dense ARFF) or CSR with
    int32 indices (svmlight, sparse ARFF, and one-hot encoded CSV/ARFF at least 32 features
    wide where CSR takes at most half the dense memory, e.g. bank-full's 51); ``y`` raw
    labels (int64 if all are integers,
    float64 if numeric, else numpy str); ``feature_names`` (one-hot as "job=management");
    ``encoding`` (JSON-able, below); ``format``; ``n_rows_dropped``; ``classes`` (sorted
    distinct labels as Python values) and ``class_counts``.

``encode_rows(encoding, rows) -> np.ndarray``
    Prediction-time rows without label -> float64 X laid out like training. A row is a
    record keyed by original column name (extra keys ignored) or a list with either the
    feature columns in file order or all non-label input columns (dropped ones ignored).
    IngestError(field="rows", row=<0-based index>, column=...) on a missing key, wrong
    length, non-numeric value, NaN/None, inf, or unknown category (message lists the
    allowed values).

``Encoder.from_dict(encoding)`` (``to_dict()``: the same JSON)
    The one encoder every path uses (``encoder.py``): ``transform_columns`` (typed columns of
    the pandas CSV reader: training's chunks, /predict/file's plain numeric CSV),
    ``transform_table`` (a file the careful readers parsed, at training and for /predict/file),
    ``transform_sparse`` (an svmlight file's matrix, at training and for /predict/file),
    ``transform_rows`` (rows or records, in bulk when it can, else as ``encode_rows``),
    ``transform_matrix`` (rows read as one float array).

``parse_feature_file(encoding, content, filename="", label=None, limits) -> (X, y | None)``
    Prediction-time file in any registry format (CSV/TSV, ARFF, Parquet, JSON Lines, or
    svmlight if trained on svmlight); ``limits.max_rows`` is checked before the file is
    parsed (Parquet metadata, the non-blank lines of unquoted text) or as a reader passes
    it. Columns are matched by name when the file has a header/ARFF attributes (extra
    columns ignored),
    else by position (full training width, or without the label, or features only). y is
    the label column (training label name, or ``label``) when present and filled, else
    None. Missing feature values are an error (rows are never dropped here).

``formats``: the one format registry (``detect(head, filename, declared) -> Format``,
    ``lookup``, ``FORMATS``), used by uploads, /predict/file and batch jobs.

``IngestError(ValueError)`` with ``.field``, ``.row`` (1-based file line), ``.column`` and
    ``.to_dict()``; every problem with an upload or option raises it.

Rules worth knowing
-------------------
* CSV missing values: empty, "?", "NA", "NaN", "nan". A column is numeric when all its
  present values are numbers, else one-hot with sorted categories. inf is an error.
* ARFF declarations decide kinds: numeric stays numeric; nominal is one-hot in declared
  order, also when the categories are numbers (phishing's {-1,0,1}: 30 attributes -> 68
  features). Exception, sparse ARFF: nominal attributes with numeric categories stay one
  numeric column (bibtex's {0,1}) because one-hot would densify; omitted entries are 0 for
  numeric and the first declared category for nominal attributes.
* svmlight: indices 1-based unless an index 0 appears (then 0-based); feature names are
  "f1".."fd" by position. NaN values count as missing, inf is an error.

Encoding dict (JSON-able)
-------------------------
::

    {"version": 1, "format": "csv",
     "input_columns": ["age", "job", "id", "y"],     # every column of the file, in order
     "label": "y", "label_index": 3,                  # None/None for svmlight (first field)
     "dropped": ["id"],
     "columns": [                                     # feature columns, file order
         {"name": "age", "kind": "numeric"},
         {"name": "job", "kind": "categorical", "categories": ["admin.", "technician"]},
         # sparse-ARFF numeric nominal: {"name": "TAG_x", "kind": "numeric", "values": [0.0, 1.0]}
     ],
     "n_output_features": 3, "sparse": False,
     "delimiter": ";", "header": True,                # CSV only, else None
     "n_features": None, "zero_based": None}          # svmlight only (input width, base)

Output columns are the ``columns`` blocks in order: one column per numeric entry, one per
category for categorical entries (``encoding_feature_names`` rebuilds their names).
"""

from .column_specs import spec_feature_names
from .dataset import ParsedDataset, StreamedDataset, parse_dataset, parse_upload_stream
from .encoder import Encoder, encode_rows
from .errors import IngestError, IngestLimitError
from .limits import Limits
from .prediction_file import parse_feature_file, parse_feature_file_skipping


def encoding_feature_names(encoding: dict) -> list[str]:
    """Output feature names of a stored encoding (same as ParsedDataset.feature_names)."""
    return [n for spec in encoding["columns"] for n in spec_feature_names(spec)]


__all__ = [
    "Encoder",
    "IngestError",
    "IngestLimitError",
    "Limits",
    "ParsedDataset",
    "StreamedDataset",
    "encode_rows",
    "encoding_feature_names",
    "parse_dataset",
    "parse_feature_file",
    "parse_feature_file_skipping",
    "parse_upload_stream",
]
