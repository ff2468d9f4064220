"""Turn a ``CREATE JOB`` body into a :class:`JobPlan` of named stages.

Each ``INSERT`` is one branch: ``source -> [filter] -> [stateful stage] -> projections -> sink``.
The stateful stage is planned by its kind (:mod:`pitstop.stages`): an aggregation's by the
SELECT's FROM (a window function, or none: a running aggregate), deduplication's by ``SELECT
DISTINCT`` or Flink's ``ROW_NUMBER() OVER (...) ... WHERE rn = 1`` pattern.
Anything that a streaming job cannot run is refused here, before anything starts, with a message
that says what to write instead.

This module plans a job and its branches (one per INSERT); one SELECT is planned by
:mod:`pitstop.planner.selects`, with :mod:`pitstop.planner.stateful` (where a chain of stages is
cut), :mod:`pitstop.planner.projection` (WHERE and columns as Spark SQL),
:mod:`pitstop.planner.checks` (what a job's SELECT may not hold, names) and
:mod:`pitstop.planner.lookups` (mappings, views, CTEs by name).
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from pitstop.connectors import registry
from pitstop.errors import NotSupportedError, PlanError
from pitstop.plan.model import Branch, JobPlan
from pitstop.planner import joins
from pitstop.planner.checks import known_mapping
from pitstop.planner.lookups import Lookups, MappingLookup, ViewLookup
from pitstop.planner.selects import plan_query
from pitstop.sql.dialect import PitstopDialect


def plan_job(
    job: str, inserts: list[exp.Insert], mappings: MappingLookup, views: ViewLookup | None = None
) -> JobPlan:
    """Plan every branch of a job and check stage names are unique within it.

    ``views`` returns the SELECT of a view by name (None: no such view)."""
    lookup = Lookups(mappings, views or (lambda name: None))
    branches = tuple(_plan_branch(job, i, insert, lookup) for i, insert in enumerate(inserts))
    seen: dict[str, int] = {}  # lower-case stage name -> branch index (names are case-insensitive)
    for b in branches:
        for stage in b.stages:
            key = stage.name.lower()
            if key in seen:
                raise PlanError(
                    f"stage '{stage.name}' already exists in job '{job}' (INSERT #{seen[key] + 1} "
                    f"and #{b.index + 1}); give each stateful stage its own name with a CTE alias "
                    "or /*+ STAGE(name) */"
                )
            seen[key] = b.index
    return JobPlan(job=job, branches=branches)


# --------------------------------------------------------------------------------------------
def _plan_branch(job: str, index: int, insert: exp.Insert, lookup: Lookups) -> Branch:
    mappings = lookup.mappings
    target = insert.this
    if isinstance(target, exp.Schema):
        raise NotSupportedError("INSERT INTO sink (columns) is not supported; name the columns in the SELECT")
    sink_name = target.name
    sink = known_mapping(sink_name, mappings, "sink")
    if not registry.connector(sink.type).sink:
        raise PlanError(
            f"mapping '{sink.name}' is of type {registry.display_name(sink.type)}, which cannot be "
            f"written to; sinks are of type {', '.join(registry.SINK_TYPES)}"
        )
    query = insert.expression
    ctes: dict[str, tuple[str, exp.Select]] = {}  # lower-case alias -> (alias as declared, select)
    with_ = insert.args.get("with_") or (query.args.get("with_") if query is not None else None)
    if with_ is not None:
        for cte in with_.expressions:
            if not isinstance(cte.this, exp.Select):
                raise PlanError(f"CTE '{cte.alias}' must be a SELECT")
            ctes[cte.alias.lower()] = (cte.alias, cte.this)
    if not isinstance(query, exp.Select):
        raise NotSupportedError(
            f"INSERT INTO {sink_name} needs a SELECT; UNION and other set operations are not "
            "supported in jobs yet"
        )
    p = plan_query(query, None, ctes, replace(lookup, ctes=ctes), sink)
    return joins.buffered_in_chain(
        Branch(
            upsert_keys=p.upsert_keys,
            index=index,
            sink=sink.name,
            source=p.src.source.name,
            where_sql=p.where_sql,
            stage=p.stage,
            layers=p.layers,
            pre_layers=p.src.pre_layers,
            sql=insert.sql(dialect=PitstopDialect),
            join=p.join,
            before=p.src.chain,
            join_layers=p.src.join_layers,
        )
    )
