"""One client query as DuckDB SQL over the emulated catalog: parsed (:mod:`.dialect`), its result
columns named as PostgreSQL names them (:mod:`.naming`), PostgreSQL's semantics applied
(:mod:`pitstop.server.pgsemantics`), rewritten (:mod:`.rewrite`), and generated as DuckDB SQL
with the catalog's CTEs it needs in front of its own.
"""

from __future__ import annotations

import functools
import logging
import re

from sqlglot import exp
from sqlglot.errors import SqlglotError

from pitstop.server import pgsemantics
from pitstop.server.pgcatalog.dialect import DIALECT
from pitstop.server.pgcatalog.naming import name_results, values_names
from pitstop.server.pgcatalog.rewrite import Context, rewrite
from pitstop.server.pgcatalog.views import CTE_SQL

log = logging.getLogger(__name__)


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
def translate_query(
    sql: str, schema: pgsemantics.Schema, parameters: tuple[str | None, ...] = ()
) -> pgsemantics.Translation:
    """One PostgreSQL query (SELECT / WITH / VALUES) as DuckDB SQL over the emulated catalog, with
    PostgreSQL's semantics (:mod:`pitstop.server.pgsemantics`, given the sink tables' ``schema``
    and the types of its parameters, ``$1``...: ``DECIMAL``, ``BIGINT``, None when not known).

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
        tree = values_names(tree)
        name_results(tree)
        applied = pgsemantics.apply(tree, schema, parameters)
        ctx = Context([], _user_ctes(applied.tree))
        sql = _with_ctes(rewrite(applied.tree, ctx), ctx.ctes)
        return pgsemantics.Translation(sql, applied.numeric_columns, applied.column_types, applied.declared)
    except pgsemantics.PgError:
        raise
    except Exception:  # a rewrite that trips must not cost the client its query: DuckDB may run it
        log.warning("could not translate, running it as sent: %s", sql, exc_info=True)
        return pgsemantics.Translation(sql)
