"""A batch scoring job's stored params (``BatchJob``) and the choices its request offers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

OutputFormat = Literal["csv", "parquet"]
#: The formats a result can be downloaded in (``?format=``; default the job's ``output``).
DownloadFormat = Literal["csv", "parquet", "jsonl"]
OnError = Literal["fail", "skip"]
#: Bad rows the job's result lists (all of them are in the errors file).
ERRORS_SHOWN = 20


class BatchJob(BaseModel):
    """What a ``batch_predict`` job scores, and how (resolved and checked at submission)."""

    model_config = ConfigDict(extra="forbid")

    model_id: int
    model: str | None = None  # the registry reference the request named, if any
    source: Literal["upload", "dataset", "reference"]
    dataset_id: int | None = None
    filename: str = ""
    size: int = 0
    format: Literal["csv", "tsv", "whitespace", "parquet", "jsonl", "arff", "svmlight",
                    "dataset"]
    # source "reference": the directory the job's parts go under (app.batch.partitions)
    output_base: str | None = None
    delimiter: str | None = None
    header: bool = True
    names: list[str] | None = None  # a headerless file's columns (the training file's; ARFF's)
    skip_lines: int = 0  # ARFF: the lines up to its @data line
    id_column: str | None = None
    passthrough: list[str] = Field(default_factory=list)
    output: OutputFormat = "csv"
    # how the chunks' outputs are stored: Parquet (any download format), or, for jobs queued
    # before there was a choice (None), in the ``output`` format itself
    stored: Literal["parquet"] | None = None
    on_error: OnError = "fail"
    chunk_rows: int = Field(gt=0, le=1_000_000)
    columns: list[str]  # the output's columns, in order
    # the decision rule chosen at submission (the reference's: app.serving.codec.decision_for)
    # as the answer's ``decision_rule`` {"name", "source", "rule"}; None: the model's own
    decision_rule: dict[str, Any] | None = None
