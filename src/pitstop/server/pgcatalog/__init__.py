"""PostgreSQL's catalog, emulated over DuckDB: what clients ask ``pg_catalog`` and
``information_schema`` when they connect and browse, answered from pitstop's home.

psql, JDBC, SQLAlchemy, asyncpg, pgcli and Superset list tables and columns by querying
``pg_class``, ``pg_attribute``, ``pg_type``... and calling ``format_type``, ``pg_get_expr``,
``::regclass``. DuckDB's own ``pg_catalog`` answers few of those statements, and some wrongly
(DuckDB type ids in ``atttypid``, schema ``main``, OIDs that change per process), and refuses new
entries. So every statement a client sends is rewritten before it reaches DuckDB:

1. it is parsed as PostgreSQL (sqlglot, with ``::oid[]``-style array casts added);
2. the top-level result columns get PostgreSQL's names (``count``, ``format_type``, ``?column?``);
3. references to emulated ``pg_catalog`` / ``information_schema`` relations become references to
   CTEs (``pgc_pg_class``...) that are added to the statement with the CTEs they need;
   ``public`` becomes DuckDB's ``main``;
4. emulated functions (``format_type``, ``pg_get_userbyid``, ``current_schemas``...) are inlined
   as DuckDB expressions; ``::regclass``/``::regtype`` casts become look-ups or names;
   ``OPERATOR(pg_catalog.~)`` a regex match; ``COLLATE pg_catalog.default`` disappears;
5. the result is generated as DuckDB SQL.

Nothing is created in DuckDB but four per-connection macros (``prepare``: the user, the backend
process id and key, the session's settings) and the server's functions behind ``pg_stat_activity``
(:mod:`pitstop.server.activity`): creating temporary views and macros costs ~0.3 ms each, so a
catalog of them would cost every client ~40 ms on connect. Static tables (``pg_type``,
``pg_settings``...) travel as one JSON string each, which DuckDB binds far faster than VALUES.

What the emulated catalog shows: DuckDB schema ``main`` as ``public`` (the sink tables), the
``pitstop`` schema (pitstop's own catalog tables), ``pg_catalog`` and ``information_schema``;
tables with PostgreSQL type OIDs and typmods (from :mod:`pitstop.server.pgtypes`), primary keys,
unique and check constraints with their indexes, comments. Relation OIDs are md5 hashes of
``schema.name`` (:func:`relation_oid`), the same in every process. Every OID column (and
``::oid``, ``::regclass``...) is a DuckDB UINTEGER, which result sets describe as PostgreSQL's oid
(:mod:`pitstop.server.pgtypes`), and a list of them as oid[]. The search path is ``public`` (after
``pg_catalog``): ``pitstop.jobs`` must be qualified.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import duckdb
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from pitstop.server import pgsemantics
from pitstop.server.pgcatalog.functions import FUNCTIONS
from pitstop.server.pgcatalog.oids import DATABASE, OWNER, relation_oid
from pitstop.server.pgcatalog.relation import lit
from pitstop.server.pgcatalog.views import CTE_SQL, VIEWS, ctes_of, needed

__all__ = ["DATABASE", "DIALECT", "PgCatalog", "relation_oid", "translate"]

log = logging.getLogger(__name__)


# -- parsing ---------------------------------------------------------------------------------------
class _PgDialect(Postgres):
    """PostgreSQL as clients write it (strict where PostgreSQL is: :mod:`pgsemantics`), plus arrays
    of OID-like types (``::oid[]``, ``::regtype[]``)."""

    class Parser(pgsemantics.StrictParser):
        def _parse_types(
            self,
            check_func: bool = False,
            schema: bool = False,
            allow_identifiers: bool = True,
            with_collation: bool = False,
        ) -> exp.Expr | None:
            this = super()._parse_types(check_func, schema, allow_identifiers, with_collation)
            if isinstance(this, exp.ObjectIdentifier) and self._match_pair(
                TokenType.L_BRACKET, TokenType.R_BRACKET
            ):
                return exp.DataType(this=exp.DType.ARRAY, expressions=[this], nested=True)
            return this


DIALECT = _PgDialect()
"""How client statements are parsed (here, and for their parameters' casts in paramtypes)."""
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


# -- the rewrite -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Context:
    """What one statement's rewrite collects: the CTEs it needs, in dependency order."""

    ctes: list[str]
    user_ctes: frozenset[str]

    def need(self, names: Iterable[str]) -> None:
        for name in names:
            if name not in self.ctes:
                self.ctes.append(name)


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


def _rewrite_table(table: exp.Table, ctx: _Context) -> exp.Expr:
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
_SQL_VALUE_WORDS = {
    "user": "current_user",
    "current_role": "current_user",
    "current_catalog": "current_catalog",
}


def _rewrite_column(column: exp.Column, ctx: _Context) -> exp.Expr:
    word = column.name.lower()
    if word in _SQL_VALUE_WORDS and not column.table and not column.this.quoted:
        return _call(_SQL_VALUE_WORDS[word], [], ctx)
    schema = _schema_of(column)
    if schema in _CATALOG_SCHEMAS:
        column.set("db", None)
        column.set("catalog", None)
    elif schema == "public":
        column.set("db", exp.to_identifier("main"))
    return column


_TYPED_FUNCTIONS: dict[type[exp.Expr], str] = {
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


def _call(name: str, args: list[exp.Expr], ctx: _Context) -> exp.Expr:
    template = FUNCTIONS.get(f"{name}/{len(args)}", FUNCTIONS[name])
    ctx.need(ctes_of(template))
    return _instantiate(template, args)


def _rewrite_anonymous(node: exp.Anonymous, ctx: _Context) -> exp.Expr:
    name = str(node.this).lower()
    if name in _RENAMED:
        return exp.Anonymous(this=_RENAMED[name], expressions=list(node.expressions))
    if name not in FUNCTIONS:
        return node
    return _call(name, _function_args(node), ctx)


def _rewrite_typed_function(node: exp.Expr, ctx: _Context) -> exp.Expr:
    return _call(_TYPED_FUNCTIONS[type(node)], _function_args(node), ctx)


def _unwrap_qualified(node: exp.Dot, ctx: _Context) -> exp.Expr:
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


def _type_name(to: exp.Expr) -> str:
    """A cast target as PostgreSQL names it, lower case, without ``pg_catalog.``: ``regclass``,
    ``int2[]``, ``text``."""
    if isinstance(to, exp.ObjectIdentifier):
        return str(to.this).lower()
    if isinstance(to, exp.DataType) and to.this == exp.DType.ARRAY and to.expressions:
        return _type_name(to.expressions[0]) + "[]"
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


def _to_oid(kind: str, operand: exp.Expr, ctx: _Context) -> exp.Expr:
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


_NAME_OF: dict[str, Callable[[exp.Expr, _Context], exp.Expr]] = {
    "regclass": lambda oid, ctx: _call("pgc_regclass_name", [oid], ctx),
    "regtype": lambda oid, ctx: _call("format_type", [oid, exp.null()], ctx),
    "regnamespace": lambda oid, ctx: _call("pgc_namespace_name", [oid], ctx),
    "regrole": lambda oid, ctx: _call("pg_get_userbyid", [oid], ctx),
}


def _named(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
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


def _rewrite_cast(cast: exp.Cast, ctx: _Context) -> exp.Expr:
    kind = _type_name(cast.to)
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


def _rewrite_operator(node: exp.Operator, ctx: _Context) -> exp.Expr:
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


def _rewrite_any(node: exp.Any, ctx: _Context) -> exp.Expr:
    """``x = ANY('{r,p}')`` and ``x = ANY($1)`` (a parameter in PostgreSQL's array syntax)."""
    inner = node.this.unnest() if isinstance(node.this, exp.Paren) else node.this
    if isinstance(inner, exp.Literal) and inner.is_string:
        array = _array_literal(inner.name)
        return exp.Any(this=array) if array is not None else node
    if isinstance(inner, exp.Parameter | exp.Placeholder):
        return exp.Any(this=_call("pgc_text_array", [inner], ctx))
    return node


def _rewrite_comparison(node: exp.Expr, ctx: _Context) -> exp.Expr:
    """``pol.polroles = '{0}'``: an array column of the catalog compared with an array literal."""
    for side, other in (("expression", node.this), ("this", node.args.get("expression"))):
        value = node.args.get(side)
        if isinstance(other, exp.Column) and other.name.lower() in _ARRAY_COLUMNS:
            if isinstance(value, exp.Literal) and value.is_string:
                array = _array_literal(value.name)
                if array is not None:
                    node.set(side, array)
    return node


def _display_reg_casts(select: exp.Select, ctx: _Context) -> exp.Expr:
    """``SELECT c.oid::regclass``: a reg* cast that is a result column shows the name, as
    PostgreSQL prints it."""
    for projection in select.expressions:
        target = projection.this if isinstance(projection, exp.Alias) else projection
        named = _named(target, ctx)
        if named is not None:
            target.replace(named)
    return select


_Rewrite = Callable[[Any, _Context], exp.Expr]
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
_REWRITES.update({cls: _rewrite_typed_function for cls in _TYPED_FUNCTIONS})


def _rewrite(node: exp.Expr, ctx: _Context) -> exp.Expr:
    """Rewrite bottom-up: a node's children are rewritten before the node is."""
    for child in list(node.iter_expressions()):
        new = _rewrite(child, ctx)
        if new is not child:
            child.replace(new)
    handler = _REWRITES.get(type(node))
    return handler(node, ctx) if handler else node


# Result column names ---------------------------------------------------------------------------------
# PostgreSQL's FigureColname: a name and its strength (2: a column or function name, 1: a type name
# or "case", 0: none, which prints as ?column?).
_PG_TYPE_NAMES = {
    "int": "int4", "integer": "int4", "smallint": "int2", "bigint": "int8", "boolean": "bool",
    "double precision": "float8", "real": "float4", "character varying": "varchar",
    "decimal": "numeric",
}  # fmt: skip
_NAMED_NODES: dict[type[exp.Expr], str] = {
    exp.Exists: "exists", exp.Array: "array", exp.Coalesce: "coalesce", exp.Nullif: "nullif",
    exp.Greatest: "greatest", exp.Least: "least",
}  # fmt: skip
_NOT_CALLS = (exp.Connector, exp.Binary, exp.Unary, exp.Predicate)


def _figure(node: exp.Expr) -> tuple[str, int]:
    handler = _FIGURES.get(type(node))
    if handler is not None:
        return handler(node)
    if type(node) in _NAMED_NODES:
        return _NAMED_NODES[type(node)], 2
    if type(node) in _TYPED_FUNCTIONS:
        return _TYPED_FUNCTIONS[type(node)], 2
    if isinstance(node, exp.Func) and not isinstance(node, _NOT_CALLS):
        match = re.match(r"\s*([A-Za-z_][A-Za-z_0-9]*)\s*\(", node.sql(dialect="postgres"))
        if match:
            return match.group(1).lower(), 2
    return "?column?", 0


def _figure_cast(node: exp.Cast) -> tuple[str, int]:
    name, strength = _figure(node.this)
    if strength > 1:
        return name, strength
    kind = _type_name(node.to)
    return _PG_TYPE_NAMES.get(kind, kind).removesuffix("[]"), 1


def _figure_case(node: exp.Case) -> tuple[str, int]:
    default = node.args.get("default")
    name, strength = _figure(default) if isinstance(default, exp.Expr) else ("", 0)
    return (name, strength) if strength > 1 else ("case", 1)


def _figure_subquery(node: exp.Subquery) -> tuple[str, int]:
    select = node.this
    if isinstance(select, exp.Select) and select.expressions:
        first = select.expressions[0]
        if isinstance(first, exp.Alias):
            return first.alias, 2
        name, strength = _figure(first)
        return (name, 2) if strength else ("?column?", 0)
    return "?column?", 0


def _figure_dot(node: exp.Dot) -> tuple[str, int]:
    if isinstance(node.this, exp.Identifier):  # pg_catalog.f(...)
        return _figure(node.expression)
    return (node.expression.name, 2) if isinstance(node.expression, exp.Identifier) else ("?column?", 0)


_FIGURES: dict[type[exp.Expr], Callable[[Any], tuple[str, int]]] = {
    exp.Column: lambda node: (node.name if node.this.quoted else node.name.lower(), 2),
    exp.Anonymous: lambda node: (str(node.this).lower(), 2),
    exp.Cast: _figure_cast,
    exp.Case: _figure_case,
    exp.Subquery: _figure_subquery,
    exp.Dot: _figure_dot,
    exp.Paren: lambda node: _figure(node.this),
    exp.Bracket: lambda node: _figure(node.this),
    exp.Collate: lambda node: _figure(node.this),
    exp.Window: lambda node: _figure(node.this),
}


def pg_column_name(node: exp.Expr) -> str:
    """The name PostgreSQL gives a result column (aliases fold to lower case unless quoted)."""
    if isinstance(node, exp.Alias):
        identifier = node.args.get("alias")
        quoted = isinstance(identifier, exp.Identifier) and identifier.quoted
        return node.alias if quoted else node.alias.lower()
    name, strength = _figure(node)
    return name if strength else "?column?"


def _name_results(tree: exp.Expr) -> None:
    """Name the outermost SELECT's result columns as PostgreSQL does (DuckDB would print
    ``count_star()`` for ``count(*)``, keep ``AS TABLE_SCHEM`` upper case...)."""
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    if not isinstance(select, exp.Select):
        return
    projections: list[exp.Expr] = []
    for projection in select.expressions:
        if (
            isinstance(projection, exp.Star)
            or isinstance(projection, exp.Column)
            and isinstance(projection.this, exp.Star)
        ):
            projections.append(projection)
            continue
        name = pg_column_name(projection)
        target = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(target, exp.Column) and name == target.name and name not in _SQL_VALUE_WORDS:
            projections.append(target)
        else:
            projections.append(exp.alias_(target, name, quoted=True))
    select.set("expressions", projections)


def _values_names(tree: exp.Expr) -> exp.Expr:
    """A top-level VALUES list: PostgreSQL names its columns column1, column2..."""
    if not isinstance(tree, exp.Values) or not tree.expressions:
        return tree
    first = tree.expressions[0]
    width = len(first.expressions) if isinstance(first, exp.Tuple) else 1
    alias = exp.TableAlias(
        this=exp.to_identifier("v"), columns=[exp.to_identifier(f"column{i + 1}") for i in range(width)]
    )
    return exp.select("*").from_(exp.Subquery(this=tree, alias=alias))


# -- translate ---------------------------------------------------------------------------------------
def _user_ctes(tree: exp.Expr) -> frozenset[str]:
    return frozenset(cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE))


def _with_ctes(tree: exp.Expr, ctes: list[str]) -> str:
    """The statement as DuckDB SQL with the catalog CTEs it needs in front of its own."""
    if not ctes:
        return tree.sql(dialect="duckdb")
    ours = ", ".join(f"{name} AS ({CTE_SQL[name].strip()})" for name in ctes)
    with_ = tree.args.get("with_")
    if not isinstance(with_, exp.With):
        return f"WITH {ours} {tree.sql(dialect='duckdb')}"
    tree.set("with_", None)
    theirs = re.sub(r"^WITH\s+(RECURSIVE\s+)?", "", with_.sql(dialect="duckdb"))
    keyword = "WITH RECURSIVE" if with_.args.get("recursive") else "WITH"
    return f"{keyword} {ours}, {theirs} {tree.sql(dialect='duckdb')}"


def translate(sql: str) -> str:
    """:func:`translate_query` without the sink tables' types (tests, catalog statements)."""
    return translate_query(sql, pgsemantics.NO_SCHEMA).sql


@functools.lru_cache(maxsize=1024)
def translate_query(sql: str, schema: pgsemantics.Schema) -> pgsemantics.Translation:
    """One PostgreSQL query (SELECT / WITH / VALUES) as DuckDB SQL over the emulated catalog, with
    PostgreSQL's semantics (:mod:`pitstop.server.pgsemantics`, given the sink tables' ``schema``).

    A statement sqlglot cannot parse is returned unchanged (DuckDB may still run it); one that
    PostgreSQL refuses and sqlglot would accept raises ``pgsemantics.PgError``. Kept by text: clients
    send the same queries again and again (a dashboard's, a driver's catalog queries), and the
    parse and rewrite cost more than running most of them.
    """
    lead = len(sql) - len(sql.lstrip())
    try:
        tree: exp.Expr = exp.maybe_parse(sql.strip().rstrip(";"), dialect=DIALECT)
    except pgsemantics.PgError as exc:
        raise pgsemantics.PgError(exc.code, exc.message, exc.position + lead if exc.position else 0) from None
    except SqlglotError as exc:
        log.debug("not translated (%s): %s", exc, sql)
        return pgsemantics.Translation(sql)
    if not isinstance(tree, exp.Query | exp.Values):
        return pgsemantics.Translation(sql)
    try:
        tree = _values_names(tree)
        _name_results(tree)
        tree, numeric = pgsemantics.apply(tree, schema)
        ctx = _Context([], _user_ctes(tree))
        return pgsemantics.Translation(_with_ctes(_rewrite(tree, ctx), ctx.ctes), numeric)
    except pgsemantics.PgError:
        raise
    except Exception:  # a rewrite that trips must not cost the client its query: DuckDB may run it
        log.warning("could not translate, running it as sent: %s", sql, exc_info=True)
        return pgsemantics.Translation(sql)


def _settings_macro(settings: Mapping[str, str]) -> str:
    pairs = ", ".join(f"{lit(name.lower())}: {lit(value)}" for name, value in settings.items())
    return f"CREATE OR REPLACE TEMP MACRO pgc_settings() AS CAST(MAP {{{pairs}}} AS MAP(VARCHAR, VARCHAR))"


class PgCatalog:
    """The catalog emulation of one server: shared by its sessions, safe from any thread.

    ``backend_key`` gives a session's key, by its process id, for ``pg_stat_activity`` and
    ``pg_cancel_backend`` (:mod:`pitstop.server.activity`); without it, sessions have none."""

    def __init__(self, backend_key: Callable[[int], str] | None = None) -> None:
        self.backend_key = backend_key

    def prepare(
        self,
        cursor: duckdb.DuckDBPyConnection,
        user: str = OWNER,
        backend_pid: int = 0,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        """Set up a fresh client cursor: the connection's user, process id (``pg_backend_pid()``),
        key (``pgc_backend_key()``) and session settings (``current_setting()``, ``pg_settings``)
        as four macros (~1 ms)."""
        key = self.backend_key(backend_pid) if self.backend_key is not None else ""
        cursor.execute(
            f"CREATE OR REPLACE TEMP MACRO pgc_user() AS {lit(user)}; "
            f"CREATE OR REPLACE TEMP MACRO pgc_backend_pid() AS CAST({int(backend_pid)} AS INTEGER); "
            f"CREATE OR REPLACE TEMP MACRO pgc_backend_key() AS {lit(key)}; "
            + _settings_macro(settings or {})
        )

    def set_parameters(self, cursor: duckdb.DuckDBPyConnection, settings: Mapping[str, str]) -> None:
        """The session's settings changed (SET, RESET): ``current_setting()`` and ``pg_settings``
        answer ``settings`` from now on, pitstop's defaults for any other name. Not inside a
        read-only transaction."""
        cursor.execute(_settings_macro(settings))

    def translate(self, sql: str) -> str:
        """One PostgreSQL statement (a SELECT / WITH / VALUES) -> DuckDB SQL for a prepared cursor."""
        return translate(sql)

    def translate_query(self, sql: str, schema: pgsemantics.Schema) -> pgsemantics.Translation:
        """:meth:`translate`, typed by the sink tables' ``schema``, with its numeric text columns."""
        return translate_query(sql, schema)
