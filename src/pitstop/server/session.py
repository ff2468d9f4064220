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

Which way a statement goes is read from its first words (:mod:`pitstop.server.routing`). The
session runs each way, with what it holds for the client: its queries' DuckDB connection
(:mod:`pitstop.server.queries`), its transaction block (:mod:`pitstop.server.transactions`), its
parameters, SQL cursors and statement_timeout (:mod:`pitstop.server.timeout`); pitstop's own
statements go through :mod:`pitstop.server.pitstopsql`.

The session knows nothing of sockets: the connection (``connection.py``) turns its outcomes
(:mod:`pitstop.server.outcome`) into messages. Every method may block (a statement runs on the
connection's own thread).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import duckdb

from pitstop.driver import Driver
from pitstop.errors import PermissionDeniedError, PitstopError
from pitstop.executor import SESSION_SETTINGS, Executor, Result
from pitstop.server import copyout, cursors, pitstopsql, sqlstate
from pitstop.server.cursors import SqlCursor, SqlCursors
from pitstop.server.outcome import Notice, Outcome
from pitstop.server.params import InvalidValue, SessionParameters, canonical, milliseconds
from pitstop.server.pgtypes import TEXT, Column
from pitstop.server.queries import SessionQueries, one_query, result_columns
from pitstop.server.results import SharedResults
from pitstop.server.routing import (
    Statement,
    error_position,
    inner_statement,
    leading_words,
    name_position,
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


def _located(err: WireError, stmt: Statement) -> WireError:
    """A DuckDB error of a name the statement uses, positioned under that name (psql's caret)."""
    if err.position is not None or err.subject is None:
        return err
    return replace(err, position=name_position(err.subject, stmt))


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
        self.user = user
        self.role = role
        self.parameters = parameters
        self._allowed = allowed
        self.executor = Executor(manager)
        self.driver = Driver(self.executor, self._may_run)
        self._cancel = threading.Event()
        self.client_gone: Callable[[], bool] = lambda: False
        """Set by the connection: whether the client has hung up (a wait then stops, as on cancel)."""
        self.deallocate: Callable[[str | None], bool] = lambda name: False
        """Set by the connection: forget a prepared statement (None: all of them); whether it was there."""
        self.executor.cancelled = self._stop_waiting
        self.timeout = StatementTimeout(self.cancel)
        self.queries = SessionQueries(
            manager,
            pgcatalog,
            user,
            parameters,
            results if results is not None else SharedResults(),
            self.timeout,
        )
        self.sql_cursors = SqlCursors()
        self.block = TransactionBlock(self.sql_cursors.end_transaction)

    @property
    def backend_pid(self) -> int:
        """The process id the client was given (BackendKeyData): ``pg_backend_pid()``."""
        return self.queries.backend_pid

    @backend_pid.setter
    def backend_pid(self, pid: int) -> None:
        self.queries.backend_pid = pid

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
        self.queries.interrupt()
        self.sql_cursors.interrupt()

    def close(self) -> None:
        self._cancel.set()
        self.sql_cursors.close(None)
        self.queries.close()

    def end_query(self) -> None:
        """End the read-only transaction of the last query (its rows are no longer wanted)."""
        self.queries.end_query()

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
                raise self.timeout.said(_located(exc, stmt)) from exc.__cause__
            if isinstance(exc, PitstopError):
                said = WireError(sqlstate.code_of(exc), exc.message, error_position(exc, stmt, query))
            else:
                said = _located(sqlstate.from_duckdb(exc), stmt)
            raise self.timeout.said(said) from exc
        if outcome.more is None and outcome.arrow is None:
            self.timeout.stop()  # (a result still to be read keeps it until the query ends)
        outcome.zone = self.parameters.zone
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
            try:
                return self.queries.describe(stmt, query, declared)
            except WireError as err:
                raise _located(err, stmt) from err.__cause__
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

    # -- the routes ------------------------------------------------------------------------------------
    def _may_run(self, parsed: ParsedStatement) -> None:
        if not self._allowed(self.role, parsed.node):
            raise PermissionDeniedError(
                f"user '{self.user}' has the role '{self.role}', which may not run "
                f"{pitstopsql.statement_name(parsed)}; ask an admin (pitstop user add NAME --role admin)"
            )

    def _execute(self, parsed: ParsedStatement) -> Result:
        return self.driver.run(parsed)

    def _query(self, stmt: Statement, query: str, params: list[Any]) -> Outcome:
        return self.queries.run(stmt, query, params)

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
        except InvalidValue as exc:
            raise WireError(sqlstate.INVALID_PARAMETER_VALUE, str(exc)) from None
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
        self.queries.sync_parameters()

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
        if state.mentions(inner.text):  # the client's text is one query (see SessionQueries.run)
            one_query(self.queries.translate(inner, inner.text).sql)
        connection = self.queries.connect()
        try:
            text, _ = self.queries.state_tables(inner.text, inner, query, connection)
            translation = self.queries.translate(inner, text)
            statement = one_query(translation.sql)
            connection.execute("BEGIN TRANSACTION READ ONLY")
            with self.sql_cursors.running(connection):
                rel = connection.execute(statement, params) if params else connection.execute(statement)
            columns = result_columns(rel.description, translation)
        except BaseException:
            self.queries.release(connection)
            raise
        cursor = SqlCursor(
            declare.name,
            columns,
            declare.hold,
            self.transaction != "I",
            connection,
            self.queries.release,
            statement=stmt.text,
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
        result = self.queries.run(inner, query, params)
        assert result.columns is not None
        return Outcome(
            "COPY", copy=copyout.Lines(copy, result.columns, result.every_row(), self.parameters.zone)
        )

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
