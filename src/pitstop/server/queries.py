"""A session's queries on DuckDB (the ``query`` route, and the queries of COPY and DECLARE): each
translated by the catalog emulation (:mod:`pitstop.server.pgcatalog`), checked to be a single
SELECT (:func:`one_query`), and run in a transaction begun ``READ ONLY`` on a DuckDB connection of
the session's own: whatever a query holds, it cannot write.

A small result (fewer than :data:`FIRST_ROWS` rows) is read whole, its transaction ended at once,
and kept for the server's sessions until the catalog changes (:mod:`pitstop.server.results`); a
larger one stays open in DuckDB, read on as tuples or Arrow batches while the connection sends it.
``snapshot_state(...)`` reads a snapshot's state as Arrow tables registered for the query
(:mod:`pitstop.snapshots.state`).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from pitstop.errors import PitstopError
from pitstop.server import paramtypes, pgsemantics, sqlstate
from pitstop.server.outcome import Outcome
from pitstop.server.params import SessionParameters
from pitstop.server.pgtypes import NUMERIC, Column, PgType, pg_type_of
from pitstop.server.results import SharedResults
from pitstop.server.routing import Statement
from pitstop.server.sqlstate import WireError
from pitstop.server.timeout import StatementTimeout
from pitstop.snapshots import state

if TYPE_CHECKING:
    from pitstop.manager import Manager
    from pitstop.server.pgcatalog import PgCatalog

log = logging.getLogger(__name__)
FETCH_ROWS = 2000
FIRST_ROWS = 100
"""A result of fewer rows is read at once and encoded value by value (its transaction ends before
it is sent); a larger one goes on as Arrow batches, whose set-up costs about what 100 rows do."""
ARROW_ROWS = 65_536
# DuckDB warns that Arrow output of an executed query copies the rows once: measured, the copy is a
# small part of encoding them (see server/bulk.py), and the query must run on the session's cursor.
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", category=UserWarning)
MAX_CHECKED = 1000
"""Queries a session keeps checked (``SessionQueries._checked``); a full store is emptied and fills
again."""


class SessionQueries:
    """One session's queries: its DuckDB connection, and the read-only transaction of the query open
    on it. Called on the session's thread, but for :meth:`interrupt`."""

    def __init__(
        self,
        manager: Manager,
        pgcatalog: PgCatalog,
        user: str,
        parameters: SessionParameters,
        results: SharedResults,
        timeout: StatementTimeout,
    ) -> None:
        self.manager = manager
        self.pgcatalog = pgcatalog
        self.user = user
        self.parameters = parameters
        self.results = results
        """Small query results kept until the next catalog commit, shared by a server's sessions."""
        self.timeout = timeout
        self._cursor: duckdb.DuckDBPyConnection | None = None
        self.backend_pid = 0
        """The process id the client was given (BackendKeyData): ``pg_backend_pid()``."""
        self._query_open = False
        self._registered: list[str] = []  # snapshot_state tables of the query open now
        self._open: Outcome | None = None
        self._reader: pa.RecordBatchReader | None = None
        self._statements: dict[str, duckdb.Statement] = {}
        self._token = 0

    def interrupt(self) -> None:
        """Interrupt the DuckDB query in progress, if there is one (from any thread)."""
        cursor = self._cursor
        if cursor is not None and self._query_open:
            try:
                cursor.interrupt()
            except duckdb.Error:
                log.debug("interrupt failed", exc_info=True)

    def close(self) -> None:
        self.end_query()
        if self._cursor is not None:
            try:
                self.manager.catalog.disconnect(self._cursor)
            except duckdb.Error:
                log.debug("closing a client cursor", exc_info=True)
            self._cursor = None

    def cursor(self) -> duckdb.DuckDBPyConnection:
        if self._cursor is None:
            self._cursor = self.connect()
        return self._cursor

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection of the catalog's, set up for this client's queries (the session's
        own, and each SQL cursor's)."""
        connection = self.manager.catalog.connect()
        try:
            self.pgcatalog.prepare(connection, self.user, self.backend_pid, self.parameters.values)
            pgsemantics.prepare(connection)
            _set_zone(connection, self.parameters.zone)
        except BaseException:
            self.release(connection)
            raise
        return connection

    def release(self, connection: duckdb.DuckDBPyConnection) -> None:
        """Close a connection of :meth:`connect` (its transaction, if any, is rolled back)."""
        try:
            self.manager.catalog.disconnect(connection)
        except duckdb.Error:
            log.debug("closing a client connection", exc_info=True)

    def describe(
        self, stmt: Statement, query: str, declared: list[int]
    ) -> tuple[list[int], tuple[Column, ...]]:
        """The parameter types and result columns of a query, without running it: parameters the
        client left untyped get the type they are cast to, or of what they are compared with
        (:mod:`pitstop.server.paramtypes`), and the query runs with NULL parameters under
        ``LIMIT 0``."""
        declared = paramtypes.from_casts(stmt.text, declared)
        parameters = paramtypes.of_oids(declared)
        one_query(self.translate(stmt, stmt.text, parameters).sql)
        cursor = self.cursor()
        self.detach_open()
        text, registered = self.state_tables(stmt.text, stmt, query)
        translation = self.translate(stmt, text, parameters)
        sql = translation.sql
        try:
            types = paramtypes.infer(cursor, sql, declared)
        except duckdb.Error as exc:
            state.forget(cursor, registered)
            raise sqlstate.from_duckdb(exc) from exc
        cursor.execute("BEGIN TRANSACTION READ ONLY")
        try:
            nulls = [None] * stmt.param_count
            try:
                rel = cursor.execute(f"SELECT * FROM ({sql}) AS q LIMIT 0", nulls)
            except duckdb.ParserException:
                rel = cursor.execute(sql, nulls)
            return types, result_columns(rel.description, translation)
        except duckdb.Error as exc:
            raise sqlstate.from_duckdb(exc) from exc
        finally:
            cursor.execute("ROLLBACK")
            state.forget(cursor, registered)

    def _checked(self, sql: str) -> duckdb.Statement:
        """``one_query(sql)``, kept by this session (a dashboard sends the same queries again; the
        parse is a third of a small query's time). A session's statements run on its one thread."""
        statement = self._statements.get(sql)
        if statement is None:
            statement = one_query(sql)
            if len(self._statements) >= MAX_CHECKED:
                self._statements.clear()
            self._statements[sql] = statement
        return statement

    def state_tables(
        self, sql: str, stmt: Statement, query: str, connection: duckdb.DuckDBPyConnection | None = None
    ) -> tuple[str, list[str]]:
        """``sql`` with its ``snapshot_state(...)`` calls replaced by tables registered on this
        session's cursor (or ``connection``), and their names (:mod:`pitstop.snapshots.state`:
        pitstop reads the snapshot's Parquet, DuckDB, whose file access is off, sees only the Arrow
        tables)."""
        if not state.mentions(sql):
            return sql, []
        try:
            sql, tables = state.resolve(sql, self.manager.catalog)
        except PitstopError as err:
            raise WireError(sqlstate.code_of(err), err.message, stmt.offset + 1) from err
        return sql, state.register(connection or self.cursor(), tables)

    def translate(
        self, stmt: Statement, text: str, parameters: tuple[str | None, ...] = ()
    ) -> pgsemantics.Translation:
        """``text`` (the statement's, or it with state tables in) as DuckDB SQL with PostgreSQL's
        semantics, typed by the sink tables' columns (read on the catalog's own connection: this
        session's may hold a suspended portal's rows) and by its ``parameters``' types
        (:func:`paramtypes.of_values`)."""
        catalog = self.manager.catalog
        # The sink tables' columns change only by a catalog commit (a job's sink created or
        # evolved): read once per change, not by every query of every client.
        schema = pgsemantics.schema_of(
            text,
            lambda: catalog.cached_for("sink schema", lambda: pgsemantics.read_schema(catalog.cursor()), 1.0),
        )
        try:
            return self.pgcatalog.translate_query(text, schema, parameters)
        except pgsemantics.PgError as exc:
            position = stmt.offset + exc.position if exc.position else None
            raise WireError(exc.code, exc.message, position) from exc

    def run(self, stmt: Statement, query: str, params: list[Any]) -> Outcome:
        parameters = paramtypes.of_values(params) if params else ()
        if state.mentions(stmt.text):  # before translate, which makes calls in FROM subqueries
            one_query(self.translate(stmt, stmt.text, parameters).sql)  # the client's text is one query
            self.detach_open()  # ends the last query, whose tables go with it
            text, self._registered = self.state_tables(stmt.text, stmt, query)
            translation = self.translate(stmt, text, parameters)
        else:
            translation = self.translate(stmt, stmt.text, parameters)
        sql = translation.sql
        statement = one_query(sql) if self._registered else self._checked(sql)
        # A state table is read when the query runs, not from the catalog: never kept.
        key = None if self._registered else self.results.key(sql, params, self.user, self.parameters.values)
        generation = self.manager.catalog.generation  # read before the transaction begins
        kept = self.results.get(key, generation)
        if kept is not None:
            return Outcome("SELECT", kept.columns, iter(kept.rows))
        cursor = self.cursor()
        if not self._registered:  # (with state tables, the last query was ended above)
            self.detach_open()
        cursor.execute("BEGIN TRANSACTION READ ONLY")
        self._query_open = True
        try:
            rel = cursor.execute(statement, params) if params else cursor.execute(statement)
            description = rel.description or []
            columns = result_columns(description, translation)
            head = cursor.fetchmany(FIRST_ROWS) if description else []
        except BaseException:
            self.end_query()
            raise
        if len(head) < FIRST_ROWS:  # the whole result: its transaction can end now
            self.end_query()
            self.results.keep(cursor, key, generation, columns, head)
            return Outcome("SELECT", columns, iter(head))
        self._token += 1
        token = self._token
        outcome = Outcome(
            "SELECT",
            columns,
            iter(head),
            more=lambda: self._fetch(cursor, token),
            arrow=lambda: self._batches(cursor, token),
            duckdb_types=tuple(str(d[1]) for d in description),
        )
        self._open = outcome
        return outcome

    def detach_open(self) -> None:
        """A portal suspended half-way (JDBC's fetch size) still reads from this session's DuckDB
        cursor: keep its remaining rows in memory before the cursor runs another query."""
        open_outcome, self._open = self._open, None
        if open_outcome is not None and self._query_open:
            if open_outcome.batches is not None:
                open_outcome.batches = iter(list(open_outcome.batches))
            elif open_outcome.more is not None:
                open_outcome.rows = iter(list(open_outcome.rows) + list(open_outcome.more()))
                open_outcome.more = open_outcome.arrow = None
        self.end_query()

    def _fetch(self, cursor: duckdb.DuckDBPyConnection, token: int) -> Iterator[tuple[Any, ...]]:
        try:
            while True:
                try:
                    chunk = cursor.fetchmany(FETCH_ROWS)
                except duckdb.Error as exc:
                    raise self.timeout.said(sqlstate.from_duckdb(exc)) from exc
                if not chunk:
                    return
                yield from chunk
        finally:
            if token == self._token:  # not a later query's transaction (a dropped portal's rows)
                self.timeout.stop()
                self.end_query()

    def _batches(self, cursor: duckdb.DuckDBPyConnection, token: int) -> Iterator[pa.RecordBatch]:
        try:
            try:
                reader = cursor.to_arrow_reader(ARROW_ROWS)
            except duckdb.Error as exc:
                raise sqlstate.from_duckdb(exc) from exc
            if reader is None:
                return
            self._reader = reader
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
                except duckdb.Error as exc:
                    raise self.timeout.said(sqlstate.from_duckdb(exc)) from exc
                except pa.ArrowException as exc:  # DuckDB's error, passed on by Arrow's stream
                    raise self.timeout.said(sqlstate.from_arrow(exc)) from exc
                yield batch
        finally:
            if token == self._token:
                self.timeout.stop()
                self.end_query()

    def end_query(self) -> None:
        """End the read-only transaction of the last query (its rows are no longer wanted).

        An Arrow reader left half-read (a portal closed early, a client gone) holds DuckDB's
        result open, and DuckDB refuses the ROLLBACK until it is closed: it is closed first."""
        self._open = None
        reader, self._reader = self._reader, None
        if reader is not None:
            try:
                reader.close()
            except (duckdb.Error, pa.ArrowException):
                log.debug("closing a query's Arrow reader", exc_info=True)
        if self._query_open and self._cursor is not None:
            self._query_open = False
            try:
                self._cursor.execute("ROLLBACK")
            except duckdb.Error:
                log.warning("could not end a read-only query's transaction", exc_info=True)
        registered, self._registered = self._registered, []
        if registered and self._cursor is not None:
            state.forget(self._cursor, registered)

    def sync_parameters(self) -> None:
        """``current_setting()`` and ``pg_settings`` follow SET and RESET."""
        if self._cursor is not None:
            self.detach_open()
            self.pgcatalog.set_parameters(self._cursor, self.parameters.values)
            _set_zone(self._cursor, self.parameters.zone)


def _set_zone(connection: duckdb.DuckDBPyConnection, zone: str) -> None:
    """The session's TimeZone (a checked name of the time zone database) in its DuckDB
    connection: timestamps with a zone are computed in it (``::date``, ``date_trunc``, a
    ``timestamp`` compared with a ``timestamptz``), as PostgreSQL computes them."""
    connection.execute(f"SET TimeZone = '{zone}'")


def one_query(sql: str) -> duckdb.Statement:
    """``sql`` as the one SELECT statement DuckDB will run, or a WireError.

    The statement was cut from the client's string by pitstop's splitter; DuckDB's own parser has
    the last word on where a statement ends (escape strings, dollar quotes and comments are not
    read quite alike by the two), and a second statement smuggled past the splitter — ``...;
    COMMIT; DROP TABLE ...`` — would end the read-only transaction and run. So DuckDB parses it
    here, and only a single SELECT (WITH, VALUES and TABLE are SELECTs to DuckDB) goes on.
    """
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise sqlstate.from_duckdb(exc) from exc
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        raise WireError(
            sqlstate.SYNTAX_ERROR,
            "a query must be a single SELECT (or WITH, VALUES, TABLE); send other statements one at a time",
        )
    return statements[0]


def result_columns(description: Any, translation: pgsemantics.Translation) -> tuple[Column, ...]:
    """The result columns DuckDB describes, with PostgreSQL's types; a numeric text column
    (:attr:`pgsemantics.Translation.numeric_columns`) is numeric; a DECIMAL(p,s) that PostgreSQL
    would describe unconstrained (:attr:`pgsemantics.Translation.declared`) is numeric, typmod -1."""
    numeric, described, declared = translation.numeric_columns, translation.column_types, translation.declared
    columns = []
    for i, (name, kind, *_) in enumerate(description or []):
        pgtype = _pg_type(str(kind), i in numeric, described.get(i))
        if pgtype.oid == NUMERIC.oid and declared is not None and i not in declared:
            pgtype = NUMERIC
        columns.append(Column(name, pgtype))
    return tuple(columns)


def _pg_type(kind: str, numeric: bool, described: PgType | None) -> PgType:
    if kind == "VARCHAR" and numeric:
        return NUMERIC
    if kind == "VARCHAR" and described is not None:
        return described
    found = pg_type_of(kind)
    if described is not None and described.oid == found.oid:  # timestamp(0): its typmod
        return described
    return found
