"""Every relation a client can name, and the CTE that answers it: the registry the rewrite looks
``pg_catalog`` and ``information_schema`` names up in, and the CTEs each one needs, in the order
they must be written (a CTE before those that read it).
"""

from __future__ import annotations

import functools
import re

from pitstop.server.pgcatalog import fixed, information_schema, pg_catalog, pg_type, sources
from pitstop.server.pgcatalog.relation import CatalogView

INTERNAL: dict[str, str] = sources.INTERNAL | pg_type.INTERNAL
"""The relations clients do not name, which the others are built from (``pgc__*``)."""
VIEWS: dict[tuple[str, str], CatalogView] = (
    pg_type.VIEWS | pg_catalog.VIEWS | fixed.VIEWS | information_schema.VIEWS
)


CTE_SQL: dict[str, str] = INTERNAL | {view.cte: view.sql for view in VIEWS.values()}
CTE_NAME = re.compile(r"\bpgc_[a-z_]+\b")


@functools.cache
def needed(cte: str) -> tuple[str, ...]:
    """``cte`` and every CTE (or function template) it refers to, dependencies first."""
    ordered: list[str] = []
    for name in CTE_NAME.findall(CTE_SQL[cte]):
        if name in CTE_SQL and name != cte:
            ordered.extend(n for n in needed(name) if n not in ordered)
    return tuple(ordered) + (cte,)


def ctes_of(template: str) -> tuple[str, ...]:
    """Every CTE a piece of SQL (a function template) refers to, with those they need, dependencies
    first."""
    ordered: list[str] = []
    for name in CTE_NAME.findall(template):
        if name in CTE_SQL:
            ordered.extend(n for n in needed(name) if n not in ordered)
    return tuple(ordered)
