"""The DuckDB append sink: a batch's rows and a ``(job, run, branch, batch)`` bookkeeping row commit
in one DuckDB transaction; a batch that Spark replays after a failure is found in the
bookkeeping and skipped. The protocol is :mod:`pitstop.connectors.exactly_once`'s; this module is
DuckDB's part of it (:class:`DuckDBSink`: the catalog's transaction, the bookkeeping row in
``pitstop.sink_batches``, the rows appended with their hashes in ``pitstop.sink_rows``). Also the
sink table's columns and types, which evolve when a job adds or widens a column.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import duckdb
import pyarrow as pa

from pitstop.catalog.clock import now
from pitstop.catalog.rows import Mapping
from pitstop.catalog.store import Catalog
from pitstop.connectors.exactly_once import Batch, write_batch
from pitstop.errors import PlanError
from pitstop.names import check_name, quote_ident
from pitstop.plan.types import widens

log = logging.getLogger(__name__)

_CONSTANT = re.compile(r"'(?:[^']|'')*'|-?\d+(?:\.\d+)?|true|false", re.IGNORECASE)
"""A column default that is a constant (a row's hash may repeat it; not ``nextval(...)``, which
would draw another value, nor ``random()``): a string, a number, a boolean."""


def duckdb_type(spark_simple: str) -> str:
    """DuckDB column type for a Spark ``simpleString`` type."""
    t = spark_simple.lower()
    return {"string": "VARCHAR", "float": "FLOAT", "int": "INTEGER"}.get(t, t.upper())


def table_name(mapping: Mapping) -> str:
    """The DuckDB table a sink mapping writes (quoted wherever it is used, and checked as a name)."""
    return check_name("sink table", mapping.options.get("table", mapping.name))


def table_columns(tx: Any, table: str) -> list[tuple[str, str]]:
    """``(name, DuckDB type)`` of a sink table's columns, in the table's order."""
    rows = tx.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'main' AND table_name = ? ORDER BY ordinal_position",
        [table],
    ).fetchall()
    return [(str(n), str(t)) for n, t in rows]


def row_hash(
    columns: list[tuple[str, str]], given: set[str] | None = None, defaults: dict[str, str] | None = None
) -> str:
    """The SQL of a row's hash as the table holds it: ``hash()`` of every column in table order,
    each cast to the table's type (a column the batch does not give is its default, SQL in
    ``defaults``, else NULL, as ``INSERT BY NAME`` leaves it). ``given`` None: over the table's
    own columns."""
    parts = []
    for name, kind in columns:
        quoted = quote_ident(name)
        have = given is None or name in given or name.lower() in {g.lower() for g in given}
        parts.append(f"CAST({quoted if have else (defaults or {}).get(name, 'NULL')} AS {kind})")
    return f"hash({', '.join(parts)})"


def constant_defaults(defaults: dict[str, str]) -> dict[str, str]:
    """Of a table's column defaults, those a row's hash repeats (constants: see ``_CONSTANT``)."""
    return {n: d for n, d in defaults.items() if _CONSTANT.fullmatch(d)}


def column_defaults(tx: Any, table: str) -> dict[str, str]:
    """The defaults (SQL) of a sink table's columns that have one, by column name."""
    return {
        str(name): str(default)
        for name, default in tx.execute(
            "SELECT column_name, column_default FROM information_schema.columns "
            "WHERE table_schema = 'main' AND lower(table_name) = lower(?) "
            "AND column_default IS NOT NULL",
            [table],
        ).fetchall()
    }


def evolve_table(
    tx: Any,
    table: str,
    schema: list[tuple[str, str]],
    defaults: dict[str, str] | None = None,
) -> list[str]:
    """Give sink table ``main.table`` the columns of ``schema`` it lacks (NULL in the rows written
    before, until their key or window is written again; or their SQL value in ``defaults``) and
    widen the types of those ``schema`` widens (:func:`pitstop.plan.types.widens`: INT ->
    BIGINT, FLOAT -> DOUBLE, DECIMAL(p,s) -> DECIMAL(p',s)); other types stay (a row's values are
    cast on insert). Returns what changed, in sentences.

    1. Compare the table's columns with ``schema``; nothing to do when none is missing or wider.
    2. Re-key the row hashes that rollback finds the table's rows by (``pitstop.sink_rows``): each
       row's hash over the old columns maps to its hash over the new ones (added: NULL; widened:
       cast), computed from the table before it changes.
    3. Add and widen the columns."""
    # Step 1.
    before = table_columns(tx, table)
    have = {n.lower(): (n, t) for n, t in before}
    added = [(n, duckdb_type(t)) for n, t in schema if n.lower() not in have]
    widened: list[tuple[str, str, str]] = []
    for n, t in schema:
        if n.lower() in have:
            name, old = have[n.lower()]
            new = duckdb_type(t)
            if _spark_name(old) != _spark_name(new) and widens(_spark_name(old), _spark_name(new)):
                widened.append((name, old, new))
    if not added and not widened:
        return []
    # Step 2.
    quoted = quote_ident(table)
    wider = {n: new for n, _, new in widened}
    after = [(n, wider.get(n, t)) for n, t in before] + added
    defaults = defaults or {}
    old_hash = row_hash(before)
    # An added column with a default holds it in the rows written before.
    new_hash = row_hash(after, {n for n, _ in before}, {n: defaults[n] for n, _ in added if n in defaults})
    tx.execute(
        f"""UPDATE pitstop.sink_rows x SET row_hash = m.new_h FROM (
            SELECT DISTINCT {old_hash} AS old_h, {new_hash} AS new_h FROM main.{quoted}) m
            WHERE x.row_hash = m.old_h AND m.old_h <> m.new_h"""
    )
    # Step 3.
    changes: list[str] = []
    target = f"main.{quoted}"
    for name, typ in added:
        default = f" DEFAULT {defaults[name]}" if name in defaults else ""
        tx.execute(f"ALTER TABLE {target} ADD COLUMN {quote_ident(name)} {typ}{default}")
    for name, _, typ in widened:
        tx.execute(f"ALTER TABLE {target} ALTER COLUMN {quote_ident(name)} TYPE {typ}")
    changes += [
        f"column '{n}' {t} added ({defaults.get(n, 'NULL')} in the rows written before)" for n, t in added
    ]
    changes += [f"column '{n}' widened from {old} to {new}" for n, old, new in widened]
    return changes


def _spark_name(duck: str) -> str:
    """A DuckDB column type as :func:`~pitstop.plan.types.widens` names it."""
    t = duck.upper().replace(" ", "")
    return {"INTEGER": "INT", "VARCHAR": "STRING", "REAL": "FLOAT"}.get(t, t)


class DuckDBSink:
    """One appending branch's writer to one DuckDB table, and the DuckDB side of the exactly-once
    protocol (:class:`pitstop.connectors.exactly_once.Database`), which :class:`.upsert.UpsertSink`
    extends with its upserts."""

    def __init__(self, catalog: Catalog, mapping: Mapping, job: str, run_id: str, branch: int) -> None:
        self.catalog = catalog
        self.mapping = mapping
        self.table = table_name(mapping)
        self.job = job
        self.run_id = run_id
        self.branch = branch
        self.keys: tuple[str, ...] = ()  # appends
        self._hash_columns: list[tuple[str, str]] | None = None  # the table's, read at the first batch
        self._hash_defaults: dict[str, str] = {}  # its columns' constant defaults, read with them

    def prepare(self, schema: list[tuple[str, str]]) -> None:
        """Create the table, or give an existing one that this job's earlier runs wrote the job's
        new columns and widened types (:func:`evolve_table`: a restored job whose aggregates were
        added or widened). A table this job never wrote (another job's, or one made by hand) is
        not changed: a column it lacks is an error naming it."""
        quoted = quote_ident(self.table)
        cols = ", ".join(f"{quote_ident(n)} {duckdb_type(t)}" for n, t in schema)
        with self.catalog.transaction() as tx:
            tx.execute(f"CREATE TABLE IF NOT EXISTS main.{quoted} ({cols})")
            if not self._ours():
                existing = {n.lower() for n, _ in table_columns(tx, self.table)}
                missing = [n for n, _ in schema if n.lower() not in existing]
                if missing:
                    raise PlanError(
                        f"sink table '{self.table}' (mapping '{self.mapping.name}') has no column(s) "
                        f"{', '.join(missing)}, and job '{self.job}' never wrote it, so it is not changed; "
                        "alias the job's columns to the table's, or write to a new mapping"
                    )
                return
            for change in evolve_table(tx, self.table, schema):
                log.info("sink table '%s' (mapping '%s'): %s", self.table, self.mapping.name, change)

    def _ours(self) -> bool:
        """Whether an earlier run of this job wrote this sink (the job's own table, which evolves
        with it across updates)."""
        return any(
            job.lower() == self.job.lower() and run_id != self.run_id
            for job, run_id, _ in self.catalog.runs_writing(self.mapping.name)
        )

    def last_batch(self) -> int | None:
        """The last batch this sink holds for its run and branch (from the bookkeeping)."""
        return self.catalog.last_sink_batch(self.run_id, self.branch)

    def write(self, table: pa.Table, batch_id: int) -> None:
        """Write one micro-batch exactly once (:func:`pitstop.connectors.exactly_once.write_batch`)."""
        write_batch(self, Batch.of(table, batch_id))

    # -- the exactly-once protocol's steps (pitstop.connectors.exactly_once.Database) -------------
    @property
    def sink_name(self) -> str:
        return self.table

    def transaction(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """The catalog's transaction (the sink table is in the home's DuckDB file)."""
        return self.catalog.transaction()

    def claim(self, tx: duckdb.DuckDBPyConnection, batch: Batch) -> bool:
        """Step 1: whether this run's branch has not written the batch yet (Spark replays a batch
        whose sink write committed but whose checkpoint did not): no bookkeeping row says so."""
        done = tx.execute(
            "SELECT 1 FROM pitstop.sink_batches WHERE run_id = ? AND branch = ? AND batch_id = ?",
            [self.run_id, self.branch, batch.batch_id],
        ).fetchone()
        return done is None

    @contextmanager
    def staged(self, tx: duckdb.DuckDBPyConnection, batch: Batch) -> Iterator[None]:
        """Step 2: the batch's rows registered as ``__pitstop_batch`` for the block."""
        tx.register("__pitstop_batch", batch.rows)
        try:
            yield
        finally:
            tx.unregister("__pitstop_batch")

    def append(self, tx: duckdb.DuckDBPyConnection, batch: Batch) -> None:
        """Step 2a: the rows by name, and each row's hash as the table holds it (a column the job
        does not write has its default, when that is a constant), which what rolls the sink back
        to a snapshot's cut finds them by."""
        tx.execute(f"INSERT INTO main.{quote_ident(self.table)} BY NAME SELECT * FROM __pitstop_batch")
        if self._hash_columns is None:
            self._hash_columns = table_columns(tx, self.table)
            self._hash_defaults = constant_defaults(column_defaults(tx, self.table))
        hashed = row_hash(self._hash_columns, set(batch.rows.column_names), self._hash_defaults)
        tx.execute(
            f"INSERT INTO pitstop.sink_rows SELECT ?, ?, ?, {hashed} FROM __pitstop_batch",
            [self.run_id, self.branch, batch.batch_id],
        )

    def upsert(self, tx: duckdb.DuckDBPyConnection, batch: Batch) -> None:
        raise AssertionError("an appending sink has no keys")  # UpsertSink's

    def finalize(self, tx: duckdb.DuckDBPyConnection, batch: Batch, in_batch: bool) -> None:
        raise AssertionError("an appending sink writes no early rows")  # UpsertSink's

    def record(self, tx: duckdb.DuckDBPyConnection, batch: Batch) -> None:
        """Step 3: the batch's bookkeeping row, in the transaction that wrote its rows."""
        tx.execute(
            "INSERT INTO pitstop.sink_batches VALUES (?, ?, ?, ?, ?, ?)",
            [self.job, self.run_id, self.branch, batch.batch_id, batch.counted, now()],
        )
