"""Which result columns PostgreSQL describes with a type modifier (RowDescription's typmod).

PostgreSQL gives a result column the type modifier of what it reads: a table's column keeps its
declared ``numeric(12,2)``, and so does a cast that names one (``x::numeric(10,3)``), a column of a
subquery or CTE that is one of these, and a column of a UNION whose every branch is one; any other
expression -- ``sum(revenue)``, ``revenue * 2``, ``round(revenue, 2)``, ``min(revenue)``,
``lag(revenue) OVER (...)``, ``revenue::numeric`` -- is an unconstrained ``numeric`` (typmod -1).
DuckDB gives each of these a DECIMAL(p,s) of its own choosing, so the server strips the precision
and scale of every result column that is not such a reference (:func:`declared_columns`).

A cast to a time type with a precision (``ts::timestamp(0)``) is described with it
(:func:`time_precisions`); DuckDB's types have none.

``CASE``, ``coalesce``, ``greatest`` and ``least`` keep the type modifier their alternatives share
(PostgreSQL's ``exprTypmod``: every branch, the ``ELSE`` included, the same; a ``CASE`` without
``ELSE`` has a NULL there, of none), and ``nullif`` its first argument's.

Known gap: a UNION of two columns of different precisions is described as DuckDB's common type.
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, build_scope

from pitstop.server.pgtypes import TIME, TIMESTAMP, TIMESTAMPTZ, PgType

__all__ = ["Origin", "declared_columns", "time_precisions"]

_TIMES = {exp.DType.TIMESTAMP: TIMESTAMP, exp.DType.TIMESTAMPTZ: TIMESTAMPTZ, exp.DType.TIME: TIME}


def time_precisions(tree: exp.Expr) -> dict[int, PgType]:
    """The outermost SELECT's result columns that are casts to a time type with a precision
    (``ts::timestamp(0)``), by 0-based index: that type, its typmod the precision."""
    if not isinstance(tree, exp.Select):
        return {}
    found: dict[int, PgType] = {}
    for index, projection in enumerate(tree.expressions):
        node = projection
        while isinstance(node, exp.Alias | exp.Paren):
            node = node.this
        if not isinstance(node, exp.Cast) or node.to.this not in _TIMES or len(node.to.expressions) != 1:
            continue
        param = node.to.expressions[0].this
        if isinstance(param, exp.Literal) and param.is_int:
            plain = _TIMES[node.to.this]
            precision = min(int(param.name), 6)
            name = f"{plain.format_type.split(' ', 1)[0]}({precision})"
            rest = plain.format_type.split(" ", 1)[1:]
            format_type = " ".join([name, *rest])
            found[index] = dataclasses.replace(plain, format_type=format_type, modifier=precision)
    return found


def declared_columns(tree: exp.Expr, schema: dict[str, dict[str, str]]) -> frozenset[int] | None:
    """The 0-based indexes of the outermost query's result columns that keep the type modifier
    of what they read (the others are described without one); None when that is not known here
    (a ``*``, a statement sqlglot cannot scope). ``schema``: the sink tables' column types, by
    table and column (a UNION's branches keep a modifier when they have the same one)."""
    try:
        scope = build_scope(tree)
    except Exception:  # sqlglot's scoping refuses some statements: keep DuckDB's description
        return None
    if scope is None:
        return None
    origins = _origins(scope, schema, 0)
    if origins is None:
        return None
    return frozenset(i for i, origin in enumerate(origins) if origin is not None)


_DEPTH = 32
Origin = str | None
"""What a result column's type modifier comes from: a table column's or a cast's declared type
(``DECIMAL(12,2)``; the table and column when the type is not known), None for none."""


def _origins(scope: Scope, schema: dict[str, dict[str, str]], depth: int) -> list[Origin] | None:
    """The origin of each of a scope's result columns; None when not known (a ``*``)."""
    if scope.set_operation_scopes:  # a set operation: a column keeps a modifier all branches share
        branches = [_origins(branch, schema, depth) for branch in scope.set_operation_scopes]
        found: list[Origin] = []
        for branch in branches:
            if branch is None:
                return None
        first = branches[0]
        assert first is not None
        for i, origin in enumerate(first):
            same = all(b is not None and len(b) > i and b[i] == origin for b in branches)
            found.append(origin if same else None)
        return found
    select = scope.expression
    if not isinstance(select, exp.Select):
        return None
    origins: list[Origin] = []
    for projection in select.expressions:
        if isinstance(projection, exp.Star) or isinstance(projection.this, exp.Star):
            return None
        origins.append(_origin(projection, scope, schema, depth))
    return origins


def _origin(node: exp.Expr, scope: Scope, schema: dict[str, dict[str, str]], depth: int) -> Origin:
    while isinstance(node, exp.Alias | exp.Paren):
        node = node.this
    if isinstance(node, exp.Cast):
        return node.to.sql(dialect="duckdb").upper() if node.to.expressions else None
    if depth >= _DEPTH:
        return None
    if isinstance(node, exp.Column):
        return _column_origin(node, scope, schema, depth)
    if isinstance(node, exp.Nullif):
        return _origin(node.this, scope, schema, depth + 1)
    alternatives = _alternatives(node)
    if not alternatives:
        return None
    origins = {_origin(a, scope, schema, depth + 1) for a in alternatives}
    return origins.pop() if len(origins) == 1 else None


def _alternatives(node: exp.Expr) -> list[exp.Expr]:
    """The values a CASE, coalesce, greatest or least may give (none for anything else)."""
    if isinstance(node, exp.Case):
        default = node.args.get("default")
        if default is None:
            return []  # no ELSE: a NULL of no type modifier
        return [*(branch.args["true"] for branch in node.args.get("ifs") or []), default]
    if isinstance(node, exp.Coalesce | exp.Greatest | exp.Least):
        return [node.this, *node.expressions]
    return []


def _column_origin(column: exp.Column, scope: Scope, schema: dict[str, dict[str, str]], depth: int) -> Origin:
    sources = scope.selected_sources
    if column.table:
        found = sources.get(column.table)
        candidates = [found[1]] if found else []
    else:
        candidates = [source for _, source in sources.values()]
    joined: Origin = None  # a column of one of several tables joined, not known which
    for source in candidates:
        if isinstance(source, Scope):
            origins = _origins(source, schema, depth + 1)
            select = source.expression
            while isinstance(select, exp.SetOperation):
                select = select.this
            if origins is None or not isinstance(select, exp.Select):
                continue
            names = [p.alias_or_name for p in select.expressions]
            if column.name in names:
                return origins[names.index(column.name)]
            continue
        table = source.name
        columns = schema.get(table)
        if columns is not None and column.name in columns:
            return columns[column.name].upper()
        if column.table or len(candidates) == 1:
            return f"{table}.{column.name}"  # a table's column: its declared type
        joined = f"?.{column.name}"
    return joined
