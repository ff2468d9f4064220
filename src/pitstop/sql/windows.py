"""Table functions in a FROM clause: the windows TUMBLE, HOP and SESSION, and Hazelcast's
IMPOSE_ORDER, as a parser mixin of :class:`pitstop.sql.dialect.PitstopDialect.Parser`.

``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR)) [AS w]`` parses into
:class:`~pitstop.sql.nodes.WindowTvf` and ``TABLE(IMPOSE_ORDER(TABLE t, DESCRIPTOR(ts), lag))``
into :class:`~pitstop.sql.nodes.ImposeOrder`; both sit where a table would (``exp.From.this`` or
``exp.Join.this``). Called anywhere else (Flink's legacy ``GROUP BY TUMBLE(ts, ...)``) these
names are an error that shows the table-function form.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp, generator, parser
from sqlglot.tokens import Token, TokenType

from pitstop.intervals import interval_micros
from pitstop.sql import nodes
from pitstop.sql.words import LITERAL_TOKENS, did_you_mean, one_of

# Interval parameters of each window function, in positional order (Hazelcast's: size before
# slide; Flink's documentation writes HOP's slide first, so pitstop refuses a slide longer than
# the size rather than silently reading Flink's order as Hazelcast's).
WINDOW_TVF_PARAMS: dict[str, tuple[str, ...]] = {
    "TUMBLE": ("size",),
    "HOP": ("size", "slide"),
    "SESSION": ("gap",),
}
# Every function pitstop accepts inside TABLE(...) in a FROM clause.
TABLE_FUNCTION_PARAMS: dict[str, tuple[str, ...]] = {**WINDOW_TVF_PARAMS, "IMPOSE_ORDER": ("lag",)}
# Names accepted before '=>': the interval parameters, and Flink's names of the first two
# arguments (DATA => TABLE t, TIMECOL => DESCRIPTOR(ts)), which must stay in their positions.
ARGUMENT_NAMES: dict[str, str] = {
    "DATA": "this",
    "TIMECOL": "descriptor",
    "SIZE": "size",
    "SLIDE": "slide",
    "GAP": "gap",
    "LAG": "lag",
}
# Window functions of Flink that pitstop does not have, with what to write instead.
REJECTED_TABLE_FUNCTIONS: dict[str, str] = {
    "CUMULATE": "CUMULATE windows (Flink's) are not supported: use TUMBLE, HOP or SESSION",
}
# Calls that are window functions outside TABLE(...) (Flink's legacy GROUP BY TUMBLE(ts, ...)).
LEGACY_WINDOW_CALLS = (
    *TABLE_FUNCTION_PARAMS,
    *REJECTED_TABLE_FUNCTIONS,
    *(f"{kind}_{part}" for kind in WINDOW_TVF_PARAMS for part in ("START", "END", "ROWTIME", "PROCTIME")),
)
FROM_TABLE_TUMBLE = (
    "FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR)) ... GROUP BY window_start, window_end"
)


class TableFunctionParser(parser.Parser):
    """Parses ``TABLE(<function>(...))`` wherever sqlglot parses a table. The dialect's parser
    supplies :meth:`_parse_name` and :meth:`_parse_pitstop_interval`."""

    # Functions that only exist inside TABLE(...) in a FROM clause: called anywhere else
    # (Flink's legacy GROUP BY TUMBLE(ts, INTERVAL ...)) they are an error, not a UDF call.
    FUNCTION_PARSERS: t.ClassVar = {
        **parser.Parser.FUNCTION_PARSERS,
        **{name: lambda self: self._refuse_window_call() for name in LEGACY_WINDOW_CALLS},
    }

    # Functions pitstop accepts inside TABLE(...): name -> node parser.
    TABLE_FUNCTION_PARSERS: t.ClassVar = {
        **{name: lambda self, kind: self._parse_window_tvf(kind) for name in WINDOW_TVF_PARAMS},
        "IMPOSE_ORDER": lambda self, kind: self._parse_impose_order(),
    }

    def _parse_table(self, *args: t.Any, **kwargs: t.Any) -> exp.Expr | None:
        if self._curr.token_type == TokenType.TABLE and self._next.token_type == TokenType.L_PAREN:
            node = self._parse_table_function()
            alias_tokens = kwargs.get("alias_tokens") or self.TABLE_ALIAS_TOKENS
            node.set("alias", self._parse_table_alias(alias_tokens=alias_tokens))
            return node
        return super()._parse_table(*args, **kwargs)

    def _parse_table_function(self) -> exp.Expr:
        """``TABLE(<function>(...))``, dispatched on the function's name."""
        self._advance(2)  # TABLE (
        name = self._curr
        kind = name.text.upper() if name.token_type not in LITERAL_TOKENS else ""
        parse = self.TABLE_FUNCTION_PARSERS.get(kind)
        if parse is not None and self._next.token_type != TokenType.L_PAREN:
            self.raise_error(f"expected ( after {kind}: {self._signature(kind)}", self._next)
        if parse is None:
            functions = one_of(TABLE_FUNCTION_PARAMS)
            if not name:
                self.raise_error(f"expected {functions} after TABLE(", name)
            hint = REJECTED_TABLE_FUNCTIONS.get(kind)
            typo = did_you_mean(name.text, TABLE_FUNCTION_PARAMS) if kind else ""
            self.raise_error(
                hint or f"unknown table function {name.text!r} in TABLE(...): use {functions}{typo}",
                name,
                hinted=bool(hint),
            )
        self._advance(2)  # KIND (
        node = parse(self, kind)
        self._match_r_paren()
        self._match_r_paren()
        return node

    def _parse_window_tvf(self, kind: str) -> nodes.WindowTvf:
        source = self._parse_function_source(kind, subquery=True)
        descriptor = self._parse_descriptor(kind)
        intervals = self._parse_function_intervals(kind)
        return self.expression(nodes.WindowTvf(kind=kind, this=source, descriptor=descriptor, **intervals))

    def _parse_impose_order(self) -> nodes.ImposeOrder:
        kind = "IMPOSE_ORDER"
        source = self._parse_function_source(kind, subquery=False)
        descriptor = self._parse_descriptor(kind)
        intervals = self._parse_function_intervals(kind)
        return self.expression(nodes.ImposeOrder(this=source, descriptor=descriptor, **intervals))

    def _parse_function_source(self, kind: str, subquery: bool) -> exp.Expr:
        """``TABLE t`` (or, for a window, ``(SELECT ...)``), after an optional ``DATA =>``."""
        expected = "TABLE <name> or (SELECT ...)" if subquery else "TABLE <name>"
        self._parse_argument_name(kind, "this", f"first argument is its input, {expected}")
        start = self._curr
        if self._match(TokenType.TABLE):
            if self._curr.token_type == TokenType.L_PAREN:
                self.raise_error(
                    f"{kind} reads TABLE <name> or (SELECT ...), not TABLE(...): write "
                    f"{kind}((SELECT * FROM TABLE(...)), ...) or name the ordered input in a view",
                    self._curr,
                )
            source: exp.Expr | None = self._parse_table_parts()
            if self._curr.token_type in (TokenType.PARTITION_BY, TokenType.PARTITION):
                self.raise_error(
                    f"PARTITION BY inside {kind}(...) is Flink's: write {kind}(TABLE t, "
                    "DESCRIPTOR(ts), ...) and GROUP BY the key with window_start, window_end",
                    self._curr,
                )
        elif subquery and self._curr.token_type == TokenType.L_PAREN:
            source = self._parse_select(nested=True, parse_subquery_alias=False)
            if not isinstance(source, exp.Subquery):
                self.raise_error(f"{kind} expects {expected} as its first argument", start)
        else:
            self.raise_error(f"{kind} expects {expected} as its first argument", start)
        return t.cast(exp.Expr, source)

    def _parse_descriptor(self, kind: str) -> exp.Identifier:
        """``, [TIMECOL =>] DESCRIPTOR(ts)``."""
        expected = f"{kind} expects DESCRIPTOR(<time column>) as its second argument"
        if not self._match(TokenType.COMMA):
            self.raise_error(expected)
        self._parse_argument_name(kind, "descriptor", "second argument is DESCRIPTOR(<time column>)")
        if not self._match_text_seq("DESCRIPTOR"):
            self.raise_error(expected)
        self._match_l_paren()
        descriptor = self._parse_name("time column")
        if self._curr.token_type == TokenType.COMMA:
            self.raise_error(f"DESCRIPTOR(...) of {kind} names one time column", self._curr)
        self._match_r_paren()
        return descriptor

    def _parse_function_intervals(self, kind: str) -> dict[str, exp.Expr]:
        """The interval arguments, positional in ``TABLE_FUNCTION_PARAMS`` order or named."""
        params = TABLE_FUNCTION_PARAMS[kind]
        intervals: dict[str, exp.Expr] = {}
        starts: dict[str, Token] = {}
        while self._match(TokenType.COMMA):
            start = self._curr
            key = self._parse_argument_name(kind, None, "")
            if key is None:
                free = [p for p in params if p not in intervals]
                if not free:
                    self.raise_error(f"too many arguments for {kind}: write {self._signature(kind)}", start)
                key = free[0]
            if key in intervals:
                self.raise_error(f"{kind} argument {key.upper()} is given twice", start)
            starts[key] = self._curr
            intervals[key] = self._parse_pitstop_interval(f"{kind} {key.upper()}")
        missing = [p.upper() for p in params if p not in intervals]
        if missing:
            self.raise_error(f"{kind} needs {one_of(missing)}: an interval such as INTERVAL '1' HOUR")
        if kind == "HOP" and interval_micros(intervals["slide"]) > interval_micros(intervals["size"]):
            self.raise_error(
                f"HOP's slide {intervals['slide'].sql()} is longer than its size "
                f"{intervals['size'].sql()}: HOP takes the window size first, then the slide "
                "(Hazelcast's order; Flink's documentation writes the slide first). Swap them, or "
                "name them: SIZE => ..., SLIDE => ...",
                starts["slide"],
            )
        return intervals

    def _parse_argument_name(self, kind: str, position: str | None, expected: str) -> str | None:
        """Read ``NAME =>`` if present and return its parameter. ``position`` is the
        parameter this argument's place requires (source and descriptor), or None for the
        interval arguments, which may be named in any order."""
        name = self._curr
        if self._next.token_type != TokenType.FARROW:
            return None
        param = ARGUMENT_NAMES.get(name.text.upper())
        allowed = TABLE_FUNCTION_PARAMS[kind]
        if position is not None and param != position:
            self.raise_error(f"{kind}'s {expected}", name)
        if position is None and param not in allowed:
            names = one_of([p.upper() for p in allowed])
            offset = (
                " (windows are aligned to the epoch; there is no OFFSET)"
                if name.text.upper() == "OFFSET"
                else ""
            )
            self.raise_error(
                f"{kind} has no argument {name.text.upper()}; its arguments are {names}{offset}",
                name,
            )
        self._advance(2)
        return param

    @staticmethod
    def _signature(kind: str) -> str:
        intervals = ", ".join(p for p in TABLE_FUNCTION_PARAMS[kind])
        return f"{kind}(TABLE t, DESCRIPTOR(ts), {intervals})"

    def _refuse_window_call(self) -> t.NoReturn:
        """A window function called as a scalar (``GROUP BY TUMBLE(ts, INTERVAL '1' HOUR)``)."""
        name = self._tokens[self._index - 2]
        word = name.text.upper()
        if word in REJECTED_TABLE_FUNCTIONS:
            self.raise_error(REJECTED_TABLE_FUNCTIONS[word], name, hinted=True)
        if word in TABLE_FUNCTION_PARAMS:
            self.raise_error(
                f"{word} is a table function: call it in FROM as TABLE({self._signature(word)})"
                + (", GROUP BY window_start, window_end" if word in WINDOW_TVF_PARAMS else ""),
                name,
            )
        self.raise_error(
            f"{word} is Flink's legacy group window: select window_start and window_end of "
            f"{FROM_TABLE_TUMBLE}",
            name,
        )

    # Supplied by the dialect's parser ------------------------------------------------------

    def _parse_name(self, what: str) -> exp.Identifier:
        raise NotImplementedError

    def _parse_pitstop_interval(self, what: str) -> exp.Expr:
        raise NotImplementedError

    def raise_error(self, message: str, token: Token | None = None, hinted: bool = False) -> t.NoReturn:
        raise NotImplementedError


def window_tvf_sql(gen: generator.Generator, e: nodes.WindowTvf) -> str:
    kind = e.args["kind"]
    intervals = [gen.sql(e, key) for key in WINDOW_TVF_PARAMS[kind]]
    source = gen.sql(e, "this")
    if isinstance(e.this, exp.Table):
        source = f"TABLE {source}"
    args = ", ".join([source, f"DESCRIPTOR({gen.sql(e, 'descriptor')})"] + intervals)
    alias = f" AS {gen.sql(e, 'alias')}" if e.args.get("alias") else ""
    return f"TABLE({kind}({args})){alias}"


def impose_order_sql(gen: generator.Generator, e: nodes.ImposeOrder) -> str:
    alias = gen.sql(e, "alias")
    return (
        f"TABLE(IMPOSE_ORDER(TABLE {gen.sql(e, 'this')}, DESCRIPTOR({gen.sql(e, 'descriptor')}), "
        f"{gen.sql(e, 'lag')}))" + (f" AS {alias}" if alias else "")
    )
