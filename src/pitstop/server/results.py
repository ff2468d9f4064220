"""Query results kept between catalog commits, for the clients that ask the same thing again.

Fifty dashboard panels refreshing every few seconds send the same few queries over and over, and
each answer costs the server a read-only DuckDB transaction: ``BEGIN``, the query and
``ROLLBACK``, about 0.5 ms of CPU under Python's one lock. Measured with 50 clients (bench/server.py),
that cost is what made statements queue behind each other. A result that cannot have changed
is sent again instead.

Why a kept result is the right answer (each step is what makes the next one hold):

1. Everything a server's query can read is in the home's DuckDB database: DuckDB's file functions
   are switched off in a serving process (``server/app.py``), and the sinks that write elsewhere
   (PostgreSQL, Kafka, files) are not readable from a query. (A query that reads a snapshot's
   state, ``snapshot_state(...)``, reads tables pitstop registers for it alone: it is never kept,
   ``server/queries.py``.)
2. Every write to that database goes through ``Catalog.transaction()``, in this process (the
   home's lock keeps other processes out), and ``Catalog.generation`` goes up after each COMMIT.
   A query whose transaction began after the generation read ``g`` sees every commit up to
   ``g``; its result is kept under ``g`` and given out only while the generation is still ``g``.
   A client that has just changed something (its statement's commit is done when the statement
   returns) reads a newer generation, so it never gets a result from before its own change.
3. Only a query whose answer depends on the database alone is kept: DuckDB's own parse of it
   (``json_serialize_sql``) must name only tables of the database (no table function, no view,
   no ``USING SAMPLE``) and only functions DuckDB calls ``CONSISTENT`` (``now()``,
   ``random()``, ``current_setting()``, ``nextval()`` are not; neither are the bare words
   ``current_date``, ``current_user``... that DuckDB reads as functions). The session's user and
   settings (the two macros ``pgc_user()`` and ``pgc_settings()`` a query may read) and the
   parameter values are part of the key.
4. Only small results: the ones read whole before they are sent (fewer than ``FIRST_ROWS`` rows).
   A text is judged (step 3) the second time it is run: an ad-hoc query sent once costs nothing.

Anything this module cannot prove is run as before: the verdict errs towards running the query.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

log = logging.getLogger(__name__)

MAX_KEPT = 2048
"""Results kept at most (small ones: see FIRST_ROWS); a full store is emptied and fills again."""
MAX_VERDICTS = 4096

SESSION_MACROS = frozenset({"pgc_user", "pgc_settings"})
"""Macros whose answer is the session's user or settings: both are part of the key."""
KEYWORD_FUNCTIONS = frozenset(
    {
        "current_date",
        "current_time",
        "current_timestamp",
        "localtime",
        "localtimestamp",
        "current_user",
        "session_user",
        "user",
        "current_role",
        "current_schema",
        "current_catalog",
        "current_database",
    }
)
"""Bare words DuckDB reads as function calls when no column has the name (a query naming a column
so is not kept either: the store errs towards running the query)."""
CLOCK_FUNCTIONS = frozenset({"age", "current_localtime", "current_localtimestamp"})
"""Functions that read the clock although DuckDB 2.0 calls them CONSISTENT (``age(ts)`` counts
from today)."""
ZONED_TYPES = ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ_NS", "TIME WITH TIME ZONE")
"""Parameter types whose functions read the session's TimeZone (see SharedResults.consistent)."""
TABLE_REFS = frozenset({"BASE_TABLE", "SUBQUERY", "JOIN", "EMPTY", "EXPRESSION_LIST"})


@dataclass(frozen=True)
class Kept:
    """A small query result and the generation of the catalog it was read at."""

    generation: int
    columns: tuple[Any, ...]
    rows: tuple[tuple[Any, ...], ...]


class SharedResults:
    """The kept results of one server, shared by its sessions (safe from any thread)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[Any, ...], Kept] = {}
        self._verdicts: dict[str, bool] = {}
        self._seen: set[str] = set()
        """Texts run once and not judged yet (judging costs about what running a small query does)."""
        self._consistent: frozenset[str] | None = None
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    # -- the key -------------------------------------------------------------------------------
    @staticmethod
    def key(
        sql: str, params: Sequence[Any], user: str, settings: Mapping[str, str]
    ) -> tuple[Any, ...] | None:
        """What a result depends on besides the database; None when a parameter cannot be a key."""
        try:
            values = tuple((type(v).__name__, v) for v in params)
            hash(values)
        except TypeError:  # a list or a dict parameter: such queries are run every time
            return None
        return (sql, values, user, tuple(sorted(settings.items())))

    def get(self, key: tuple[Any, ...] | None, generation: int) -> Kept | None:
        if key is None:
            return None
        kept = self._kept.get(key)
        if kept is not None and kept.generation == generation:
            self.hits += 1
            return kept
        self.misses += 1
        return None

    def keep(
        self,
        cursor: duckdb.DuckDBPyConnection,
        key: tuple[Any, ...] | None,
        generation: int,
        columns: tuple[Any, ...],
        rows: Sequence[tuple[Any, ...]],
    ) -> None:
        """Keep a whole result read at ``generation`` (read before the query's transaction
        began), if its query depends on the database alone. ``cursor`` is idle (no open result)."""
        if key is None:
            return
        sql = key[0]
        if sql not in self._verdicts and sql not in self._seen:  # maybe an ad-hoc query, sent once:
            if len(self._seen) >= MAX_VERDICTS:  # judged when it comes again
                self._seen.clear()
            self._seen.add(sql)
            return
        if not self.cacheable(cursor, sql):
            return
        if len(self._kept) >= MAX_KEPT:
            self._kept.clear()
        self._kept[key] = Kept(generation, columns, tuple(rows))

    # -- the verdict -----------------------------------------------------------------------------
    def cacheable(self, cursor: duckdb.DuckDBPyConnection, sql: str) -> bool:
        """Whether ``sql``'s answer depends on nothing but the database (step 3), kept by text."""
        verdict = self._verdicts.get(sql)
        if verdict is None:
            try:
                verdict = self._judge(cursor, sql)
            except (duckdb.Error, ValueError, KeyError, TypeError):
                log.debug("no verdict on %s: it is run every time", sql, exc_info=True)
                verdict = False
            if len(self._verdicts) >= MAX_VERDICTS:
                self._verdicts.clear()
            self._verdicts[sql] = verdict
        return verdict

    def _judge(self, cursor: duckdb.DuckDBPyConnection, sql: str) -> bool:
        row = cursor.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
        tree: dict[str, Any] = json.loads(row[0]) if row else {"error": True}
        if tree.get("error") or len(tree.get("statements") or []) != 1:
            return False
        tables = {
            (schema.lower(), name.lower())
            for schema, name in cursor.execute(
                "SELECT schema_name, table_name FROM duckdb_tables() WHERE NOT temporary"
            ).fetchall()
        }
        ctes: set[str] = set()
        _collect_ctes(tree, ctes)
        return _plain(tree, self.consistent(cursor), tables, ctes)

    def consistent(self, cursor: duckdb.DuckDBPyConnection) -> frozenset[str]:
        """Names of the functions whose every overload DuckDB calls CONSISTENT, and the session
        macros. An overload that reads a time-zone-aware value counts too: DuckDB 2.0.1 calls
        those CONSISTENT_WITHIN_QUERY (``timestamptz + interval`` depends on the session's
        TimeZone, as every operator ``+`` then would), and the session's settings, TimeZone
        among them, are part of a kept result's key."""
        with self._lock:
            if self._consistent is None:
                rows = cursor.execute(
                    "SELECT lower(function_name) FROM duckdb_functions() GROUP BY 1 "
                    "HAVING bool_and(coalesce(stability, '') = 'CONSISTENT' OR "
                    "(stability = 'CONSISTENT_WITHIN_QUERY' AND list_has_any(parameter_types, ?)))",
                    [list(ZONED_TYPES)],
                ).fetchall()
                self._consistent = (frozenset(r[0] for r in rows) - CLOCK_FUNCTIONS) | SESSION_MACROS
            return self._consistent


def _collect_ctes(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        cte_map = node.get("cte_map")
        if isinstance(cte_map, dict):
            out.update(str(entry["key"]).lower() for entry in cte_map.get("map", []))
        for value in node.values():
            _collect_ctes(value, out)
    elif isinstance(node, list):
        for value in node:
            _collect_ctes(value, out)


def _plain(node: Any, consistent: frozenset[str], tables: set[tuple[str, str]], ctes: set[str]) -> bool:
    """Whether a parse tree (DuckDB's JSON) reads only tables and CONSISTENT functions."""
    if isinstance(node, list):
        return all(_plain(v, consistent, tables, ctes) for v in node)
    if not isinstance(node, dict):
        return True
    if node.get("sample") is not None:  # USING SAMPLE / TABLESAMPLE: random rows
        return False
    if "function_name" in node and str(node["function_name"]).lower() not in consistent:
        return False
    cls, kind = node.get("class"), node.get("type")
    if cls == "COLUMN_REF":
        names = node.get("column_names") or []
        if len(names) == 1 and str(names[0]).lower() in KEYWORD_FUNCTIONS:
            return False
    if cls is None and "alias" in node and "query_location" in node:  # a table reference
        if kind not in TABLE_REFS or (kind == "BASE_TABLE" and not _is_table(node, tables, ctes)):
            return False
    return all(_plain(v, consistent, tables, ctes) for v in node.values())


def _is_table(node: Mapping[str, Any], tables: set[tuple[str, str]], ctes: set[str]) -> bool:
    name = str(node.get("table_name", "")).lower()
    schema = str(node.get("schema_name", "")).lower()
    if node.get("catalog_name") or node.get("at_clause") is not None:
        return False
    if not schema:
        return name in ctes or ("main", name) in tables
    return (schema, name) in tables
