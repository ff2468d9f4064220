"""A PostgreSQL sink rolled back to a snapshot's cut (:mod:`pitstop.connectors.rollback`): what
the spans ``(run_id, branch, after)`` of the job's history wrote after it, counted, then taken
back in one PostgreSQL transaction.

An appended table loses the rows the spans wrote, found by the row hashes kept in
``pitstop_sink_rows`` (as many rows of each hash as were written); an upsert table (a running
aggregate's, with a history of before-images) gets each key's value at the cut back instead
(:func:`_restore_keys`). Either way the spans' bookkeeping rows go, so a rollback done already
finds nothing to do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pitstop.connectors.postgres.options import TableRef
from pitstop.connectors.postgres.table import BOOKKEEPING, ROW_HASH, ROW_HASHES
from pitstop.connectors.upsert import HISTORY_SUFFIX
from pitstop.errors import PitstopError

if TYPE_CHECKING:
    import psycopg

Spans = list[tuple[str, int, int]]
"""``(run_id, branch, after)``: the batches after ``after`` of a run's branch, in the order of the
job's history."""

_ON = "x.run_id = s.run_id AND x.branch = s.branch AND x.batch_id > s.after"


def upsert_keys(conn: psycopg.Connection[Any], schema: str, ref: TableRef) -> tuple[str, ...]:
    """The columns an upsert replaces rows by: the table's primary key (else its narrowest
    unique index); () when the table has no history of before-images (it is appended to)."""
    from psycopg import sql

    history = sql.Identifier(schema, ref.name + HISTORY_SUFFIX)
    if conn.execute("SELECT to_regclass(%s)", [history.as_string(conn)]).fetchone() in (None, (None,)):
        return ()
    row = conn.execute(
        "SELECT (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(i.indkey) WITH ORDINALITY "
        "k(attnum, ord) JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum) "
        "FROM pg_index i WHERE i.indrelid = %s::regclass AND i.indisunique "
        "ORDER BY i.indisprimary DESC, i.indnatts LIMIT 1",
        [sql.Identifier(schema, ref.name).as_string(conn)],
    ).fetchone()
    return () if row is None or row[0] is None else tuple(str(c) for c in row[0])


def count_restores(
    conn: psycopg.Connection[Any], schema: str, ref: TableRef, keys: tuple[str, ...], spans: Spans
) -> int:
    """How many keys of an upsert table the spans wrote (each gets its value at the cut back)."""
    from psycopg import sql

    within, params = _spans(spans)
    history = sql.Identifier(schema, ref.name + HISTORY_SUFFIX)
    by_key = sql.SQL(", ").join(sql.SQL("x.{}").format(sql.Identifier(k)) for k in keys)
    query = "SELECT count(*) FROM (SELECT DISTINCT {} FROM {} x JOIN {} ON " + _ON + ") d"
    found = conn.execute(sql.SQL(query).format(by_key, history, within), params).fetchone()
    return int(found[0]) if found else 0


def count_written(
    conn: psycopg.Connection[Any], schema: str, ref: TableRef, job: str, spans: Spans
) -> tuple[list[tuple[str, int, int]], int, list[tuple[str, int]]]:
    """``(run_id, batches, rows)`` written in the spans, oldest first; how many of those rows have
    a hash (rows written before pitstop kept them have none); and ``(job, rows)`` of the other
    jobs that wrote the table (never touched)."""
    from psycopg import sql

    within, params = _spans(spans)
    book = sql.Identifier(schema, BOOKKEEPING)
    if conn.execute("SELECT to_regclass(%s)", [book.as_string(conn)]).fetchone() in (None, (None,)):
        return [], 0, []
    others = conn.execute(
        sql.SQL(
            "SELECT job, sum(rows) FROM {} WHERE sink_table = %s AND lower(job) <> lower(%s) "
            "GROUP BY job ORDER BY job"
        ).format(book),
        [ref.text(), job],
    ).fetchall()
    per_run = conn.execute(
        sql.SQL(
            "SELECT x.run_id, count(*), sum(x.rows) FROM {} x JOIN {} ON " + _ON + " "
            "WHERE x.sink_table = %s GROUP BY x.run_id ORDER BY min(x.committed)"
        ).format(book, within),
        [*params, ref.text()],
    ).fetchall()
    hashes = sql.Identifier(schema, ROW_HASHES)
    hashed = 0
    if conn.execute("SELECT to_regclass(%s)", [hashes.as_string(conn)]).fetchone() not in (
        None,
        (None,),
    ):
        found = conn.execute(
            sql.SQL("SELECT count(*) FROM {} x JOIN {} ON " + _ON).format(hashes, within), params
        ).fetchone()
        hashed = int(found[0]) if found else 0
    return (
        [(str(r), int(n), int(rows or 0)) for r, n, rows in per_run],
        hashed,
        [(str(j), int(n or 0)) for j, n in others],
    )


def roll_back(
    conn: psycopg.Connection[Any],
    schema: str,
    ref: TableRef,
    keys: tuple[str, ...],
    spans: Spans,
    restores: int,
    about: str,
) -> int:
    """Inside the caller's transaction: delete the rows the spans wrote (found by hash, as many
    of each as they wrote), their hashes and bookkeeping rows; returns the rows deleted. An
    upsert table (``keys``) instead gets each key's value at the cut back (:func:`_restore_keys`;
    the plan counted ``restores`` keys). PitstopError (nothing deleted) if the table holds fewer
    rows than the bookkeeping counts."""
    from psycopg import sql

    within, params = _spans(spans)
    book, hashes = sql.Identifier(schema, BOOKKEEPING), sql.Identifier(schema, ROW_HASHES)
    target = sql.Identifier(schema, ref.name)
    if keys:
        return _restore_keys(conn, schema, ref, keys, within, params, restores, about)
    found = conn.execute(
        sql.SQL(
            "SELECT coalesce(sum(x.rows), 0) FROM {} x JOIN {} ON " + _ON + " WHERE x.sink_table = %s"
        ).format(book, within),
        [*params, ref.text()],
    ).fetchone()
    expected = int(found[0]) if found else 0
    if expected == 0:
        deleted = 0
    else:
        cur = conn.execute(
            sql.SQL(
                "WITH gone AS (SELECT x.row_hash AS h, count(*) AS n FROM {} x JOIN {} ON " + _ON + " "
                "GROUP BY 1), ranked AS (SELECT t.ctid AS tid, t.h, row_number() OVER "
                "(PARTITION BY t.h ORDER BY t.ctid DESC) AS k FROM (SELECT ctid, "
                + ROW_HASH.format("t")
                + " AS h "
                "FROM {} t) t "
                "WHERE t.h IN (SELECT h FROM gone)) "
                "DELETE FROM {} WHERE ctid IN (SELECT r.tid FROM ranked r JOIN gone g ON r.h = g.h "
                "WHERE r.k <= g.n)"
            ).format(hashes, within, target, target),
            params,
        )
        deleted = cur.rowcount
        if deleted != expected:
            raise PitstopError(
                f"{about}: the table holds {deleted:,} of the {expected:,} rows its "
                "bookkeeping says the job wrote after the cut; nothing was rolled back there"
            )
    for table in (hashes, book):
        conn.execute(sql.SQL("DELETE FROM {} x USING {} WHERE " + _ON).format(table, within), params)
    return deleted


def _restore_keys(
    conn: psycopg.Connection[Any],
    schema: str,
    ref: TableRef,
    keys: tuple[str, ...],
    within: Any,
    params: list[Any],
    restores: int,
    about: str,
) -> int:
    """An upsert table back at the cut, inside :func:`roll_back`'s transaction (the DuckDB
    sink's rule, :mod:`pitstop.connectors.duckdb.connector`): each key the spans wrote gets its
    before-image from the first batch after the cut that wrote it (spans in the order of the
    job's history, then batch), or is deleted if it had no row then; the spans' before-images
    and bookkeeping rows go. Returns the keys restored; PitstopError (nothing done) if the
    history holds another number of keys than the plan counted."""
    from psycopg import sql

    target = sql.Identifier(schema, ref.name)
    history = sql.Identifier(schema, ref.name + HISTORY_SUFFIX)
    table = [
        str(n)
        for (n,) in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
            "AND NOT attisdropped ORDER BY attnum",
            [target.as_string(conn)],
        ).fetchall()
    ]
    by_key = sql.SQL(", ").join(sql.SQL("x.{}").format(sql.Identifier(k)) for k in keys)
    conn.execute(
        sql.SQL(
            "CREATE TEMP TABLE pitstop_at_cut ON COMMIT DROP AS SELECT DISTINCT ON ({}) x.* "
            "FROM {} x JOIN {} ON " + _ON + " ORDER BY {}, s.ord, x.batch_id"
        ).format(by_key, history, within, by_key),
        params,
    )
    found = conn.execute("SELECT count(*) FROM pitstop_at_cut").fetchone()
    restored = int(found[0]) if found else 0
    if restored == 0:  # rolled back already (or nothing written after the cut)
        return 0
    if restores and restored != restores:
        raise PitstopError(
            f"{about}: its history holds {restored:,} keys written after the cut, not the "
            f"{restores:,} counted; nothing was rolled back there"
        )
    on = sql.SQL(" AND ").join(
        sql.SQL("t.{} = f.{}").format(sql.Identifier(k), sql.Identifier(k)) for k in keys
    )
    names = sql.SQL(", ").join(map(sql.Identifier, table))
    conn.execute(sql.SQL("DELETE FROM {} t USING pitstop_at_cut f WHERE {}").format(target, on))
    conn.execute(
        sql.SQL("INSERT INTO {} ({}) SELECT {} FROM pitstop_at_cut WHERE NOT absent").format(
            target, names, names
        )
    )
    for kept in (history, sql.Identifier(schema, BOOKKEEPING)):
        conn.execute(sql.SQL("DELETE FROM {} x USING {} WHERE " + _ON).format(kept, within), params)
    return restored


def _spans(spans: Spans) -> tuple[Any, list[Any]]:
    """The spans ``(run_id, branch, after)`` as an inline table, and its parameters; ``ord`` is a
    span's place in the job's history (the snapshot's run first, then later runs)."""
    from psycopg import sql

    rows = ", ".join("(%s::text, %s::integer, %s::bigint, %s::integer)" for _ in spans)
    return (
        sql.SQL(f"(VALUES {rows or '(NULL, NULL, NULL, NULL)'}) AS s(run_id, branch, after, ord)"),
        [v for i, span in enumerate(spans) for v in (*span, i)],
    )
