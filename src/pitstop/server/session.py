"""One client's session: what each statement a client sends means, and its outcome.

A statement goes one of these ways:

1. pitstop's own statements (``CREATE JOB``, ``DROP JOB ... WITH SNAPSHOT``, ``SHOW JOBS``,
   ``AWAIT JOB``, ``EXPLAIN``...) go to the executor, the one way into the manager that the shell
   and scripts use too; its messages reach the client as NoticeResponses;
2. queries (``SELECT``, ``WITH``, ``VALUES``) run on DuckDB over the sink tables and pitstop's
   catalog, through the catalog emulation that answers what PostgreSQL clients ask of
   ``pg_catalog`` and ``information_schema``, always in a transaction begun ``READ ONLY``:
   whatever a query holds, it cannot write;
3. PostgreSQL session commands (``SET``/``SHOW`` of parameters, ``BEGIN``/``COMMIT``,
   ``DISCARD``, ``DEALLOCATE``) are answered here as a PostgreSQL server would;
4. cursors (``DECLARE``, ``FETCH``, ``MOVE``, ``CLOSE``) read a query a few rows at a time
   (:mod:`pitstop.server.cursors`), and ``COPY ... TO STDOUT`` sends a query's rows as text or
   CSV (:mod:`pitstop.server.copyout`);
5. writes to tables (``INSERT``, ``UPDATE``, ``COPY ... FROM``...) are refused with what to do
   instead.

The session knows nothing of sockets: the connection (``connection.py``) turns its outcomes into
messages. Every method may block (a statement runs on the connection's own thread).
"""

from __future__ import annotations

import logging
import re
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from pitstop.errors import PermissionDeniedError, PitstopError
from pitstop.executor import SESSION_SETTINGS, Executor, Result, positioned
from pitstop.server import copyout, cursors, paramtypes, pgsemantics, pitstopsql, sqlstate
from pitstop.server.cursors import SqlCursor, SqlCursors
from pitstop.server.outcome import Notice, Outcome
from pitstop.server.params import SessionParameters, canonical, milliseconds
from pitstop.server.pgtypes import NUMERIC, TEXT, Column, pg_type_of
from pitstop.server.results import SharedResults
from pitstop.server.routing import (
    Statement,
    error_position,
    inner_statement,
    leading_words,
    strip_comments,
)
from pitstop.server.sqlstate import WireError
from pitstop.server.timeout import StatementTimeout
from pitstop.server.transactions import TransactionBlock
from pitstop.snapshots import state
from pitstop.sql import nodes
from pitstop.sql.parser import ParsedStatement

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
MAX_PARSED = 1000


class Session:
    """One client's statements, on one manager. ``cancel()`` may be called from another thread."""

    def __init__(
        self,
        manager: Manager,
        pgcatalog: PgCatalog,
        user: str,
        role: str,
        parameters: SessionParameters,
        allowed: Callable[[str, Any], bool],
        results: SharedResults | None = None,
    ) -> None:
        self.manager = manager
        self.pgcatalog = pgcatalog
        self.results = results if results is not None else SharedResults()
        """Small query results kept until the next catalog commit, shared by a server's sessions."""
        self.user = user
        self.role = role
        self.parameters = parameters
        self._allowed = allowed
        self.executor = Executor(manager)
        self._cancel = threading.Event()
        self.client_gone: Callable[[], bool] = lambda: False
        """Set by the connection: whether the client has hung up (a wait then stops, as on cancel)."""
        self.deallocate: Callable[[str | None], bool] = lambda name: False
        """Set by the connection: forget a prepared statement (None: all of them); whether it was there."""
        self.executor.cancelled = self._stop_waiting
        self._cursor: duckdb.DuckDBPyConnection | None = None
        self.backend_pid = 0
        """The process id the client was given (BackendKeyData): ``pg_backend_pid()``."""
        self._query_open = False
        self._registered: list[str] = []  # snapshot_state tables of the query open now
        self._open: Outcome | None = None
        self._reader: pa.RecordBatchReader | None = None
        self._statements: dict[str, duckdb.Statement] = {}
        self._token = 0
        self.timeout = StatementTimeout(self.cancel)
        self.sql_cursors = SqlCursors()
        self.block = TransactionBlock(self.sql_cursors.end_transaction)

    @property
    def transaction(self) -> str:
        """The transaction block's status: I idle, T in a block, E failed block (PostgreSQL's letters)."""
        return self.block.status

    # -- lifecycle ---------------------------------------------------------------------------------
    def _stop_waiting(self) -> bool:
        return self._cancel.is_set() or self.client_gone()

    def cancel(self) -> None:
        """Stop waiting (AWAIT JOB, the drain of DROP JOB ... WITH SNAPSHOT) or interrupt the
        DuckDB query of the statement in progress; jobs go on."""
        self._cancel.set()
        cursor = self._cursor
        if cursor is not None and self._query_open:
            try:
                cursor.interrupt()
            except duckdb.Error:
                log.debug("interrupt failed", exc_info=True)
        self.sql_cursors.interrupt()

    def close(self) -> None:
        self._cancel.set()
        self.sql_cursors.close(None)
        self.end_query()
        if self._cursor is not None:
            try:
                self.manager.catalog.disconnect(self._cursor)
            except duckdb.Error:
                log.debug("closing a client cursor", exc_info=True)
            self._cursor = None

    def cursor(self) -> duckdb.DuckDBPyConnection:
        if self._cursor is None:
            self._cursor = self._connect()
        return self._cursor

    def _connect(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection of the catalog's, set up for this client's queries (the session's
        own, and each SQL cursor's)."""
        connection = self.manager.catalog.connect()
        try:
            self.pgcatalog.prepare(connection, self.user, self.backend_pid, self.parameters.values)
            pgsemantics.prepare(connection)
        except BaseException:
            self._release(connection)
            raise
        return connection

    def _release(self, connection: duckdb.DuckDBPyConnection) -> None:
        """Close a connection of :meth:`_connect` (its transaction, if any, is rolled back)."""
        try:
            self.manager.catalog.disconnect(connection)
        except duckdb.Error:
            log.debug("closing a client connection", exc_info=True)

    # -- running ------------------------------------------------------------------------------------
    def run(self, stmt: Statement, query: str, params: list[Any] | None = None) -> Outcome:
        """Run one statement; WireError on any failure (the transaction block, if any, fails)."""
        self._cancel.clear()
        self.block.refuse_if_failed(stmt)
        self.timeout.start(self.parameters.values.get("statement_timeout", "0"))
        try:
            outcome = self._ROUTES[stmt.route](self, stmt, query, params or [])
        except (WireError, PitstopError, duckdb.Error) as exc:
            self.timeout.stop()
            self.block.fail()
            if isinstance(exc, WireError):
                raise self.timeout.said(exc) from exc.__cause__
            if isinstance(exc, PitstopError):
                said = WireError(sqlstate.code_of(exc), exc.message, error_position(exc, stmt, query))
            else:
                said = sqlstate.from_duckdb(exc)
            raise self.timeout.said(said) from exc
        if outcome.more is None and outcome.arrow is None:
            self.timeout.stop()  # (a result still to be read keeps it until the query ends)
        return outcome

    def describe(
        self, stmt: Statement, query: str, declared: list[int]
    ) -> tuple[list[int], tuple[Column, ...] | None]:
        """The parameter types and the columns a statement will return, without running anything
        that changes state.

        Queries run with NULL parameters under ``LIMIT 0`` (parameters the client left untyped
        get the type they are cast to, or of what they are compared with: :mod:`paramtypes`);
        pitstop's read-only statements (SHOW, DESCRIBE, EXPLAIN) run; everything else returns no
        rows.
        """
        texts = [t or TEXT.oid for t in declared]
        if stmt.route == "query":
            declared = paramtypes.from_casts(stmt.text, declared)
            one_query(self._translate(stmt, stmt.text).sql)
            cursor = self.cursor()
            self._detach_open()
            text, registered = self._state_tables(stmt.text, stmt, query)
            translation = self._translate(stmt, text)
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
                return types, _columns(rel.description, translation)
            except duckdb.Error as exc:
                raise sqlstate.from_duckdb(exc) from exc
            finally:
                cursor.execute("ROLLBACK")
                state.forget(cursor, registered)
        if stmt.route == "show":  # SHOW of a parameter changes nothing: its own answer describes it
            return texts, self._show(stmt, query, []).columns
        if stmt.route == "cursor":  # DECLARE: its query's parameters; FETCH: the cursor's rows
            if stmt.words[0] == "DECLARE":
                inner = inner_statement(stmt, cursors.parse_declare(stmt.text).query_start)
                return (self.describe(inner, query, declared)[0] if inner.route == "query" else texts), None
            if stmt.words[0] == "FETCH":
                return texts, self.sql_cursors.get(cursors.parse_fetch(stmt.text).name).columns
            return texts, None
        if stmt.route == "pitstop":
            try:
                parsed = pitstopsql.parse(stmt)
                if isinstance(parsed.node, pitstopsql.READ_ONLY_NODES):
                    outcome = pitstopsql.executor_outcome(parsed, self._execute(parsed))
                    return texts, outcome.columns
            except PitstopError as err:
                raise WireError(sqlstate.code_of(err), err.message, error_position(err, stmt, query)) from err
        return texts, None

    # -- the four ways --------------------------------------------------------------------------------
    def _checked(self, sql: str) -> duckdb.Statement:
        """``one_query(sql)``, kept by this session (a dashboard sends the same queries again; the
        parse is a third of a small query's time). A session's statements run on its one thread."""
        statement = self._statements.get(sql)
        if statement is None:
            statement = one_query(sql)
            if len(self._statements) >= MAX_PARSED:
                self._statements.clear()
            self._statements[sql] = statement
        return statement

    def _state_tables(
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

    def _translate(self, stmt: Statement, text: str) -> pgsemantics.Translation:
        """``text`` (the statement's, or it with state tables in) as DuckDB SQL with PostgreSQL's
        semantics, typed by the sink tables' columns (read on the catalog's own connection: this
        session's may hold a suspended portal's rows)."""
        schema = pgsemantics.schema_of(self.manager.catalog.cursor(), text)
        try:
            return self.pgcatalog.translate_query(text, schema)
        except pgsemantics.PgError as exc:
            position = stmt.offset + exc.position if exc.position else None
            raise WireError(exc.code, exc.message, position) from exc

    def _query(self, stmt: Statement, query: str, params: list[Any]) -> Outcome:
        if state.mentions(stmt.text):  # before translate, which makes calls in FROM subqueries
            one_query(self._translate(stmt, stmt.text).sql)  # the client's text is one query
            self._detach_open()  # ends the last query, whose tables go with it
            text, self._registered = self._state_tables(stmt.text, stmt, query)
            translation = self._translate(stmt, text)
        else:
            translation = self._translate(stmt, stmt.text)
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
            self._detach_open()
        cursor.execute("BEGIN TRANSACTION READ ONLY")
        self._query_open = True
        try:
            rel = cursor.execute(statement, params) if params else cursor.execute(statement)
            description = rel.description or []
            columns = _columns(description, translation)
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

    def _detach_open(self) -> None:
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

    def _execute(self, parsed: ParsedStatement) -> Result:
        if not self._allowed(self.role, parsed.node):
            raise PermissionDeniedError(
                f"user '{self.user}' has the role '{self.role}', which may not run "
                f"{pitstopsql.statement_name(parsed)}; ask an admin (pitstop user add NAME --role admin)"
            )
        try:
            return self.executor.execute(parsed)
        except PitstopError as err:
            raise positioned(err, parsed) from None

    def _pitstop(self, stmt: Statement, query: str, params: list[Any]) -> Outcome:
        parsed = pitstopsql.parse(stmt)
        outcome = pitstopsql.executor_outcome(parsed, self._execute(parsed))
        if self.transaction == "T" and not isinstance(parsed.node, pitstopsql.READ_ONLY_NODES):
            what = pitstopsql.statement_name(parsed)
            if not isinstance(parsed.node, nodes.SetOption | nodes.AwaitJob):
                outcome.notices.append(Notice(pitstopsql.NOT_TRANSACTIONAL.format(what=what), "WARNING"))
        return outcome

    def _transaction(self, stmt: Statement, query: str, params: list[Any]) -> Outcome:
        return self.block.run(stmt)

    def _set(self, stmt: Statement, query: str, params: list[Any]) -> Outcome:
        match = re.match(
            r"\s*(SET|RESET)\s+(?:(?:SESSION|LOCAL)\s+(?!CHARACTERISTICS|AUTHORIZATION))?(.*)$",
            strip_comments(stmt.text),
            re.I | re.S,
        )
        assert match is not None
        verb, rest = match.group(1).upper(), match.group(2).strip()
        # pitstop's own settings: SET 'trigger_ms' = '200'
        key = re.match(r"'([^']*)'|([A-Za-z_][A-Za-z_0-9]*)", rest)
        if verb == "SET" and key and (key.group(1) is not None or key.group(2) in SESSION_SETTINGS):
            return self._pitstop(stmt, query, params)
        if re.match(r"(SESSION\s+CHARACTERISTICS|TRANSACTION|ROLE|SESSION\s+AUTHORIZATION)\b", rest, re.I):
            return Outcome("SET")
        if verb == "RESET":
            name = rest.strip().rstrip(";")
            if name.upper() == "ALL":
                changes = [self.parameters.show(p.name) for p in self.parameters.reset_all()]
                self._sync_parameters()
                return Outcome("RESET", parameter_changes=changes)
            return self._apply(name, None, "RESET")
        zone = re.match(r"TIME\s+ZONE\s+(.*)$", rest, re.I | re.S)
        if zone:
            return self._apply("timezone", _value(zone.group(1)), "SET")
        names = re.match(r"NAMES\s+(.*)$", rest, re.I | re.S)
        if names:
            return self._apply("client_encoding", _value(names.group(1)), "SET")
        assign = re.match(r"([A-Za-z_][A-Za-z_0-9.]*|\"[^\"]+\")\s*(?:=|\bTO\b)\s*(.*)$", rest, re.I | re.S)
        if not assign:
            raise WireError(
                sqlstate.SYNTAX_ERROR, f"syntax error in SET: {stmt.text.strip()}", stmt.offset + 1
            )
        return self._apply(assign.group(1).strip('"'), _value(assign.group(2)), "SET")

    def _apply(self, name: str, value: str | None, tag: str) -> Outcome:
        if value is not None and canonical(name) == "statement_timeout":
            try:
                milliseconds(name, value)
            except ValueError as exc:
                raise WireError(sqlstate.INVALID_PARAMETER_VALUE, str(exc)) from None
        try:
            changed = self.parameters.set(name, value)
        except KeyError:
            raise WireError(
                sqlstate.UNDEFINED_OBJECT, f'unrecognized configuration parameter "{name}"'
            ) from None
        except ValueError as exc:
            raise WireError("55P02", str(exc)) from None
        changes = [self.parameters.show(changed.name)] if changed else []
        self._sync_parameters()
        return Outcome(tag, parameter_changes=changes)

    def _sync_parameters(self) -> None:
        """``current_setting()`` and ``pg_settings`` follow SET and RESET."""
        if self._cursor is not None:
            self._detach_open()
            self.pgcatalog.set_parameters(self._cursor, self.parameters.values)

    def _show(self, stmt: Statement, query: str, params: list[Any]) -> Outcome:
        name = _show_name(stmt.text)
        if name.lower() == "all":
            rows = self.parameters.all()
            cols = (Column("name", TEXT), Column("setting", TEXT), Column("description", TEXT))
            return Outcome("SHOW", cols, iter(rows), count=len(rows))
        try:
            column, value = self.parameters.show(name)
        except KeyError:
            raise WireError(
                sqlstate.UNDEFINED_OBJECT, f'unrecognized configuration parameter "{name}"', stmt.offset + 1
            ) from None
        return Outcome("SHOW", (Column(column, TEXT),), iter([(value,)]), count=1)

    def _session(self, stmt: Statement, query: str, params: list[Any]) -> Outcome:
        word = stmt.words[0]
        if word == "DEALLOCATE":  # DEALLOCATE [PREPARE] name | ALL, as PostgreSQL does it
            found = re.match(
                r'\s*DEALLOCATE\s+(?:PREPARE\s+)?(?:"((?:[^"]|"")*)"|([A-Za-z_][\w$]*))\s*;?\s*$',
                strip_comments(stmt.text),
                re.I,
            )
            if found is None:
                raise WireError(sqlstate.SYNTAX_ERROR, "DEALLOCATE takes a prepared statement's name or ALL")
            quoted, bare = found.groups()
            if quoted is None and bare.upper() == "ALL":
                self.deallocate(None)
                return Outcome("DEALLOCATE ALL")
            name = quoted.replace('""', '"') if quoted is not None else bare.lower()
            if not self.deallocate(name):
                raise WireError(
                    sqlstate.INVALID_PREPARED_STATEMENT, f'prepared statement "{name}" does not exist'
                )
            return Outcome("DEALLOCATE")
        if word == "DISCARD":
            what = stmt.words[1] if len(stmt.words) > 1 else ""
            if what == "ALL":  # as PostgreSQL: prepared statements go and settings are reset
                if self.transaction != "I":
                    raise WireError(
                        sqlstate.ACTIVE_TRANSACTION, "DISCARD ALL cannot run inside a transaction block"
                    )
                self.deallocate(None)
                self.sql_cursors.close(None)
                changes = [self.parameters.show(p.name) for p in self.parameters.reset_all()]
                self._sync_parameters()
                return Outcome("DISCARD ALL", parameter_changes=changes)
            return Outcome(f"DISCARD {what}".strip())
        return Outcome(word)

    # -- cursors --------------------------------------------------------------------------------------
    def cursor_columns(self, name: str) -> tuple[Column, ...] | None:
        """The rows of the SQL cursor ``name`` (a Describe of that portal), None if there is none."""
        cursor = self.sql_cursors.open.get(name)
        return cursor.columns if cursor is not None else None

    def _sql_cursor(self, stmt: Statement, query: str, params: list[Any]) -> Outcome:
        word = stmt.words[0]
        if word == "DECLARE":
            return self._declare(stmt, query, params)
        if word == "CLOSE":
            name = cursors.close_target(stmt.text)
            self.sql_cursors.close(name)
            return Outcome("CLOSE CURSOR" if name is not None else "CLOSE CURSOR ALL")
        fetch = cursors.parse_fetch(stmt.text)
        columns = self.sql_cursors.get(fetch.name).columns
        rows = self.sql_cursors.read(fetch)
        if fetch.verb == "MOVE":
            return Outcome(f"MOVE {len(rows)}")
        return Outcome("FETCH", columns, iter(rows))

    def _declare(self, stmt: Statement, query: str, params: list[Any]) -> Outcome:
        declare = cursors.parse_declare(stmt.text)
        if not declare.hold and self.transaction == "I":
            raise WireError(
                sqlstate.NO_ACTIVE_TRANSACTION,
                "DECLARE CURSOR can only be used in transaction blocks",
                stmt.offset + 1,
                hint=f'BEGIN a transaction first, or declare the cursor "{declare.name}" WITH HOLD',
            )
        self.sql_cursors.check_new(declare.name)
        inner = inner_statement(stmt, declare.query_start)
        if inner.route != "query":
            what = " ".join(inner.words[:2]) or "nothing"
            raise WireError(
                sqlstate.SYNTAX_ERROR,
                f'cursor "{declare.name}" must be declared FOR a query (SELECT, WITH, VALUES or TABLE), '
                f"not {what}",
                inner.offset + 1,
                hint="run other statements on their own (pitstop's tables are written by jobs)",
            )
        if state.mentions(inner.text):  # the client's text is one query (see _query)
            one_query(self._translate(inner, inner.text).sql)
        connection = self._connect()
        try:
            text, _ = self._state_tables(inner.text, inner, query, connection)
            translation = self._translate(inner, text)
            statement = one_query(translation.sql)
            connection.execute("BEGIN TRANSACTION READ ONLY")
            with self.sql_cursors.running(connection):
                rel = connection.execute(statement, params) if params else connection.execute(statement)
            columns = _columns(rel.description, translation)
        except BaseException:
            self._release(connection)
            raise
        cursor = SqlCursor(
            declare.name, columns, declare.hold, self.transaction != "I", connection, self._release
        )
        self.sql_cursors.add(cursor)
        if self.transaction == "I":  # WITH HOLD outside a block: its own transaction ends now
            cursor.hold_rows()
        return Outcome("DECLARE CURSOR")

    def _copy(self, stmt: Statement, query: str, params: list[Any]) -> Outcome:
        """COPY ... TO STDOUT: the query's rows, as the lines of :mod:`copyout`."""
        copy = copyout.parse(stmt.text)
        if copy.query_start is None:  # COPY table: a query of pitstop's making
            words = leading_words(copy.query)
            inner = Statement(copy.query, stmt.offset, stmt.line, stmt.col, "query", words)
        else:
            inner = inner_statement(stmt, copy.query_start, copy.query_start + len(copy.query))
        if inner.route != "query":
            what = " ".join(inner.words[:2]) or "nothing"
            raise WireError(
                sqlstate.SYNTAX_ERROR,
                f"COPY (...) TO STDOUT copies a query (SELECT, WITH, VALUES or TABLE), not {what}",
                inner.offset + 1,
                hint="pitstop's tables are written by jobs" if inner.route == "write" else None,
            )
        result = self._query(inner, query, params)
        assert result.columns is not None
        return Outcome("COPY", copy=copyout.Lines(copy, result.columns, result.every_row()))

    def _write(self, stmt: Statement, query: str, params: list[Any]) -> Outcome:
        word = stmt.words[0]
        raise WireError(
            sqlstate.READ_ONLY_TRANSACTION,
            f"{word} is not accepted: pitstop's sink tables are written by jobs and its catalog by "
            "pitstop's statements",
            stmt.offset + 1,
            hint="to fill a table, create a job: CREATE JOB j AS INSERT INTO sink SELECT ... FROM source",
        )

    def _empty(self, stmt: Statement, query: str, params: list[Any]) -> Outcome:
        return Outcome("EMPTY")

    _ROUTES: dict[str, Callable[[Session, Statement, str, list[Any]], Outcome]] = {
        "query": _query,
        "pitstop": _pitstop,
        "tx": _transaction,
        "set": _set,
        "show": _show,
        "session": _session,
        "cursor": _sql_cursor,
        "copy": _copy,
        "write": _write,
        "empty": _empty,
    }


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


def _columns(description: Any, translation: pgsemantics.Translation) -> tuple[Column, ...]:
    """The result columns DuckDB describes, with PostgreSQL's types; a numeric text column
    (:attr:`pgsemantics.Translation.numeric_columns`) is numeric."""
    numeric = translation.numeric_columns
    return tuple(
        Column(name, NUMERIC if i in numeric and str(kind) == "VARCHAR" else pg_type_of(str(kind)))
        for i, (name, kind, *_) in enumerate(description or [])
    )


def _show_name(text: str) -> str:
    rest = re.sub(r"^\s*SHOW\s+", "", strip_comments(text), flags=re.I)
    return rest.strip().rstrip(";").strip().strip('"')


def _value(text: str) -> str | None:
    """A SET value: quotes removed, lists joined as PostgreSQL prints them; DEFAULT -> None."""
    text = text.strip().rstrip(";").strip()
    if text.upper() in ("DEFAULT", "LOCAL"):
        return None
    parts = re.findall(r"'((?:[^']|'')*)'|\"([^\"]*)\"|([^,\s]+)", text)
    values = []
    for quoted, ident, bare in parts:
        if quoted or (not ident and not bare):
            values.append(quoted.replace("''", "'"))
        else:
            values.append(ident or bare)
    return ", ".join(values)
