"""Request and response bodies of /datasets."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.core.pagination import Page

#: longest dataset name and file name (the columns are VARCHAR(255))
MAX_NAME_LENGTH = 255

_SUMMARY_EXAMPLE = {
    "id": 1,
    "name": "wdbc",
    "filename": "wdbc.arff",
    "format": "arff",
    "n_rows": 569,
    "n_features": 30,
    "n_rows_dropped": 0,
    "sparse": False,
    "classes": ["1", "2"],
    "class_counts": [357, 212],
    "sha256": "3b4c…",
    "size_bytes": 123456,
    "created_at": "2026-01-01T12:00:00Z",
}


class DatasetSummary(BaseModel):
    """A stored dataset, without its per-feature details."""

    model_config = ConfigDict(
        from_attributes=True, json_schema_extra={"examples": [_SUMMARY_EXAMPLE]}
    )

    id: int
    name: str = Field(description="Name given at upload (default: the file name)")
    filename: str = Field(description="Name of the uploaded file")
    format: str = Field(description="Detected or requested format (csv, tsv, libsvm, arff, ...)")
    n_rows: int = Field(description="Rows kept")
    n_features: int = Field(description="Columns of the encoded feature matrix")
    n_rows_dropped: int = Field(description="Rows dropped for missing values (missing=drop)")
    sparse: bool = Field(description="Stored as a CSR matrix")
    classes: list[Any] = Field(description="Distinct labels, sorted, in their original values")
    class_counts: list[int] = Field(description="Rows per class, aligned with `classes`")
    sha256: str = Field(description="SHA-256 of the uploaded bytes")
    size_bytes: int = Field(description="Size of the uploaded file")
    created_at: datetime


class ReferenceFile(BaseModel):
    """One Parquet file (partition) of a dataset by reference."""

    path: str = Field(description="Local path or URL of the file")
    n_rows: int = Field(description="Rows it held at registration")
    size_bytes: int


class ReferenceOut(BaseModel):
    """Where a dataset by reference lies (its rows are read there by every job)."""

    model_config = ConfigDict(from_attributes=True)

    uri: str = Field(description="The location as registered: a directory, file or glob")
    files: list[ReferenceFile] = Field(description="Its Parquet files, in row order")


_REFERENCE_EXAMPLE = {
    "uri": "/srv/msvmav-data/clicks/",
    "files": [
        {"path": "/srv/msvmav-data/clicks/part-0.parquet", "n_rows": 250000,
         "size_bytes": 4123456},
        {"path": "/srv/msvmav-data/clicks/part-1.parquet", "n_rows": 250000,
         "size_bytes": 4120981},
    ],
}


class DatasetReferenceIn(BaseModel):
    """POST /datasets/references: a Parquet dataset registered where it lies."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"name": "clicks", "uri": "/srv/msvmav-data/clicks/", "label": "clicked",
                 "drop": ["session_id"]}
            ]
        },
    )

    uri: str = Field(
        min_length=1, max_length=4096,
        description="A directory (searched for *.parquet files), a file or a glob, as an "
        "absolute path, file:// URL or fsspec URL (s3://bucket/prefix/) under one of "
        "MSVMAV_DATA_ROOTS",
    )
    name: str | None = Field(None, max_length=MAX_NAME_LENGTH,
                             description="Display name (default: the location's last part)")
    label: str | None = Field(None, max_length=MAX_NAME_LENGTH,
                              description="Label column (default: the last column)")
    drop: list[str] = Field(default_factory=list, max_length=10_000,
                            description="Columns that are not features (ids, timestamps)")


class DatasetDetail(DatasetSummary):
    """A stored dataset with its feature names, the encoding used for predictions, and the
    options it was read with."""

    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    **_SUMMARY_EXAMPLE,
                    "feature_names": ["radius_mean", "texture_mean", "…"],
                    "encoding": {"columns": "…"},
                    "options": {"label": "Class", "missing": "error"},
                    "reference": None,
                },
                {
                    **_SUMMARY_EXAMPLE,
                    "name": "clicks",
                    "filename": "/srv/msvmav-data/clicks/",
                    "format": "parquet",
                    "n_rows": 500000,
                    "feature_names": ["hour", "device=mobile", "…"],
                    "encoding": {"columns": "…"},
                    "options": {"label": "clicked", "drop": ["session_id"]},
                    "reference": _REFERENCE_EXAMPLE,
                },
            ]
        },
    )

    feature_names: list[str] = Field(description="Names of the encoded feature columns")
    encoding: dict[str, Any] = Field(
        description="How raw values become features (applied again at prediction)"
    )
    options: dict[str, Any] = Field(description="Parsing options used at upload")
    reference: ReferenceOut | None = Field(
        None, description="A dataset by reference: its location and files (its rows are not "
        "stored; jobs read them there); null for an uploaded dataset"
    )


class DatasetPage(Page[DatasetSummary]):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [_SUMMARY_EXAMPLE], "next_cursor": "aWQ6MQ"}]}
    )


class ColumnProfile(BaseModel):
    """One column of the file that became features (a categorical one: its one-hot block)."""

    name: str
    kind: str = Field(description="`numeric` or `categorical`")
    missing: int = Field(
        description="NaN still stored (numeric); rows with none of its categories (categorical)"
    )
    distinct: int = Field(description="Distinct values (categorical: categories present)")
    min: float | None
    max: float | None
    mean: float | None
    top: list[dict[str, Any]] | None = Field(
        None, description="Categorical: its most frequent categories, `value` and `count`"
    )


class DatasetProfile(BaseModel):
    """A dataset's first rows as stored and its per-column profile (GET …/profile)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "dataset_id": 1,
                    "rows_profiled": 569,
                    "n_rows": 569,
                    "n_columns": 30,
                    "columns": [
                        {"name": "V1", "kind": "numeric", "missing": 0, "distinct": 456,
                         "min": 6.981, "max": 28.11, "mean": 14.127, "top": None},
                    ],
                    "label": {"name": "Class", "classes": [1, 2], "counts": [357, 212]},
                    "preview": {"feature_names": ["V1", "…"], "rows": [[17.99, "…"]],
                                "labels": [2]},
                }
            ]
        }
    )

    dataset_id: int
    rows_profiled: int = Field(description="Rows profiled (at most the first 100,000)")
    n_rows: int
    n_columns: int = Field(description="Columns that became features (`columns`: ≤ 200)")
    columns: list[ColumnProfile]
    label: dict[str, Any] = Field(description="`name`, `classes` and their `counts`")
    preview: dict[str, Any] = Field(
        description="The first 10 rows as stored: `feature_names`, `rows`, `labels`"
    )
