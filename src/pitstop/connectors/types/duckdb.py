"""``TYPE DuckDB``: a table in the home's DuckDB file, written by jobs and read by SELECT.

Each micro-batch's rows and a ``(job, run, branch, batch)`` bookkeeping row commit in one
transaction, so a batch replayed after a failure is found in the bookkeeping and skipped. A
running aggregate's rows are upserted by its group keys, the table's primary key
(:mod:`pitstop.connectors.upsert`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pitstop.connectors.base import Connector, Option

if TYPE_CHECKING:
    from pitstop.catalog.rows import Mapping
    from pitstop.catalog.store import Catalog
    from pitstop.connectors.sinks import Sink


class DuckDBConnector(Connector):
    type_name = "DuckDB"
    summary = "a table in the home's DuckDB file, exactly once; SELECT reads it"
    sink = True
    upserts = True
    options = (Option("table", "the table's name (default: the mapping's name)"),)

    def make_sink(
        self,
        catalog: Catalog,
        mapping: Mapping,
        job: str,
        run_id: str,
        branch: int,
        keys: tuple[str, ...] = (),
    ) -> Sink:
        from pitstop.connectors.sinks import DuckDBSink
        from pitstop.connectors.upsert import UpsertSink

        if keys:
            return UpsertSink(catalog, mapping, job, run_id, branch, keys)
        return DuckDBSink(catalog, mapping, job, run_id, branch)


CONNECTOR = DuckDBConnector()
