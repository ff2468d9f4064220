"""Turn a ``CREATE JOB`` body into a :class:`JobPlan` of named stages.

Each ``INSERT`` is one branch: ``source -> [filter] -> [stateful stage] -> projections -> sink``.
The stateful stage is planned by its kind (:mod:`pitstop.stages`): an aggregation's by the
SELECT's FROM (a window function, or none: a running aggregate), deduplication's by ``SELECT
DISTINCT`` or Flink's ``ROW_NUMBER() OVER (...) ... WHERE rn = 1`` pattern.
Anything that a streaming job cannot run is refused here, before anything starts, with a message
that says what to write instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import cast

from sqlglot import exp

from pitstop.catalog.rows import Mapping, WatermarkDef
from pitstop.connectors import registry
from pitstop.errors import BadNameError, NotSupportedError, PlanError
from pitstop.intervals import interval_micros
from pitstop.names import check_name
from pitstop.plan.model import AggregateStage, Branch, JobPlan, JoinSpec, OutputColumn, Projection, Step
from pitstop.plan.scope import Input, Layer, check_columns, output_name, unique_names
from pitstop.plan.types import SPARK, infer, spark_type
from pitstop.planner import joins
from pitstop.sql.dialect import PitstopDialect
from pitstop.sql.nodes import ImposeOrder, WindowTvf
from pitstop.sql.parser import stage_hint
from pitstop.stages import dedup, interval_join
from pitstop.stages import registry as kinds
from pitstop.stages.base import aggregates

MappingLookup = Callable[[str], Mapping | None]
ViewLookup = Callable[[str], exp.Query | None]


@dataclass(frozen=True)
class _Lookups:
    mappings: MappingLookup
    views: ViewLookup
    ctes: dict[str, tuple[str, exp.Select]] = field(default_factory=dict)  # the INSERT's, as declared


def plan_job(
    job: str, inserts: list[exp.Insert], mappings: MappingLookup, views: ViewLookup | None = None
) -> JobPlan:
    """Plan every branch of a job and check stage names are unique within it.

    ``views`` returns the SELECT of a view by name (None: no such view)."""
    lookup = _Lookups(mappings, views or (lambda name: None))
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
def _plan_branch(job: str, index: int, insert: exp.Insert, lookup: _Lookups) -> Branch:
    mappings = lookup.mappings
    target = insert.this
    if isinstance(target, exp.Schema):
        raise NotSupportedError("INSERT INTO sink (columns) is not supported; name the columns in the SELECT")
    sink_name = target.name
    sink = _mapping(sink_name, mappings, "sink")
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
    p = _plan_query(query, None, ctes, replace(lookup, ctes=ctes), sink)
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


@dataclass(frozen=True)
class _Planned:
    """A planned SELECT: ``src`` (with any stateful stages before this one: ``src.chain``), then
    ``where_sql``, ``stage`` and ``layers``, whose last columns are ``layer``."""

    src: Input
    where_sql: str | None
    stage: AggregateStage | None
    layers: tuple[Projection, ...]
    layer: Layer
    join: JoinSpec | None
    upsert_keys: tuple[str, ...]


def _plan_query(
    query: exp.Select,
    query_cte: str | None,
    ctes: dict[str, tuple[str, exp.Select]],
    lookup: _Lookups,
    sink: Mapping,
) -> _Planned:
    """Plan the SELECT an INSERT writes (``query_cte`` None), or, in a chain, the CTE, view or
    subquery whose stateful stage feeds the next one (``query_cte``: the CTE's name)."""
    mappings = lookup.mappings
    sink_name = sink.name
    plain_ctes = {k: v[1] for k, v in ctes.items()}
    # Walk down through CTE references to the select that reads the source, or to the stateful
    # select whose input is another stateful select (a chain: that input is planned on its own).
    chain: list[tuple[exp.Select, str | None]] = [(query, query_cte)]
    while True:
        select, _ = chain[-1]
        from_table = _from_of(select, sink_name, dedup_ok=True, joins_ok=True)
        if isinstance(from_table, exp.Table) and from_table.name.lower() in ctes:
            name = from_table.name.lower()
            if any(n is not None and n.lower() == name for _, n in chain):
                raise PlanError(f"CTE '{name}' refers to itself")
            # (the sides of a JOIN are mappings: a JOIN's FROM is walked into, and refused there)
            if (
                _own_stateful(select)
                and not select.args.get("joins")
                and _stateful(ctes[name][1], plain_ctes, lookup, {name})
            ):
                break
            chain.append((ctes[name][1], ctes[name][0]))
            continue
        break
    core, core_cte = chain[-1]
    outer = [sel for sel, _ in reversed(chain[:-1])]
    for select in outer:
        if select.args.get("joins"):
            raise PlanError(
                f"INSERT INTO {sink_name}: JOIN is supported in the SELECT that reads the sources only "
                "(FROM a JOIN b ON ...); move it there"
            )
    joined: joins.PlannedJoin | None = None
    if core.args.get("joins"):
        suffix = interval_join.KIND.suffix
        joined = joins.plan_join(
            core, mappings, sink_name, lambda: _stage_name(core, core_cte, sink.name, suffix)
        )
        core = joined.select
    from_node = _from_of(core, sink_name, dedup_ok=True)

    # Deduplication: DISTINCT in the SELECT that reads the source, or Flink's ROW_NUMBER() pattern
    # (the numbered SELECT as a subquery or a CTE, filtered WHERE rn = 1 by the SELECT above it).
    numbered: exp.Select | None = None
    if isinstance(from_node, exp.Subquery) and isinstance(from_node.this, exp.Select):
        if dedup.row_number_of(from_node.this) is not None:
            numbered, first_outer = from_node.this, core
    if numbered is None and dedup.row_number_of(core) is not None and outer:
        numbered, first_outer = core, outer[0]
        outer = outer[1:]
    for select in [core, *outer]:
        if select is core and core.args.get("distinct"):  # DISTINCT here deduplicates; the rest is checked
            select = select.copy()
            select.set("distinct", None)
        if select is not numbered:
            _refuse_unsupported(select, sink_name)
    if numbered is not None:
        return _plan_numbered(sink, numbered, first_outer, core, core_cte, outer, plain_ctes, lookup)

    tvf = from_node if isinstance(from_node, WindowTvf) else None
    if joined is not None:
        src = joined.input
    else:
        src = _resolve_input(tvf.this if tvf is not None else from_node, plain_ctes, lookup, sink_name, set())
    source, src_layer = src.source, src.layer
    where_sql = _where(core, src_layer)
    has_aggregates = aggregates(core)
    stage: AggregateStage | None = None
    if joined is not None and joined.stage is not None:
        if core.args.get("distinct") or has_aggregates:
            raise NotSupportedError(
                f"INSERT INTO {sink_name}: an interval join followed by an aggregation or DISTINCT in one "
                "SELECT is not supported: they are two stateful stages; put the join in a CTE and "
                "aggregate that: WITH joined AS "
                "(SELECT ... FROM a JOIN b ON ...) SELECT ... FROM TABLE(TUMBLE(TABLE joined, "
                "DESCRIPTOR(ts), INTERVAL '1' HOUR)) GROUP BY ..."
            )
        # The WHERE holds on the joined rows: it goes after the join, with the projection.
        first, layer = _projection(core, src_layer, where=where_sql)
        return _planned(sink, src, None, joined.stage, [first], layer, outer, joined.join)
    if core.args.get("distinct") and (has_aggregates or tvf is not None):
        raise NotSupportedError(
            f"INSERT INTO {sink_name}: SELECT DISTINCT with GROUP BY or a window function is not "
            "supported; GROUP BY the columns instead (each group is one row)"
        )
    kind = kinds.recognize(core, tvf)
    if kind is not None:
        if kind.updates and not registry.connector(sink.type).upserts:
            raise PlanError(
                f"INSERT INTO {sink_name}: GROUP BY on a stream without a window is a running "
                "aggregate, whose rows change as input arrives, and mapping "
                f"'{sink.name}' is of type {registry.display_name(sink.type)}, which only appends: "
                "write it to a sink that replaces rows by key (a TYPE DuckDB or TYPE Postgres "
                "mapping), or aggregate per window so that each row is final when it is written: "
                f"FROM TABLE(TUMBLE(TABLE {source.name}, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
                "... GROUP BY window_start, window_end, ..."
            )
        stage, layer, first = kind.plan(core, tvf, src, _stage_name(core, core_cte, sink.name, kind.suffix))
    else:
        if tvf is not None:
            raise PlanError(
                f"INSERT INTO {sink_name}: a window function needs GROUP BY window_start, "
                "window_end, ... and aggregates"
            )
        first, layer = _projection(core, src_layer, where=None)
    join = None if joined is None else joined.join
    return _planned(sink, src, where_sql, stage, [first], layer, outer, join)


def _planned(
    sink: Mapping,
    src: Input,
    where_sql: str | None,
    stage: AggregateStage | None,
    layers: list[Projection],
    layer: Layer,
    outer: list[exp.Select],
    join: JoinSpec | None = None,
) -> _Planned:
    """The planned SELECT, with the stateless SELECTs above the stage as its last layers. A
    stateless SELECT over a chain (``src.chain``) ends with the chain's last stage."""
    sink_name = sink.name
    for select in outer:
        if aggregates(select):
            raise PlanError("only one aggregation per INSERT is supported; aggregate in one SELECT")
        projection, layer = _projection(select, layer, where=_where(select, layer))
        layers.append(projection)
    if stage is None and src.chain:
        last = src.chain[-1]
        if where_sql is not None:  # this SELECT's WHERE holds on the chain's output rows
            layers[0] = replace(layers[0], where_sql=where_sql)
        src = replace(src, chain=src.chain[:-1])
        where_sql, stage, layers = last.where_sql, last.stage, [*last.layers, *layers]
    updates = stage is not None and kinds.kind_of(stage).updates
    return _Planned(
        src=src,
        where_sql=where_sql,
        stage=stage,
        layers=tuple(layers),
        layer=layer,
        join=join or src.join,
        upsert_keys=_upsert_keys(stage, layers, sink_name) if stage is not None and updates else (),
    )


def _plan_numbered(
    sink: Mapping,
    numbered: exp.Select,
    above: exp.Select,
    core: exp.Select,
    core_cte: str | None,
    outer: list[exp.Select],
    ctes: dict[str, exp.Select],
    lookup: _Lookups,
) -> _Planned:
    """Flink's deduplication: ``SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER (PARTITION BY k
    ORDER BY ts) AS rn FROM t) WHERE rn = 1``. The numbered SELECT's other columns are projected
    before the stage; ``above`` is the SELECT that keeps ``rn = 1``."""
    alias = dedup.row_number_of(numbered)
    assert alias is not None
    rn = alias.alias
    rest: list[exp.Expression] = []
    kept_first = False
    where = above.args.get("where")
    for cond in (
        where.this.flatten()
        if where is not None and isinstance(where.this, exp.And)
        else ([where.this] if where is not None else [])
    ):
        if (
            isinstance(cond, (exp.EQ, exp.LTE))
            and isinstance(cond.this, exp.Column)
            and cond.this.name.lower() == rn.lower()
            and cond.expression.sql() == "1"
        ):
            kept_first = True
        else:
            rest.append(cast(exp.Expression, cond))
    if not kept_first:
        raise PlanError(
            f"INSERT INTO {sink.name}: ROW_NUMBER() OVER (...) AS {rn} deduplicates only as Flink's "
            f"pattern: keep the first row of each key with WHERE {rn} = 1 in the SELECT that reads it"
        )
    inner = numbered.copy()
    inner.set("expressions", [e for e in inner.expressions if e.alias_or_name != rn])
    src = _input_of_select(inner, "the ROW_NUMBER() subquery", ctes, lookup, sink.name, set())
    hint_from = numbered if stage_hint(numbered) is not None else core
    cte = core_cte if numbered is core else None
    stage, layer, first = dedup.KIND.plan(
        numbered, None, src, _stage_name(hint_from, cte, sink.name, dedup.KIND.suffix)
    )
    filtered = above.copy()
    filtered.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
    for col in filtered.find_all(exp.Column):
        if col.name.lower() == rn.lower():
            raise PlanError(
                f"INSERT INTO {sink.name}: {rn} is 1 in every row that is kept; leave it out of the SELECT"
            )
    _refuse_unsupported(filtered, sink.name)
    projection, layer = _projection(filtered, layer, where=_where(filtered, layer))
    return _planned(sink, src, None, stage, [first, projection], layer, outer)


def _upsert_keys(stage: AggregateStage, layers: list[Projection], sink: str) -> tuple[str, ...]:
    """The sink columns that hold the stage's group keys, followed through the projections after
    the stage; PlanError when the SELECT does not write one of them as it is (the sink replaces
    rows by them)."""
    out: list[str] = []
    for key in stage.keys:
        name = key.name
        for layer in layers:
            ref = f"`{name}`".lower()
            found = next((c.name for c in layer.columns if c.sql.lower() in (ref, name.lower())), None)
            if found is None:
                shown = key.sql if key.name.startswith("__k") else key.name
                raise PlanError(
                    f"INSERT INTO {sink}: a running aggregate replaces its groups' rows in the sink by "
                    f"their keys, so the SELECT must write each group key as a column of its own; "
                    f"{shown} is not written as it is: add it to the SELECT (AS a name, if it is an "
                    "expression)"
                )
            name = found
        out.append(name)
    return tuple(out)


def _resolve_input(
    node: exp.Expression, ctes: dict[str, exp.Select], lookup: _Lookups, sink: str, seen: set[str]
) -> Input:
    """Follow views, stateless CTEs, subqueries and IMPOSE_ORDER down to a source mapping."""
    if isinstance(node, ImposeOrder):
        inner = _resolve_input(node.this, ctes, lookup, sink, seen)
        if inner.chain:
            raise PlanError(
                f"IMPOSE_ORDER reads a source mapping or a stateless view; {node.this.name} runs a "
                "stateful stage, whose rows already have the watermark of its input"
            )
        column = node.args["descriptor"].name
        typ = next((t for n, t in inner.layer.columns.items() if n.lower() == column.lower()), None)
        if typ is None:
            raise PlanError(f"IMPOSE_ORDER: {inner.layer.table} has no column '{column}'")
        if typ != "TIMESTAMP":
            raise PlanError(f"IMPOSE_ORDER: column '{column}' is {typ}; it orders by a TIMESTAMP column")
        return replace(inner, watermark=WatermarkDef(column, interval_micros(node.args["lag"])))
    if isinstance(node, exp.Subquery):
        if not isinstance(node.this, exp.Select):
            raise PlanError(f"INSERT INTO {sink}: a subquery in FROM must be a SELECT")
        if _stateful(node.this, ctes, lookup, seen):
            got = _upstream(node.this, None, "the subquery", ctes, lookup, sink)
        else:
            got = _input_of_select(node.this, "subquery", ctes, lookup, sink, seen)
        return replace(got, read_as="a subquery")
    if not isinstance(node, exp.Table):
        raise PlanError(f"INSERT INTO {sink}: FROM must name a source mapping or a view")
    name = node.name
    if name.lower() in seen:
        raise PlanError(f"view or CTE '{name}' refers to itself")
    if name.lower() in ctes:
        what, cte = f"CTE '{name}'", ctes[name.lower()]
        if _stateful(cte, ctes, lookup, seen | {name.lower()}):
            got = _upstream(cte, name, what, ctes, lookup, sink)
        else:
            got = _input_of_select(cte, what, ctes, lookup, sink, seen | {name.lower()})
        return replace(got, read_as=what)
    view = lookup.views(name)
    if view is not None:
        if not isinstance(view, exp.Select):
            raise PlanError(f"view '{name}' is a UNION; jobs read views that are one SELECT")
        what = f"view '{name}'"
        if _stateful(view, {}, lookup, seen | {name.lower()}):
            got = _upstream(view, name, what, {}, lookup, sink)
        else:
            got = _input_of_select(view, what, {}, lookup, sink, seen | {name.lower()})
        return replace(got, read_as=what)
    source = _mapping(name, lookup.mappings, "source")
    if not registry.connector(source.type).source:
        raise PlanError(
            f"mapping '{source.name}' is of type {registry.display_name(source.type)}, which cannot "
            f"be read as a stream; sources are of type {', '.join(registry.SOURCE_TYPES)}"
        )
    layer = Layer(source.name, {c.name: spark_type(c.type) for c in source.columns})
    if not layer.columns:
        raise PlanError(f"mapping '{source.name}' has no columns; declare them to read it")
    return Input(source, layer, (), source.watermark)


def _input_of_select(
    select: exp.Select, what: str, ctes: dict[str, exp.Select], lookup: _Lookups, sink: str, seen: set[str]
) -> Input:
    if aggregates(select):
        raise PlanError(f"{what} aggregates; a job reads only stateless views and CTEs below its window")
    inner = _resolve_input(_from_of(select, sink), ctes, lookup, sink, seen)
    where = _where(select, inner.layer)
    projection, layer = _projection(select, inner.layer, where)
    watermark = _kept(inner.watermark, projection)
    if inner.join is not None and not inner.chain:  # over a static join: after it
        return replace(
            inner,
            layer=Layer(inner.source.name, layer.columns),
            watermark=watermark,
            join_layers=(*inner.join_layers, projection),
        )
    if inner.chain:  # over a stateful stage: the projection is among the layers after it
        last = inner.chain[-1]
        chain = (*inner.chain[:-1], replace(last, layers=(*last.layers, projection)))
        return replace(inner, layer=Layer(inner.source.name, layer.columns), watermark=watermark, chain=chain)
    return Input(
        inner.source, Layer(inner.source.name, layer.columns), (*inner.pre_layers, projection), watermark
    )


def _kept(watermark: WatermarkDef | None, projection: Projection) -> WatermarkDef | None:
    """The watermark after ``projection``: on the column that passes the time column on as it is."""
    if watermark is None:
        return None
    kept = [c for c in projection.columns if c.sql.strip("`").lower() == watermark.column.lower()]
    return WatermarkDef(kept[0].name, watermark.delay_micros) if kept else None


def _own_stateful(select: exp.Select) -> bool:
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


def _stateful(select: exp.Select, ctes: dict[str, exp.Select], lookup: _Lookups, seen: set[str]) -> bool:
    """Whether ``select`` or anything it reads through CTEs, views and subqueries is stateful."""
    if _own_stateful(select):
        return True
    from_ = select.args.get("from_")
    node = from_.this if from_ is not None else None
    while isinstance(node, (WindowTvf, ImposeOrder)):
        node = node.this
    if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select):
        return _stateful(node.this, ctes, lookup, seen)
    if isinstance(node, exp.Table):
        name = node.name.lower()
        if name in seen:
            return False  # refused where the input is resolved
        if name in ctes:
            return _stateful(ctes[name], ctes, lookup, seen | {name})
        view = lookup.views(node.name)
        if isinstance(view, exp.Select):
            return _stateful(view, {}, lookup, seen | {name})
    return False


def _upstream(
    select: exp.Select, name: str | None, what: str, ctes: dict[str, exp.Select], lookup: _Lookups, sink: str
) -> Input:
    """A chain: ``select`` (a CTE, view or subquery) runs a stateful stage whose rows are the input
    of the stage above it. Only a stage that emits each row once, final, and passes event time
    on can feed another: deduplication and an interval join (Spark runs several stateful
    operators in one query in append mode, the watermark flowing through them)."""
    full = {k: (lookup.ctes.get(k, (k, v))[0], v) for k, v in ctes.items()}
    p = _plan_query(select, name, full, lookup, _mapping(sink, lookup.mappings, "sink"))
    if p.stage is None:  # a static join (enrichment), stateless: its rows are the next one's input
        assert p.join is not None and p.join.kind == "table" and not p.src.chain, what
        layers = list(p.layers)
        if p.where_sql is not None:  # the joined SELECT's WHERE holds on the joined rows
            layers[0] = replace(layers[0], where_sql=p.where_sql)
        watermark = p.src.watermark
        for projection in layers:
            watermark = _kept(watermark, projection)
        return replace(
            p.src,
            layer=Layer(p.src.source.name, p.layer.columns),
            watermark=watermark,
            join=p.join,
            join_layers=(*p.src.join_layers, *layers),
        )
    kind = kinds.kind_of(p.stage)
    if kind.updates or p.stage.window is not None:
        raise PlanError(
            f"INSERT INTO {sink}: {what} aggregates, and only one aggregation per INSERT is supported: a "
            "stateful stage reads a source, a stateless view or CTE, or the rows of a deduplication or "
            "an interval join, not an aggregation's (its "
            f"{'rows change' if kind.updates else 'windows close'} as input arrives); aggregate in one SELECT"
        )
    watermark = p.src.watermark  # DISTINCT: the input's, on a column it keeps
    if p.stage.time_column is not None:  # ROW_NUMBER dedup, interval join: the stage's own
        watermark = WatermarkDef(p.stage.time_column, p.stage.watermark_delay_micros)
    for projection in p.layers:
        watermark = _kept(watermark, projection)
    step = Step(p.where_sql, p.stage, p.layers)
    return Input(
        p.src.source,
        Layer(p.src.source.name, p.layer.columns),
        p.src.pre_layers,
        watermark,
        (*p.src.chain, step),
        p.join,
    )


def _mapping(name: str, mappings: MappingLookup, role: str) -> Mapping:
    mapping = mappings(name)
    if mapping is None:
        raise PlanError(
            f"unknown mapping '{name}' (used as a {role}); create it first with "
            f"CREATE MAPPING {name} (...) TYPE ... OPTIONS (...)"
        )
    return mapping


def _from_of(select: exp.Select, sink: str, dedup_ok: bool = False, joins_ok: bool = False) -> exp.Expression:
    """The FROM of a SELECT, after refusing what a job cannot run (``dedup_ok``: not yet DISTINCT
    and window functions, which the caller checks where deduplication may stand)."""
    _refuse_unsupported(select, sink, dedup_ok, joins_ok)
    from_ = select.args.get("from_")
    if from_ is None:
        raise PlanError(f"INSERT INTO {sink}: the SELECT needs a FROM clause naming a source")
    return from_.this


def _refuse_unsupported(
    select: exp.Select, sink: str, dedup_ok: bool = False, joins_ok: bool = False
) -> None:
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


def _stage_name(select: exp.Select, cte: str | None, sink: str, suffix: str = "aggregate") -> str:
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


def _where(select: exp.Select, layer: Layer) -> str | None:
    where = select.args.get("where")
    if where is None:
        return None
    cond = where.this
    if list(cond.find_all(exp.AggFunc)):
        raise PlanError("aggregates are not allowed in WHERE; use HAVING")
    check_columns(cond, layer)
    infer(cond, layer.table, layer.columns)
    return cond.sql(SPARK)


def _projection(select: exp.Select, layer: Layer, where: str | None) -> tuple[Projection, Layer]:
    columns: list[OutputColumn] = []
    for i, proj in enumerate(select.expressions):
        if isinstance(proj, exp.Star):
            for name, typ in layer.columns.items():
                columns.append(OutputColumn(name, f"`{name}`", typ))
            continue
        body = proj.this if isinstance(proj, exp.Alias) else proj
        check_columns(body, layer)
        columns.append(
            OutputColumn(output_name(proj, i), body.sql(SPARK), infer(body, layer.table, layer.columns))
        )
    unique_names(columns)
    return Projection(where, tuple(columns)), Layer(layer.table, {c.name: c.type for c in columns})
