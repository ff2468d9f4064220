"""Aggregations in accumulator form (DESIGN.md section 3, point 2), planned from SQL.

Every aggregate function is a list of typed accumulators with a merge function
(:data:`pitstop.planner.plan.MERGE_FUNCTION`) and a finish expression: ``COUNT`` is a BIGINT
summed; ``AVG(x)`` a sum and a count; ``MIN`` / ``MAX`` themselves. The accumulator schema is the
state type of every aggregating stage kind, and what "the accumulator type must stay the same" is
checked against.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from pitstop.errors import PlanError
from pitstop.planner.plan import Accumulator, AggregateStage, KeyColumn, OutputColumn, Projection, WindowSpec
from pitstop.planner.scope import Input, Layer, check_columns, output_name, unique_names
from pitstop.planner.types import SPARK, decimal_parts, infer, parse_spark, sum_type

WINDOW_COLUMNS = ("window_start", "window_end")
SUPPORTED_AGGREGATES = "COUNT(*), COUNT(x), SUM, MIN, MAX, AVG"


def plan_aggregate(
    select: exp.Select, window: WindowSpec, input_: Input, stage_name: str
) -> tuple[AggregateStage, Layer, Projection]:
    """A windowed aggregation in accumulator form: keys, accumulators, and the projection that
    finishes them into the SELECT's columns (and its HAVING as the projection's filter)."""
    src = input_.layer
    group = select.args.get("group")
    if group is None:
        raise PlanError(
            f"stage '{stage_name}': a windowed aggregation needs GROUP BY window_start, window_end, ..."
        )
    keys: list[KeyColumn] = []
    key_nodes: dict[str, str] = {}  # sql of the group expression -> key column name
    window_cols: set[str] = set()
    for i, g in enumerate(group.expressions):
        if isinstance(g, exp.Column) and g.name.lower() in WINDOW_COLUMNS:
            window_cols.add(g.name.lower())
            continue
        check_columns(g, src)
        name = g.name if isinstance(g, exp.Column) else f"__k{i}"
        keys.append(KeyColumn(name, g.sql(SPARK), infer(g, src.table, src.columns)))
        key_nodes[g.sql(SPARK)] = name
    if window_cols != set(WINDOW_COLUMNS):
        raise PlanError(f"stage '{stage_name}': GROUP BY must include both window_start and window_end")

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

    agg_columns = {"window_start": "TIMESTAMP", "window_end": "TIMESTAMP"}
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
            if col.name not in agg_columns and col.name.lower() not in WINDOW_COLUMNS:
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
        window=window,
        keys=tuple(keys),
        accumulators=tuple(accumulators),
        functions=tuple(functions),
        watermark_delay_micros=input_.watermark.delay_micros if input_.watermark else 0,
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
                raise PlanError(f"nested aggregates are not supported: {call.sql()}")
            calls.append(call)
    return calls


def accumulate(call: exp.AggFunc, src: Layer, add: Callable[[str, str, str], str]) -> str:
    """Declare the accumulators of one aggregate call; return its finish expression."""
    text = call.sql(SPARK)
    if isinstance(call, exp.Count):
        arg = call.this
        if isinstance(arg, exp.Distinct):
            raise PlanError(
                f"{text}: COUNT(DISTINCT ...) is not supported yet; supported: {SUPPORTED_AGGREGATES}. "
                "To count distinct values, GROUP BY them in one job and count the sink's rows"
            )
        if arg is None or isinstance(arg, exp.Star):
            return add("count", "BIGINT", "CAST(1 AS BIGINT)")
        check_columns(arg, src)
        return add("count", "BIGINT", f"CAST(CASE WHEN {arg.sql(SPARK)} IS NULL THEN 0 ELSE 1 END AS BIGINT)")
    if not isinstance(call, (exp.Sum, exp.Min, exp.Max, exp.Avg)):
        raise PlanError(f"aggregate {text} is not supported; supported: {SUPPORTED_AGGREGATES}")
    arg = call.this
    if isinstance(arg, exp.Distinct):
        raise PlanError(
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
