"""The comparison of two replays' captures, sink by sink.

A sink whose rows have a key (a running aggregate's group keys, a window branch's window and
group keys, unique in both captures) is compared row by row on it: identical, changed (which
columns), only in the old replay, only in the new one. Otherwise the captures are compared as
multisets of rows (only old / only new; there is no "changed" without a key). A column only one
side writes is NULL on the other. Floating-point values equal to 1e-9 relative are the same value
(a sum's last digits depend on the order Spark adds its partial sums in).

The diff table keeps every row that is not identical: ``change``, ``changed_columns`` and the key
columns, then ``old_<column>`` and ``new_<column>`` per other column (keyed); or ``change`` and the
columns (multiset).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pyarrow as pa

from pitstop.names import quote_ident
from pitstop.replay.capture import Capture

ONLY_OLD, ONLY_NEW, CHANGED = "only old", "only new", "changed"
_FLOATS = ("DOUBLE", "FLOAT", "REAL")


@dataclass(frozen=True)
class SinkDiff:
    sink: str
    identical: int
    changed: int
    only_old: int
    only_new: int
    columns: tuple[tuple[str, int], ...]  # changed column -> rows it changed in
    keys: tuple[str, ...]  # what rows were matched on (empty: as multisets)
    table: pa.Table  # the rows that are not identical

    @property
    def same(self) -> bool:
        return not (self.changed or self.only_old or self.only_new)

    def text(self) -> str:
        """``312 rows identical, 24 changed (revenue), 0 only old, 96 only new``."""
        changed = f"{self.changed:,} changed"
        if self.columns:
            changed += f" ({', '.join(c for c, _ in self.columns)})"
        parts = [f"{self.identical:,} row(s) identical"]
        parts += [changed] if self.keys else []
        parts += [f"{self.only_old:,} only old", f"{self.only_new:,} only new"]
        matched = f"matched on {', '.join(self.keys)}" if self.keys else "compared as whole rows"
        return f"{', '.join(parts)} ({matched})"


def compare(capture: Capture, sink: str, old: str, new: str, keys: tuple[str, ...]) -> SinkDiff:
    """Diff capture table ``old`` against ``new`` (either may be missing: that side wrote nothing
    to the sink, or has no branch into it)."""
    old_cols, new_cols = capture.columns(old), capture.columns(new)
    types: dict[str, str] = {}
    names: list[str] = []
    for n, t in (*new_cols, *old_cols):
        if n.lower() not in types:
            types[n.lower()] = t
            names.append(n)
    have_old = {n.lower() for n, _ in old_cols}
    have_new = {n.lower() for n, _ in new_cols}
    o, n = _side(old, names, have_old, types), _side(new, names, have_new, types)
    usable = bool(keys) and all(k.lower() in types for k in keys)
    if usable:
        usable = _unique(capture, o, keys) and _unique(capture, n, keys)
    with capture.lock:
        cur = capture.db.cursor()
        if usable:
            table, counts = _keyed(cur, o, n, names, keys, types)
        else:
            table, counts = _multiset(cur, o, n)
            keys = ()
    identical, changed, only_old, only_new = counts
    columns: dict[str, int] = {}
    if changed:
        for cell in table.column("changed_columns").to_pylist():
            for col in (cell or "").split(", "):
                if col:
                    columns[col] = columns.get(col, 0) + 1
    return SinkDiff(sink, identical, changed, only_old, only_new, tuple(sorted(columns.items())), keys, table)


def _side(table: str | None, names: list[str], have: set[str], types: dict[str, str]) -> str:
    """A capture table as a SELECT over every column of both sides (NULL where it has none)."""
    cols = [
        quote_ident(c) if c.lower() in have else f"CAST(NULL AS {types[c.lower()]}) AS {quote_ident(c)}"
        for c in names
    ]
    if not have:
        return f"(SELECT {', '.join(cols)} WHERE false)"
    return f"(SELECT {', '.join(cols)} FROM {quote_ident(str(table))})"


def _unique(capture: Capture, side: str, keys: tuple[str, ...]) -> bool:
    on = ", ".join(quote_ident(k) for k in keys)
    with capture.lock:
        row = (
            capture.db.cursor().execute(f"SELECT count(*) = count(DISTINCT ({on})) FROM {side} s").fetchone()
        )
    return bool(row and row[0])


def _equal(a: str, b: str, kind: str) -> str:
    if kind.upper() in _FLOATS:
        return f"({a} IS NOT DISTINCT FROM {b} OR abs({a} - {b}) <= 1e-9 * greatest(abs({a}), abs({b})))"
    return f"({a} IS NOT DISTINCT FROM {b})"


def _keyed(
    cur: duckdb.DuckDBPyConnection,
    o: str,
    n: str,
    names: list[str],
    keys: tuple[str, ...],
    types: dict[str, str],
) -> tuple[pa.Table, tuple[int, int, int, int]]:
    keyset = {k.lower() for k in keys}
    values = [c for c in names if c.lower() not in keyset]
    on = " AND ".join(f"o.{quote_ident(k)} IS NOT DISTINCT FROM n.{quote_ident(k)}" for k in keys)
    equal = {c: _equal(f"o.{quote_ident(c)}", f"n.{quote_ident(c)}", types[c.lower()]) for c in values}
    same = " AND ".join(equal.values()) or "true"
    which = ", ".join(f"CASE WHEN NOT {e} THEN {_literal(c)} END" for c, e in equal.items())
    change = (
        f"CASE WHEN o.__old IS NULL THEN '{ONLY_NEW}' WHEN n.__new IS NULL THEN '{ONLY_OLD}' "
        f"WHEN {same} THEN 'identical' ELSE '{CHANGED}' END"
    )
    changed = (
        f"CASE WHEN o.__old AND n.__new THEN nullif(concat_ws(', ', {which}), '') END"
        if values
        else "NULL::VARCHAR"
    )
    select = [f"{change} AS change", f"{changed} AS changed_columns"]
    select += [f"coalesce(o.{quote_ident(k)}, n.{quote_ident(k)}) AS {quote_ident(k)}" for k in keys]
    for c in values:
        select += [
            f"o.{quote_ident(c)} AS {quote_ident('old_' + c)}",
            f"n.{quote_ident(c)} AS {quote_ident('new_' + c)}",
        ]
    sql = (
        f"SELECT {', '.join(select)} FROM (SELECT *, true AS __old FROM {o}) o "
        f"FULL OUTER JOIN (SELECT *, true AS __new FROM {n}) n ON {on}"
    )
    execute = cur.execute
    execute(f"CREATE OR REPLACE TEMP TABLE __diff AS {sql}")
    counts = execute(
        f"SELECT count(*) FILTER (change = 'identical'), count(*) FILTER (change = '{CHANGED}'), "
        f"count(*) FILTER (change = '{ONLY_OLD}'), count(*) FILTER (change = '{ONLY_NEW}') FROM __diff"
    ).fetchall()[0]
    order = ", ".join(str(i + 3) for i in range(len(keys)))
    table = cur.sql(f"SELECT * FROM __diff WHERE change <> 'identical' ORDER BY 1, {order}").to_arrow_table()
    execute("DROP TABLE __diff")
    return table, (int(counts[0]), int(counts[1]), int(counts[2]), int(counts[3]))


def _multiset(cur: duckdb.DuckDBPyConnection, o: str, n: str) -> tuple[pa.Table, tuple[int, int, int, int]]:
    execute = cur.execute
    sql = (
        f"SELECT '{ONLY_OLD}' AS change, NULL::VARCHAR AS changed_columns, * FROM ({o} EXCEPT ALL {n}) "
        f"UNION ALL SELECT '{ONLY_NEW}', NULL::VARCHAR, * FROM ({n} EXCEPT ALL {o})"
    )
    execute(f"CREATE OR REPLACE TEMP TABLE __diff AS {sql}")
    counts = execute(
        f"SELECT count(*) FILTER (change = '{ONLY_OLD}'), count(*) FILTER (change = '{ONLY_NEW}'), "
        f"(SELECT count(*) FROM {o}) FROM __diff"
    ).fetchall()[0]
    only_old, only_new, total_old = counts
    table = cur.sql("SELECT * FROM __diff ORDER BY ALL").to_arrow_table()
    execute("DROP TABLE __diff")
    identical = int(total_old) - int(only_old)
    return table, (identical, 0, int(only_old), int(only_new))


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
