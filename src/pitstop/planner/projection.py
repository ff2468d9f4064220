"""A SELECT's WHERE and columns, checked against the columns they read and written as Spark SQL,
and what passes through the projections: the watermark's column and a running aggregate's keys."""

from __future__ import annotations

from sqlglot import exp

from pitstop.catalog.rows import WatermarkDef
from pitstop.errors import PlanError
from pitstop.plan.model import AggregateStage, OutputColumn, Projection
from pitstop.plan.scope import Layer, check_columns, output_name, unique_names
from pitstop.plan.types import SPARK, infer


def where_of(select: exp.Select, layer: Layer) -> str | None:
    where = select.args.get("where")
    if where is None:
        return None
    cond = where.this
    if list(cond.find_all(exp.AggFunc)):
        raise PlanError("aggregates are not allowed in WHERE; use HAVING")
    check_columns(cond, layer)
    infer(cond, layer.table, layer.columns)
    return cond.sql(SPARK)


def project(select: exp.Select, layer: Layer, where: str | None) -> tuple[Projection, Layer]:
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


def kept_watermark(watermark: WatermarkDef | None, projection: Projection) -> WatermarkDef | None:
    """The watermark after ``projection``: on the column that passes the time column on as it is."""
    if watermark is None:
        return None
    kept = [c for c in projection.columns if c.sql.strip("`").lower() == watermark.column.lower()]
    return WatermarkDef(kept[0].name, watermark.delay_micros) if kept else None


def upsert_keys(stage: AggregateStage, layers: list[Projection], sink: str) -> tuple[str, ...]:
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
