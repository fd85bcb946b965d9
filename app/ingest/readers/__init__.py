"""The one reader of each file format (``app.ingest.formats`` names a format's reader): every
door that takes a file (POST /datasets, /predict/file, /models/{ref}/evaluate, batch jobs,
datasets by reference) reads a format through its module here, a chunk at a time; a whole-file
read is its chunks collected. ``parquet``: Parquet files (the only module that imports
``pyarrow.parquet``); ``jsonl``: JSON Lines (the only one parsing its lines)."""
