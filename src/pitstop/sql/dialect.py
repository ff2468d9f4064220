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
"""

from __future__ import annotations

import re
import typing as t

from sqlglot import exp, generator, parser, tokens
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import Token, TokenType

from pitstop.connectors import registry
from pitstop.errors import SqlError
from pitstop.intervals import interval_micros
from pitstop.sql import nodes, statements
from pitstop.sql.typos import SuspectParseError, suspects
from pitstop.sql.windows import (
    TABLE_FUNCTION_PARAMS,
    WINDOW_TVF_PARAMS,
    TableFunctionParser,
    impose_order_sql,
    window_tvf_sql,
)
from pitstop.sql.words import LITERAL_TOKENS, did_you_mean, one_of

__all__ = [
    "MAPPING_KINDS",
    "TABLE_FUNCTION_PARAMS",
    "WINDOW_TVF_PARAMS",
    "JobBlock",
    "PitstopDialect",
    "chunk_tokens",
    "did_you_mean",
    "one_of",
    "position",
]

ACCEPTED_STATEMENTS = statements.ACCEPTED
# The first words of every statement, for "did you mean" on a misspelt one.
STATEMENT_WORDS = tuple(sorted({s.name.split()[0] for s in statements.STATEMENTS} | {"WITH", "VALUES"}))
JOB_BODY_EXPECTED = "a job's body is INSERT INTO <sink> SELECT ..., or BEGIN ... END around several"
MAPPING_KINDS = registry.TYPE_NAMES  # the connectors' names (pitstop.connectors.registry)

_T = exp.DataType.Type
MAPPING_COLUMN_TYPES = {
    _T.BIGINT: "BIGINT",
    _T.INT: "INT",
    _T.SMALLINT: "SMALLINT",
    _T.TINYINT: "TINYINT",
    _T.DOUBLE: "DOUBLE",
    _T.FLOAT: "FLOAT",
    _T.DECIMAL: "DECIMAL(p, s)",
    _T.VARCHAR: "VARCHAR",
    _T.TEXT: "STRING",
    _T.BOOLEAN: "BOOLEAN",
    _T.TIMESTAMP: "TIMESTAMP",
    _T.DATE: "DATE",
}

_CLAUSE_NAMES = {"conflict": "ON CONFLICT", "by_name": "BY NAME", "overwrite": "OVERWRITE"}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class JobBlock:
    """Tracks whether a statement is inside a job's ``AS BEGIN ... END`` block, word by word.

    The block opens at ``BEGIN`` right after the ``AS`` that ends a job's header (``CREATE JOB``
    or ``EXPLAIN CREATE JOB``, before any INSERT/SINK/SELECT/WITH). Inside it ``BEGIN`` and
    ``CASE`` open a level and ``END`` closes one, so ``CASE ... END`` does not end the block.
    Shared by :func:`chunk_tokens` (tokens) and ``parser.split_statements`` (characters).
    """

    BODY_WORDS = frozenset({"INSERT", "SINK", "SELECT", "WITH"})

    def __init__(self) -> None:
        self.depth = 0
        self._head: list[str] = []
        self._previous = ""
        self._in_body = False

    def feed(self, word: str) -> None:
        """The next upper-case word of the statement; "" for a literal or punctuation."""
        if self.depth:
            if word in ("BEGIN", "CASE"):
                self.depth += 1
            elif word == "END":
                self.depth -= 1
        elif word == "BEGIN" and self._previous == "AS" and self._in_job_header():
            self.depth = 1
        if word and len(self._head) < 5:
            self._head.append(word)
        self._in_body = self._in_body or word in self.BODY_WORDS
        self._previous = word

    def _in_job_header(self) -> bool:
        return (
            not self._in_body
            and bool(self._head)
            and self._head[0] in ("CREATE", "EXPLAIN")
            and "JOB" in self._head
        )


def chunk_tokens(raw_tokens: list[Token]) -> list[list[Token]]:
    """Split tokens into statements at ';', except inside a job's ``AS BEGIN ... END`` block
    (see :class:`JobBlock`). Empty statements are dropped."""
    chunks: list[list[Token]] = [[]]
    block = JobBlock()
    for token in raw_tokens:
        if token.token_type == TokenType.SEMICOLON and not block.depth:
            chunks.append([])
            block = JobBlock()
            continue
        chunks[-1].append(token)
        block.feed("" if token.token_type in LITERAL_TOKENS else token.text.upper())
    return [chunk for chunk in chunks if chunk] or [[]]


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, col) of character ``offset`` in ``text``."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


class PitstopDialect(Dialect):
    class Tokenizer(tokens.Tokenizer):
        # No statement is swallowed as a raw string (sqlglot's Command fallback).
        COMMANDS: t.ClassVar[set[TokenType]] = set()
        KEYWORDS = {k: v for k, v in tokens.Tokenizer.KEYWORDS.items() if k != "EXPLAIN"}

    class Parser(TableFunctionParser):
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

        ALTER_JOB_ACTIONS: t.ClassVar = {
            "SUSPEND": lambda self: None,
            "RESUME": lambda self: None,
            "RESTART": lambda self: None,
            "OPTIONS": lambda self: self._parse_options(),
        }

        # What a job's INSERT may hold: the sink (a table, or a table with a column list), the
        # query and its CTEs. Anything else sqlglot reads (ON CONFLICT, RETURNING, ...) is refused.
        JOB_INSERT_ARGS: t.ClassVar = frozenset({"this", "expression", "with_"})

        # Clauses between a job's name and AS, in any order: word -> (arg name, parser).
        JOB_CLAUSE_PARSERS: t.ClassVar = {
            "OPTIONS": ("options", lambda self: self._parse_options()),
            "FROM": ("snapshot", lambda self: self._parse_from_snapshot()),
            "UNTIL": ("until", lambda self: self._parse_snapshot_clause("UNTIL", "UNTIL SNAPSHOT <name>")),
        }

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

        # Mappings ------------------------------------------------------------------------

        def _parse_create_mapping(self, replace: bool) -> nodes.CreateMapping:
            exists = self._parse_exists(not_=True)
            name = self._parse_name("mapping")
            columns: list[exp.ColumnDef] = []
            watermark: nodes.Watermark | None = None
            if self._match(TokenType.L_PAREN):
                columns, watermark = self._parse_mapping_columns()
            if not self._match_text_seq("TYPE"):
                self.raise_error(f"expected TYPE <{one_of(MAPPING_KINDS)}> after mapping {name.name!r}")
            kind_token = self._curr
            kind = self._parse_name("mapping type")
            if kind.name.upper() not in {k.upper() for k in MAPPING_KINDS}:
                self.raise_error(
                    f"unknown mapping type {kind.name!r}: use {one_of(MAPPING_KINDS)}"
                    f"{did_you_mean(kind.name, MAPPING_KINDS)}",
                    kind_token,
                )
            options = self._parse_options() if self._match_text_seq("OPTIONS") else None
            return self.expression(
                nodes.CreateMapping(
                    this=name,
                    columns=columns,
                    watermark=watermark,
                    kind=kind,
                    options=options,
                    replace=replace,
                    exists=exists,
                )
            )

        def _parse_mapping_columns(self) -> tuple[list[exp.ColumnDef], nodes.Watermark | None]:
            columns: list[exp.ColumnDef] = []
            watermark: nodes.Watermark | None = None
            while True:
                if self._match_text_seq("WATERMARK"):
                    if watermark is not None:
                        self.raise_error("a mapping has one WATERMARK clause", self._prev)
                    watermark = self._parse_watermark()
                else:
                    columns.append(self._parse_mapping_column())
                if not self._match(TokenType.COMMA):
                    break
            self._match_r_paren()
            return columns, watermark

        def _parse_mapping_column(self) -> exp.ColumnDef:
            if self._curr and self._curr.text.upper().startswith(("PRIMARY", "CONSTRAINT")):
                self.raise_error(
                    "a mapping has no keys or constraints: remove the PRIMARY KEY / CONSTRAINT clause",
                    self._curr,
                )
            name = self._parse_name("column")
            type_token = self._curr
            kind = self._parse_types(check_func=False, schema=True, allow_identifiers=False)
            if not isinstance(kind, exp.DataType) or kind.this not in MAPPING_COLUMN_TYPES:
                written = self.sql[type_token.start : self._prev.end + 1] if kind else type_token.text
                shown = repr(written) if type_token else "nothing"
                self.raise_error(
                    f"unsupported type {shown} for column {name.name!r}: use "
                    f"{one_of(sorted(set(MAPPING_COLUMN_TYPES.values())))}",
                    type_token,
                )
            if self._curr and self._curr.text.upper() == "EXTERNAL":
                self.raise_error(
                    f"pitstop reads column {name.name!r} by its name: remove EXTERNAL NAME", self._curr
                )
            return self.expression(exp.ColumnDef(this=name, kind=kind))

        def _parse_watermark(self) -> nodes.Watermark:
            if not self._match(TokenType.FOR):
                self.raise_error("expected FOR <column> after WATERMARK")
            column = self._parse_name("column")
            expected = f"WATERMARK FOR {column.name} AS {column.name} - INTERVAL 'n' unit"
            if not self._match(TokenType.ALIAS):
                self.raise_error(f"expected AS in the watermark of column {column.name!r}: {expected}")
            ref_token = self._curr
            ref = self._parse_id_var(any_token=False)
            if not isinstance(ref, exp.Identifier) or ref.name.lower() != column.name.lower():
                self.raise_error(
                    f"the watermark of column {column.name!r} must subtract an interval from "
                    f"{column.name!r}: {expected}",
                    ref_token,
                )
            if not self._match(TokenType.DASH):
                self.raise_error(
                    f"the watermark of column {column.name!r} must be {column.name} - INTERVAL "
                    f"'n' unit: {expected}"
                )
            delay = self._parse_pitstop_interval(f"the watermark of column {column.name!r}")
            return self.expression(nodes.Watermark(this=column, expression=delay))

        # Jobs ----------------------------------------------------------------------------

        def _parse_create_job(self, replace: bool) -> nodes.CreateJob:
            if replace:
                self.raise_error(
                    "CREATE OR REPLACE JOB is not supported: DROP JOB <name> WITH SNAPSHOT <snap>, "
                    "then CREATE JOB <name> FROM SNAPSHOT <snap> AS ...",
                    self._prev,
                )
            exists = self._parse_exists(not_=True)
            name = self._parse_name("job")
            clauses: dict[str, t.Any] = {}
            while self._match_texts(self.JOB_CLAUSE_PARSERS):
                word = self._prev
                key, parse_clause = self.JOB_CLAUSE_PARSERS[word.text.upper()]
                if key in clauses:
                    self.raise_error(f"{word.text.upper()} is given twice for job {name.name!r}", word)
                clauses[key] = parse_clause(self)
            if not self._match(TokenType.ALIAS):
                word = self._curr
                typo = did_you_mean(word.text, [*self.JOB_CLAUSE_PARSERS, "AS"]) if word else ""
                self.raise_error(
                    f"expected OPTIONS (...), FROM SNAPSHOT <name> or AS <body> after job {name.name!r}{typo}"
                )
            return self.expression(
                nodes.CreateJob(this=name, exists=exists, body=self._parse_job_body(), **clauses)
            )

        def _parse_from_snapshot(self) -> exp.Identifier:
            return self._parse_snapshot_clause("FROM", "FROM SNAPSHOT <name>")

        def _parse_snapshot_clause(self, after: str, expected: str) -> exp.Identifier:
            word = self._curr
            if not self._match_text_seq("SNAPSHOT"):
                got = f", got {word.text!r}{did_you_mean(word.text, ['SNAPSHOT'])}" if word else ""
                self.raise_error(f"expected SNAPSHOT after {after} ({expected}){got}", word)
            return self._parse_name("snapshot")

        def _parse_job_body(self) -> list[exp.Insert]:
            if not self._match(TokenType.BEGIN):
                return [self._parse_job_insert()]
            inserts: list[exp.Insert] = []
            while not self._match(TokenType.END):
                if not self._curr:
                    self.raise_error("expected END to close the job's BEGIN block")
                inserts.append(self._parse_job_insert())
                if not self._match(TokenType.SEMICOLON) and not self._match(TokenType.END, advance=False):
                    self.raise_error("expected ';' or END after the INSERT")
            if not inserts:
                self.raise_error(f"empty BEGIN ... END: {JOB_BODY_EXPECTED}", self._prev)
            return inserts

        def _parse_job_insert(self) -> exp.Insert:
            start = self._curr
            with_ = self._parse_with() if self._match(TokenType.WITH, advance=False) else None
            if not (self._match(TokenType.INSERT) or self._match_text_seq("SINK")):
                self.raise_error(JOB_BODY_EXPECTED, self._curr if with_ else start)
            if not self._match(TokenType.INTO, advance=False):
                self.raise_error(f"expected INTO after {self._prev.text.upper()}: {JOB_BODY_EXPECTED}")
            insert = self._parse_insert()
            if not isinstance(insert, exp.Insert) or not isinstance(insert.expression, exp.Query):
                self.raise_error(f"a job's INSERT reads from a SELECT: {JOB_BODY_EXPECTED}", start)
            extra = sorted(k for k, v in insert.args.items() if v and k not in self.JOB_INSERT_ARGS)
            if extra:
                self.raise_error(
                    f"a job's INSERT is INSERT INTO <sink> [(<columns>)] SELECT ...: pitstop does not "
                    f"support {_CLAUSE_NAMES.get(extra[0], extra[0].upper().replace('_', ' '))} here",
                    start,
                )
            if with_ is not None:
                insert.set("with_", with_)
            return t.cast(exp.Insert, insert)

        def _parse_drop_job(self) -> nodes.DropJob:
            exists = self._parse_exists()
            name = self._parse_name("job")
            snapshot = None
            if self._match(TokenType.WITH):
                snapshot = self._parse_snapshot_clause(
                    "WITH", f"DROP JOB {name.name} WITH SNAPSHOT <snapshot>"
                )
            return self.expression(nodes.DropJob(this=name, exists=exists, snapshot=snapshot))

        def _parse_alter_job(self) -> nodes.AlterJob:
            name = self._parse_name("job")
            word = self._curr
            if not self._match_texts(self.ALTER_JOB_ACTIONS):
                got = f", got {word.text!r}{did_you_mean(word.text, self.ALTER_JOB_ACTIONS)}" if word else ""
                self.raise_error(
                    f"expected {one_of(self.ALTER_JOB_ACTIONS)} after ALTER JOB {name.name}{got}", word
                )
            action = word.text.upper()
            options = self.ALTER_JOB_ACTIONS[action](self)
            if action == "OPTIONS":
                # Hazelcast's ALTER JOB j OPTIONS (...) RESUME: new options, then resume.
                after = self._curr
                if self._match_text_seq("RESUME"):
                    action = "RESUME"
                elif after and after.text.upper() in self.ALTER_JOB_ACTIONS:
                    self.raise_error(
                        f"only RESUME may follow ALTER JOB {name.name} OPTIONS (...), got "
                        f"{after.text.upper()}",
                        after,
                    )
            return self.expression(nodes.AlterJob(this=name, action=action, options=options))

        def _parse_await_job(self) -> nodes.AwaitJob:
            name = self._parse_name("job")
            timeout = None
            word = self._curr
            typo = did_you_mean(word.text, ["TIMEOUT"]) if word.token_type == TokenType.VAR else ""
            if self._match_text_seq("TIMEOUT"):
                timeout = self._parse_pitstop_interval(f"the timeout of AWAIT JOB {name.name}")
            elif typo:
                self.raise_error(
                    f"expected TIMEOUT INTERVAL 'n' unit or the end of AWAIT JOB {name.name}, got "
                    f"{word.text!r}{typo}",
                    word,
                )
            return self.expression(nodes.AwaitJob(this=name, timeout=timeout))

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

        # Shared pieces -------------------------------------------------------------------

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

    class Generator(generator.Generator):
        TRANSFORMS: t.ClassVar = {
            **generator.Generator.TRANSFORMS,
            nodes.Option: lambda self, e: f"{self.sql(e, 'this')}={self.sql(e, 'expression')}",
            nodes.Watermark: lambda self, e: (
                f"WATERMARK FOR {self.sql(e, 'this')} AS {self.sql(e, 'this')} - {self.sql(e, 'expression')}"
            ),
            nodes.CreateMapping: lambda self, e: _create_mapping_sql(self, e),
            nodes.DropMapping: lambda self, e: _drop_sql(self, e, "MAPPING"),
            nodes.ShowMappings: lambda self, e: "SHOW MAPPINGS",
            nodes.CreateJob: lambda self, e: _create_job_sql(self, e),
            nodes.DropJob: lambda self, e: (
                _drop_sql(self, e, "JOB") + _clause(self, e, "snapshot", " WITH SNAPSHOT ")
            ),
            nodes.ShowJobs: lambda self, e: "SHOW JOBS",
            nodes.AlterJob: lambda self, e: _alter_job_sql(self, e),
            nodes.AwaitJob: lambda self, e: (
                f"AWAIT JOB {self.sql(e, 'this')}" + _clause(self, e, "timeout", " TIMEOUT ")
            ),
            nodes.DescribeJob: lambda self, e: f"DESCRIBE JOB {self.sql(e, 'this')}",
            nodes.CreateSnapshot: lambda self, e: (
                f"CREATE {'OR REPLACE ' if e.args.get('replace') else ''}SNAPSHOT "
                f"{self.sql(e, 'this')} FOR JOB {self.sql(e, 'job')}"
            ),
            nodes.DropSnapshot: lambda self, e: _drop_sql(self, e, "SNAPSHOT"),
            nodes.ShowSnapshots: lambda self, e: "SHOW SNAPSHOTS",
            nodes.DescribeSnapshot: lambda self, e: f"DESCRIBE SNAPSHOT {self.sql(e, 'this')}",
            nodes.CreateView: lambda self, e: (
                f"CREATE {'OR REPLACE ' if e.args.get('replace') else ''}VIEW "
                f"{'IF NOT EXISTS ' if e.args.get('exists') else ''}{self.sql(e, 'this')} "
                f"AS {self.sql(e, 'expression')}"
            ),
            nodes.DropView: lambda self, e: _drop_sql(self, e, "VIEW"),
            nodes.ShowViews: lambda self, e: "SHOW VIEWS",
            nodes.SetOption: lambda self, e: f"SET {self.sql(e, 'this')} = {self.sql(e, 'expression')}",
            nodes.Explain: lambda self, e: f"EXPLAIN {self.sql(e, 'this')}",
            nodes.ExplainAnalyze: lambda self, e: f"EXPLAIN ANALYZE {self.sql(e, 'this')}",
            nodes.DropDiff: lambda self, e: _drop_sql(self, e, "DIFF"),
            nodes.WindowTvf: window_tvf_sql,
            nodes.ImposeOrder: impose_order_sql,
        }


def _clause(gen: generator.Generator, e: exp.Expr, key: str, prefix: str) -> str:
    value = gen.sql(e, key)
    return f"{prefix}{value}" if value else ""


def _options_sql(gen: generator.Generator, e: exp.Expr) -> str:
    return f"OPTIONS ({', '.join(gen.sql(option) for option in e.args['options'])})"


def _alter_job_sql(gen: generator.Generator, e: nodes.AlterJob) -> str:
    action = e.args["action"]
    if not e.args.get("options"):
        return f"ALTER JOB {gen.sql(e, 'this')} {action}"
    resume = " RESUME" if action == "RESUME" else ""
    return f"ALTER JOB {gen.sql(e, 'this')} {_options_sql(gen, e)}{resume}"


def _drop_sql(gen: generator.Generator, e: exp.Expr, kind: str) -> str:
    exists = "IF EXISTS " if e.args.get("exists") else ""
    return f"DROP {kind} {exists}{gen.sql(e, 'this')}"


def _create_mapping_sql(gen: generator.Generator, e: nodes.CreateMapping) -> str:
    replace = "OR REPLACE " if e.args.get("replace") else ""
    exists = "IF NOT EXISTS " if e.args.get("exists") else ""
    parts = [gen.sql(column) for column in e.args.get("columns") or []]
    if e.args.get("watermark"):
        parts.append(gen.sql(e, "watermark"))
    schema = f" ({', '.join(parts)})" if parts else ""
    options = f" {_options_sql(gen, e)}" if e.args.get("options") else ""
    return f"CREATE {replace}MAPPING {exists}{gen.sql(e, 'this')}{schema} TYPE {gen.sql(e, 'kind')}{options}"


def _create_job_sql(gen: generator.Generator, e: nodes.CreateJob) -> str:
    exists = "IF NOT EXISTS " if e.args.get("exists") else ""
    options = f" {_options_sql(gen, e)}" if e.args.get("options") else ""
    snapshot = _clause(gen, e, "snapshot", " FROM SNAPSHOT ") + _clause(gen, e, "until", " UNTIL SNAPSHOT ")
    inserts = [gen.sql(insert) for insert in e.args["body"]]
    body = inserts[0] if len(inserts) == 1 else f"BEGIN {'; '.join(inserts)}; END"
    return f"CREATE JOB {exists}{gen.sql(e, 'this')}{options}{snapshot} AS {body}"
