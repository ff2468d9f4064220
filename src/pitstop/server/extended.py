"""The extended query protocol of one session: its prepared statements and portals, and the
messages that make, describe, run and close them (Parse, Bind, Describe, Execute, Close), as
PostgreSQL's ``postgres.c`` answers them.

1. Parse: one statement (or none) under a name; the unnamed one is replaced by the next Parse.
2. Bind: a portal of a prepared statement with its parameters decoded
   (:func:`pitstop.server.bindvalues.decode_params`) by the types the client was told.
3. Describe: a statement's ParameterDescription and RowDescription (described by the session,
   once); a portal's RowDescription, which runs its statement; a cursor DECLAREd in SQL is
   described as a portal too.
4. Execute: the portal's rows, up to the row limit (PortalSuspended), then its tag.
5. Close, and the end of a query cycle (Sync, or a simple Query): the unnamed portal goes;
   outside a transaction block every portal goes.

An error in any of them is the connection's to send; it then skips every message up to Sync.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pygwire.messages import (
    Bind,
    BindComplete,
    Close,
    CloseComplete,
    CommandComplete,
    Describe,
    Execute,
    NoData,
    ParameterDescription,
    Parse,
    ParseComplete,
)

from pitstop.server import sqlstate
from pitstop.server.activity import Activity
from pitstop.server.bindvalues import decode_params
from pitstop.server.outcome import Outcome
from pitstop.server.pgtypes import TEXT, Column
from pitstop.server.replies import row_description, send_outcome
from pitstop.server.routing import Statement, split
from pitstop.server.session import Session
from pitstop.server.sqlstate import WireError
from pitstop.server.wire import ClientGone, Wire


@dataclass
class Prepared:
    statement: Statement | None
    query: str
    param_types: list[int]
    described: tuple[Column, ...] | None = None
    was_described: bool = False


@dataclass
class Portal:
    prepared: Prepared
    params: list[Any]
    result_formats: list[int]
    outcome: Outcome | None = None
    done: bool = False
    columns: tuple[Column, ...] | None = None
    binary: list[bool] = field(default_factory=list)


class ExtendedQuery:
    """The prepared statements and portals of one session, and the messages that use them."""

    def __init__(self, wire: Wire, session: Session, activity: Activity) -> None:
        self.wire = wire
        self.session = session
        self.activity = activity
        self.prepared: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}

    def parse(self, message: Parse) -> None:
        statements = split(message.query)
        if len(statements) > 1:
            raise WireError(
                sqlstate.SYNTAX_ERROR, "cannot insert multiple commands into a prepared statement"
            )
        stmt = statements[0] if statements else None
        name = message.statement
        if name and name in self.prepared:
            raise WireError("42P05", f'prepared statement "{name}" already exists')
        count = stmt.param_count if stmt else 0
        types = list(message.param_types) + [0] * max(0, count - len(message.param_types))
        self.prepared[name] = Prepared(stmt, message.query, types)
        self.wire.send(ParseComplete())

    def bind(self, message: Bind) -> None:
        prepared = self.prepared.get(message.statement)
        if prepared is None:
            raise WireError(
                sqlstate.INVALID_PREPARED_STATEMENT,
                f'prepared statement "{message.statement}" does not exist',
            )
        values = list(message.param_values)
        if len(values) != len(prepared.param_types):
            raise WireError(
                sqlstate.PROTOCOL_VIOLATION,
                f"bind message supplies {len(values)} parameters, but prepared statement "
                f'"{message.statement}" requires {len(prepared.param_types)}',
            )
        params = decode_params(
            values, prepared.param_types, _formats(list(message.param_formats), len(values))
        )
        if message.portal and message.portal in self.portals:
            raise WireError("42P03", f'cursor "{message.portal}" already exists')
        self.portals[message.portal] = Portal(prepared, params, list(message.result_formats))
        self.wire.send(BindComplete())

    def describe(self, message: Describe) -> None:
        if message.kind == "S":
            prepared = self.prepared.get(message.name)
            if prepared is None:
                raise WireError(
                    sqlstate.INVALID_PREPARED_STATEMENT, f'prepared statement "{message.name}" does not exist'
                )
            columns = self._describe_statement(prepared)
            self.wire.send(ParameterDescription(type_oids=prepared.param_types))
            self.wire.send(row_description(columns, None) if columns is not None else NoData())
            return
        if message.name and message.name not in self.portals:  # a cursor DECLAREd in SQL is a portal
            declared = self.session.cursor_columns(message.name)
            if declared is not None:
                self.wire.send(row_description(declared, None))
                return
        portal = self._portal(message.name)
        columns = self._portal_columns(portal)
        self.wire.send(row_description(columns, portal.binary) if columns is not None else NoData())

    def _describe_statement(self, prepared: Prepared) -> tuple[Column, ...] | None:
        if not prepared.was_described:
            stmt = prepared.statement
            if stmt is None:
                prepared.param_types = [t or TEXT.oid for t in prepared.param_types]
            else:
                types, prepared.described = self.session.describe(stmt, prepared.query, prepared.param_types)
                prepared.param_types = types  # Bind decodes by what the client was told
            prepared.was_described = True
        return prepared.described

    def _portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise WireError(sqlstate.INVALID_CURSOR_NAME, f'portal "{name}" does not exist')
        return portal

    def _portal_columns(self, portal: Portal) -> tuple[Column, ...] | None:
        """Run the portal's statement (once) and fix its columns and their formats."""
        if portal.outcome is None:
            stmt = portal.prepared.statement
            if self.wire.going_away:
                raise ClientGone
            self.activity.running(portal.prepared.query)
            if stmt is None:
                portal.outcome = Outcome("EMPTY")
            else:
                portal.outcome = self.session.run(stmt, portal.prepared.query, portal.params)
            columns = portal.outcome.columns
            described = portal.prepared.described if portal.prepared.was_described else None
            if columns is not None and described is not None and len(described) == len(columns):
                # The statement was described before: keep the types the client was told.
                columns = described
                portal.outcome.columns = described
            portal.columns = columns
            count = len(columns) if columns is not None else 0
            portal.binary = [f == 1 for f in _formats(portal.result_formats, count)]
        return portal.columns

    def execute(self, message: Execute) -> None:
        portal = self._portal(message.portal)
        if portal.done:
            self.wire.send(CommandComplete(tag=portal.outcome.final_tag() if portal.outcome else "SELECT 0"))
            return
        self._portal_columns(portal)
        assert portal.outcome is not None
        self.activity.running(portal.prepared.query)
        finished = send_outcome(self.wire, portal.outcome, portal.binary, message.max_rows, describe=False)
        portal.done = finished

    def deallocate(self, name: str | None) -> bool:
        """SQL's DEALLOCATE (and DISCARD ALL): a prepared statement goes, or all of them."""
        if name is None:
            self.prepared.clear()
            return True
        return self.prepared.pop(name, None) is not None

    def close(self, message: Close) -> None:
        if message.kind == "S":
            self.prepared.pop(message.name, None)
        else:
            portal = self.portals.pop(message.name, None)
            if portal is not None:
                self.session.end_query()
        self.wire.send(CloseComplete())

    def close_unnamed(self) -> None:
        """End of a query cycle: the unnamed portal goes; outside a transaction block every
        portal goes (inside one, named portals live on until COMMIT, as JDBC's fetch size needs)."""
        self.portals.pop("", None)
        if self.session.transaction == "I":
            self.portals.clear()
            self.session.end_query()


def _formats(codes: list[int], count: int) -> list[bool]:
    """PostgreSQL's format code rules: none = all text, one = for all, else one per column."""
    if not codes:
        return [False] * count
    if len(codes) == 1:
        return [codes[0] == 1] * count
    if len(codes) != count:
        raise WireError(sqlstate.PROTOCOL_VIOLATION, f"expected {count} format codes, got {len(codes)}")
    return [c == 1 for c in codes]
