"""``TYPE Postgres``: a table in a PostgreSQL database, written by jobs exactly once (sink only).

The writer is :mod:`pitstop.connectors.postgres.sink`, over psycopg 3: each micro-batch's rows (by
``COPY``) and a bookkeeping row ``(job, run, branch, batch)`` in ``pitstop_sink_batches`` (beside
the table, in its schema) commit in one PostgreSQL transaction, so a batch that Spark replays after
a crash, a restart or a restore is found there and skipped (the protocol the DuckDB sink follows
too, :mod:`pitstop.connectors.exactly_once`).

Rolled back to a snapshot's cut (``'sinkRollback'``) by deleting the rows of the batches after it
(found by the row hashes kept in ``pitstop_sink_rows``) with their bookkeeping rows, in one
PostgreSQL transaction, after the catalog has recorded the restored job and before its queries
start; an interrupted rollback is finished by the next process (it is idempotent). A running
aggregate's table (upserted by its keys) gets each key's value at the cut back from its history of
before-images instead, as a DuckDB sink's does.

The table is created at ``CREATE JOB`` if it is missing, with PostgreSQL types mapped from the
job's columns; an existing table must have a column of a fitting type for each of them. The
password of the ``dsn`` is never shown (:mod:`pitstop.dsn`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from pitstop.connectors.base import Connector, Option

if TYPE_CHECKING:
    from pitstop.catalog.rows import ColumnDef, Mapping
    from pitstop.catalog.store import Catalog
    from pitstop.connectors.base import Sink
    from pitstop.connectors.rollback import SinkRollback, Span


log = logging.getLogger(__name__)


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

    def sink_keys(self, catalog: Catalog, mapping: Mapping, ask_server: bool) -> tuple[str, ...] | None:
        if not ask_server:  # (a run not restored from a snapshot: its start does not wait for a server)
            return None
        from pitstop.connectors.postgres.sink import PostgresSink

        probe = PostgresSink(catalog, mapping, mapping.name, "", 0)
        try:
            with probe._connect() as conn:
                return tuple(probe.upsert_keys(conn)) or None
        except Exception:  # noqa: BLE001 - unreachable now: the sink's own check says so
            log.warning("sink '%s': not reached to learn its keys; rows are appended", mapping.name)
            return None

    def check_mapping(self, mapping: str, columns: tuple[ColumnDef, ...], options: dict[str, str]) -> None:
        from pitstop.connectors.postgres.options import parse_dsn, table_ref

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
        from pitstop.connectors.postgres.sink import PostgresSink

        return PostgresSink(catalog, mapping, job, run_id, branch, keys)

    def rollback_plan(
        self, catalog: Catalog, home: Path, mapping: Mapping, spans: tuple[Span, ...], job: str
    ) -> SinkRollback:
        from pitstop import dsn
        from pitstop.connectors.postgres.sink import PostgresSink
        from pitstop.connectors.rollback import RunShare, SinkRollback

        sink = PostgresSink(catalog, mapping, job, "", 0)
        try:
            per_run, hashed, others = sink.rollback_counts([(s.run_id, s.branch, s.after) for s in spans])
            restores = sink.restore_count([(s.run_id, s.branch, s.after) for s in spans]) if per_run else None
        except Exception as exc:  # noqa: BLE001 - psycopg's errors, said without the password
            said = dsn.mask(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
            return SinkRollback(
                mapping.name,
                self.type_name,
                spans,
                possible=False,
                unknown=True,
                note=f"cannot read its bookkeeping in PostgreSQL at {sink.where} ({said})",
            )
        runs = tuple(RunShare(r, n, rows) for r, n, rows in per_run)
        total = sum(r.rows for r in runs)
        plan = SinkRollback(mapping.name, self.type_name, spans, rows=total, runs=runs, others=tuple(others))
        if restores is not None:  # a running aggregate's table: keys get their values at the cut back
            return SinkRollback(
                mapping.name, self.type_name, spans, restores=restores, runs=runs, others=tuple(others)
            )
        if hashed < total:
            from dataclasses import replace

            return replace(
                plan,
                possible=False,
                note=(
                    f"{total - hashed:,} of the rows written after the cut were written by a pitstop that "
                    "kept no row hashes (pitstop_sink_rows), so they cannot be found"
                ),
            )
        return plan

    def rollback_outside(
        self, catalog: Catalog, home: Path, mapping: Mapping, plan: SinkRollback, trash: Path
    ) -> None:
        from pitstop.connectors.postgres.sink import PostgresSink

        PostgresSink(catalog, mapping, "", "", 0).roll_back(
            [(s.run_id, s.branch, s.after) for s in plan.spans], plan.restores
        )


CONNECTOR = PostgresConnector()
