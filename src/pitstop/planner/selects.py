"""Planning one SELECT of a job: down through CTEs, views and subqueries to its source, its stateful
stage by kind (an aggregation, a deduplication, an interval join), the stateless SELECTs above it,
and a chain of stateful stages, each one's rows the input of the next."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import cast

from sqlglot import exp

from pitstop.catalog.rows import Mapping, WatermarkDef
from pitstop.connectors import registry
from pitstop.errors import NotSupportedError, PlanError
from pitstop.intervals import interval_micros
from pitstop.plan.model import AggregateStage, JoinSpec, Projection, Step
from pitstop.plan.scope import Input, Layer
from pitstop.plan.types import spark_type
from pitstop.planner import joins
from pitstop.planner.checks import from_of, known_mapping, refuse_unsupported, stage_name
from pitstop.planner.lookups import Lookups
from pitstop.planner.projection import kept_watermark, project, upsert_keys, where_of
from pitstop.planner.stateful import own_stateful, stateful
from pitstop.sql.nodes import ImposeOrder, WindowTvf
from pitstop.sql.parser import stage_hint
from pitstop.stages import dedup, interval_join
from pitstop.stages import registry as kinds
from pitstop.stages.base import aggregates


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


def plan_query(
    query: exp.Select,
    query_cte: str | None,
    ctes: dict[str, tuple[str, exp.Select]],
    lookup: Lookups,
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
        from_table = from_of(select, sink_name, dedup_ok=True, joins_ok=True)
        if isinstance(from_table, exp.Table) and from_table.name.lower() in ctes:
            name = from_table.name.lower()
            if any(n is not None and n.lower() == name for _, n in chain):
                raise PlanError(f"CTE '{name}' refers to itself")
            # (the sides of a JOIN are mappings: a JOIN's FROM is walked into, and refused there)
            if (
                own_stateful(select)
                and not select.args.get("joins")
                and stateful(ctes[name][1], plain_ctes, lookup, {name})
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
            core, mappings, sink_name, lambda: stage_name(core, core_cte, sink.name, suffix)
        )
        core = joined.select
    from_node = from_of(core, sink_name, dedup_ok=True)

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
            refuse_unsupported(select, sink_name)
    if numbered is not None:
        return _plan_numbered(sink, numbered, first_outer, core, core_cte, outer, plain_ctes, lookup)

    tvf = from_node if isinstance(from_node, WindowTvf) else None
    if joined is not None:
        src = joined.input
    else:
        src = _resolve_input(tvf.this if tvf is not None else from_node, plain_ctes, lookup, sink_name, set())
    source, src_layer = src.source, src.layer
    where_sql = where_of(core, src_layer)
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
        first, layer = project(core, src_layer, where=where_sql)
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
        stage, layer, first = kind.plan(core, tvf, src, stage_name(core, core_cte, sink.name, kind.suffix))
    else:
        if tvf is not None:
            raise PlanError(
                f"INSERT INTO {sink_name}: a window function needs GROUP BY window_start, "
                "window_end, ... and aggregates"
            )
        first, layer = project(core, src_layer, where=None)
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
        projection, layer = project(select, layer, where=where_of(select, layer))
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
        upsert_keys=upsert_keys(stage, layers, sink_name) if stage is not None and updates else (),
    )


def _plan_numbered(
    sink: Mapping,
    numbered: exp.Select,
    above: exp.Select,
    core: exp.Select,
    core_cte: str | None,
    outer: list[exp.Select],
    ctes: dict[str, exp.Select],
    lookup: Lookups,
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
        numbered, None, src, stage_name(hint_from, cte, sink.name, dedup.KIND.suffix)
    )
    filtered = above.copy()
    filtered.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
    for col in filtered.find_all(exp.Column):
        if col.name.lower() == rn.lower():
            raise PlanError(
                f"INSERT INTO {sink.name}: {rn} is 1 in every row that is kept; leave it out of the SELECT"
            )
    refuse_unsupported(filtered, sink.name)
    projection, layer = project(filtered, layer, where=where_of(filtered, layer))
    return _planned(sink, src, None, stage, [first, projection], layer, outer)


def _resolve_input(
    node: exp.Expression, ctes: dict[str, exp.Select], lookup: Lookups, sink: str, seen: set[str]
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
        if stateful(node.this, ctes, lookup, seen):
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
        if stateful(cte, ctes, lookup, seen | {name.lower()}):
            got = _upstream(cte, name, what, ctes, lookup, sink)
        else:
            got = _input_of_select(cte, what, ctes, lookup, sink, seen | {name.lower()})
        return replace(got, read_as=what)
    view = lookup.views(name)
    if view is not None:
        if not isinstance(view, exp.Select):
            raise PlanError(f"view '{name}' is a UNION; jobs read views that are one SELECT")
        what = f"view '{name}'"
        if stateful(view, {}, lookup, seen | {name.lower()}):
            got = _upstream(view, name, what, {}, lookup, sink)
        else:
            got = _input_of_select(view, what, {}, lookup, sink, seen | {name.lower()})
        return replace(got, read_as=what)
    source = known_mapping(name, lookup.mappings, "source")
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
    select: exp.Select, what: str, ctes: dict[str, exp.Select], lookup: Lookups, sink: str, seen: set[str]
) -> Input:
    if aggregates(select):
        raise PlanError(f"{what} aggregates; a job reads only stateless views and CTEs below its window")
    inner = _resolve_input(from_of(select, sink), ctes, lookup, sink, seen)
    where = where_of(select, inner.layer)
    projection, layer = project(select, inner.layer, where)
    watermark = kept_watermark(inner.watermark, projection)
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


def _upstream(
    select: exp.Select, name: str | None, what: str, ctes: dict[str, exp.Select], lookup: Lookups, sink: str
) -> Input:
    """A chain: ``select`` (a CTE, view or subquery) runs a stateful stage whose rows are the input
    of the stage above it. Only a stage that emits each row once, final, and passes event time
    on can feed another: deduplication and an interval join (Spark runs several stateful
    operators in one query in append mode, the watermark flowing through them)."""
    full = {k: (lookup.ctes.get(k, (k, v))[0], v) for k, v in ctes.items()}
    p = plan_query(select, name, full, lookup, known_mapping(sink, lookup.mappings, "sink"))
    if p.stage is None:  # a static join (enrichment), stateless: its rows are the next one's input
        assert p.join is not None and p.join.kind == "table" and not p.src.chain, what
        layers = list(p.layers)
        if p.where_sql is not None:  # the joined SELECT's WHERE holds on the joined rows
            layers[0] = replace(layers[0], where_sql=p.where_sql)
        watermark = p.src.watermark
        for projection in layers:
            watermark = kept_watermark(watermark, projection)
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
        watermark = kept_watermark(watermark, projection)
    step = Step(p.where_sql, p.stage, p.layers)
    return Input(
        p.src.source,
        Layer(p.src.source.name, p.layer.columns),
        p.src.pre_layers,
        watermark,
        (*p.src.chain, step),
        p.join,
    )
