"""The Parquet reader: the one way any part of the service reads a Parquet file (an upload, a
/predict/file or evaluation file, a batch job's input and its stored output parts, a dataset
by reference's files and the parts its batch jobs write), and the only module importing
``pyarrow.parquet``.

``open_file`` reads a file's footer (schema, rows, row groups: nothing decoded); ``chunks``
reads the columns asked for in record batches of at most ``chunk_rows`` rows, text columns
asked for as dictionaries kept dictionary-encoded (a value repeated in every row decodes to one
value); ``read`` is those chunks collected into one table. A file that is not Parquet, or
whose pages cannot be decoded, is ``ParquetReadError`` (an ``IngestError``, field "file");
each door words it for its own field.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import IO, Any

from app.ingest.errors import IngestError

#: the rows of a chunk when a whole file is read (its chunks collected)
WHOLE_FILE_CHUNK_ROWS = 1 << 16

Source = IO[bytes] | bytes | bytearray | memoryview | str


class ParquetReadError(IngestError):
    """The bytes are not a Parquet file, or a page of it cannot be decoded."""

    def __init__(self, exc: BaseException, field: str = "file"):
        self.reason = _first_line(exc)
        super().__init__(f"The file cannot be read as Parquet: {self.reason}", field=field)


def open_file(source: Source, *, dictionary: Iterable[str] = ()) -> Any:
    """The ``pyarrow.parquet.ParquetFile`` of ``source`` (bytes, a binary file, a local path
    or an fsspec URL): its footer read, no page decoded; ``dictionary``: the text columns its
    reads keep dictionary-encoded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if isinstance(source, bytes | bytearray | memoryview):
        source = pa.BufferReader(source)
    elif isinstance(source, str) and "://" in source:
        import fsspec

        source = fsspec.open(source, "rb").open()
    try:
        return pq.ParquetFile(source, read_dictionary=list(dictionary) or None)
    except (pa.ArrowException, OSError) as exc:
        raise ParquetReadError(exc) from None


def chunks(source: Source | Any, columns: list[str] | None = None, *,
           chunk_rows: int = WHOLE_FILE_CHUNK_ROWS, dictionary: Iterable[str] = ()
           ) -> Iterator[Any]:
    """The file's rows as ``pyarrow.Table`` chunks of at most ``chunk_rows`` rows, in file
    order, holding ``columns`` (None: every column; projected before anything is decoded).
    ``source`` may be an open ``ParquetFile`` (with no ``dictionary`` then)."""
    import pyarrow as pa

    parquet = source if _is_parquet_file(source) else open_file(source, dictionary=dictionary)
    try:
        for batch in parquet.iter_batches(batch_size=chunk_rows, columns=columns,
                                          use_pandas_metadata=False):
            yield pa.Table.from_batches([batch])
    except (pa.ArrowException, OSError) as exc:
        raise ParquetReadError(exc) from None


def read(source: Source | Any, columns: list[str] | None = None, *,
         dictionary: Iterable[str] = ()) -> Any:
    """The whole file (``columns`` of it) as one ``pyarrow.Table``: its ``chunks`` collected."""
    import pyarrow as pa

    parquet = source if _is_parquet_file(source) else open_file(source, dictionary=dictionary)
    parts = list(chunks(parquet, columns))
    if parts:
        return pa.concat_tables(parts)
    schema = parquet.schema_arrow
    names = schema.names if columns is None else columns
    return pa.schema([schema.field(n) for n in names]).empty_table()


def schema(source: Source | Any) -> Any:
    """The file's ``pyarrow.Schema`` (from its footer)."""
    return (source if _is_parquet_file(source) else open_file(source)).schema_arrow


def to_bytes(table: Any) -> bytes:
    """``table`` as the bytes of one Parquet file (a batch job's stored part)."""
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def writer(sink: Any, schema: Any) -> Any:
    """A ``pyarrow.parquet.ParquetWriter`` of one file of ``schema`` into ``sink``."""
    import pyarrow.parquet as pq

    return pq.ParquetWriter(sink, schema)


def _is_parquet_file(source: Any) -> bool:
    import pyarrow.parquet as pq

    return isinstance(source, pq.ParquetFile)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().split("\n", 1)[0]
    return text[:300] or type(exc).__name__
