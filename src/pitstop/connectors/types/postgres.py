"""``TYPE Postgres``: a table in a PostgreSQL database, written by jobs exactly once (sink only).

The writer is :mod:`pitstop.connectors.postgres`, over psycopg 3: each micro-batch's rows (by
``COPY``) and a bookkeeping row ``(job, run, branch, batch)`` in ``pitstop_sink_batches`` (beside
the table, in its schema) commit in one PostgreSQL transaction, so a batch that Spark replays after
a crash, a restart or a restore is found there and skipped.

The table is created at ``CREATE JOB`` if it is missing, with PostgreSQL types mapped from the
job's columns; an existing table must have a column of a fitting type for each of them. The
password of the ``dsn`` is never shown (:mod:`pitstop.connectors.dsn`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pitstop.connectors.base import Connector, Option

if TYPE_CHECKING:
    from pitstop.catalog.rows import ColumnDef, Mapping
    from pitstop.catalog.store import Catalog
    from pitstop.connectors.sinks import Sink


class PostgresConnector(Connector):
    type_name = "Postgres"
    summary = "a table in a PostgreSQL database, exactly once (rows by COPY, one transaction per batch)"
    sink = True
    upserts = True
    options = (
        Option(
            "dsn",
            "the database, postgresql://user[:password]@host[:port]/db or key=value pairs; the password "
            "is never shown (PGPASSWORD or ~/.pgpass keep it out of the statement)",
            required=True,
        ),
        Option("table", "the table, [schema.]name (default: the mapping's name); created if missing"),
    )

    def check_mapping(self, mapping: str, columns: tuple[ColumnDef, ...], options: dict[str, str]) -> None:
        from pitstop.connectors.postgres import parse_dsn, table_ref

        parse_dsn(mapping, options["dsn"])
        table_ref(mapping, options.get("table", mapping))

    def make_sink(
        self,
        catalog: Catalog,
        mapping: Mapping,
        job: str,
        run_id: str,
        branch: int,
        keys: tuple[str, ...] = (),
    ) -> Sink:
        from pitstop.connectors.postgres import PostgresSink

        return PostgresSink(catalog, mapping, job, run_id, branch, keys)


CONNECTOR = PostgresConnector()
