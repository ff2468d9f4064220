"""Script-level API of pitstop's SQL dialect: split a script, parse its statements, and read
the few things other modules need from the nodes (names, options, stage hints).

Every error is a :class:`~pitstop.errors.SqlError` positioned in the *script* (1-based line and
column of the offending token's first character), never an ``exp.Command`` or a silent fallback.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from pitstop.errors import BadNameError, SqlError
from pitstop.names import check_name
from pitstop.sql import nodes
from pitstop.sql.blocks import JobBlock, position
from pitstop.sql.dialect import PitstopDialect
from pitstop.sql.typos import SuspectParseError, misspelt_keyword

__all__ = [
    "EXISTING_NAME_ARGS",
    "NAME_ARGS",
    "REFUSED_NAME",
    "ParsedStatement",
    "in_job_block",
    "is_complete",
    "name_of",
    "option_dict",
    "parse_script",
    "parse_script_all",
    "parse_statement",
    "split_statements",
    "stage_hint",
]

_DIALECT = PitstopDialect()
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")
_QUOTES = {"'": "string", '"': "quoted identifier"}

NAME_ARGS: dict[type[exp.Expression], tuple[tuple[str, str], ...]] = {
    nodes.CreateMapping: (("mapping", "this"),),
    nodes.DropMapping: (("mapping", "this"),),
    nodes.ShowMappings: (),
    nodes.CreateJob: (("job", "this"), ("snapshot", "snapshot"), ("snapshot", "until")),
    nodes.DropJob: (("job", "this"), ("snapshot", "snapshot")),
    nodes.ShowJobs: (),
    nodes.AlterJob: (("job", "this"),),
    nodes.AwaitJob: (("job", "this"),),
    nodes.DescribeJob: (("job", "this"),),
    nodes.CreateSnapshot: (("snapshot", "this"), ("job", "job")),
    nodes.DropSnapshot: (("snapshot", "this"),),
    nodes.ShowSnapshots: (),
    nodes.DescribeSnapshot: (("snapshot", "this"),),
    nodes.CreateView: (("view", "this"),),
    nodes.DropView: (("view", "this"),),
    nodes.ShowViews: (),
    nodes.SetOption: (),
    nodes.Explain: (),
    nodes.ExplainAnalyze: (),
    nodes.DropDiff: (),
}
"""Per statement node, ``(kind, argument)`` of every job, snapshot, mapping or view name it takes;
checked by :func:`parse_statement` against :mod:`pitstop.names`. Options that hold a name
(``'initialSnapshotName'``, a DuckDB mapping's ``'table'``), CTE aliases and ``STAGE`` hints of a
job are checked there too."""

EXISTING_NAME_ARGS: frozenset[tuple[type[exp.Expression], str]] = frozenset(
    {
        (nodes.DropMapping, "this"),
        (nodes.DropView, "this"),
        (nodes.DropJob, "this"),
        (nodes.DropSnapshot, "this"),
        (nodes.DescribeJob, "this"),
        (nodes.DescribeSnapshot, "this"),
    }
)
"""Arguments that name an object which must already exist. An older pitstop's catalog may hold an
object whose name the rule now refuses; these statements still reach it by its exact name, so
its user can drop it. The refusal (a :class:`~pitstop.errors.BadNameError`, positioned in the
statement) is kept in the node's ``meta[REFUSED_NAME]``, and the executor raises it unless the
catalog holds that name: nothing on disk is ever addressed by the name itself."""
REFUSED_NAME = "refused_name"

# Options whose value is a name: option key -> kind of name.
_NAME_OPTIONS: dict[type[exp.Expression], dict[str, str]] = {
    nodes.CreateJob: {"initialSnapshotName": "snapshot"},
    nodes.AlterJob: {"initialSnapshotName": "snapshot"},
    nodes.CreateMapping: {"table": "sink table"},
}


@dataclass(frozen=True)
class ParsedStatement:
    node: exp.Expression
    """A node of :mod:`pitstop.sql.nodes`, or ``exp.Select``/``exp.Union`` for ad-hoc queries."""
    text: str
    """The statement's source text, without the trailing ';'."""
    line: int
    """1-based line of the statement's first token in the script."""
    col: int
    """1-based column of the statement's first token in the script."""
    file: str | None = None
    """The script's file (None: typed, piped, ``-c`` or sent by a client)."""


@dataclass(frozen=True)
class _Scan:
    statements: list[tuple[int, int]]
    """(start, end) offsets of each non-empty statement's first and past-last token character."""
    complete: bool
    """The script ends with ';' (or holds nothing but whitespace and comments)."""
    unclosed: tuple[str, int] | None
    """What was left open at the end of the script and where it started: ("string", offset)."""
    backtick: int | None = None
    """Offset of the first backtick outside quotes and comments (Flink's quoted names)."""
    block_open: bool = False
    """The script ends inside a job's ``AS BEGIN ... END`` block."""


def _scan(script: str) -> _Scan:
    """Find statement boundaries: ';' outside quotes, comments and a job's AS BEGIN ... END
    (the same rule as :func:`pitstop.sql.blocks.chunk_tokens`, on characters)."""
    statements: list[tuple[int, int]] = []
    start: int | None = None
    end = 0
    block = JobBlock()
    unclosed: tuple[str, int] | None = None
    backtick: int | None = None
    i, n = 0, len(script)
    while i < n:
        char = script[i]
        if char.isspace():
            i += 1
        elif script.startswith("--", i):
            newline = script.find("\n", i)
            i = n if newline < 0 else newline + 1
        elif script.startswith("/*", i):
            opened = i
            i, closed = _skip_block_comment(script, i)
            if not closed:
                unclosed = ("comment", opened)
        elif char == ";" and not block.depth:
            if start is not None:
                statements.append((start, end))
            start, block = None, JobBlock()
            i += 1
        else:
            if start is None:
                start = i
            word = ""
            if char in _QUOTES:
                opened = i
                i, closed = _skip_quoted(script, i)
                if not closed:
                    unclosed = (_QUOTES[char], opened)
            elif char in _WORD_CHARS:
                j = i
                while j < n and script[j] in _WORD_CHARS:
                    j += 1
                word = "" if char.isdigit() else script[i:j].upper()
                i = j
            else:
                if char == "`" and backtick is None:
                    backtick = i
                i += 1
            block.feed(word)
            end = i
    if start is not None:
        statements.append((start, end))
    complete = start is None and unclosed is None
    return _Scan(statements, complete, unclosed, backtick, bool(block.depth))


def _skip_block_comment(script: str, i: int) -> tuple[int, bool]:
    """Index past the (nested) /* ... */ comment starting at ``i``, and whether it was closed."""
    level = 0
    while i < len(script):
        if script.startswith("/*", i):
            level += 1
            i += 2
        elif script.startswith("*/", i):
            level -= 1
            i += 2
            if level == 0:
                return i, True
        else:
            i += 1
    return i, False


def _skip_quoted(script: str, i: int) -> tuple[int, bool]:
    """Index past the quoted text starting at ``i`` (a doubled quote escapes it)."""
    quote = script[i]
    i += 1
    while i < len(script):
        if script[i] == quote:
            if script.startswith(quote * 2, i):
                i += 2
                continue
            return i + 1, True
        i += 1
    return i, False


def split_statements(script: str) -> list[tuple[str, int, int]]:
    """Split a script into (text, line, col) per statement, without the ';'.

    ``;`` inside strings, quoted identifiers, comments and a job's ``AS BEGIN ... END`` block
    does not split; statements holding only whitespace and comments are skipped. ``line`` and
    ``col`` (1-based) are those of the statement's first token.
    """
    result = []
    for start, end in _scan(script).statements:
        line, col = position(script, start)
        result.append((script[start:end], line, col))
    return result


def in_job_block(text: str) -> bool:
    """Whether ``text`` ends inside a job's ``AS BEGIN ... END`` block (what psql, which splits
    at every ';', sends of a multi-sink job before its END)."""
    return _scan(text).block_open


def is_complete(text: str) -> bool:
    """Whether ``text`` ends with a ';' that closes a statement (for a shell's Enter key)."""
    scan = _scan(text)
    return scan.complete and bool(scan.statements)


def parse_statement(text: str) -> exp.Expression:
    """Parse exactly one statement; SqlError (positioned in ``text``) if it is not one."""
    scan = _scan(text)
    if scan.unclosed is not None:
        what, offset = scan.unclosed
        _raise_at(text, offset, f"unterminated {what}: close it before the end of the statement")
    if not scan.statements:
        raise SqlError("empty statement: expected a statement", 1, 1, text.split("\n")[0], None)
    if len(scan.statements) > 1:
        _raise_at(text, scan.statements[1][0], "expected one statement, found a second one here")
    if scan.backtick is not None:
        _raise_at(text, scan.backtick, 'quote names with double quotes ("name"), not backticks')

    try:
        tokens = _DIALECT.tokenize(text)
    except TokenError as error:
        _raise_at(text, error.start or 0, f"cannot read this statement: {error}")
    try:
        expressions = _DIALECT.parser().parse(tokens, text)
    except ParseError as error:
        typo = misspelt_keyword(text, error, _reached) if isinstance(error, SuspectParseError) else None
        if typo is not None:
            word, keyword = typo
            _raise_at(text, word.start, f"unknown word {word.text!r} — did you mean {keyword}?")
        detail = error.errors[0] if error.errors else {}
        line, col = detail.get("line") or 1, detail.get("col") or 1
        message = detail.get("description") or str(error)
        raise SqlError(message, line, col, _source_line(text, line)) from None

    nodes = [node for node in expressions if node is not None]
    node = nodes[0] if len(nodes) == 1 else None
    if not isinstance(node, exp.Expression) or node.find(exp.Command):
        # Unreachable by construction (no Command fallback); kept so nothing slips through.
        raise SqlError("pitstop could not read this statement", 1, 1, _source_line(text, 1))
    _check_names(node, text)
    return node


def _reached(text: str) -> int | None:
    """How far the parser gets in ``text`` (an offset), or None if it parses: how
    :func:`~pitstop.sql.typos.misspelt_keyword` tries a keyword in place of a word."""
    try:
        _DIALECT.parser().parse(_DIALECT.tokenize(text), text)
    except SuspectParseError as error:
        return error.reached
    except (ParseError, TokenError):
        return 0
    return None


def _check_names(node: exp.Expression, text: str) -> None:
    """Refuse a statement that takes a job, snapshot, mapping, view or stage name outside the
    rule of :mod:`pitstop.names`, positioned at the name."""
    if isinstance(node, nodes.Explain | nodes.ExplainAnalyze):
        _check_names(node.this, text)
        return
    for kind, arg in NAME_ARGS.get(type(node), ()):
        value = node.args.get(arg)
        if value is None:
            continue
        try:
            _check_name_at(text, kind, name_of(value), value)
        except BadNameError as refused:
            if (type(node), arg) not in EXISTING_NAME_ARGS:
                raise
            node.meta[REFUSED_NAME] = refused
    named_options = _NAME_OPTIONS.get(type(node), {})
    for option in node.args.get("options") or []:
        option_kind = named_options.get(option.this.name)
        if option_kind is not None:
            _check_name_at(text, option_kind, option.expression.name, option.expression)
    if isinstance(node, nodes.CreateJob):
        for cte in node.find_all(exp.CTE):
            alias = cte.args.get("alias")
            if alias is not None:
                _check_name_at(text, "stage", alias.name, alias)
        for select in node.find_all(exp.Select):
            hinted = _stage_hint_node(select)
            if hinted is not None:
                _check_name_at(text, "stage", _hint_name(hinted), hinted, _hint_start(text, hinted))


def _check_name_at(text: str, kind: str, name: str, node: exp.Expression, start: int | None = None) -> None:
    try:
        check_name(kind, name)
    except BadNameError as error:
        start = _start_of(node) if start is None else start
        if start is None:
            raise
        line, col = position(text, start)
        raise error.at(line, col, _source_line(text, line)) from None


def _hint_start(text: str, node: exp.Expression) -> int | None:
    """Offset of a STAGE hint's argument in the statement. sqlglot parses a hint's text on its
    own, so the argument's offsets count from just after its ``/*+``: find the hint whose text
    holds the argument, as written, there."""
    relative = _start_of(node)
    if relative is None:
        return None
    written = node.sql(dialect=_DIALECT)
    at = text.find("/*+")
    while at >= 0:
        start = at + 3 + relative
        if text.startswith(written, start):
            return start
        at = text.find("/*+", at + 3)
    return None


def _start_of(node: exp.Expression) -> int | None:
    """Offset of a node's first character in the statement (None: the parser recorded none)."""
    starts = [
        part.meta["start"]
        for part in (node, *node.find_all(exp.Identifier, exp.Literal))
        if isinstance(part.meta.get("start"), int)
    ]
    return min(starts, default=None)


def parse_script(script: str, file: str | None = None) -> list[ParsedStatement]:
    """Parse every statement of a script; the first bad one raises SqlError positioned in the
    script, with ``file`` passed through."""
    parsed, errors = _parse_script(script, file, stop_at_first=True)
    if errors:
        raise errors[0]
    return parsed


def parse_script_all(script: str, file: str | None = None) -> tuple[list[ParsedStatement], list[SqlError]]:
    """Parse every statement of a script, going on after a bad one (for ``pitstop check``).

    Returns the statements that parsed and one SqlError per statement that did not (positioned
    in the script, in script order, with ``file`` passed through). A string or quoted
    identifier left open swallows the rest of the script, so it is reported once.
    """
    return _parse_script(script, file, stop_at_first=False)


def _parse_script(
    script: str, file: str | None, stop_at_first: bool
) -> tuple[list[ParsedStatement], list[SqlError]]:
    parsed: list[ParsedStatement] = []
    errors: list[SqlError] = []
    for text, line, col in split_statements(script):
        try:
            node = parse_statement(text)
        except SqlError as error:
            inner_line, inner_col = error.line or 1, error.col or 1
            at_line = line + inner_line - 1
            at_col = col + inner_col - 1 if inner_line == 1 else inner_col
            error.at(at_line, at_col, _source_line(script, at_line), file)
            errors.append(error)
            if stop_at_first:
                return parsed, errors
            continue
        parsed.append(ParsedStatement(node=node, text=text, line=line, col=col, file=file))
    unclosed = _scan(script).unclosed
    if unclosed is not None and unclosed[0] == "comment":
        # A string or identifier left open is inside the last statement's text and reported
        # there; only a comment can be left open outside every statement.
        what, offset = unclosed
        at_line, at_col = position(script, offset)
        errors.append(
            SqlError(
                f"unterminated {what}: close it before the end of the script",
                at_line,
                at_col,
                _source_line(script, at_line),
                file,
            )
        )
    return parsed, errors


def stage_hint(select: exp.Expression) -> str | None:
    """The name in a ``SELECT /*+ STAGE(name) */`` hint, or None without one. A dotted name
    (``STAGE(daily_revenue.aggregate)``) is the whole dotted text."""
    hinted = _stage_hint_node(select)
    return None if hinted is None else _hint_name(hinted)


def _stage_hint_node(select: exp.Expression) -> exp.Column | exp.Identifier | None:
    """The argument node of a ``SELECT /*+ STAGE(name) */`` hint, or None without one."""
    hint = select.args.get("hint")
    if not isinstance(hint, exp.Hint):
        return None
    found: list[exp.Column | exp.Identifier] = []
    for item in hint.expressions:
        if isinstance(item, exp.Anonymous) and item.name.upper() == "STAGE":
            args = item.expressions
            if len(args) != 1 or not isinstance(args[0], (exp.Column, exp.Identifier)):
                raise SqlError(f"a STAGE hint names one stage: /*+ STAGE(name) */, got {item.sql()}")
            found.append(args[0])
        elif isinstance(item, str) and "STAGE" in item.upper():
            raise SqlError(f"malformed hint /*+ {item} */: write /*+ STAGE(name) */")
    if len(found) > 1:
        names = ", ".join(repr(_hint_name(n)) for n in found)
        raise SqlError(f"a SELECT has one STAGE hint, got {names}")
    return found[0] if found else None


def _hint_name(node: exp.Column | exp.Identifier) -> str:
    if isinstance(node, exp.Column):
        return ".".join(part.name for part in node.parts)
    return node.name


def option_dict(options: list[exp.Expression] | None) -> dict[str, str]:
    """``OPTIONS ('k'='v', ...)`` as a dict; SqlError on a key given twice."""
    result: dict[str, str] = {}
    for option in options or []:
        key = option.this.name
        if key in result:
            raise SqlError(f"option {key!r} is given twice")
        result[key] = option.expression.name
    return result


def name_of(node: exp.Expression | str) -> str:
    """The text of a name (identifier, column, table or string); unquoted names keep the case
    they were written in."""
    if isinstance(node, str):
        return node
    if isinstance(node, (exp.Identifier, exp.Column, exp.Table, exp.Literal, exp.TableAlias)):
        return node.name
    raise TypeError(f"not a name: {node.sql() if isinstance(node, exp.Expression) else node!r}")


def _source_line(text: str, line: int) -> str:
    lines = text.split("\n")
    return lines[line - 1].rstrip("\r") if 0 < line <= len(lines) else ""


def _raise_at(text: str, offset: int, message: str) -> None:
    line, col = position(text, offset)
    raise SqlError(message, line, col, _source_line(text, line))
