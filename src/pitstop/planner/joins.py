"""Plan the JOIN of the SELECT that reads a branch's source (:class:`pitstop.plan.model.JoinSpec`).

``FROM a [AS x] [LEFT] JOIN b [AS y] ON ...`` names two mappings. The ON decides what the join is:

- equalities only (``ON c.user_id = u.id``): a **stream-static join**; ``b`` is read whole as a
  table for every micro-batch (:mod:`pitstop.connectors.tables`). Stateless. INNER or LEFT.
- equalities and a time bound (``ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1'
  HOUR``; also ``b.ts >= a.ts - INTERVAL ... AND b.ts <= a.ts + INTERVAL ...``): an **interval
  join** of two streams, a stateful stage (:mod:`pitstop.stages.interval_join`). INNER only.

The join's rows get flat column names (``JoinSpec`` says how), and the SELECT is rewritten over
them with the join removed, so that the rest of the planner plans it as a SELECT of one input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import cast

import sqlglot
from sqlglot import exp

from pitstop.catalog.rows import Mapping
from pitstop.connectors import registry, tables
from pitstop.errors import NotSupportedError, PlanError
from pitstop.intervals import interval_micros
from pitstop.plan.model import (
    AggregateStage,
    Branch,
    IntervalSpec,
    JoinSpec,
    KeyColumn,
    OutputColumn,
    Projection,
    Step,
)
from pitstop.plan.scope import Input, Layer
from pitstop.plan.types import SPARK, spark_type
from pitstop.stages import registry as kinds


@dataclass(frozen=True)
class PlannedJoin:
    select: exp.Select  # the SELECT over the flat columns, its join removed
    input: Input  # the flat columns, with the source's watermark (static joins)
    join: JoinSpec
    stage: AggregateStage | None  # an interval join's stage


@dataclass(frozen=True)
class _Side:
    mapping: Mapping
    names: tuple[str, ...]  # lower-case: the alias, and the mapping's name
    flat: dict[str, str]  # lower-case column -> flat name
    columns: tuple[OutputColumn, ...]  # flat name <- column, in the mapping's order


def plan_join(
    select: exp.Select, mappings: Callable[[str], Mapping | None], sink: str, stage_name: Callable[[], str]
) -> PlannedJoin:
    """``stage_name`` names an interval join's stage (asked only for one)."""
    what = f"INSERT INTO {sink}"
    joins = select.args["joins"]
    if len(joins) != 1:
        raise PlanError(f"{what}: one JOIN per SELECT is supported (found {len(joins)})")
    join = joins[0]
    side = (join.args.get("side") or "").upper()
    kind = (join.args.get("kind") or "").upper()
    if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER") or join.args.get("using"):
        raise NotSupportedError(
            f"{what}: {join.sql(SPARK).split(' ON ')[0]} is not supported; write [INNER] JOIN or LEFT JOIN "
            "... ON a condition"
        )
    on = join.args.get("on")
    if on is None:
        raise PlanError(f"{what}: the JOIN needs ON a condition (e.g. ON c.user_id = u.id)")
    left_node = select.args["from_"].this
    left = _mapping_of(left_node, mappings, what, "FROM")
    right = _mapping_of(join.this, mappings, what, "JOIN")
    if not registry.connector(left.type).source:
        raise PlanError(
            f"{what}: mapping '{left.name}' is of type {registry.display_name(left.type)}, which cannot be "
            "read as a stream; the FROM of a join is a stream (sources are of type "
            f"{', '.join(registry.SOURCE_TYPES)})"
        )
    lside = _side(left, left_node, set())
    rside = _side(right, join.this, set(lside.flat.values()))
    if left.name.lower() == right.name.lower() and lside.names[0] != rside.names[0]:
        # (Its two reads would share the source's positions in the run folder.)
        raise NotSupportedError(
            f"{what}: a JOIN of mapping '{left.name}' with itself is not supported (a job reads each "
            f"source once); map the same data a second time (CREATE MAPPING {left.name}_2 ... with the "
            "same OPTIONS) and join the two"
        )
    if set(lside.names) & set(rside.names):
        raise PlanError(
            f"{what}: both sides of the JOIN are called '{left_node.alias_or_name}'; alias one (AS x)"
        )
    resolve = _resolver(lside, rside, what)
    bound = _time_bound(on, lside, rside, resolve, what)
    flat_layer = Layer(left.name, {c.name: c.type for c in (*lside.columns, *rside.columns)})
    spec_columns = (lside.columns, rside.columns)
    rewritten = _rewrite(select, lside, rside, resolve, left.name)
    if bound is None:
        tables.check_table(right, registry.connector(right.type), what)
        on_sql = _flat(on, resolve).sql(SPARK)
        spec = JoinSpec("table", "left" if side == "LEFT" else "inner", right.name, *spec_columns, on_sql)
        src = Input(left, flat_layer, (), left.watermark)
        return PlannedJoin(rewritten, src, spec, None)
    if side == "LEFT":
        raise PlanError(
            f"{what}: an interval join of two streams is INNER only (a LEFT interval join emits a row "
            "with NULLs when its interval closes, which pitstop does not plan yet); write JOIN"
        )
    if not registry.connector(right.type).source:
        raise PlanError(
            f"{what}: the ON bounds the join in time, so '{right.name}' is read as a second stream, and "
            f"mapping '{right.name}' is of type {registry.display_name(right.type)}, which cannot be read "
            "as a stream; drop the time bound to join it as a static table"
        )
    keys, (lt, rt, lower, upper) = bound
    for m, t in ((left, lt), (right, rt)):
        wm = m.watermark
        original = next(c for c, f in (lside.flat if m is left else rside.flat).items() if f == t)
        if wm is None or wm.column.lower() != original:
            raise PlanError(
                f"{what}: an interval join bounds its state by both streams' watermarks; mapping "
                f"'{m.name}' needs WATERMARK FOR {original} AS {original} - INTERVAL '...' SECOND "
                f"(the time column the ON bounds)"
            )
    assert left.watermark is not None and right.watermark is not None
    # Each side buffers only the columns the branch uses (Spark prunes the others before the
    # join, so the state holds exactly these): the keys, the times, and what the SELECT reads.
    used = {c.name for c in rewritten.find_all(exp.Column)} | {lt, rt} | {n for pair in keys for n in pair}
    lcols = tuple(c for c in lside.columns if c.name in used)
    rcols = tuple(c for c in rside.columns if c.name in used)
    stage = AggregateStage(
        name=stage_name(),
        params=IntervalSpec(
            left_time=lt,
            right=right.name,
            right_keys=tuple(rk for _, rk in keys),
            right_time=rt,
            lower_micros=lower,
            upper_micros=upper,
            right_delay_micros=right.watermark.delay_micros,
            left_columns=tuple(KeyColumn(c.name, c.sql, c.type) for c in lcols),
            right_columns=tuple(KeyColumn(c.name, c.sql, c.type) for c in rcols),
        ),
        keys=tuple(KeyColumn(lk, f"`{lk}`", flat_layer.columns[lk]) for lk, _ in keys),
        accumulators=(),
        functions=(),
        watermark_delay_micros=left.watermark.delay_micros,
    )
    spec = JoinSpec("interval", "inner", right.name, lcols, rcols, "")
    flat_layer = Layer(left.name, {c.name: c.type for c in (*lcols, *rcols)})
    return PlannedJoin(rewritten, Input(left, flat_layer, (), None), spec, stage)


def buffered_in_chain(branch: Branch) -> Branch:
    """The branch, its interval join buffering the columns Spark keeps when the join feeds another
    stage. Spark prunes every column that nothing after the join reads before the join, so a
    side's buffered row (the state contract) is its keys, its time and what is read after it.
    :func:`plan_join` finds those of the SELECT that holds the join; in a chain, the stages after
    it may read fewer (a window reads its keys, time and aggregates' inputs): followed here from
    the sink back to the join, and the layers between them keep only the columns read after them
    (as Spark would), so that a restored join's rows, which hold only those, feed them."""
    if branch.join is None or branch.join.kind != "interval" or not branch.before:
        return branch
    needed = _read_by(branch.layers, {c.name.lower() for c in branch.output})  # the sink writes all
    if branch.stage is not None:
        needed = _stage_reads(branch.stage, needed) | _columns(branch.where_sql)
    steps: list[Step] = []
    for i, step in reversed(list(enumerate(branch.before))):
        layers, needed = _pruned(step.layers, needed)
        steps.insert(0, replace(step, layers=layers))
        if i > 0:
            needed = _stage_reads(step.stage, needed) | _columns(step.where_sql)
    join = branch.before[0].stage
    iv = join.interval
    assert iv is not None, join.name
    keep_left = needed | {k.name.lower() for k in join.keys} | {str(join.time_column).lower()}
    keep_right = needed | {k.lower() for k in iv.right_keys} | {iv.right_time.lower()}
    pruned = replace(
        iv,
        left_columns=tuple(c for c in iv.left_columns if c.name.lower() in keep_left),
        right_columns=tuple(c for c in iv.right_columns if c.name.lower() in keep_right),
    )
    spec = replace(
        branch.join,
        left_columns=tuple(c for c in branch.join.left_columns if c.name.lower() in keep_left),
        right_columns=tuple(c for c in branch.join.right_columns if c.name.lower() in keep_right),
    )
    steps[0] = replace(steps[0], stage=replace(join, params=pruned))
    return replace(branch, join=spec, before=tuple(steps))


def _pruned(layers: tuple[Projection, ...], needed: set[str]) -> tuple[tuple[Projection, ...], set[str]]:
    """``layers`` keeping only the ``needed`` columns of each, and the input columns they read."""
    out: list[Projection] = []
    for layer in reversed(layers):
        kept = tuple(c for c in layer.columns if c.name.lower() in needed)
        out.insert(0, replace(layer, columns=kept))
        needed = _columns(layer.where_sql)
        for c in kept:
            needed |= _columns(c.sql)
    return tuple(out), needed


def _columns(sql: str | None) -> set[str]:
    if not sql:
        return set()
    return {c.name.lower() for c in sqlglot.parse_one(sql, read=SPARK).find_all(exp.Column)}


def _read_by(layers: tuple[Projection, ...], needed: set[str]) -> set[str]:
    """The input columns that ``layers`` read to give the ``needed`` columns of their output."""
    for layer in reversed(layers):
        read = _columns(layer.where_sql)
        for c in layer.columns:
            if c.name.lower() in needed:
                read |= _columns(c.sql)
        needed = read
    return needed


def _stage_reads(stage: AggregateStage, needed: set[str]) -> set[str]:
    """The input columns a stage reads, when the ``needed`` columns of its output are read."""
    read: set[str] = set()
    for key in stage.keys:
        read |= _columns(key.sql)
    for acc in stage.accumulators:
        read |= _columns(acc.input_sql)
    for time in (stage.window.time_column if stage.window else None, stage.time_column):
        if time is not None:
            read.add(time.lower())
    if kinds.kind_of(stage).passes_input(stage):
        read |= needed  # ROW_NUMBER ... = 1 passes its input rows on
    return read


def _mapping_of(
    node: exp.Expression, mappings: Callable[[str], Mapping | None], what: str, where: str
) -> Mapping:
    if not isinstance(node, exp.Table):
        raise PlanError(
            f"{what}: each side of a JOIN names a mapping ({where} {node.sql(SPARK)} does not); "
            "views and subqueries cannot be joined yet"
        )
    mapping = mappings(node.name)
    if mapping is None:
        raise PlanError(
            f"unknown mapping '{node.name}' (used in a JOIN, whose sides are mappings: a view or CTE "
            f"cannot be joined yet); create it with CREATE MAPPING {node.name} (...) TYPE ... OPTIONS (...)"
        )
    return mapping


def _side(mapping: Mapping, node: exp.Table, taken: set[str]) -> _Side:
    alias = node.alias_or_name
    flat: dict[str, str] = {}
    columns: list[OutputColumn] = []
    lower_taken = {t.lower() for t in taken}
    for c in mapping.columns:
        name = c.name if c.name.lower() not in lower_taken else f"{alias}_{c.name}"
        flat[c.name.lower()] = name
        columns.append(OutputColumn(name, f"`{c.name}`", spark_type(c.type)))
    return _Side(mapping, tuple(dict.fromkeys((alias.lower(), mapping.name.lower()))), flat, tuple(columns))


def _resolver(lside: _Side, rside: _Side, what: str) -> Callable[[exp.Column], tuple[str, str]]:
    """``column -> (side, flat name)``, side ``left`` or ``right``."""

    def resolve(col: exp.Column) -> tuple[str, str]:
        name, table = col.name.lower(), col.table.lower()
        found = []
        for label, s in (("left", lside), ("right", rside)):
            if (not table or table in s.names) and name in s.flat:
                found.append((label, s.flat[name]))
        if len(found) == 1:
            return found[0]
        shown = col.sql(SPARK)
        if found:
            raise PlanError(f"{what}: column {shown} is in both sides of the JOIN; qualify it (x.{col.name})")
        known = [f"{s.names[0]}.{c}" for s in (lside, rside) for c in s.flat]
        raise PlanError(f"{what}: unknown column {shown} in the JOIN; known columns: {', '.join(known)}")

    return resolve


def _flat(node: exp.Expression, resolve: Callable[[exp.Column], tuple[str, str]]) -> exp.Expression:
    def swap(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and not isinstance(n.this, exp.Star):
            return exp.column(resolve(n)[1], quoted=True)
        return n

    return node.copy().transform(swap)


def _rewrite(
    select: exp.Select,
    lside: _Side,
    rside: _Side,
    resolve: Callable[[exp.Column], tuple[str, str]],
    table: str,
) -> exp.Select:
    """The SELECT over the flat columns: join removed, ``x.*`` and ``*`` expanded (a flat name
    that differs from its column keeps the column's name with AS)."""
    out = select.copy()
    out.set("joins", None)
    out.set("from_", exp.From(this=exp.to_table(table)))
    projections: list[exp.Expression] = []
    for proj in out.expressions:
        star_of: tuple[_Side, ...] | None = None
        if isinstance(proj, exp.Star):
            star_of = (lside, rside)
        elif isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star):
            picked = [s for s in (lside, rside) if proj.table.lower() in s.names]
            if not picked:
                raise PlanError(f"{proj.sql(SPARK)}: '{proj.table}' is neither side of the JOIN")
            star_of = tuple(picked)
        if star_of is None:
            projections.append(_flat(proj, resolve))
            continue
        for s in star_of:
            for c in s.columns:
                original = c.sql.strip("`")
                ref = exp.column(c.name, quoted=True)
                shown = ref if original == c.name else exp.alias_(ref, original, quoted=True)
                projections.append(cast(exp.Expression, shown))
    out.set("expressions", projections)
    for arg in ("where", "group", "having", "qualify"):
        part = out.args.get(arg)
        if part is not None:
            out.set(arg, _flat(part, resolve))
    return out


def _time_bound(
    on: exp.Expression,
    lside: _Side,
    rside: _Side,
    resolve: Callable[[exp.Column], tuple[str, str]],
    what: str,
) -> tuple[list[tuple[str, str]], tuple[str, str, int, int]] | None:
    """None when the ON has no time bound (a static join; its equalities are checked by Spark).
    Otherwise the key pairs ``(left, right)`` and ``(left time, right time, lower, upper)``: a
    right row joins when ``right time`` is within ``[left time + lower, left time + upper]``."""
    conjuncts = list(on.flatten()) if isinstance(on, exp.And) else [on]
    keys: list[tuple[str, str]] = []
    bounds: list[
        tuple[str, tuple[str, str], tuple[str, str], int]
    ] = []  # (op >=|<=, subject (side, flat), other, offset)
    others: list[exp.Expression] = []
    for c in conjuncts:
        if isinstance(c, exp.Between):
            bounds.append((">=", *_term_pair(c.this, c.args["low"], resolve)))
            bounds.append(("<=", *_term_pair(c.this, c.args["high"], resolve)))
        elif isinstance(c, (exp.GTE, exp.LTE)) and _is_time_term(c.expression):
            op = ">=" if isinstance(c, exp.GTE) else "<="
            bounds.append((op, *_term_pair(c.this, c.expression, resolve)))
        elif (
            isinstance(c, exp.EQ) and isinstance(c.this, exp.Column) and isinstance(c.expression, exp.Column)
        ):
            a, b = resolve(c.this), resolve(c.expression)
            if {a[0], b[0]} == {"left", "right"}:
                keys.append((a[1], b[1]) if a[0] == "left" else (b[1], a[1]))
            else:
                others.append(cast(exp.Expression, c))
        else:
            others.append(cast(exp.Expression, c))
    if not bounds:
        return None
    if others:
        raise PlanError(
            f"{what}: an interval join's ON holds key equalities (a.k = b.k) and the time bound only; "
            f"move {others[0].sql(SPARK)} to WHERE"
        )
    if not keys:
        raise PlanError(f"{what}: an interval join needs at least one key equality in ON (a.k = b.k)")
    lower: int | None = None
    upper: int | None = None
    times: set[tuple[str, str]] = set()
    for op, subject, other, offset in bounds:
        # subject op other + offset; put it as right time op left time + d
        if subject[0] == other[0]:
            raise PlanError(f"{what}: the time bound compares a side with itself; compare a.ts with b.ts")
        if subject[0] == "right":
            rt, lt, d, is_lower = subject[1], other[1], offset, op == ">="
        else:  # left op right + offset  <=>  right (reversed op) left - offset
            rt, lt, d, is_lower = other[1], subject[1], -offset, op == "<="
        times.add((lt, rt))
        if is_lower:
            lower = d if lower is None else max(lower, d)
        else:
            upper = d if upper is None else min(upper, d)
    if len(times) != 1 or lower is None or upper is None:
        raise PlanError(
            f"{what}: an interval join bounds one time column of each side from both ends: "
            "b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' HOUR"
        )
    if lower > upper:
        raise PlanError(f"{what}: the join's time bound is empty (its lower end is after its upper end)")
    ((lt, rt),) = times
    return keys, (lt, rt, lower, upper)


def _is_time_term(node: exp.Expression) -> bool:
    return (
        isinstance(node, (exp.Add, exp.Sub))
        and isinstance(node.expression, exp.Interval)
        or (isinstance(node, exp.Column))
    )


def _term_pair(
    subject: exp.Expression, other: exp.Expression, resolve: Callable[[exp.Column], tuple[str, str]]
) -> tuple[tuple[str, str], tuple[str, str], int]:
    """``subject`` (a column) and ``other`` (a column, plus or minus an interval) as
    ``((side, flat), (side, flat), offset micros)``."""
    if not isinstance(subject, exp.Column):
        raise PlanError(f"the join's time bound must compare a time column: {subject.sql(SPARK)}")
    offset = 0
    if isinstance(other, (exp.Add, exp.Sub)) and isinstance(other.expression, exp.Interval):
        offset = interval_micros(other.expression) * (1 if isinstance(other, exp.Add) else -1)
        other = other.this
    if not isinstance(other, exp.Column):
        raise PlanError(
            f"the join's time bound must be a time column plus or minus an INTERVAL: {other.sql(SPARK)}"
        )
    return resolve(subject), resolve(other), offset
