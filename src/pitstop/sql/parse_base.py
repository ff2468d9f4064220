"""What every part of the dialect's parser uses: names, OPTIONS (...), intervals, and errors
positioned at a token's first character with the words that may be misspelt keywords. The
statements of each kind of object are a mixin over :class:`BaseParser` (:mod:`.parse_mappings`,
:mod:`.parse_jobs`), and :class:`pitstop.sql.dialect.PitstopDialect.Parser` is all of them.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from pitstop.errors import SqlError
from pitstop.intervals import interval_micros
from pitstop.sql import nodes
from pitstop.sql.blocks import position
from pitstop.sql.typos import SuspectParseError, suspects
from pitstop.sql.windows import TableFunctionParser


class BaseParser(TableFunctionParser):
    """The shared pieces of :class:`pitstop.sql.dialect.PitstopDialect.Parser`."""

    def _parse_name(self, what: str) -> exp.Identifier:
        token = self._curr
        name = self._parse_id_var(any_token=False)
        if not isinstance(name, exp.Identifier):
            got = f", got {token.text!r}" if token else ""
            self.raise_error(f"expected a {what} name{got}", token)
        return t.cast(exp.Identifier, name)

    def _parse_options(self) -> list[nodes.Option]:
        if not self._match(TokenType.L_PAREN):
            self.raise_error("expected ( after OPTIONS: OPTIONS ('key'='value', ...)")
        options: list[nodes.Option] = []
        seen: set[str] = set()
        while True:
            key_token = self._curr
            key = self._parse_option_string("option keys")
            if key.name in seen:
                self.raise_error(f"option {key.name!r} is given twice", key_token)
            seen.add(key.name)
            if not self._match(TokenType.EQ):
                self.raise_error(f"expected = after option {key.name!r}")
            value = self._parse_option_string("option values")
            options.append(self.expression(nodes.Option(this=key, expression=value)))
            if not self._match(TokenType.COMMA):
                break
        self._match_r_paren()
        return options

    def _parse_option_string(self, what: str) -> exp.Literal:
        if not self._match(TokenType.STRING):
            self.raise_error(f"{what} are quoted strings: OPTIONS ('key'='value', ...)")
        literal = exp.Literal.string(self._prev.text)
        literal.meta["start"] = self._prev.start  # where a bad name in an option is shown
        return literal

    def _parse_pitstop_interval(self, what: str) -> exp.Expr:
        start = self._curr
        interval = self._parse_interval()
        if interval is None:
            self.raise_error(f"expected an interval such as INTERVAL '5' SECOND for {what}", start)
        try:
            interval_micros(t.cast(exp.Expr, interval))
        except SqlError as error:
            self.raise_error(f"{error.message} ({what})", start)
        return t.cast(exp.Expr, interval)

    def raise_error(self, message: str, token: Token | None = None, hinted: bool = False) -> t.NoReturn:
        """Like sqlglot's, but positioned at the token's first character (at the end of the
        statement: just past its last token), and always raised: pitstop never collects
        errors to carry on with a half-parsed statement.

        The error also records the plain words at the failure, which may be a misspelt
        keyword (:mod:`pitstop.sql.typos`), unless the message already says what to write
        instead: it is ``hinted`` or has a "did you mean"."""
        if token:
            offset = token.start
        elif self._curr:
            offset = self._curr.start
        elif self._prev:
            offset = self._prev.end + 1
        else:
            offset = 0
        if message == "Invalid expression / Unexpected token" and self._curr:
            message = f"unexpected {self._curr.text!r}: expected the end of the statement"
        words: tuple[Token, ...] = ()
        if not hinted and "did you mean" not in message:
            before = self._tokens[self._index - 2] if self._index >= 2 else None
            words = suspects((token, self._curr, self._next, self._prev, before))
        line, col = position(self.sql, offset)
        raise SuspectParseError(
            f"{message}. Line {line}, Col: {col}.",
            [
                {
                    "description": message,
                    "line": line,
                    "col": col,
                    "highlight": self.sql[offset : offset + 1],
                }
            ],
            suspects=words,
            reached=self._curr.start if self._curr else len(self.sql),
        )
