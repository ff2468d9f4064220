"""PostgreSQL's character types and ``format``, for :mod:`pitstop.server.pgsemantics` (each a
rewrite of one node, given the types of its parts):

- ``x::varchar(n)`` keeps the first n characters (an explicit cast truncates in PostgreSQL;
  DuckDB's VARCHAR has no length); ``x::char(n)`` (``char`` is ``char(1)``) too, and is padded
  with spaces to n where it is a result column -- inside an expression a ``bpchar``'s trailing
  spaces do not count (``length``, ``||``, ``=``), so there it is the characters without them;
- a result column cast to ``varchar`` or ``char`` is described as PostgreSQL's ``varchar``
  (1043) or ``bpchar`` (1042) with its length as the type modifier, not as ``text``
  (:attr:`pitstop.server.pgsemantics.Translation.column_types`);
- a result column that names a subquery's or a CTE's ``char(n)`` column (``SELECT c FROM (SELECT
  x::char(3) AS c ...) s``) is padded there and described as ``character(n)``
  (:func:`referenced_chars`);
- ``format('%s has %s', region, orders)`` is PostgreSQL's: ``%s`` prints a NULL as nothing, ``%L``
  as ``NULL`` and a value quoted, ``%%`` is ``%``, ``%2$s`` takes the second argument, ``%-10s`` /
  ``%10s`` pad to a width (sqlglot passes it on as DuckDB's ``format``, whose placeholders are
  ``{}``: the text came back as written). A format string that is not a literal, ``%I`` and a
  width given by an argument (``%*s``) are refused (0A000).
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, build_scope

from pitstop.server.pgfunctions import Kinds, Refused
from pitstop.server.pgkinds import removes_duplicates, set_branches
from pitstop.server.pgnumtext import TEXT, call
from pitstop.server.pgtypes import BPCHAR, VARCHAR, PgType

__all__ = ["DESCRIBED", "PADDED", "char_cast", "format_text", "referenced_chars", "set_operation_chars"]

D = exp.DType
DESCRIBED = "pgs_described"
"""A node's meta: the PostgreSQL type (a :class:`PgType`) a result column of its value is
described as, where DuckDB's type would say otherwise (its VARCHAR is ``text``)."""
PADDED = "pgs_padded"
"""A node's meta: a ``char(n)`` cast in a branch of the outermost UNION (INTERSECT, EXCEPT) whose
result column is a ``bpchar``: padded to n, as a result column is."""
_CHAR_TYPES = (D.CHAR, D.NCHAR, D.BPCHAR)
_STRING = "VARCHAR"


def _length(to: exp.DataType) -> int | None:
    """The n of ``varchar(n)`` / ``char(n)``; ``char`` alone is ``char(1)``, ``bpchar`` and
    ``varchar`` alone have none."""
    if to.expressions:
        param = to.expressions[0]
        literal = param.this if isinstance(param, exp.DataTypeParam) else param
        if isinstance(literal, exp.Literal) and literal.is_int:
            return int(literal.name)
        return None
    return 1 if to.this in (D.CHAR, D.NCHAR) else None


def _text(node: exp.Expr, ctx: Kinds) -> exp.Expr:
    """A value as the text its cast to a character type gives (PostgreSQL's output function,
    but ``true`` for a boolean, as ``::text`` prints it)."""
    if node.meta.get(TEXT):  # a numeric text: its text
        node.meta.pop(TEXT)
        return node
    kind, datatype = ctx.kind(node), ctx.type(node)
    if kind == "text" or isinstance(node, exp.Null):
        return node
    if datatype is not None and datatype.this == D.DOUBLE:  # float8out, not DuckDB's 100.0 and inf
        return call("pgs_float_text", node)
    return exp.cast(node, exp.DataType.build(_STRING))


def char_cast(node: exp.Cast, ctx: Kinds, result: bool) -> exp.Expr | None:
    """``x::varchar``, ``x::varchar(n)``, ``x::char(n)``, ``x::bpchar``: truncated to n characters,
    a ``char(n)`` that is a ``result`` column padded to n, and described as PostgreSQL's type."""
    to = node.to
    if to.this not in (D.VARCHAR, *_CHAR_TYPES):
        return None
    length = _length(to)
    char = to.this in _CHAR_TYPES
    value = _text(node.this, ctx)
    if length is not None:
        value = call("left", value, exp.Literal.number(length))
        if char:  # a bpchar's trailing spaces are not part of its value
            value = call("rtrim", value, exp.Literal.string(" "))
            if result:
                value = call("rpad", value, exp.Literal.number(length), exp.Literal.string(" "))
    elif value is node.this:
        value = exp.cast(value, exp.DataType.build(_STRING))
    if result:
        value.meta[DESCRIBED] = _described(BPCHAR if char else VARCHAR, length)
    return value


def _described(base: PgType, length: int | None) -> PgType:
    if length is None:
        return base
    name = "character" if base is BPCHAR else "character varying"
    return PgType(base.oid, base.name, base.size, f"{name}({length})", length + 4, base.element)


# -- UNION ----------------------------------------------------------------------------------------
def set_operation_chars(tree: exp.Expr) -> dict[int, PgType]:
    """``SELECT x::char(4) ... UNION ALL SELECT ...``: PostgreSQL's result column is a ``bpchar``
    when the first branch that is not a bare string constant has a ``char(n)`` there; each
    ``char(n)`` value keeps its padding (its cast is marked :data:`PADDED`), and the column is
    described as ``character(n)`` when every branch is a ``char(n)`` of the same n, else as
    ``bpchar``. Otherwise (a text first) the values are text, without trailing spaces, as they
    are here anyway. The result columns described so, by 0-based index.

    Raises Refused (0A000) for a UNION, INTERSECT or EXCEPT that removes duplicates among
    ``char`` values of different lengths: PostgreSQL compares them without their trailing spaces,
    which DuckDB cannot be told."""
    if not isinstance(tree, exp.SetOperation):
        return {}
    branches = set_branches(tree)
    if not branches or any(isinstance(p, exp.Star) for b in branches for p in b.expressions):
        return {}
    found: dict[int, PgType] = {}
    for index in range(min(len(b.expressions) for b in branches)):
        values = [b.expressions[index] for b in branches]
        values = [v.this if isinstance(v, exp.Alias) else v for v in values]
        chars = [v for v in values if isinstance(v, exp.Cast) and v.to.this in _CHAR_TYPES]
        first = next((v for v in values if not (isinstance(v, exp.Literal) and v.is_string)), None)
        if first is None or first not in chars:
            continue
        lengths = {_length(v.to) for v in chars}
        if len(chars) < len(values) or len(lengths) > 1:
            if removes_duplicates(tree):
                raise Refused(
                    "0A000",
                    "pitstop cannot compare char(n) values of different lengths, or with text, in a "
                    "UNION, INTERSECT or EXCEPT as PostgreSQL does (without their trailing spaces); "
                    "cast every branch's column to one char(n), or use UNION ALL",
                )
            found[index] = BPCHAR
        else:
            found[index] = _described(BPCHAR, lengths.pop())
        for cast in chars:
            cast.meta[PADDED] = True
    return found


_DEPTH = 16


def referenced_chars(tree: exp.Expr) -> dict[int, PgType]:
    """The outermost SELECT's result columns that name a subquery's or a CTE's ``char(n)`` column
    (a cast there, or a UNION ALL whose every branch casts to the same ``char(n)``): padded to n
    here, where they are result columns (inside the subquery a ``bpchar``'s trailing spaces do
    not count), and described as ``character(n)``; by 0-based index. Rewrites ``tree``.

    Raises Refused (0A000) for such a column whose branches are ``char`` values of different
    lengths, or ``char`` and text: PostgreSQL pads each value to its own branch's length."""
    if not isinstance(tree, exp.Select) or not tree.args.get("from_"):
        return {}
    try:
        scope = build_scope(tree)
    except Exception:  # sqlglot's scoping refuses some statements: nothing known
        return {}
    if scope is None:
        return {}
    found: dict[int, PgType] = {}
    for index, projection in enumerate(tree.expressions):
        column = projection.this if isinstance(projection, exp.Alias) else projection
        if not isinstance(column, exp.Column) or isinstance(column.this, exp.Star):
            continue
        length = _char_column(column, scope, 0)
        if length is None:
            continue
        padded = call("rpad", column.copy(), exp.Literal.number(length), exp.Literal.string(" "))
        if projection is column:
            projection.replace(exp.alias_(padded, column.name, quoted=True))
        else:
            column.replace(padded)
        found[index] = _described(BPCHAR, length)
    return found


def _char_column(column: exp.Column, scope: Scope, depth: int) -> int | None:
    """The n of the ``char(n)`` a subquery's or CTE's column named by ``column`` is; None when it
    is not one (or not known)."""
    sources = [source for _, source in scope.selected_sources.values()]
    if column.table:
        named = scope.selected_sources.get(column.table)
        sources = [named[1]] if named else []
    for source in sources:
        if not isinstance(source, Scope) or depth >= _DEPTH:
            continue
        branches = set_branches(source.expression)
        if not branches or any(isinstance(p, exp.Star) for b in branches for p in b.expressions):
            continue
        names = [p.alias_or_name for p in branches[0].expressions]
        if column.name not in names:
            continue
        index = names.index(column.name)
        values = [b.expressions[index] for b in branches if len(b.expressions) > index]
        values = [v.this if isinstance(v, exp.Alias) else v for v in values]
        if len(values) == 1 and isinstance(values[0], exp.Column):
            return _char_column(values[0], source, depth + 1)  # a column of a subquery of its own
        chars = [v for v in values if isinstance(v, exp.Cast) and v.to.this in _CHAR_TYPES]
        first = next((v for v in values if not (isinstance(v, exp.Literal) and v.is_string)), None)
        if first is None or first not in chars:
            return None
        lengths = {_length(v.to) for v in chars}
        if len(chars) < len(values) or len(lengths) > 1 or None in lengths:
            raise Refused(
                "0A000",
                f"pitstop cannot pad the char values of column {column.name!r} as PostgreSQL does "
                "(each to its own branch's length); cast every branch's column to one char(n)",
            )
        return lengths.pop()
    return None


# -- format ----------------------------------------------------------------------------------------
_SPEC = re.compile(r"%(?:(?P<position>\d+)\$)?(?P<flags>-?)(?P<width>\*|\d*)(?P<type>.?)", re.S)


def _format_text(node: exp.Expr, ctx: Kinds) -> exp.Expr:
    """A value as ``format``'s ``%s`` prints it: PostgreSQL's output function (a boolean is
    ``t``), and nothing for a NULL."""
    datatype = ctx.type(node)
    if datatype is not None and datatype.this == D.BOOLEAN:
        text: exp.Expr = exp.Case(
            ifs=[exp.If(this=node, true=exp.Literal.string("t")), exp.If(this=exp.Not(this=node.copy()),
                 true=exp.Literal.string("f"))],
        )  # fmt: skip
    else:
        text = _text(node, ctx)
    return exp.Coalesce(this=text, expressions=[exp.Literal.string("")])


def _literal(text: exp.Expr) -> exp.Expr:
    """``%L``: NULL unquoted; a value quoted, its quotes doubled, ``E'...'`` with its backslashes
    doubled when it has one (PostgreSQL's quote_literal)."""
    has_backslash = call("contains", text, exp.Literal.string("\\"))
    doubled = call("replace", text.copy(), exp.Literal.string("'"), exp.Literal.string("''"))
    escaped = call("replace", doubled.copy(), exp.Literal.string("\\"), exp.Literal.string("\\\\"))
    return exp.Case(
        ifs=[
            exp.If(this=exp.Is(this=text.copy(), expression=exp.Null()), true=exp.Literal.string("NULL")),
            exp.If(this=has_backslash, true=call("concat", exp.Literal.string("E'"), escaped,
                                                 exp.Literal.string("'"))),
        ],
        default=call("concat", exp.Literal.string("'"), doubled, exp.Literal.string("'")),
    )  # fmt: skip


def _padded(text: exp.Expr, width: str, left: bool) -> exp.Expr:
    """``%10s`` pads on the left, ``%-10s`` on the right, and never cuts."""
    if not width:
        return text
    size = call("greatest", call("length", text), exp.Literal.number(int(width)))
    return call("rpad" if left else "lpad", text.copy(), size, exp.Literal.string(" "))


def format_text(node: exp.Format, ctx: Kinds) -> exp.Expr | None:
    """``format(fmt, args...)`` with a literal ``fmt``, as PostgreSQL prints it."""
    pattern, args = node.this, list(node.expressions)
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise Refused("0A000", "pitstop's format() needs its format string as a literal ('%s has %s')")
    text, at, next_arg = pattern.name, 0, 0
    parts: list[exp.Expr] = []
    for match in _SPEC.finditer(text):
        if match.start() > at:
            parts.append(exp.Literal.string(text[at : match.start()]))
        at = match.end()
        kind = match.group("type")
        if kind == "%" and not (match.group("position") or match.group("flags") or match.group("width")):
            parts.append(exp.Literal.string("%"))
            continue
        if not kind:
            raise Refused("22023", "unterminated format() type specifier")
        if kind not in "sIL":
            raise Refused("22023", f'unrecognized format() type specifier "{kind}"')
        if kind == "I" or match.group("width") == "*":
            raise Refused(
                "0A000",
                "pitstop's format() prints %s and %L with a width written as a number; for an "
                "identifier write '\"' || replace(x, '\"', '\"\"') || '\"'",
            )
        index = int(match.group("position")) - 1 if match.group("position") else next_arg
        if index < 0:
            raise Refused("22023", "format specifies argument 0, but arguments are numbered from 1")
        if index >= len(args):
            raise Refused("22023", "too few arguments for format()")
        next_arg = index + 1
        value = _format_text(args[index].copy(), ctx)
        if kind == "L":
            value = _literal(_text(args[index].copy(), ctx))
        parts.append(_padded(value, match.group("width"), bool(match.group("flags"))))
    if at < len(text):
        parts.append(exp.Literal.string(text[at:]))
    if not parts:
        return exp.Literal.string("")
    return call("concat", *parts) if len(parts) > 1 else parts[0]
