"""Whether a SELECT runs a stateful stage, itself or through the CTEs, views and subqueries it
reads: where a chain of stateful stages is cut into its steps."""

from __future__ import annotations

from sqlglot import exp

from pitstop.planner.lookups import Lookups
from pitstop.sql.nodes import ImposeOrder, WindowTvf
from pitstop.stages import dedup
from pitstop.stages import registry as kinds
from pitstop.stages.base import aggregates


def own_stateful(select: exp.Select) -> bool:
    """Whether ``select`` itself runs a stateful stage, or is part of one: a JOIN (an interval
    join's, or a static join whose SELECT is walked into), the numbering of a deduplication, or
    an aggregation (whatever its FROM: one without a stage kind is refused where it is planned)."""
    return bool(
        select.args.get("joins")
        or dedup.row_number_of(select) is not None
        or aggregates(select)
        or kinds.recognize(select, _tvf_of(select)) is not None
    )


def _tvf_of(select: exp.Select) -> exp.Expression | None:
    from_ = select.args.get("from_")
    return from_.this if from_ is not None and isinstance(from_.this, WindowTvf) else None


def stateful(select: exp.Select, ctes: dict[str, exp.Select], lookup: Lookups, seen: set[str]) -> bool:
    """Whether ``select`` or anything it reads through CTEs, views and subqueries is stateful."""
    if own_stateful(select):
        return True
    from_ = select.args.get("from_")
    node = from_.this if from_ is not None else None
    while isinstance(node, (WindowTvf, ImposeOrder)):
        node = node.this
    if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select):
        return stateful(node.this, ctes, lookup, seen)
    if isinstance(node, exp.Table):
        name = node.name.lower()
        if name in seen:
            return False  # refused where the input is resolved
        if name in ctes:
            return stateful(ctes[name], ctes, lookup, seen | {name})
        view = lookup.views(node.name)
        if isinstance(view, exp.Select):
            return stateful(view, {}, lookup, seen | {name})
    return False
