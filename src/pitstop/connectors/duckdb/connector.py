"""``TYPE DuckDB``: a table in the home's DuckDB file, written by jobs and read by SELECT.

Each micro-batch's rows and a ``(job, run, branch, batch)`` bookkeeping row commit in one
transaction, so a batch replayed after a failure is found in the bookkeeping and skipped (the
protocol of :mod:`pitstop.connectors.exactly_once`). A running aggregate's rows are upserted by
its group keys, the table's primary key (:mod:`pitstop.connectors.duckdb.upsert`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pitstop.connectors.base import Connector, Option
from pitstop.errors import PitstopError
from pitstop.names import quote_ident

if TYPE_CHECKING:
    from pitstop.catalog.rows import Mapping
    from pitstop.catalog.store import Catalog
    from pitstop.connectors.base import Sink
    from pitstop.connectors.rollback import SinkRollback, Span

_ON = "x.run_id = s.run_id AND x.branch = s.branch AND x.batch_id > s.after"


class DuckDBConnector(Connector):
    type_name = "DuckDB"
    summary = "a table in the home's DuckDB file, exactly once; SELECT reads it"
    sink = True
    upserts = True
    whole = "catalog"
    options = (Option("table", "the table's name (default: the mapping's name)"),)

    def sink_keys(self, catalog: Catalog, mapping: Mapping, ask_server: bool) -> tuple[str, ...] | None:
        from pitstop.connectors.duckdb.sink import table_name

        return _upsert_keys(catalog.cursor(), table_name(mapping)) or None

    def make_sink(
        self,
        catalog: Catalog,
        mapping: Mapping,
        job: str,
        run_id: str,
        branch: int,
        keys: tuple[str, ...] = (),
    ) -> Sink:
        from pitstop.connectors.duckdb.sink import DuckDBSink
        from pitstop.connectors.duckdb.upsert import UpsertSink

        if keys:
            return UpsertSink(catalog, mapping, job, run_id, branch, keys)
        return DuckDBSink(catalog, mapping, job, run_id, branch)

    # -- rollback -----------------------------------------------------------------------------------
    # An appending sink: the rows of the spans' batches, found by their hashes (pitstop.sink_rows).
    # An upserting sink (a running aggregate, pitstop.connectors.upsert) overwrites rows, so it
    # keeps the before-image of each key per (run, batch) in its history table instead: each key
    # the spans wrote gets its value at the cut back (the before-image of the first batch after the
    # cut that wrote it; a key that had no row then is deleted), counted as ``restores``.
    def rollback_plan(
        self, catalog: Catalog, home: Path, mapping: Mapping, spans: tuple[Span, ...], job: str
    ) -> SinkRollback:
        from pitstop.connectors.duckdb.sink import table_name
        from pitstop.connectors.rollback import RunShare, SinkRollback

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
        others = _other_jobs(catalog, table, job)
        keys = _upsert_keys(cur, table)
        if keys:
            from pitstop.connectors.upsert import history_table

            history = history_table(table)
            restores = cur.execute(
                f"SELECT count(*) FROM (SELECT DISTINCT {', '.join('x.' + quote_ident(k) for k in keys)} "
                f"FROM {history} x JOIN {within} s ON {_ON})",
                params,
            ).fetchall()
            # Rows appended before the table was keyed (a window table an early-results job
            # keyed later) have no before-images: they are found by their hashes, as below.
            return SinkRollback(
                mapping.name,
                self.type_name,
                spans,
                rows=int(hashed[0][0] if hashed else 0),
                restores=int(restores[0][0]),
                runs=runs,
                others=others,
            )
        plan = SinkRollback(mapping.name, self.type_name, spans, rows=total, runs=runs, others=others)
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
        from pitstop.connectors.duckdb.sink import row_hash, table_columns, table_name

        if not plan.spans:
            return
        table = table_name(mapping)
        quoted = quote_ident(table)
        within, params = _spans(plan.spans)
        keys = _upsert_keys(tx, table)
        if keys:
            _restore_keys(tx, mapping, table, keys, plan, within, params)
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
    """The spans as an inline table ``(run_id, branch, after, ord)`` and its parameters; ``ord``
    is the span's place in the job's history (the snapshot's run first, then later runs)."""
    values = ", ".join("(?::VARCHAR, ?::INTEGER, ?::BIGINT, ?::INTEGER)" for _ in spans)
    params = [v for i, s in enumerate(spans) for v in (s.run_id, s.branch, s.after, i)]
    return (
        f"(SELECT * FROM (VALUES {values or '(NULL, NULL, NULL, NULL)'}) v(run_id, branch, after, ord))",
        params,
    )


def _upsert_keys(cur: Any, table: str) -> tuple[str, ...]:
    """The primary key of an upsert sink's table (one that has a history table), else ()."""
    from pitstop.connectors.upsert import HISTORY_SUFFIX

    found = cur.execute(
        "SELECT 1 FROM information_schema.tables "
        "WHERE table_schema = 'pitstop' AND lower(table_name) = lower(?)",
        [table + HISTORY_SUFFIX],
    ).fetchall()
    if not found:
        return ()
    keyed = cur.execute(
        "SELECT constraint_column_names FROM duckdb_constraints() WHERE schema_name = 'main' "
        "AND lower(table_name) = lower(?) AND constraint_type = 'PRIMARY KEY'",
        [table],
    ).fetchall()
    return tuple(str(c) for c in keyed[0][0]) if keyed else ()


def _restore_keys(
    tx: Any,
    mapping: Mapping,
    table: str,
    keys: tuple[str, ...],
    plan: SinkRollback,
    within: str,
    params: list[Any],
) -> None:
    """An upsert sink back at the cut: each key the spans wrote gets its before-image from the
    first batch after the cut that wrote it (deleted if it had no row then); the spans' history
    and bookkeeping rows go. PitstopError if the history holds another number of keys than the
    plan counted (the transaction, and the job, are rolled back)."""
    from pitstop.connectors.duckdb.sink import table_columns
    from pitstop.connectors.upsert import history_table

    target, history = f"main.{quote_ident(table)}", history_table(table)
    cols = [n for n, _ in table_columns(tx, table)]
    by_key = ", ".join(f"x.{quote_ident(k)}" for k in keys)
    tx.execute(
        f"CREATE OR REPLACE TEMP TABLE __pitstop_at_cut AS SELECT x.* "
        f"FROM {history} x JOIN {within} s ON {_ON} "
        f"QUALIFY row_number() OVER (PARTITION BY {by_key} ORDER BY s.ord, x.batch_id) = 1",
        params,
    ).fetchall()
    try:
        found = tx.execute("SELECT count(*) FROM __pitstop_at_cut").fetchall()
        if int(found[0][0]) != plan.restores:
            raise PitstopError(
                f"sink '{mapping.name}' (table {table}): its history holds {found[0][0]:,} keys written "
                f"after the cut, not the {plan.restores:,} counted; nothing was rolled back, no job started"
            )
        on = " AND ".join(f"t.{quote_ident(k)} = f.{quote_ident(k)}" for k in keys)
        tx.execute(f"DELETE FROM {target} t USING __pitstop_at_cut f WHERE {on}").fetchall()
        names = ", ".join(quote_ident(c) for c in cols)
        tx.execute(
            f"INSERT INTO {target} ({names}) SELECT {names} FROM __pitstop_at_cut WHERE NOT absent"
        ).fetchall()
        tx.execute(f"DELETE FROM {history} x USING {within} s WHERE {_ON}", params).fetchall()
        tx.execute(f"DELETE FROM pitstop.sink_batches x USING {within} s WHERE {_ON}", params).fetchall()
    finally:
        tx.execute("DROP TABLE IF EXISTS __pitstop_at_cut").fetchall()


def _other_jobs(catalog: Catalog, table: str, job: str) -> tuple[tuple[str, int], ...]:
    """``(job, rows)`` of the other jobs whose runs wrote the same table (under any mapping)."""
    from pitstop.connectors.duckdb.sink import table_name

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
