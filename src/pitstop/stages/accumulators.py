"""Aggregations in accumulator form (DESIGN.md section 3, point 2), planned from SQL.

Every aggregate function is a list of typed accumulators with a merge function
(:mod:`pitstop.stages.buffers`) and a finish expression. The accumulator schema is the state type
of every aggregating stage kind (the ``acc0..accN`` columns of their state contracts), and what
"the accumulator type must stay the same" is checked against:

==========================  ===============================================  =====================
aggregate                   accumulator(s): kind and state column type       finish
==========================  ===============================================  =====================
``COUNT(*)``, ``COUNT(x)``  count BIGINT (summed)                            itself
``SUM(x)``                  sum, of Spark's SUM type                         itself
``AVG(x)``                  sum, and count BIGINT                            sum / count
``MIN(x)``, ``MAX(x)``      min / max, of x's type                           itself
``MIN_BY(x, y)``,           min / max STRUCT<ord: type of y, val: type of    ``acc['val']``
``MAX_BY(x, y)``            x>; a row whose y is NULL is skipped; pairs
                            compare by y, then x: of equal y, MIN_BY takes
                            the least x, MAX_BY the greatest
``COUNT(DISTINCT x)``       set ARRAY<type of x>: the distinct non-NULL      its size
                            values (exact; merged by union)
``APPROX_COUNT_DISTINCT``   hll BINARY: an Apache DataSketches HLL sketch    its estimate
``(x)``                     (lgConfigK 12) of x as a STRING, Spark's
                            ``hll_sketch_agg`` (merged by ``hll_union``)
==========================  ===============================================  =====================

``MIN_BY`` and ``MAX_BY`` differ only in their comparator: their state has one type, so changing one
into the other keeps the state (Hazelcast: "changing the comparator" of ``minBy``), with a warning
that each kept value is the old comparator's best until its window or key sees new events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from pitstop.errors import NotSupportedError, PlanError
from pitstop.plan.model import (
    Accumulator,
    AggregateStage,
    KeyColumn,
    OutputColumn,
    Projection,
    RunningSpec,
    WindowSpec,
)
from pitstop.plan.scope import Input, Layer, check_columns, output_name, unique_names
from pitstop.plan.types import SPARK, decimal_parts, infer, parse_spark, sum_type, widens
from pitstop.stages.buffers import SET_ELEMENT_TYPES

WINDOW_COLUMNS = ("window_start", "window_end")
SUPPORTED_AGGREGATES = (
    "COUNT(*), COUNT(x), COUNT(DISTINCT x), APPROX_COUNT_DISTINCT(x), SUM, MIN, MAX, AVG, "
    "MIN_BY(x, y), MAX_BY(x, y)"
)


def plan_aggregate(
    select: exp.Select,
    params: WindowSpec | RunningSpec,
    input_: Input,
    stage_name: str,
) -> tuple[AggregateStage, Layer, Projection]:
    """An aggregation in accumulator form: keys, accumulators, and the projection that finishes
    them into the SELECT's columns (and its HAVING as the projection's filter). Per window and
    key for a window kind's ``params``; else per key alone (a running aggregate)."""
    window = params if isinstance(params, WindowSpec) else None
    src = input_.layer
    group = select.args.get("group")
    if group is None:
        if window is not None:
            raise PlanError(
                f"stage '{stage_name}': a windowed aggregation needs GROUP BY window_start, window_end, ..."
            )
        raise PlanError(
            f"stage '{stage_name}': a running aggregate needs GROUP BY at least one column: its rows "
            "are replaced in the sink by their group keys"
        )
    windowed = window is not None
    keys: list[KeyColumn] = []
    key_nodes: dict[str, str] = {}  # sql of the group expression -> key column name
    window_cols: set[str] = set()
    for i, g in enumerate(group.expressions):
        if windowed and isinstance(g, exp.Column) and g.name.lower() in WINDOW_COLUMNS:
            window_cols.add(g.name.lower())
            continue
        check_columns(g, src)
        name = g.name if isinstance(g, exp.Column) else f"__k{i}"
        keys.append(KeyColumn(name, g.sql(SPARK), infer(g, src.table, src.columns)))
        key_nodes[g.sql(SPARK)] = name
    if windowed and window_cols != set(WINDOW_COLUMNS):
        raise PlanError(f"stage '{stage_name}': GROUP BY must include both window_start and window_end")
    if not windowed and not keys:
        raise PlanError(
            f"stage '{stage_name}': a running aggregate needs GROUP BY at least one column: its rows "
            "are replaced in the sink by their group keys"
        )

    accumulators: list[Accumulator] = []
    finishes: dict[str, str] = {}  # sql of the aggregate call -> finish expression
    functions: list[str] = []

    def add(kind: str, typ: str, input_sql: str) -> str:
        name = f"acc{len(accumulators)}"
        accumulators.append(Accumulator(name, kind, typ, input_sql))
        return name

    for call in aggregate_calls(select):
        text = call.sql(SPARK)
        if text in finishes:
            continue
        functions.append(text)
        finishes[text] = accumulate(call, src, add)

    if not accumulators:
        # Spark's aggregation needs a function to merge, and the state contract an accumulator.
        raise NotSupportedError(
            f"stage '{stage_name}': a GROUP BY without an aggregate function is not supported; add "
            "one (e.g. COUNT(*) AS n), or keep the first row of each key with ROW_NUMBER() OVER "
            "(PARTITION BY ... ORDER BY ...) = 1"
        )
    agg_columns = {"window_start": "TIMESTAMP", "window_end": "TIMESTAMP"} if windowed else {}
    agg_columns.update({k.name: k.type for k in keys})
    agg_columns.update({a.name: a.type for a in accumulators})
    agg_layer = Layer(stage_name.replace(".", "_"), agg_columns)

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.AggFunc):
            return parse_spark(finishes[node.sql(SPARK)])
        if node.sql(SPARK) in key_nodes and not isinstance(node, exp.Alias):
            return exp.column(key_nodes[node.sql(SPARK)], quoted=True)
        return node

    columns: list[OutputColumn] = []
    for i, proj in enumerate(select.expressions):
        if isinstance(proj, exp.Star):
            raise PlanError(f"stage '{stage_name}': SELECT * cannot be aggregated; name the columns")
        body = proj.this if isinstance(proj, exp.Alias) else proj
        rewritten = body.copy().transform(rewrite)
        for col in rewritten.find_all(exp.Column):
            if col.name not in agg_columns and not (windowed and col.name.lower() in WINDOW_COLUMNS):
                raise PlanError(
                    f"stage '{stage_name}': column '{col.name}' must be in GROUP BY or inside an aggregate"
                )
        columns.append(
            OutputColumn(
                output_name(proj, i),
                rewritten.sql(SPARK),
                infer(rewritten, agg_layer.table, agg_layer.columns),
            )
        )
    unique_names(columns)
    having_sql = None
    having = select.args.get("having")
    if having is not None:
        having_sql = having.this.copy().transform(rewrite).sql(SPARK)
    stage = AggregateStage(
        name=stage_name,
        params=params,
        keys=tuple(keys),
        accumulators=tuple(accumulators),
        functions=tuple(functions),
        watermark_delay_micros=input_.watermark.delay_micros if input_.watermark and windowed else 0,
    )
    out_layer = Layer(agg_layer.table, {c.name: c.type for c in columns})
    return stage, out_layer, Projection(having_sql, tuple(columns))


def aggregate_calls(select: exp.Select) -> list[exp.AggFunc]:
    calls: list[exp.AggFunc] = []
    nodes = list(select.expressions)
    if select.args.get("having") is not None:
        nodes.append(select.args["having"])
    for node in nodes:
        for call in node.find_all(exp.AggFunc):
            if any(isinstance(a, exp.AggFunc) for a in call.find_all(exp.AggFunc) if a is not call):
                raise NotSupportedError(f"nested aggregates are not supported: {call.sql()}")
            calls.append(call)
    return calls


def accumulate(call: exp.AggFunc, src: Layer, add: Callable[[str, str, str], str]) -> str:
    """Declare the accumulators of one aggregate call; return its finish expression."""
    text = call.sql(SPARK)
    if isinstance(call, exp.Count):
        arg = call.this
        if isinstance(arg, exp.Distinct):
            return distinct_set(text, arg, src, add)
        if arg is None or isinstance(arg, exp.Star):
            return add("count", "BIGINT", "CAST(1 AS BIGINT)")
        check_columns(arg, src)
        return add("count", "BIGINT", f"CAST(CASE WHEN {arg.sql(SPARK)} IS NULL THEN 0 ELSE 1 END AS BIGINT)")
    if isinstance(call, exp.ApproxDistinct):
        if call.args.get("accuracy") is not None or isinstance(call.this, exp.Distinct):
            raise PlanError(
                f"{text}: write APPROX_COUNT_DISTINCT(x) with one argument (its sketch has a fixed size)"
            )
        check_columns(call.this, src)
        acc = add("hll", "BINARY", f"CAST({call.this.sql(SPARK)} AS STRING)")
        return f"CAST(coalesce(hll_sketch_estimate({acc}), 0) AS BIGINT)"
    if isinstance(call, (exp.ArgMin, exp.ArgMax)):
        return arg_extremum(call, src, add)
    if not isinstance(call, (exp.Sum, exp.Min, exp.Max, exp.Avg)):
        raise NotSupportedError(f"aggregate {text} is not supported; supported: {SUPPORTED_AGGREGATES}")
    arg = call.this
    if isinstance(arg, exp.Distinct):
        raise NotSupportedError(
            f"{text}: DISTINCT aggregates are not supported yet; supported: {SUPPORTED_AGGREGATES}"
        )
    check_columns(arg, src)
    arg_sql = arg.sql(SPARK)
    arg_type = infer(arg, src.table, src.columns)
    if isinstance(call, (exp.Min, exp.Max)):
        kind = "min" if isinstance(call, exp.Min) else "max"
        return add(kind, arg_type, f"CAST({arg_sql} AS {arg_type})")
    total = sum_type(arg_type)
    if total is None:
        raise PlanError(f"{text}: cannot sum a value of type {arg_type}")
    s = add("sum", total, f"CAST({arg_sql} AS {total})")
    if isinstance(call, exp.Sum):
        return f"CAST({s} AS {total})"
    c = add("count", "BIGINT", f"CAST(CASE WHEN {arg_sql} IS NULL THEN 0 ELSE 1 END AS BIGINT)")
    parts = decimal_parts(arg_type)
    if parts is not None:
        p, scale = parts
        return f"CAST({s} / {c} AS DECIMAL({min(38, p + 4)},{min(38, scale + 4)}))"
    return f"CAST({s} AS DOUBLE) / {c}"


def distinct_set(text: str, arg: exp.Distinct, src: Layer, add: Callable[[str, str, str], str]) -> str:
    """``COUNT(DISTINCT x)``: the set of x's distinct values."""
    if len(arg.expressions) != 1:
        raise PlanError(f"{text}: COUNT(DISTINCT ...) counts one expression; write COUNT(DISTINCT x)")
    x = arg.expressions[0]
    check_columns(x, src)
    typ = infer(x, src.table, src.columns)
    parts = decimal_parts(typ)
    if typ not in SET_ELEMENT_TYPES and (parts is None or parts[0] > 18):
        raise NotSupportedError(
            f"{text}: a distinct set of {typ} values is not supported; CAST the value to STRING (or "
            f"to one of {', '.join(SET_ELEMENT_TYPES)}, DECIMAL(p,s) with p <= 18)"
        )
    acc = add("set", f"ARRAY<{typ}>", f"CAST({x.sql(SPARK)} AS {typ})")
    return f"CAST(coalesce(size({acc}), 0) AS BIGINT)"


def arg_extremum(call: exp.ArgMin | exp.ArgMax, src: Layer, add: Callable[[str, str, str], str]) -> str:
    """``MIN_BY(x, y)`` / ``MAX_BY(x, y)``: the least / greatest (y, x), whose x is the result."""
    text = call.sql(SPARK)
    x, y = call.this, call.expression
    if y is None or call.args.get("count") is not None:
        raise PlanError(f"{text}: write {'MIN_BY' if isinstance(call, exp.ArgMin) else 'MAX_BY'}(x, y)")
    check_columns(x, src)
    check_columns(y, src)
    tx, ty = infer(x, src.table, src.columns), infer(y, src.table, src.columns)
    kind = "min" if isinstance(call, exp.ArgMin) else "max"
    pair = f"named_struct('ord', CAST({y.sql(SPARK)} AS {ty}), 'val', CAST({x.sql(SPARK)} AS {tx}))"
    acc = add(
        kind, f"STRUCT<ord: {ty}, val: {tx}>", f"CASE WHEN {y.sql(SPARK)} IS NULL THEN NULL ELSE {pair} END"
    )
    return f"CAST({acc}['val'] AS {tx})"


def comparator_changes(changed: tuple[tuple[str, str], ...], in_flight: str) -> list[str]:
    """A warning per ``MIN_BY`` changed into ``MAX_BY`` (or back), whose state is kept: what the
    restored value is until new events arrive."""
    warnings: list[str] = []
    for old, new in changed:
        before, after = parse_spark(old), parse_spark(new)
        pair = {type(before), type(after)}
        if pair == {exp.ArgMin, exp.ArgMax} and before.args.get("this") == after.args.get("this"):
            if before.args.get("expression") == after.args.get("expression"):
                warnings.append(
                    f"{old} -> {new} changes the comparator and keeps the state: for {in_flight}, "
                    f"{new} starts from the value {old} kept (the old comparator's best) and holds it "
                    "until it sees an event that wins by the new comparator; it is the true "
                    f"{new} only for those that start after the cut"
                )
    return warnings


# -- evolution ------------------------------------------------------------------------------------
def groups(stage: AggregateStage) -> list[tuple[str, tuple[Accumulator, ...]]]:
    """Each aggregate call as written, with its accumulators (``AVG`` has two: sum and count), in
    the order they were planned."""
    out: list[tuple[str, tuple[Accumulator, ...]]] = []
    rest = list(stage.accumulators)
    for function in stage.functions:
        count = 2 if isinstance(parse_spark(function), exp.Avg) else 1
        out.append((function, tuple(rest[:count])))
        rest = rest[count:]
    assert not rest, stage.name
    return out


@dataclass(frozen=True)
class Evolution:
    """How a restored stage's accumulators come from the snapshot's (DESIGN.md section 4).

    An aggregate is matched by the call as written (``SUM(amount)``), wherever it stands, and its
    state may widen, not narrow. One that is new at a place whose old call is gone takes that
    call's state if their state types are the same (a changed function, e.g. ``MIN`` -> ``MAX``,
    with a warning). The rest of the new calls start empty; the rest of the old ones are dropped."""

    seed_columns: dict[str, str]  # new accumulator -> Spark SQL over a snapshot row (old names)
    added: tuple[str, ...]  # calls whose state starts empty
    removed: tuple[str, ...]  # calls whose state is dropped
    widened: tuple[str, ...]  # "SUM(qty) BIGINT -> DECIMAL(20,0)"
    changed: tuple[tuple[str, str], ...]  # (old call, new call) at one place, state carried over
    refused: str | None  # why the state cannot be carried over

    @property
    def identity(self) -> bool:
        """Every accumulator is carried over as it is, positionally."""
        return not (self.added or self.removed or self.widened or self.refused) and all(
            sql == name for name, sql in self.seed_columns.items()
        )


def evolve(old: AggregateStage, new: AggregateStage) -> Evolution:
    old_groups, new_groups = groups(old), groups(new)
    old_by_call = {f: accs for f, accs in old_groups}
    new_calls = {f for f, _ in new_groups}
    used: set[str] = set()
    columns: dict[str, str] = {}
    added: list[str] = []
    widened: list[str] = []
    changed: list[tuple[str, str]] = []
    for i, (call, accs) in enumerate(new_groups):
        source: str | None = call if call in old_by_call else None
        if source is None and i < len(old_groups) and old_groups[i][0] not in new_calls:
            if [a.type for a in old_groups[i][1]] == [a.type for a in accs]:
                source = old_groups[i][0]  # a changed call at the same place, of the same types
        if source is None or source in used:
            added.append(call)
            columns.update({a.name: f"CAST(NULL AS {a.type})" for a in accs})
            continue
        before = old_by_call[source]
        old_types = ", ".join(a.type for a in before)
        new_types = ", ".join(a.type for a in accs)
        if len(before) != len(accs) or not all(
            widens(b.type, a.type) for b, a in zip(before, accs, strict=False)
        ):
            what = call if source == call else f"{source} -> {call}"
            return Evolution(
                {},
                (),
                (),
                (),
                (),
                f"the state of {what} changed type from ({old_types}) to ({new_types}), "
                "which is not a widening (INT -> BIGINT, FLOAT -> DOUBLE, DECIMAL(p,s) -> DECIMAL(p',s) "
                "with p' > p); keep the type, or give the stage a new name to start it empty",
            )
        used.add(source)
        if source != call:
            changed.append((source, call))
        if old_types != new_types:
            widened.append(f"{call} ({old_types}) -> ({new_types})")
        for b, a in zip(before, accs, strict=True):
            columns[a.name] = b.name if a.type == b.type else f"CAST({b.name} AS {a.type})"
    removed = tuple(f for f, _ in old_groups if f not in used)
    return Evolution(columns, tuple(added), removed, tuple(widened), tuple(changed), None)
