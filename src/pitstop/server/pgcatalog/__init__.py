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
from collections.abc import Callable, Mapping
from typing import Any

import duckdb
from sqlglot import exp
from sqlglot.errors import SqlglotError

from pitstop.server import pgsemantics
from pitstop.server.pgcatalog.dialect import DIALECT
from pitstop.server.pgcatalog.oids import DATABASE, OWNER, relation_oid
from pitstop.server.pgcatalog.relation import lit
from pitstop.server.pgcatalog.rewrite import SQL_VALUE_WORDS, TYPED_FUNCTIONS, Context, rewrite, type_name
from pitstop.server.pgcatalog.views import CTE_SQL

__all__ = ["DATABASE", "DIALECT", "PgCatalog", "relation_oid", "translate"]

log = logging.getLogger(__name__)


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
        if isinstance(target, exp.Column) and name == target.name and name not in SQL_VALUE_WORDS:
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
        ctx = Context([], _user_ctes(tree))
        return pgsemantics.Translation(_with_ctes(rewrite(tree, ctx), ctx.ctes), numeric)
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
