"""Mappings read whole, as a **static table**: the right side of a stream-static join
(``FROM clicks c JOIN users u ON c.user_id = u.id``).

A stream-static join is stateless: Spark joins each micro-batch of the stream with the table as it
reads it *for that batch*. Measured on pyspark 4.3.0 with a Python batch data source as the static
side of a stream-static join: Spark asks the source for its partitions once, when the query
starts, and runs their ``read()`` again for every micro-batch. So the partition holds only the
folder, and ``read()`` lists and reads the folder's files itself: a file changed or added is seen
by the next batch that reads the table (had the partitions listed the files, an added file would
never be seen).

- ``TYPE File``: the mapping's folder, every file in it (not hidden ``.x`` or temp ``_x`` ones),
  read in its format; a malformed record fails the batch, naming the file. A folder that is gone
  (or that this machine may not list) fails the batch too: read as empty, it would join nothing,
  in silence (on a cluster, a folder the executors do not see is refused when the job starts).
- ``TYPE DuckDB``: the table lives in the home's DuckDB file, which the manager holds open for
  writing, so no Spark worker may open it. The manager *publishes* it instead: it writes the
  table's rows to a Parquet file of the run's own (temp file, then rename) when the query starts
  and again after every commit to the catalog while the job runs (every write to a DuckDB table
  is such a commit: a job's sink, pitstop's own bookkeeping), on the committing thread. A batch
  that starts after a change was committed joins the changed table. Measured: publishing when a
  micro-batch's sink write begins is too late, since Spark has read the static side by then (the
  batch read the table as it was before the change). Joined DuckDB tables are meant to be small
  (dimension tables): each commit copies them whole.
"""

from __future__ import annotations

import os
import re
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from pitstop.errors import PitstopError, PlanError
from pitstop.names import quote_ident
from pitstop.plan.types import arrow_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pitstop.catalog.rows import Mapping
    from pitstop.catalog.store import Catalog
    from pitstop.connectors.base import Connector

TABLE_FILE = "table.parquet"


class TableReader(DataSourceReader):
    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.schema = schema
        self.path = options["path"]
        self.format = options.get("format", "parquet")
        self.header = options.get("header", "true").lower() == "true"
        self.mapping = options["mapping"]

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(self.path)]  # the folder: read() lists it again for every batch

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pitstop.connectors.file.source import read_file

        schema = arrow_schema(self.schema)
        folder = Path(partition.value)
        try:
            names = sorted(n for n in os.listdir(folder) if not n.startswith((".", "_")))
        except OSError as exc:  # a folder that is gone is not an empty table (one that is empty is)
            raise PitstopError(
                f"mapping '{self.mapping}', read as a table: its folder {folder} cannot be listed on "
                f"{socket.gethostname()} ({exc.strerror or exc}); create it (an empty folder is an "
                "empty table) or point the mapping's 'path' at the folder that holds its files, on "
                "storage every machine that runs the job sees"
            ) from exc
        for name in names:
            try:
                table = read_file(str(folder / name), self.format, schema, self.header)
            except (pa.ArrowInvalid, ValueError, OSError) as exc:
                raise PitstopError(
                    f"mapping '{self.mapping}', read as a table: file {folder / name} cannot be read "
                    f"as {self.format}: {exc}; fix or remove the file"
                ) from exc
            yield from table.to_batches()


class TableSource(DataSource):
    """``spark.read.format("pitstop_table")``: options path (a folder), format, header, mapping."""

    @classmethod
    def name(cls) -> str:
        return "pitstop_table"

    def schema(self) -> str:
        raise ValueError("pitstop_table needs the mapping's schema: pass it with .schema(...)")

    def reader(self, schema: StructType) -> DataSourceReader:
        return TableReader(schema, dict(self.options))


def check_table(mapping: Mapping, connector: Connector, what: str) -> None:
    """PlanError unless ``mapping`` (of type ``connector``) can be read whole as a table."""
    if not connector.whole:
        raise PlanError(
            f"{what}: mapping '{mapping.name}' is of type {connector.type_name}, which "
            "cannot be read whole as a table; the static side of a join is a TYPE DuckDB or TYPE File "
            "mapping (to join two streams, bound the join in time: ON a.k = b.k AND b.ts BETWEEN "
            "a.ts AND a.ts + INTERVAL '1' HOUR)"
        )


def published(run_dir: str, key: str, mapping: Mapping) -> Path:
    """The folder a DuckDB table is published to for one query of a run."""
    return Path(run_dir) / "tables" / re.sub(r"[^A-Za-z0-9_.-]", "_", key) / mapping.name


def publish(catalog: Catalog, mapping: Mapping, run_dir: str, key: str) -> None:
    """Write a table in the home's DuckDB file (a mapping read whole from the ``"catalog"``), as
    it is now, where the query's table reader reads it. A table not created yet (its sink has
    written nothing) is published empty."""
    from pitstop.connectors.duckdb.sink import duckdb_type, table_name
    from pitstop.plan.types import spark_type

    folder = published(run_dir, key, mapping)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{TABLE_FILE}.{uuid.uuid4().hex[:8]}.tmp"
    table = table_name(mapping)
    cur = catalog.cursor()
    exists = cur.execute(
        "SELECT 1 FROM information_schema.tables WHERE table_schema = 'main' AND table_name = ?", [table]
    ).fetchone()
    columns = ", ".join(quote_ident(c.name) for c in mapping.columns)
    if exists:
        query = f"SELECT {columns} FROM main.{quote_ident(table)}"
    else:  # no rows yet: the mapping's columns, empty
        nulls = [
            f"CAST(NULL AS {duckdb_type(spark_type(c.type))}) AS {quote_ident(c.name)}"
            for c in mapping.columns
        ]
        query = f"SELECT {', '.join(nulls)} WHERE false"
    path = str(tmp).replace("'", "''")
    cur.execute(f"COPY ({query}) TO '{path}' (FORMAT parquet)")
    os.replace(tmp, folder / TABLE_FILE)


def table_frame(
    spark: SparkSession, mapping: Mapping, connector: Connector, run_dir: str, key: str
) -> DataFrame:
    """The mapping as a static DataFrame that reads it again for every micro-batch."""
    from pitstop.plan.types import ddl

    options: dict[str, Any]
    if connector.whole == "catalog":
        options = {"path": str(published(run_dir, key, mapping)), "format": "parquet"}
    else:
        options = {
            "path": mapping.options["path"],
            "format": mapping.options.get("format", "json"),
            "header": mapping.options.get("header", "true"),
        }
    name = f"pitstop_table_{re.sub(r'[^A-Za-z0-9]', '_', key)}_{re.sub(r'[^A-Za-z0-9]', '_', mapping.name)}"
    own = type(f"TableSource_{len(name)}", (TableSource,), {"name": classmethod(lambda cls, n=name: n)})
    spark.dataSource.register(own)  # one registration per query (see frames.source_format)
    return spark.read.schema(ddl(mapping)).format(name).options(mapping=mapping.name, **options).load()
