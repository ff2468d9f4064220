"""The File source: a Python streaming data source over a folder of json, csv or parquet files.

Writers should create files atomically (write a hidden or ``_``-prefixed temp file, then rename):
a file is read once, when first seen. Positions are described in :mod:`pitstop.connectors.positions`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from pitstop.connectors import positions

FORMATS = ("json", "csv", "parquet")


class FilesPartition(InputPartition):
    def __init__(self, paths: list[str]) -> None:
        self.paths = paths


def arrow_schema(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC", prefers_large_types=False)


def read_file(path: str, fmt: str, schema: pa.Schema, header: bool = True) -> pa.Table:
    """Read one data file into ``schema`` (columns matched by name)."""
    if fmt == "json":
        import pyarrow.json as pj

        table = pj.read_json(path, parse_options=pj.ParseOptions(explicit_schema=schema))
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
    columns = []
    for field in schema:
        if field.name in table.column_names:
            columns.append(table.column(field.name).cast(field.type))
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


class FileStreamReader(DataSourceStreamReader):
    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.schema = schema
        self.folder = Path(options["path"])
        self.format = options.get("format", "json").lower()
        self.header = options.get("header", "true").lower() == "true"
        self.source = options["source"]
        self.state_dir = positions.source_dir(options["run_dir"], self.source)
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
            yield from read_file(path, self.format, schema, self.header).to_batches()

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the discovery log is kept for snapshots and restarts."""


class FileSource(DataSource):
    """``spark.readStream.format("pitstop_files")``: options path, format, source, run_dir, start."""

    @classmethod
    def name(cls) -> str:
        return "pitstop_files"

    def schema(self) -> str:
        raise ValueError("pitstop_files needs the mapping's schema: pass it with .schema(...)")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return FileStreamReader(schema, dict(self.options))
