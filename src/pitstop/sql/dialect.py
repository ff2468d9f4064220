"""pitstop's SQL dialect: sqlglot's base dialect plus the statements of DESIGN.md section 1.

Statements are dispatched on their first word (``STATEMENT_PARSERS`` by token type,
``WORD_STATEMENT_PARSERS`` by text) and then on the word after it (``CREATE_PARSERS``,
``DROP_PARSERS``, ...). Nothing falls back to ``exp.Command``: a statement the dialect does not
know is a ``ParseError`` positioned at the offending token (1-based line and column of the
token's *first* character, unlike sqlglot's default which points at its last one).

Window table-valued functions (``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR))``)
parse into :class:`~pitstop.sql.nodes.WindowTvf`, Hazelcast's ``TABLE(IMPOSE_ORDER(...))`` into
:class:`~pitstop.sql.nodes.ImposeOrder`; both sit where a table would: directly in
``exp.From.this`` or ``exp.Join.this``, with their alias in ``args["alias"]`` (the parsing lives
in :mod:`pitstop.sql.windows`).

A misspelt keyword where the dialect expects one of a few words gets a "did you mean" suggestion
(:func:`did_you_mean`); any other error records the plain words at the failure, so that a
misspelt SQL keyword sqlglot read as a name (``SELECT a FORM s``) is reported at that word
(:mod:`pitstop.sql.typos`); statements of Flink and Hazelcast that pitstop writes differently are
refused with what to write instead (``REJECTED_STATEMENTS``, ``REJECTED_WORDS``).

This module holds the dispatch tables, the statements' first words, views and snapshots; the rest
of the parser is mixins: :mod:`pitstop.sql.parse_mappings` (CREATE MAPPING),
:mod:`pitstop.sql.parse_jobs` (CREATE, DROP, ALTER and AWAIT JOB), over
:mod:`pitstop.sql.parse_base` (names, options, intervals, errors). Where a statement ends is
:mod:`pitstop.sql.blocks`; the SQL text of pitstop's statements, :mod:`pitstop.sql.generate`.
"""

from __future__ import annotations

import re
import typing as t

from sqlglot import exp, generator, parser, tokens
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import Token, TokenType

from pitstop.sql import nodes, statements
from pitstop.sql.blocks import chunk_tokens
from pitstop.sql.generate import alter_job_sql, clause, create_job_sql, create_mapping_sql, drop_sql
from pitstop.sql.parse_jobs import JobParser
from pitstop.sql.parse_mappings import MAPPING_KINDS, MappingParser
from pitstop.sql.windows import TABLE_FUNCTION_PARAMS, WINDOW_TVF_PARAMS, impose_order_sql, window_tvf_sql
from pitstop.sql.words import LITERAL_TOKENS, did_you_mean, one_of

__all__ = [
    "MAPPING_KINDS",
    "TABLE_FUNCTION_PARAMS",
    "WINDOW_TVF_PARAMS",
    "PitstopDialect",
    "did_you_mean",
    "one_of",
]

ACCEPTED_STATEMENTS = statements.ACCEPTED
# The first words of every statement, for "did you mean" on a misspelt one.
STATEMENT_WORDS = tuple(sorted({s.name.split()[0] for s in statements.STATEMENTS} | {"WITH", "VALUES"}))

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class PitstopDialect(Dialect):
    class Tokenizer(tokens.Tokenizer):
        # No statement is swallowed as a raw string (sqlglot's Command fallback).
        COMMANDS: t.ClassVar[set[TokenType]] = set()
        KEYWORDS = {k: v for k, v in tokens.Tokenizer.KEYWORDS.items() if k != "EXPLAIN"}

    class Parser(JobParser, MappingParser):
        # END closes a job's BEGIN block, so it may not be read as an alias or a name there
        # ("INSERT INTO a SELECT x FROM t END" must not alias t as END). Quote it: "end".
        ID_VAR_TOKENS = parser.Parser.ID_VAR_TOKENS - {TokenType.END}
        ALIAS_TOKENS = parser.Parser.ALIAS_TOKENS - {TokenType.END}
        TABLE_ALIAS_TOKENS = parser.Parser.TABLE_ALIAS_TOKENS - {TokenType.END}
        COMMENT_TABLE_ALIAS_TOKENS = parser.Parser.COMMENT_TABLE_ALIAS_TOKENS - {TokenType.END}
        WINDOW_ALIAS_TOKENS = parser.Parser.WINDOW_ALIAS_TOKENS - {TokenType.END}

        STATEMENT_PARSERS: t.ClassVar = {
            TokenType.CREATE: lambda self: self._parse_create_statement(),
            TokenType.DROP: lambda self: self._parse_word("DROP", self.DROP_PARSERS),
            TokenType.SHOW: lambda self: self._parse_word("SHOW", self.SHOW_PARSERS),
            TokenType.ALTER: lambda self: self._parse_word("ALTER", self.ALTER_PARSERS),
            TokenType.DESCRIBE: lambda self: self._parse_word("DESCRIBE", self.DESCRIBE_PARSERS),
            TokenType.SET: lambda self: self._parse_set_option(),
        }

        # Statements whose first word is not a keyword of sqlglot's tokenizer.
        WORD_STATEMENT_PARSERS: t.ClassVar = {
            "AWAIT": lambda self: self._parse_word("AWAIT", self.AWAIT_PARSERS),
            "EXPLAIN": lambda self: self._parse_explain(),
        }

        QUERY_START_TOKENS: t.ClassVar = {
            TokenType.SELECT,
            TokenType.WITH,
            TokenType.L_PAREN,
            TokenType.VALUES,
        }

        # First words that are real SQL (often Flink's or Hazelcast's) but not pitstop
        # statements, with what to write instead.
        REJECTED_STATEMENTS: t.ClassVar = {
            "INSERT": "INSERT runs inside a job: CREATE JOB <name> AS INSERT INTO <sink> SELECT ...",
            "SINK": "SINK INTO runs inside a job: CREATE JOB <name> AS SINK INTO <sink> SELECT ...",
            "STOP": (
                "STOP JOB is Flink's: use DROP JOB <name> WITH SNAPSHOT <snapshot> to stop a job and "
                "keep its state, then CREATE JOB <name> FROM SNAPSHOT <snapshot> AS ... to go on"
            ),
            "EXECUTE": (
                "EXECUTE STATEMENT SET is Flink's: put several INSERTs in one job with "
                "CREATE JOB <name> AS BEGIN INSERT INTO a SELECT ...; INSERT INTO b SELECT ...; END"
            ),
            "BEGIN": (
                "BEGIN opens a job's body only after CREATE JOB <name> AS: "
                "CREATE JOB <name> AS BEGIN INSERT INTO a SELECT ...; INSERT INTO b SELECT ...; END"
            ),
            "RESET": "RESET is not a pitstop statement: set the value again with SET 'key' = 'value'",
            "USE": "pitstop has no catalogs or databases to USE: name mappings, views and jobs directly",
        }
        # Second words that are real SQL but not pitstop statements: first word -> word -> hint.
        REJECTED_WORDS: t.ClassVar = {
            "CREATE": {
                "TABLE": (
                    "CREATE TABLE is not a pitstop statement: declare a source or sink with "
                    "CREATE MAPPING <name> (<column> <type>, ...) TYPE File OPTIONS ('path'='...', "
                    f"'format'='json'); the mapping types are {one_of(MAPPING_KINDS)}"
                ),
                "TEMPORARY": (
                    "pitstop has no TEMPORARY objects: write CREATE MAPPING for a source or sink and "
                    "CREATE VIEW for a query"
                ),
                "EXTERNAL": "write CREATE MAPPING without EXTERNAL: CREATE MAPPING <name> (...) TYPE ...",
            },
            "DROP": {"TABLE": "pitstop's tables are mappings: DROP MAPPING <name>"},
            "SHOW": {"TABLES": "pitstop's tables are mappings: SHOW MAPPINGS"},
        }

        CREATE_PARSERS: t.ClassVar = {
            "JOB": lambda self, replace: self._parse_create_job(replace),
            "MAPPING": lambda self, replace: self._parse_create_mapping(replace),
            "SNAPSHOT": lambda self, replace: self._parse_create_snapshot(replace),
            "VIEW": lambda self, replace: self._parse_create_view(replace),
        }
        DROP_PARSERS: t.ClassVar = {
            "JOB": lambda self: self._parse_drop_job(),
            "MAPPING": lambda self: self.expression(
                nodes.DropMapping(exists=self._parse_exists(), this=self._parse_name("mapping"))
            ),
            "SNAPSHOT": lambda self: self.expression(
                nodes.DropSnapshot(exists=self._parse_exists(), this=self._parse_name("snapshot"))
            ),
            "VIEW": lambda self: self.expression(
                nodes.DropView(exists=self._parse_exists(), this=self._parse_name("view"))
            ),
            "DIFF": lambda self: self.expression(
                nodes.DropDiff(exists=self._parse_exists(), this=self._parse_name("diff"))
            ),
        }
        SHOW_PARSERS: t.ClassVar = {
            "JOBS": lambda self: self.expression(nodes.ShowJobs()),
            "MAPPINGS": lambda self: self.expression(nodes.ShowMappings()),
            "SNAPSHOTS": lambda self: self.expression(nodes.ShowSnapshots()),
            "VIEWS": lambda self: self.expression(nodes.ShowViews()),
        }
        DESCRIBE_PARSERS: t.ClassVar = {
            "JOB": lambda self: self.expression(nodes.DescribeJob(this=self._parse_name("job"))),
            "SNAPSHOT": lambda self: self.expression(
                nodes.DescribeSnapshot(this=self._parse_name("snapshot"))
            ),
        }
        ALTER_PARSERS: t.ClassVar = {"JOB": lambda self: self._parse_alter_job()}
        AWAIT_PARSERS: t.ClassVar = {"JOB": lambda self: self._parse_await_job()}

        # Statements ----------------------------------------------------------------------

        def _parse(
            self,
            parse_method: t.Callable[[parser.Parser], exp.Expr | None],
            raw_tokens: list[Token],
            sql: str | None = None,
        ) -> list[exp.Expr | None]:
            self.reset()
            self.sql = sql or ""
            self._chunks = chunk_tokens(raw_tokens)
            return self._parse_batch_statements(parse_method=parse_method, sep_first_statement=False)

        def _parse_statement(self) -> exp.Expr | None:
            first = self._curr
            if not first:
                return None
            if first.token_type in self.QUERY_START_TOKENS:
                return self._parse_query_statement()

            statement = self.STATEMENT_PARSERS.get(first.token_type)
            if statement is None and first.token_type not in self.TEXT_MATCH_EXCLUDED_TOKENS:
                statement = self.WORD_STATEMENT_PARSERS.get(first.text.upper())
            if statement is None:
                hint = self.REJECTED_STATEMENTS.get(first.text.upper())
                # Only a plain word can be a misspelt keyword: UPDATE is not a typo of CREATE.
                typo = did_you_mean(first.text, STATEMENT_WORDS) if first.token_type == TokenType.VAR else ""
                self.raise_error(
                    hint or f"unknown statement {first.text!r}: pitstop accepts {ACCEPTED_STATEMENTS}{typo}",
                    first,
                    hinted=bool(hint),
                )
            self._advance()
            return statement(self)

        def _parse_word(
            self, after: str, parsers: dict[str, t.Callable], context: str = "", **kwargs: t.Any
        ) -> exp.Expr:
            """Dispatch on the word after ``after`` (``DROP JOB``, ``SHOW MAPPINGS``, ...);
            ``context`` is the key of ``REJECTED_WORDS`` (``after`` unless given)."""
            word = self._curr
            if not self._match_texts(parsers):
                rejected = self.REJECTED_WORDS.get(context or after, {})
                if word and word.token_type not in LITERAL_TOKENS and word.text.upper() in rejected:
                    self.raise_error(rejected[word.text.upper()], word, hinted=True)
                got = f", got {word.text!r}{did_you_mean(word.text, parsers)}" if word else ""
                self.raise_error(f"expected {one_of(sorted(parsers))} after {after}{got}", word)
            return parsers[word.text.upper()](self, **kwargs)

        def _parse_query_statement(self) -> exp.Expr:
            start = self._curr
            # As sqlglot's own statement parser: "(SELECT ...) UNION ..." starts as an expression.
            query = self._parse_expression()
            query = self._parse_set_operations(query) if query else self._parse_select()
            query = self._parse_query_modifiers(query)
            if not isinstance(query, exp.Query | exp.Values):
                self.raise_error("expected a statement or a query (SELECT ...)", start)
            return t.cast(exp.Expr, query)

        def _parse_create_statement(self) -> exp.Expr:
            replace = self._match_pair(TokenType.OR, TokenType.REPLACE)
            return self._parse_word(
                "CREATE OR REPLACE" if replace else "CREATE",
                self.CREATE_PARSERS,
                context="CREATE",
                replace=replace,
            )

        def _parse_set_option(self) -> nodes.SetOption:
            expected = "SET 'key' = 'value'"
            if self._match(TokenType.STRING):
                key = self._prev.text
            else:
                key = self._parse_setting_name(expected)
            if not self._match(TokenType.EQ):
                self.raise_error(
                    f"expected = after setting {key!r}: {expected} (quote a name that is not "
                    "a plain dotted name)"
                )
            if not self._match(TokenType.STRING):
                self.raise_error(f"the value of setting {key!r} is a quoted string: {expected}")
            value = self._prev.text
            return self.expression(
                nodes.SetOption(this=exp.Literal.string(key), expression=exp.Literal.string(value))
            )

        def _parse_setting_name(self, expected: str) -> str:
            """An unquoted setting name: words joined by dots (``pitstop.trigger_ms``)."""
            parts: list[str] = []
            while True:
                token = self._curr
                if not token or token.token_type in LITERAL_TOKENS or not _WORD.fullmatch(token.text):
                    got = f", got {token.text!r}" if token else ""
                    self.raise_error(f"expected a setting name after SET{got}: {expected}", token)
                parts.append(token.text)
                self._advance()
                if not self._match(TokenType.DOT):
                    return ".".join(parts)

        def _parse_explain(self) -> nodes.Explain | nodes.ExplainAnalyze:
            start = self._curr
            if start and start.text.upper() == "EXPLAIN":
                self.raise_error("EXPLAIN EXPLAIN is not a statement", start)
            if start and start.text.upper() == "PLAN":
                self.raise_error("write EXPLAIN <statement>, without PLAN FOR", start)
            if not start:
                self.raise_error(f"expected a statement after EXPLAIN: {ACCEPTED_STATEMENTS}")
            if self._match_text_seq("ANALYZE"):
                if not self._curr:
                    self.raise_error("expected CREATE JOB after EXPLAIN ANALYZE", self._prev)
                return self.expression(nodes.ExplainAnalyze(this=self._parse_statement()))
            return self.expression(nodes.Explain(this=self._parse_statement()))

        # Views ---------------------------------------------------------------------------

        def _parse_create_view(self, replace: bool) -> nodes.CreateView:
            exists = self._parse_exists(not_=True)
            name = self._parse_name("view")
            expected = f"CREATE VIEW {name.name} AS SELECT ..."
            if not self._match(TokenType.ALIAS):
                self.raise_error(f"expected AS after view {name.name!r}: {expected}")
            start = self._curr
            if not start or start.token_type not in self.QUERY_START_TOKENS:
                self.raise_error(f"a view's body is a query: {expected}", start)
            query: exp.Expr = self._parse_query_statement()
            while isinstance(query, exp.Subquery) and not query.alias:
                query = query.this
            if not isinstance(query, (exp.Select, exp.Union)):
                self.raise_error(f"a view's body is a SELECT or a UNION of SELECTs: {expected}", start)
            return self.expression(
                nodes.CreateView(this=name, expression=query, replace=replace, exists=exists)
            )

        # Snapshots -----------------------------------------------------------------------

        def _parse_create_snapshot(self, replace: bool) -> nodes.CreateSnapshot:
            name = self._parse_name("snapshot")
            if not self._match_text_seq("FOR", "JOB"):
                self.raise_error(f"expected FOR JOB <job> after snapshot {name.name!r}")
            job = self._parse_name("job")
            return self.expression(nodes.CreateSnapshot(this=name, job=job, replace=replace))

    class Generator(generator.Generator):
        TRANSFORMS: t.ClassVar = {
            **generator.Generator.TRANSFORMS,
            nodes.Option: lambda self, e: f"{self.sql(e, 'this')}={self.sql(e, 'expression')}",
            nodes.Watermark: lambda self, e: (
                f"WATERMARK FOR {self.sql(e, 'this')} AS {self.sql(e, 'this')} - {self.sql(e, 'expression')}"
            ),
            nodes.CreateMapping: lambda self, e: create_mapping_sql(self, e),
            nodes.DropMapping: lambda self, e: drop_sql(self, e, "MAPPING"),
            nodes.ShowMappings: lambda self, e: "SHOW MAPPINGS",
            nodes.CreateJob: lambda self, e: create_job_sql(self, e),
            nodes.DropJob: lambda self, e: (
                drop_sql(self, e, "JOB") + clause(self, e, "snapshot", " WITH SNAPSHOT ")
            ),
            nodes.ShowJobs: lambda self, e: "SHOW JOBS",
            nodes.AlterJob: lambda self, e: alter_job_sql(self, e),
            nodes.AwaitJob: lambda self, e: (
                f"AWAIT JOB {self.sql(e, 'this')}" + clause(self, e, "timeout", " TIMEOUT ")
            ),
            nodes.DescribeJob: lambda self, e: f"DESCRIBE JOB {self.sql(e, 'this')}",
            nodes.CreateSnapshot: lambda self, e: (
                f"CREATE {'OR REPLACE ' if e.args.get('replace') else ''}SNAPSHOT "
                f"{self.sql(e, 'this')} FOR JOB {self.sql(e, 'job')}"
            ),
            nodes.DropSnapshot: lambda self, e: drop_sql(self, e, "SNAPSHOT"),
            nodes.ShowSnapshots: lambda self, e: "SHOW SNAPSHOTS",
            nodes.DescribeSnapshot: lambda self, e: f"DESCRIBE SNAPSHOT {self.sql(e, 'this')}",
            nodes.CreateView: lambda self, e: (
                f"CREATE {'OR REPLACE ' if e.args.get('replace') else ''}VIEW "
                f"{'IF NOT EXISTS ' if e.args.get('exists') else ''}{self.sql(e, 'this')} "
                f"AS {self.sql(e, 'expression')}"
            ),
            nodes.DropView: lambda self, e: drop_sql(self, e, "VIEW"),
            nodes.ShowViews: lambda self, e: "SHOW VIEWS",
            nodes.SetOption: lambda self, e: f"SET {self.sql(e, 'this')} = {self.sql(e, 'expression')}",
            nodes.Explain: lambda self, e: f"EXPLAIN {self.sql(e, 'this')}",
            nodes.ExplainAnalyze: lambda self, e: f"EXPLAIN ANALYZE {self.sql(e, 'this')}",
            nodes.DropDiff: lambda self, e: drop_sql(self, e, "DIFF"),
            nodes.WindowTvf: window_tvf_sql,
            nodes.ImposeOrder: impose_order_sql,
        }
