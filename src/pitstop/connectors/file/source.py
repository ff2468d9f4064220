"""The File source: a Python streaming data source over a folder of json, csv or parquet files.

Writers should create files atomically (write a hidden or ``_``-prefixed temp file, then rename):
a file is read once, when first seen. Positions are described in :mod:`pitstop.connectors.positions`.
Malformed records go on a path of their own (:mod:`pitstop.connectors.rejects`).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from pitstop.connectors import positions, rejects
from pitstop.plan.types import arrow_schema

FORMATS = ("json", "csv", "parquet")


class FilesPartition(InputPartition):
    def __init__(self, paths: list[str]) -> None:
        self.paths = paths


def read_file(path: Any, fmt: str, schema: pa.Schema, header: bool = True) -> pa.Table:
    """Read one data file (a path or a file object) into ``schema`` (columns matched by name);
    any malformed record fails the whole file. The fast path of :func:`read_records`."""
    if fmt == "json":
        import pyarrow.json as pj

        parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        table = pj.read_json(path, parse_options=parse)
        table.validate(full=True)  # pyarrow's JSON reader lets invalid UTF-8 through
    elif fmt == "csv":
        import pyarrow.csv as pc

        names = None if header else schema.names
        table = pc.read_csv(
            path,
            read_options=pc.ReadOptions(column_names=names),
            convert_options=pc.ConvertOptions(
                column_types={f.name: f.type for f in schema}, include_columns=schema.names
            ),
        )
    else:
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        if not set(schema.names) & set(table.column_names):
            raise ValueError("the Parquet file has none of the mapping's columns")
    return rejects.fit_columns(table, schema)


def read_records(
    path: str, fmt: str, schema: pa.Schema, header: bool = True, event_time: str | None = None
) -> rejects.FileRead:
    """Read one data file: its good records, and its malformed ones as rejects (``event_time``:
    the mapping's WATERMARK column, which a good record holds)."""
    strict = partial(read_file, fmt=fmt, schema=schema, header=header)
    return rejects.read_file(path, fmt, schema, header, strict, event_time)


class FileStreamReader(DataSourceStreamReader):
    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.schema = schema
        self.folder = Path(options["path"])
        self.format = options.get("format", "json").lower()
        self.header = options.get("header", "true").lower() == "true"
        self.source = options["source"]
        self.state_dir = positions.source_dir(options["run_dir"], self.source)
        self.rejects_dir = rejects.rejects_dir(options["run_dir"], self.source)
        self.on_error = options.get("on_error", "keep")
        self.event_time = options.get("event_time") or None
        self.start = int(options.get("start", "0"))
        self.parallelism = max(1, int(options.get("parallelism", "2")))
        self.available_now: int | None = None

    def initialOffset(self) -> dict[str, Any]:
        return positions.offset(self.source, self.start)

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        pos = positions.discover(self.state_dir, self.folder)
        if self.available_now is not None:
            pos = min(pos, self.available_now)
        return positions.offset(self.source, positions.bounded(self.state_dir, pos, start))

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = positions.discover(self.state_dir, self.folder)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        names = positions.read_log(self.state_dir)[int(start["pos"]) : int(end["pos"])]
        paths = [str(self.folder / n) for n in names]
        if not paths:
            return []
        chunks = min(self.parallelism, len(paths))
        return [FilesPartition(paths[i::chunks]) for i in range(chunks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilesPartition)
        schema = arrow_schema(self.schema)
        for path in partition.paths:
            got = read_records(path, self.format, schema, self.header, self.event_time)
            rejects.record(self.rejects_dir, self.source, path, got.rejects, self.on_error)
            yield from got.table.to_batches()

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the discovery log is kept for snapshots and restarts."""


class FileSource(DataSource):
    """``spark.readStream.format("pitstop_files")``: options path, format, header, source, run_dir,
    start, parallelism, on_error, event_time."""

    @classmethod
    def name(cls) -> str:
        return "pitstop_files"

    def schema(self) -> str:
        raise ValueError("pitstop_files needs the mapping's schema: pass it with .schema(...)")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return FileStreamReader(schema, dict(self.options))
