"""PostgreSQL's parser for :mod:`pitstop.server.pgsemantics`: sqlglot's, stricter where sqlglot
forgives what PostgreSQL refuses, and the error a statement is refused with before it runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp
from sqlglot.helper import seq_get
from sqlglot.parsers.postgres import PostgresParser
from sqlglot.tokens import TokenType

from pitstop.server.sqlstate import SYNTAX_ERROR

__all__ = ["CALLED", "PgError", "StrictParser"]

CALLED = "pgs_called"
"""A node's meta: the name of the function it was written as (``power(a, b)``, not ``a ^ b``: the
result column's name is ``power`` for the one, ``?column?`` for the other)."""


def _called(node: exp.Expr, name: str) -> exp.Expr:
    node.meta[CALLED] = name
    return node


class PgError(Exception):
    """A statement pitstop refuses before it runs, as PostgreSQL would say it: SQLSTATE, message
    and 1-based position in the text parsed (0: none)."""

    def __init__(self, code: str, message: str, position: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.position = position


class StrictParser(PostgresParser):
    """PostgreSQL's parser, stricter where sqlglot forgives what PostgreSQL refuses, and with
    ``to_char`` kept as written (sqlglot turns its pattern into strftime's, losing ``Mon``).

    A list with an empty item (``SELECT region,, revenue``) is a syntax error at the comma's
    position, as PostgreSQL says it (sqlglot would skip it)."""

    FUNCTIONS = {
        **PostgresParser.FUNCTIONS,
        "TO_CHAR": lambda args: exp.Anonymous(this="to_char", expressions=args),
        "DATE_PART": lambda args: exp.Anonymous(this="date_part", expressions=args),  # not extract's type
        # log10(x) as written, not log(10, x): of an integer it is a double
        "LOG10": lambda args: exp.Anonymous(this="log10", expressions=args),
        "POWER": lambda args: _called(exp.Pow(this=seq_get(args, 0), expression=seq_get(args, 1)), "power"),
        "POW": lambda args: _called(exp.Pow(this=seq_get(args, 0), expression=seq_get(args, 1)), "pow"),
        # variance(x) is named variance, not var_samp (sqlglot writes either as VAR_SAMP)
        "VARIANCE": lambda args: _called(exp.Variance(this=seq_get(args, 0)), "variance"),
    }
    FUNCTION_PARSERS = {name: f for name, f in PostgresParser.FUNCTION_PARSERS.items() if name != "DATE_PART"}

    def _parse_csv(self, parse_method: Callable[[], Any], sep: TokenType = TokenType.COMMA) -> list[Any]:
        items = []
        parse_result = parse_method()
        if parse_result is not None:
            items.append(parse_result)
        while self._match(sep):
            if isinstance(parse_result, exp.Expr):
                self._add_comments(parse_result)
            parse_result = parse_method()
            if parse_result is None:  # a, , b or a, FROM: PostgreSQL stops at what follows the comma
                token = self._curr
                if token is None:
                    raise PgError(SYNTAX_ERROR, "syntax error at end of input", len(self.sql) + 1)
                text = self.sql[token.start : token.end + 1]
                raise PgError(SYNTAX_ERROR, f'syntax error at or near "{text}"', token.start + 1)
            items.append(parse_result)
        return items
