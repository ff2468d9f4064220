"""The rewrite of one parsed PostgreSQL statement into DuckDB over the emulated catalog, bottom-up,
one handler per kind of node (``_REWRITES``):

- a relation of ``pg_catalog`` or ``information_schema`` becomes a reference to its CTE, which the
  statement gets, with the CTEs that one needs (:class:`Context`); ``public`` becomes DuckDB's
  ``main``; a function in FROM becomes DuckDB's table function, or a one-row table of its value;
- a call of an emulated function is inlined from its template
  (:mod:`pitstop.server.pgcatalog.functions`);
- ``::regclass``, ``::regtype``... casts become look-ups of the OID, or the name where a result
  column shows one; casts to PostgreSQL's other type names become DuckDB's;
- ``OPERATOR(pg_catalog.~)`` becomes a regex match, ``x = ANY('{r,p}')`` a list, and
  ``COLLATE pg_catalog.default`` disappears.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from pitstop.server.pgcatalog.functions import FUNCTIONS
from pitstop.server.pgcatalog.oids import DATABASE
from pitstop.server.pgcatalog.views import VIEWS, ctes_of, needed


@dataclass(frozen=True)
class Context:
    """What one statement's rewrite collects: the CTEs it needs, in dependency order."""

    ctes: list[str]
    user_ctes: frozenset[str]

    def need(self, names: Iterable[str]) -> None:
        for name in names:
            if name not in self.ctes:
                self.ctes.append(name)


# Function templates --------------------------------------------------------------------------------
_PLACEHOLDER = re.compile(r"\{(\d+)\}")


@functools.cache
def _template(sql: str) -> exp.Expr:
    """A function template parsed as DuckDB, its arguments as columns ``__pgc_arg_N``."""
    parsed: exp.Expr = exp.maybe_parse(_PLACEHOLDER.sub(r"__pgc_arg_\1", sql), dialect="duckdb")
    return parsed


def _instantiate(sql: str, args: list[exp.Expr]) -> exp.Expr:
    """The template with the call's arguments in place. An argument the template does not use but
    that holds a bound parameter is kept (DuckDB refuses parameters a statement does not use)."""

    def fill(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name.startswith("__pgc_arg_"):
            index = int(node.name[len("__pgc_arg_") :])
            return args[index].copy() if index < len(args) else exp.null()
        return node

    result = _template(sql).copy().transform(fill)
    used = {int(i) for i in _PLACEHOLDER.findall(sql)}
    for index, arg in enumerate(args):
        if index not in used and arg.find(exp.Parameter, exp.Placeholder) is not None:
            unused = exp.Case(
                ifs=[exp.If(this=exp.Is(this=arg.copy(), expression=exp.null()), true=exp.null())]
            )
            result = exp.Coalesce(this=result, expressions=[unused])
    return result


# Tables, columns and function calls ----------------------------------------------------------------
_CATALOG_SCHEMAS = ("pg_catalog", "information_schema")
_PG_TYPE = "pg_type"
"""Key of ``Expression.meta`` naming the reg* type of a rewritten cast (``regclass``...)."""


def _schema_of(node: exp.Expr, key: str = "db") -> str:
    part = node.args.get(key)
    return part.name.lower() if isinstance(part, exp.Identifier) else ""


# Functions that PostgreSQL calls in FROM and that DuckDB knows as table functions; any other
# function there (Grafana: FROM string_to_array(...) s) is a one-row table of its value.
_TABLE_FUNCTIONS = frozenset(
    {"generate_series", "unnest", "explode", "generate_subscripts", "range", "regexp_split_to_table",
     "json_each", "json_each_text", "json_array_elements", "json_array_elements_text", "json_object_keys"}
)  # fmt: skip


def _from_function(table: exp.Table, schema: str) -> exp.Expr:
    """``FROM f(...) [AS a(c)]``: DuckDB's table function, or a one-row table of a scalar's value."""
    if schema in _CATALOG_SCHEMAS:
        table.set("db", None)
    func = table.this
    alias = table.args.get("alias")
    if isinstance(alias, exp.TableAlias) and not alias.columns:  # PostgreSQL: AS a names the column too
        alias.set("columns", [exp.to_identifier(alias.name)])
    if isinstance(func, exp.Explode | exp.Unnest | exp.GenerateSeries | exp.ExplodingGenerateSeries):
        return table
    name = str(func.this).lower() if isinstance(func, exp.Anonymous) else type(func).__name__.lower()
    if name in _TABLE_FUNCTIONS:
        return table
    columns = alias.columns if isinstance(alias, exp.TableAlias) else []
    column = columns[0].name if columns else alias.name if isinstance(alias, exp.TableAlias) else name
    subquery_alias = exp.TableAlias(this=exp.to_identifier(alias.name if alias else name))
    value = exp.select(exp.alias_(func.copy(), column, quoted=True))
    return exp.Subquery(this=value, alias=subquery_alias)


def _rewrite_table(table: exp.Table, ctx: Context) -> exp.Expr:
    schema, name = _schema_of(table), table.name.lower()
    if not isinstance(table.this, exp.Identifier):  # a function in FROM
        return _from_function(table, schema)
    if not schema and name in ctx.user_ctes:
        return table
    view = VIEWS.get((schema or "pg_catalog", name))
    if view is not None and (schema in _CATALOG_SCHEMAS or not schema):
        ctx.need(needed(view.cte))
        alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(name))
        return exp.Table(this=exp.to_identifier(view.cte), alias=alias)
    if _schema_of(table, "catalog") == DATABASE:
        table.set("catalog", None)
    if schema == "public":
        table.set("db", exp.to_identifier("main"))
    return table


# Reserved words of PostgreSQL that read like columns: never a column unless quoted.
SQL_VALUE_WORDS = {
    "user": "current_user",
    "current_role": "current_user",
    "current_catalog": "current_catalog",
}


def _rewrite_column(column: exp.Column, ctx: Context) -> exp.Expr:
    word = column.name.lower()
    if word in SQL_VALUE_WORDS and not column.table and not column.this.quoted:
        return _call(SQL_VALUE_WORDS[word], [], ctx)
    schema = _schema_of(column)
    if schema in _CATALOG_SCHEMAS:
        column.set("db", None)
        column.set("catalog", None)
    elif schema == "public":
        column.set("db", exp.to_identifier("main"))
    return column


TYPED_FUNCTIONS: dict[type[exp.Expr], str] = {
    exp.CurrentUser: "current_user",
    exp.SessionUser: "session_user",
    exp.CurrentSchema: "current_schema",
    exp.CurrentSchemas: "current_schemas",
    exp.CurrentDatabase: "current_database",
    exp.CurrentCatalog: "current_catalog",
    exp.CurrentVersion: "version",
}
_RENAMED = {"json_build_object": "json_object", "jsonb_build_object": "json_object"}


def _function_args(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    this = node.args.get("this")
    return [this] if isinstance(this, exp.Expr) else []


def _call(name: str, args: list[exp.Expr], ctx: Context) -> exp.Expr:
    template = FUNCTIONS.get(f"{name}/{len(args)}", FUNCTIONS[name])
    ctx.need(ctes_of(template))
    return _instantiate(template, args)


def _rewrite_anonymous(node: exp.Anonymous, ctx: Context) -> exp.Expr:
    name = str(node.this).lower()
    if name in _RENAMED:
        return exp.Anonymous(this=_RENAMED[name], expressions=list(node.expressions))
    if name not in FUNCTIONS:
        return node
    return _call(name, _function_args(node), ctx)


def _rewrite_typed_function(node: exp.Expr, ctx: Context) -> exp.Expr:
    return _call(TYPED_FUNCTIONS[type(node)], _function_args(node), ctx)


def _unwrap_qualified(node: exp.Dot, ctx: Context) -> exp.Expr:
    """``pg_catalog.format_type(...)`` -> ``format_type(...)`` (already rewritten, bottom-up)."""
    if isinstance(node.this, exp.Identifier) and node.this.name.lower() in _CATALOG_SCHEMAS:
        if not isinstance(node.expression, exp.Identifier):
            return node.expression
    return node


# Casts ------------------------------------------------------------------------------------------------
_OID_TYPES = frozenset(
    {"oid", "regclass", "regtype", "regnamespace", "regproc", "regprocedure", "regrole", "regoper",
     "regoperator", "regconfig", "regdictionary", "regcollation", "xid", "cid", "xid8"}
)  # fmt: skip
_TEXT_TYPES = frozenset({"text", "varchar", "name", "char", "bpchar", "character varying", "character"})
_VECTOR_COLUMNS = frozenset({"indkey", "indclass", "indcollation", "indoption", "stxkeys", "partattrs"})
# Catalog columns holding arrays, compared by clients with array literals ('{0}').
_ARRAY_COLUMNS = frozenset(
    {"polroles", "stxkind", "proargtypes", "proallargtypes", "proargmodes", "proargnames"}
)
_DUCKDB_TYPES = {
    "int2": "SMALLINT", "int4": "INTEGER", "int8": "BIGINT", "float4": "FLOAT", "float8": "DOUBLE",
    "bool": "BOOLEAN", "text": "VARCHAR", "varchar": "VARCHAR", "name": "VARCHAR", "char": "VARCHAR",
    "bpchar": "VARCHAR", "numeric": "DECIMAL", "json": "JSON", "jsonb": "JSON", "bytea": "BLOB",
    "timestamp": "TIMESTAMP", "timestamptz": "TIMESTAMPTZ", "date": "DATE", "time": "TIME",
    "interval": "INTERVAL", "uuid": "UUID", "aclitem": "VARCHAR", "int2vector": "SMALLINT[]",
    "oidvector": "UINTEGER[]", "pg_node_tree": "VARCHAR", "anyarray": "VARCHAR[]",
}  # fmt: skip


def type_name(to: exp.Expr) -> str:
    """A cast target as PostgreSQL names it, lower case, without ``pg_catalog.``: ``regclass``,
    ``int2[]``, ``text``."""
    if isinstance(to, exp.ObjectIdentifier):
        return str(to.this).lower()
    if isinstance(to, exp.DataType) and to.this == exp.DType.ARRAY and to.expressions:
        return type_name(to.expressions[0]) + "[]"
    if isinstance(to, exp.DataType) and to.this == exp.DType.USERDEFINED:
        kind = to.args.get("kind")
        name = kind.name if isinstance(kind, exp.Dot | exp.Identifier) else str(kind)
        return name.lower().strip('"')
    return to.sql(dialect="postgres").lower()


def _is_name_source(node: exp.Expr) -> bool:
    """True for text that names an object (a string literal or a bound parameter)."""
    return (isinstance(node, exp.Literal) and node.is_string) or isinstance(
        node, exp.Parameter | exp.Placeholder
    )


_LOOKUPS = {
    "regclass": "to_regclass",
    "regtype": "to_regtype",
    "regnamespace": "to_regnamespace",
    "regrole": "to_regrole",
}


def _to_oid(kind: str, operand: exp.Expr, ctx: Context) -> exp.Expr:
    """``operand::regclass`` (and the other OID types): the OID, marked with its type."""
    oid = exp.DataType.build("UINTEGER", dialect="duckdb")
    if isinstance(operand, exp.Literal) and operand.is_string and operand.name.strip().isdigit():
        result: exp.Expr = exp.cast(exp.Literal.number(operand.name.strip()), oid)
    elif not _is_name_source(operand):
        result = exp.cast(operand, oid)
    elif kind in _LOOKUPS:
        result = exp.Paren(
            this=_call(_LOOKUPS[kind], [exp.cast(operand, exp.DataType.build("VARCHAR"))], ctx)
        )
    elif isinstance(operand, exp.Parameter | exp.Placeholder):  # $1::oid: the number bound
        result = exp.cast(operand, oid)
    else:
        result = exp.cast(exp.null(), oid)
    result.meta[_PG_TYPE] = kind
    return result


_NAME_OF: dict[str, Callable[[exp.Expr, Context], exp.Expr]] = {
    "regclass": lambda oid, ctx: _call("pgc_regclass_name", [oid], ctx),
    "regtype": lambda oid, ctx: _call("format_type", [oid, exp.null()], ctx),
    "regnamespace": lambda oid, ctx: _call("pgc_namespace_name", [oid], ctx),
    "regrole": lambda oid, ctx: _call("pg_get_userbyid", [oid], ctx),
}


def _named(node: exp.Expr, ctx: Context) -> exp.Expr | None:
    """The text PostgreSQL prints for a rewritten reg* cast (a table's name...; OID 0 prints as
    ``-``), else None."""
    inner = node.unnest() if isinstance(node, exp.Paren) else node
    builder = _NAME_OF.get(inner.meta.get(_PG_TYPE, "")) or _NAME_OF.get(node.meta.get(_PG_TYPE, ""))
    if builder is None:
        return None
    zero = exp.If(
        this=exp.EQ(this=node.copy(), expression=exp.Literal.number(0)), true=exp.Literal.string("-")
    )
    return exp.Case(ifs=[zero], default=builder(node, ctx))


def _rewrite_cast(cast: exp.Cast, ctx: Context) -> exp.Expr:
    kind = type_name(cast.to)
    operand = cast.this
    if kind in _TEXT_TYPES:
        inner = operand.unnest() if isinstance(operand, exp.Paren) else operand
        named = _named(operand, ctx)
        if named is not None:
            return named
        if isinstance(inner, exp.Column) and inner.name.lower() in _VECTOR_COLUMNS:
            return exp.func("array_to_string", inner, exp.Literal.string(" "))
        return exp.cast(operand, exp.DataType.build("VARCHAR"))
    if kind in _OID_TYPES:
        return _to_oid(kind, operand, ctx)
    if kind.endswith("[]"):
        element = kind[:-2]
        duck = "UINTEGER" if element in _OID_TYPES else _DUCKDB_TYPES.get(element)
        if duck is None:
            return cast
        source = _call("pgc_text_array", [operand], ctx) if _is_name_source(operand) else operand
        return exp.cast(source, exp.DataType.build(f"{duck}[]", dialect="duckdb"))
    if kind in _DUCKDB_TYPES:
        return exp.cast(operand, exp.DataType.build(_DUCKDB_TYPES[kind], dialect="duckdb"))
    return cast


# Operators and array literals ---------------------------------------------------------------------
_OPERATORS: dict[str, Callable[[exp.Expr, exp.Expr], exp.Expr]] = {
    "~": lambda a, b: exp.RegexpLike(this=a, expression=b),
    "~*": lambda a, b: exp.RegexpILike(this=a, expression=b),
    "!~": lambda a, b: exp.not_(exp.RegexpLike(this=a, expression=b)),
    "!~*": lambda a, b: exp.not_(exp.RegexpILike(this=a, expression=b)),
    "~~": lambda a, b: exp.Like(this=a, expression=b),
    "~~*": lambda a, b: exp.ILike(this=a, expression=b),
    "!~~": lambda a, b: exp.not_(exp.Like(this=a, expression=b)),
    "!~~*": lambda a, b: exp.not_(exp.ILike(this=a, expression=b)),
    "=": lambda a, b: exp.EQ(this=a, expression=b),
    "<>": lambda a, b: exp.NEQ(this=a, expression=b),
}


def _rewrite_operator(node: exp.Operator, ctx: Context) -> exp.Expr:
    """``a OPERATOR(pg_catalog.~) b``, as psql writes a regex match."""
    op = str(node.args.get("operator", "")).split(".")[-1].strip()
    builder = _OPERATORS.get(op)
    return builder(node.this, node.expression) if builder else node


def _array_literal(text: str) -> exp.Array | None:
    """``'{r,p,""}'`` -> ``['r', 'p', '']``; None when the text is not an array literal."""
    match = re.fullmatch(r"\s*\{(.*)\}\s*", text, re.S)
    if match is None:
        return None
    body = match.group(1).strip()
    items = [item.strip().strip('"') for item in body.split(",")] if body else []
    return exp.Array(expressions=[exp.Literal.string(item) for item in items])


def _rewrite_any(node: exp.Any, ctx: Context) -> exp.Expr:
    """``x = ANY('{r,p}')`` and ``x = ANY($1)`` (a parameter in PostgreSQL's array syntax)."""
    inner = node.this.unnest() if isinstance(node.this, exp.Paren) else node.this
    if isinstance(inner, exp.Literal) and inner.is_string:
        array = _array_literal(inner.name)
        return exp.Any(this=array) if array is not None else node
    if isinstance(inner, exp.Parameter | exp.Placeholder):
        return exp.Any(this=_call("pgc_text_array", [inner], ctx))
    return node


def _rewrite_comparison(node: exp.Expr, ctx: Context) -> exp.Expr:
    """``pol.polroles = '{0}'``: an array column of the catalog compared with an array literal."""
    for side, other in (("expression", node.this), ("this", node.args.get("expression"))):
        value = node.args.get(side)
        if isinstance(other, exp.Column) and other.name.lower() in _ARRAY_COLUMNS:
            if isinstance(value, exp.Literal) and value.is_string:
                array = _array_literal(value.name)
                if array is not None:
                    node.set(side, array)
    return node


def _display_reg_casts(select: exp.Select, ctx: Context) -> exp.Expr:
    """``SELECT c.oid::regclass``: a reg* cast that is a result column shows the name, as
    PostgreSQL prints it."""
    for projection in select.expressions:
        target = projection.this if isinstance(projection, exp.Alias) else projection
        named = _named(target, ctx)
        if named is not None:
            target.replace(named)
    return select


_Rewrite = Callable[[Any, Context], exp.Expr]
_REWRITES: dict[type[exp.Expr], _Rewrite] = {
    exp.Dot: _unwrap_qualified,
    exp.Table: _rewrite_table,
    exp.Column: _rewrite_column,
    exp.Anonymous: _rewrite_anonymous,
    exp.Cast: _rewrite_cast,
    exp.Operator: _rewrite_operator,
    exp.Collate: lambda node, ctx: node.this,  # COLLATE pg_catalog.default
    exp.Any: _rewrite_any,
    exp.EQ: _rewrite_comparison,
    exp.NEQ: _rewrite_comparison,
    exp.Select: _display_reg_casts,
}
_REWRITES.update({cls: _rewrite_typed_function for cls in TYPED_FUNCTIONS})


def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
    """Rewrite bottom-up: a node's children are rewritten before the node is."""
    for child in list(node.iter_expressions()):
        new = rewrite(child, ctx)
        if new is not child:
            child.replace(new)
    handler = _REWRITES.get(type(node))
    return handler(node, ctx) if handler else node
