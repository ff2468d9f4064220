"""SQLSTATE codes for the errors a client can meet, so that drivers and BI tools can tell a syntax
error from an unknown table, a refused privilege or a cancelled statement."""

from __future__ import annotations

import re
from dataclasses import dataclass

import duckdb

from pitstop.errors import (
    PitstopError,
)

SYNTAX_ERROR = "42601"
INVALID_NAME = "42602"
UNDEFINED_OBJECT = "42704"
UNDEFINED_TABLE = "42P01"
UNDEFINED_COLUMN = "42703"
AMBIGUOUS_COLUMN = "42702"
DUPLICATE_OBJECT = "42710"
INSUFFICIENT_PRIVILEGE = "42501"
FEATURE_NOT_SUPPORTED = "0A000"
QUERY_CANCELED = "57014"
READ_ONLY_TRANSACTION = "25006"
INVALID_PARAMETER_VALUE = "22023"
INVALID_TEXT_REPRESENTATION = "22P02"
INVALID_BINARY_REPRESENTATION = "22P03"
DATETIME_FIELD_OVERFLOW = "22008"
CHARACTER_NOT_IN_REPERTOIRE = "22021"
PROTOCOL_VIOLATION = "08P01"
INVALID_PASSWORD = "28P01"
INVALID_AUTHORIZATION = "28000"
TOO_MANY_CONNECTIONS = "53300"
ADMIN_SHUTDOWN = "57P01"
PREREQUISITE_STATE = "55000"
INVALID_PREPARED_STATEMENT = "26000"
INVALID_CURSOR_NAME = "34000"
DUPLICATE_CURSOR = "42P03"
INTERNAL_ERROR = "XX000"
UNDEFINED_FUNCTION = "42883"
DIVISION_BY_ZERO = "22012"
NUMERIC_VALUE_OUT_OF_RANGE = "22003"
DATA_EXCEPTION = "22000"
NO_ACTIVE_TRANSACTION = "25P01"
ACTIVE_TRANSACTION = "25001"
IN_FAILED_TRANSACTION = "25P02"


@dataclass(frozen=True)
class WireError(Exception):
    """An error as a client receives it: SQLSTATE, message, and 1-based position in the query."""

    code: str
    message: str
    position: int | None = None
    hint: str | None = None
    severity: str = "ERROR"
    subject: str | None = None
    """The name in the client's statement the error is about (a DuckDB error's column, table or
    function), for the session to put the position under it (:func:`pitstop.server.routing.
    name_position`); ``name(`` for a function."""

    def __str__(self) -> str:
        return self.message


def code_of(err: PitstopError) -> str:
    """The SQLSTATE of a pitstop error: its class's (:mod:`pitstop.errors`)."""
    return err.sqlstate


_DUCKDB_CODES: tuple[tuple[type[duckdb.Error], str], ...] = (
    (duckdb.ParserException, SYNTAX_ERROR),
    (duckdb.InterruptException, QUERY_CANCELED),
    (duckdb.ConversionException, INVALID_TEXT_REPRESENTATION),
    (duckdb.InvalidInputException, INVALID_PARAMETER_VALUE),
    (duckdb.PermissionException, INSUFFICIENT_PRIVILEGE),
    (duckdb.NotImplementedException, FEATURE_NOT_SUPPORTED),
    (duckdb.TransactionException, READ_ONLY_TRANSACTION),
    (duckdb.OutOfRangeException, NUMERIC_VALUE_OUT_OF_RANGE),
    (duckdb.DataError, DATA_EXCEPTION),
)


_MARKED = re.compile(r"SQLSTATE ([0-9A-Z]{5}): (.*)")
"""An error raised by pitstop's own SQL or functions (``error('SQLSTATE 22012: ...')``,
:mod:`pitstop.server.pgnumeric`): its SQLSTATE and message, whatever DuckDB wrapped them in."""


_OUT_OF_RANGE = re.compile(
    r"(?:can't be cast because the value is out of range for the destination type|"
    r"Failed to cast decimal value \S+ to type|Could not cast value \S+ to|"
    r'Casting value "[^"]*" to type|Overflow in (?:addition|subtraction|multiplication|negation) of) '
    r"(?P<type>\w+)"
)
_RANGE_WORDS = {
    "INT16": "smallint out of range",
    "INT32": "integer out of range",
    "INT64": "bigint out of range",
    "FLOAT": "value out of range: overflow",
    "DECIMAL": "numeric field overflow",
}
"""A cast DuckDB cannot make because the value is too large for the type, or integer arithmetic
that overflows its type: PostgreSQL's 22003 and its words for the type."""


def _said(first: str) -> WireError | None:
    """The errors whose DuckDB text says what PostgreSQL's SQLSTATE is."""
    marked = _MARKED.search(first)
    if marked:
        return WireError(marked.group(1), marked.group(2))
    if first.startswith("Division by zero"):  # integer / 0 and % 0, as PostgreSQL says it
        return WireError(DIVISION_BY_ZERO, "division by zero")
    out_of_range = _OUT_OF_RANGE.search(first)
    if out_of_range and out_of_range.group("type") in _RANGE_WORDS:
        return WireError(NUMERIC_VALUE_OUT_OF_RANGE, _RANGE_WORDS[out_of_range.group("type")])
    return None


_UNKNOWN_NAMES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r'^Referenced column "(?P<name>[^"]+)" not found'),
        UNDEFINED_COLUMN,
        'column "{name}" does not exist',
    ),
    (
        re.compile(r'^Table "(?P<table>[^"]+)" does not have a column named "(?P<name>[^"]+)"'),
        UNDEFINED_COLUMN,
        "column {table}.{name} does not exist",
    ),
    (
        re.compile(r'^Ambiguous reference to column name "(?P<name>[^"]+)"'),
        AMBIGUOUS_COLUMN,
        'column reference "{name}" is ambiguous',
    ),
    (
        re.compile(r"^Table with name (?P<name>\S+) does not exist"),
        UNDEFINED_TABLE,
        'relation "{name}" does not exist',
    ),
    (
        re.compile(r"^(?:Scalar|Aggregate|Table) Function with name (?P<name>\S+) does not exist"),
        UNDEFINED_FUNCTION,
        "function {name} does not exist",
    ),
)
"""DuckDB's errors of a name it does not know: PostgreSQL's SQLSTATE and words for each, the name
kept for the error's position."""


def _unknown_name(first: str, text: str) -> WireError | None:
    for pattern, code, words in _UNKNOWN_NAMES:
        found = pattern.match(first)
        if found is None:
            continue
        name = found.group("name")
        candidates = re.search(r"Candidate bindings: [:\s]*\"([^\"]+)\"", text)
        close = re.search(r'Did you mean "([^"]+)"\?', text)
        hint = None
        if candidates:
            table = found.groupdict().get("table")
            column = f"{table}.{candidates.group(1)}" if table else candidates.group(1)
            hint = f'Perhaps you meant to reference the column "{column}".'
        elif close:
            hint = f'Perhaps you meant "{close.group(1)}".'
        table = found.groupdict().get("table")
        subject = name + "(" if code == UNDEFINED_FUNCTION else f"{table}.{name}" if table else name
        return WireError(code, words.format(**found.groupdict()), hint=hint, subject=subject)
    return None


def from_duckdb(exc: duckdb.Error) -> WireError:
    """A DuckDB error as PostgreSQL would report it (the first line of DuckDB's text; an unknown
    column, table or function in PostgreSQL's words, with DuckDB's suggestion as the hint)."""
    text = str(exc).strip()
    first = text.split("\n", 1)[0]
    first = re.sub(r"^[A-Za-z ]+Error: ", "", first)
    said = _said(first) or _unknown_name(first, text)
    if said is not None:
        return said
    if isinstance(exc, duckdb.InterruptException):
        return WireError(QUERY_CANCELED, "canceling statement due to user request")
    if isinstance(exc, duckdb.CatalogException):
        code = UNDEFINED_TABLE if "Table" in first or "table" in first else UNDEFINED_OBJECT
        return WireError(code, first)
    if isinstance(exc, duckdb.BinderException):
        code = UNDEFINED_COLUMN if "column" in first.lower() else "42000"
        return WireError(code, first)
    if "read-only" in first or "read only" in first:
        return WireError(
            READ_ONLY_TRANSACTION,
            "cannot write through a query: sink tables are written by jobs and the catalog by "
            "pitstop's statements",
        )
    for cls, code in _DUCKDB_CODES:
        if isinstance(exc, cls):
            return WireError(code, first)
    return WireError(INTERNAL_ERROR, first)


def from_arrow(exc: Exception) -> WireError:
    """An error DuckDB raised while Arrow read a query's rows (Arrow passes on DuckDB's text)."""
    text = str(exc).strip()
    if "INTERRUPT" in text.upper():
        return WireError(QUERY_CANCELED, "canceling statement due to user request")
    first = re.sub(r"^[A-Za-z ]+Error: ", "", text.split("\n", 1)[0])
    return _said(first) or WireError(DATA_EXCEPTION, first)
