"""The diffs EXPLAIN ANALYZE keeps: tables of schema ``diff`` in the catalog database, where SELECT
(psql, BI tools) reads them. A diff is named ``<job>_<n>`` (``n`` counts the job's diffs) and holds
one table per sink, ``diff."<job>_<n>_<sink>"``; each table's comment says which diff it belongs to
and when it was made (JSON), so no catalog table records them. ``DROP DIFF`` drops a diff's tables;
opening the home drops those older than the trash's retention (``trash_days``).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from pitstop.catalog.store import Catalog

log = logging.getLogger(__name__)

SCHEMA = "diff"


def quote_ident(name: str) -> str:
    """A DuckDB identifier, quoted (pitstop.names' is a layer beside this one)."""
    return '"' + name.replace('"', '""') + '"'


def _all(tx: Any) -> list[tuple[str, str | None]]:
    """``(table, comment)`` of every table of schema diff."""
    rows = tx.execute(
        "SELECT table_name, comment FROM duckdb_tables() "
        "WHERE schema_name = ? AND database_name = current_database()",
        [SCHEMA],
    ).fetchall()
    return [(str(t), c) for t, c in rows]


def _tables(tx: Any, rows: list[tuple[str, str | None]] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """``(table, what its comment says)`` of every table of schema diff that pitstop made."""
    out = []
    for table, comment in _all(tx) if rows is None else rows:
        try:
            said = json.loads(comment or "")
        except ValueError:
            continue  # not one of pitstop's
        if isinstance(said, dict) and "diff" in said:
            out.append((table, said))
    return out


def keep(catalog: Catalog, job: str, tables: dict[str, pa.Table]) -> tuple[dict[str, str], str]:
    """Keep each sink's rows (``tables``: sink -> rows) as a new diff of ``job``, in one
    transaction. Returns each sink's table and the diff's name."""
    with catalog.transaction() as tx:
        tx.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        rows = _all(tx)
        numbers = [
            int(said.get("n", 0))
            for _, said in _tables(tx, rows)
            if str(said.get("job")).lower() == job.lower()
        ]
        n = max(numbers, default=0) + 1
        taken = {t.lower() for t, _ in rows}
        while any(f"{job}_{n}_{label}".lower() in taken for label in tables):  # a table of another's
            n += 1
        name = f"{job}_{n}"
        comment = json.dumps({"diff": name, "job": job, "n": n, "created": datetime.now(UTC).isoformat()})
        out: dict[str, str] = {}
        for sink, rows in tables.items():
            table = f"{SCHEMA}.{quote_ident(f'{name}_{sink}')}"
            tx.register("__pitstop_diff", rows)  # (a failure rolls the transaction back: no unregister)
            tx.execute(f"CREATE TABLE {table} AS SELECT * FROM __pitstop_diff")
            tx.unregister("__pitstop_diff")
            tx.execute(f"COMMENT ON TABLE {table} IS '{comment.replace(chr(39), chr(39) * 2)}'")
            out[sink] = table
    return out, name


def names(catalog: Catalog) -> list[str]:
    """The diffs kept, oldest first."""
    found: dict[str, str] = {}
    for _, said in _tables(catalog.cursor()):
        found.setdefault(str(said["diff"]), str(said.get("created", "")))
    return sorted(found, key=lambda d: (found[d], d))


def drop(catalog: Catalog, name: str) -> list[str]:
    """Drop the tables of diff ``name`` (case-insensitive); returns them (none: no such diff)."""
    with catalog.transaction() as tx:
        dropped = [t for t, said in _tables(tx) if str(said["diff"]).lower() == name.lower()]
        for table in dropped:
            tx.execute(f"DROP TABLE {SCHEMA}.{quote_ident(table)}")
    return dropped


def expire(catalog: Catalog, days: float | None) -> list[str]:
    """Drop the diffs made more than ``days`` days ago (None: keep all); returns their names."""
    if days is None:
        return []
    limit = datetime.now(UTC) - timedelta(days=days)
    old: set[str] = set()
    for _, said in _tables(catalog.cursor()):
        try:
            made = datetime.fromisoformat(str(said.get("created")))
        except ValueError:
            continue
        if made < limit:
            old.add(str(said["diff"]))
    for name in sorted(old):
        drop(catalog, name)
        log.info("diff '%s' dropped: made more than %g day(s) ago (trash_days)", name, days)
    return sorted(old)
