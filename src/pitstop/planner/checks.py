"""What a job's SELECT may not hold (ORDER BY, LIMIT, subqueries, OVER (...) but Flink's
deduplication), the mappings it names, and the names its stateful stages are given."""

from __future__ import annotations

from sqlglot import exp

from pitstop.catalog.rows import Mapping
from pitstop.errors import BadNameError, NotSupportedError, PlanError
from pitstop.names import check_name
from pitstop.planner.lookups import MappingLookup
from pitstop.sql.dialect import PitstopDialect
from pitstop.sql.nodes import WindowTvf
from pitstop.sql.parser import stage_hint


def known_mapping(name: str, mappings: MappingLookup, role: str) -> Mapping:
    mapping = mappings(name)
    if mapping is None:
        raise PlanError(
            f"unknown mapping '{name}' (used as a {role}); create it first with "
            f"CREATE MAPPING {name} (...) TYPE ... OPTIONS (...)"
        )
    return mapping


def from_of(select: exp.Select, sink: str, dedup_ok: bool = False, joins_ok: bool = False) -> exp.Expression:
    """The FROM of a SELECT, after refusing what a job cannot run (``dedup_ok``: not yet DISTINCT
    and window functions, which the caller checks where deduplication may stand)."""
    refuse_unsupported(select, sink, dedup_ok, joins_ok)
    from_ = select.args.get("from_")
    if from_ is None:
        raise PlanError(f"INSERT INTO {sink}: the SELECT needs a FROM clause naming a source")
    return from_.this


def refuse_unsupported(select: exp.Select, sink: str, dedup_ok: bool = False, joins_ok: bool = False) -> None:
    if select.args.get("joins") and not joins_ok:
        raise PlanError(
            f"INSERT INTO {sink}: JOIN is supported in the SELECT that reads the sources only "
            "(FROM a JOIN b ON ...), not in a view, CTE or subquery below it"
        )
    for what, present in (("ORDER BY", select.args.get("order")), ("LIMIT", select.args.get("limit"))):
        if present:
            raise NotSupportedError(
                f"INSERT INTO {sink}: {what} is not supported in a streaming job; a stream has no "
                "end to sort or limit at. Remove it, or query the sink table afterwards."
            )
    if dedup_ok:
        pass
    elif select.args.get("distinct"):
        raise PlanError(
            f"INSERT INTO {sink}: SELECT DISTINCT deduplicates only in the SELECT that reads the "
            "source; move it there, or GROUP BY window_start, window_end and the columns to keep one "
            "row per window"
        )
    elif any(w.find_ancestor(exp.Select) is select for w in select.find_all(exp.Window)):
        raise NotSupportedError(
            f"INSERT INTO {sink}: OVER (...) window functions are not supported, except Flink's "
            "deduplication (SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) "
            "AS rn FROM t) WHERE rn = 1); use TUMBLE with GROUP BY"
        )
    for sub in select.find_all(exp.Subquery):
        if isinstance(sub.parent, (WindowTvf, exp.From)):
            continue  # a subquery as the input of a window or as the FROM is planned as a view
        raise NotSupportedError(
            f"INSERT INTO {sink}: subqueries are not supported in jobs: {sub.sql(dialect=PitstopDialect)}"
        )


def stage_name(select: exp.Select, cte: str | None, sink: str, suffix: str = "aggregate") -> str:
    """A hint's name, else the CTE alias, else ``<sink>.<suffix>`` (``aggregate``, ``dedup``);
    every one checked as a name (it becomes a folder of snapshots and runs), the derived one too."""
    name = stage_hint(select)
    if name is not None:
        return check_name("stage", name)
    if cte is not None:
        return check_name("stage", cte)
    try:
        return check_name("stage", f"{sink}.{suffix}")
    except BadNameError as err:
        raise BadNameError(
            f"{err.message}. Name the stage of INSERT INTO {sink} with a CTE alias or /*+ STAGE(name) */"
        ) from None
