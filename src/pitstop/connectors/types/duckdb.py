"""``TYPE DuckDB``: a table in the home's DuckDB file, written by jobs and read by SELECT.

Each micro-batch's rows and a ``(job, run, branch, batch)`` bookkeeping row commit in one
transaction, so a batch replayed after a failure is found in the bookkeeping and skipped. A
running aggregate's rows are upserted by its group keys, the table's primary key
(:mod:`pitstop.connectors.upsert`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pitstop.connectors.base import Connector, Option
from pitstop.errors import PitstopError

if TYPE_CHECKING:
    from pitstop.catalog.rows import Mapping
    from pitstop.catalog.store import Catalog
    from pitstop.connectors.rollback import SinkRollback, Span
    from pitstop.connectors.sinks import Sink

_ON = "x.run_id = s.run_id AND x.branch = s.branch AND x.batch_id > s.after"


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

    # -- rollback: the rows of the spans' batches, found by their hashes (pitstop.sink_rows) ------
    # An appending sink only. A sink that upserts (running aggregates) overwrites rows, so a row
    # hash of what a batch wrote says nothing of the value before it: such a sink keeps the
    # before-image of each key per (run, batch) instead, and its rollback_plan counts the keys to
    # restore (SinkRollback.restores) and its rollback_in_catalog writes each key's value at the
    # cut back, in the same transaction. Until then its batches have no row hashes here, so a
    # rollback of it is refused ("cannot be found"), never done wrong.
    def rollback_plan(
        self, catalog: Catalog, home: Path, mapping: Mapping, spans: tuple[Span, ...], job: str
    ) -> SinkRollback:
        from pitstop.connectors.rollback import RunShare, SinkRollback
        from pitstop.connectors.sinks import table_name

        cur = catalog.cursor()
        within, params = _spans(spans)
        per_run = cur.execute(
            f"SELECT x.run_id, count(*), sum(x.rows) FROM pitstop.sink_batches x JOIN {within} s ON {_ON} "
            "GROUP BY x.run_id ORDER BY min(x.committed)",
            params,
        ).fetchall()
        hashed = cur.execute(
            f"SELECT count(*) FROM pitstop.sink_rows x JOIN {within} s ON {_ON}", params
        ).fetchall()
        runs = tuple(RunShare(str(r), int(n), int(rows or 0)) for r, n, rows in per_run)
        total = sum(r.rows for r in runs)
        table = table_name(mapping)
        plan = SinkRollback(mapping.name, self.type_name, spans, rows=total, runs=runs)
        others = _other_jobs(catalog, table, job)
        plan = _with(plan, others=others)
        missing = total - int(hashed[0][0] if hashed else 0)
        if missing:
            return _with(
                plan,
                possible=False,
                note=(
                    f"{missing:,} of the rows written after the cut were written by a pitstop that kept "
                    "no row hashes (pitstop.sink_rows), so they cannot be found"
                ),
            )
        return plan

    def rollback_in_catalog(self, catalog: Catalog, mapping: Mapping, plan: SinkRollback, tx: Any) -> None:
        """Delete the spans' rows (matched by hash, as many of each as the spans wrote: identical
        rows are interchangeable), then their row hashes and bookkeeping rows; PitstopError
        (rolling the whole transaction back) if the table holds fewer than the plan counted."""
        from pitstop.connectors.sinks import row_hash, table_columns, table_name

        if not plan.spans:
            return
        table = table_name(mapping)
        quoted = '"' + table.replace('"', '""') + '"'
        within, params = _spans(plan.spans)
        removed = 0
        if plan.rows:
            hashed = row_hash(table_columns(tx, table))
            found = tx.execute(
                f"""DELETE FROM main.{quoted} WHERE rowid IN (
                    WITH gone AS (
                        SELECT x.row_hash AS h, count(*) AS n
                        FROM pitstop.sink_rows x JOIN {within} s ON {_ON} GROUP BY 1),
                    ranked AS (
                        SELECT t.rid, t.h, row_number() OVER (PARTITION BY t.h ORDER BY t.rid DESC) AS k
                        FROM (SELECT rowid AS rid, {hashed} AS h FROM main.{quoted}) t
                        WHERE t.h IN (SELECT h FROM gone))
                    SELECT r.rid FROM ranked r JOIN gone g ON r.h = g.h WHERE r.k <= g.n)""",
                params,
            ).fetchall()
            removed = int(found[0][0]) if found else 0
        if removed != plan.rows:
            raise PitstopError(
                f"sink '{mapping.name}' (table {table}) holds {removed:,} of the {plan.rows:,} rows its "
                "bookkeeping says the job wrote after the cut; nothing was rolled back and no job started"
            )
        for book in ("sink_rows", "sink_batches"):
            tx.execute(f"DELETE FROM pitstop.{book} x USING {within} s WHERE {_ON}", params).fetchall()


def _spans(spans: tuple[Span, ...]) -> tuple[str, list[Any]]:
    """The spans as an inline table ``(run_id, branch, after)`` and its parameters."""
    values = ", ".join("(?::VARCHAR, ?::INTEGER, ?::BIGINT)" for _ in spans) or "(NULL, NULL, NULL)"
    params = [v for s in spans for v in (s.run_id, s.branch, s.after)]
    return f"(SELECT * FROM (VALUES {values}) v(run_id, branch, after))", params


def _other_jobs(catalog: Catalog, table: str, job: str) -> tuple[tuple[str, int], ...]:
    """``(job, rows)`` of the other jobs whose runs wrote the same table (under any mapping)."""
    from pitstop.connectors.sinks import table_name

    names = {m.name.lower() for m in catalog.mappings() if m.type == "duckdb" and table_name(m) == table}
    counts: dict[str, int] = {}
    cur = catalog.cursor()
    for name in names:
        for other, run_id, branch in catalog.runs_writing(name):
            if other.lower() == job.lower():
                continue
            row = cur.execute(
                "SELECT coalesce(sum(rows), 0) FROM pitstop.sink_batches WHERE run_id = ? AND branch = ?",
                [run_id, branch],
            ).fetchall()
            counts[other] = counts.get(other, 0) + int(row[0][0] if row else 0)
    return tuple(sorted(counts.items()))


def _with(plan: SinkRollback, **changes: Any) -> SinkRollback:
    from dataclasses import replace

    return replace(plan, **changes)


CONNECTOR = DuckDBConnector()
