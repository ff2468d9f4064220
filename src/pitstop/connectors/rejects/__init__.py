"""Malformed records: good records go on, bad ones never stop a job and are never dropped silently.

A File mapping's ``'onError'`` option says what a malformed record does (Spark's ``mode``,
Flink's ``ignore-parse-errors``):

- ``keep`` (the default): it goes to ``pitstop.rejects`` with its file, line, raw text (the first
  4 KB, and its full length) and the reason, and the job goes on;
- ``skip``: the same row without the raw text (still keyed by file and line: counts are exact);
- ``fail``: the job fails, with the file, the line and the reason in its status.

Reading one file (in Spark's Python workers, which cannot write the catalog):

1. Read the whole file with the fast path (pyarrow's reader and the mapping's schema). Most
   files end here, at pyarrow's speed.
2. Only if that fails, read it again record by record: split it into lines (CSV: rows), reject
   what is not a record at all (invalid UTF-8, not JSON, a wrong number of fields, over
   ``MAX_RECORD_BYTES``), and convert the rest with the fast path's own reader, halving the set
   around each failure, so that a record is accepted exactly when the fast path accepts it.
3. Write the file's rejects to ``<run>/sources/<source>/rejects/<file name>.jsonl`` (temp file +
   rename) before its records go on. A file's rejects are a pure function of its bytes, so a
   file read again after a crash or a replayed batch rewrites the same file.

The manager, the only writer of the catalog, ingests those files into ``pitstop.rejects``, whose
primary key ``(job, source, file, line)`` makes ingesting a file twice harmless. It does so every
second while a job runs, at ``AWAIT JOB``, and when a run stops, fails or is dropped. A job
restored from a snapshot does not read again the files consumed before the cut, so it never
rejects a record twice.

The modules: :mod:`.reading` (steps 1 and 2) with one per format (:mod:`.jsonlines`,
:mod:`.csvrows`, :mod:`.parquet`) over :mod:`.records` (what they share); :mod:`.keeping` (step 3,
and collecting the rejects files).
"""

from __future__ import annotations

from pitstop.connectors.rejects.jsonlines import json_values
from pitstop.connectors.rejects.keeping import collect, record, rejects_dir
from pitstop.connectors.rejects.reading import read_file
from pitstop.connectors.rejects.records import RAW_LIMIT, FileRead, fit_columns

__all__ = [
    "RAW_LIMIT",
    "FileRead",
    "collect",
    "fit_columns",
    "json_values",
    "read_file",
    "record",
    "rejects_dir",
]
