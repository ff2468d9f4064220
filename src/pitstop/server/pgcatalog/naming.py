"""The names PostgreSQL gives a query's result columns (its FigureColname): ``count``,
``format_type``, ``int4`` for a cast, ``?column?`` when there is none, aliases folded to lower
case unless quoted, ``column1``... for a VALUES list. DuckDB names them otherwise
(``count_star()``, an upper-case alias kept as written), and clients read columns by name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from pitstop.server.pgcatalog.rewrite import SQL_VALUE_WORDS, TYPED_FUNCTIONS, type_name
from pitstop.server.pgparser import CALLED

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
    if CALLED in node.meta:  # power(a, b), which sqlglot reads as a ^ b
        return str(node.meta[CALLED]), 2
    handler = _FIGURES.get(type(node))
    if handler is not None:
        return handler(node)
    if type(node) in _NAMED_NODES:
        return _NAMED_NODES[type(node)], 2
    if type(node) in TYPED_FUNCTIONS:
        return TYPED_FUNCTIONS[type(node)], 2
    if isinstance(node, exp.Func) and not isinstance(node, _NOT_CALLS):
        match = re.match(r"\s*([A-Za-z_][A-Za-z_0-9]*)\s*\(", node.sql(dialect="postgres"))
        if match:
            return match.group(1).lower(), 2
    return "?column?", 0


def _figure_cast(node: exp.Cast) -> tuple[str, int]:
    name, strength = _figure(node.this)
    if strength > 1:
        return name, strength
    kind = type_name(node.to)
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
    exp.WithinGroup: lambda node: _figure(node.this),  # percentile_cont(0.5) WITHIN GROUP (...)
    exp.Filter: lambda node: _figure(node.this),  # count(*) FILTER (WHERE ...)
}


def pg_column_name(node: exp.Expr) -> str:
    """The name PostgreSQL gives a result column (aliases fold to lower case unless quoted)."""
    if isinstance(node, exp.Alias):
        identifier = node.args.get("alias")
        quoted = isinstance(identifier, exp.Identifier) and identifier.quoted
        return node.alias if quoted else node.alias.lower()
    name, strength = _figure(node)
    return name if strength else "?column?"


def name_results(tree: exp.Expr) -> None:
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
        if isinstance(target, exp.Column) and name == target.name and name not in SQL_VALUE_WORDS:
            projections.append(target)
        else:
            projections.append(exp.alias_(target, name, quoted=True))
    select.set("expressions", projections)


def values_names(tree: exp.Expr) -> exp.Expr:
    """A top-level VALUES list: PostgreSQL names its columns column1, column2..."""
    if not isinstance(tree, exp.Values) or not tree.expressions:
        return tree
    first = tree.expressions[0]
    width = len(first.expressions) if isinstance(first, exp.Tuple) else 1
    names = [f"column{i + 1}" for i in range(width)]
    alias = exp.TableAlias(this=exp.to_identifier("v"), columns=[exp.to_identifier(n) for n in names])
    # The columns by name, not ``*``: they are then typed and written as any SELECT's (a numeric
    # column of ``(1.5), (2)`` is 1.5 and 2, as PostgreSQL writes it).
    rows = tree.copy()
    select = exp.select(*names).from_(exp.Subquery(this=rows, alias=alias))
    for part in ("order", "limit", "offset"):
        if rows.args.get(part) is not None:
            select.set(part, rows.args[part].pop())
    return select
