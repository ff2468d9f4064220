"""What one point of a branch sees while it is planned: its columns and their types, and the
input a core SELECT reads. Shared by the planner (:mod:`pitstop.planner.build`) and the stage
kinds that plan themselves (:mod:`pitstop.stages`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from pitstop.catalog.rows import Mapping, WatermarkDef
from pitstop.errors import PlanError
from pitstop.plan.model import JoinSpec, OutputColumn, Projection, Step


@dataclass(frozen=True)
class Layer:
    """The columns visible at one point of a branch: name -> Spark type."""

    table: str
    columns: dict[str, str]


@dataclass(frozen=True)
class Input:
    """What a job's core SELECT reads: a source mapping seen through stateless layers (views,
    subqueries, IMPOSE_ORDER), with the watermark that holds on the visible columns; or, in a
    chain, the output of stateful stages (``chain``, after ``pre_layers`` and ``join``), whose
    last step's layers are the stateless ones above them."""

    source: Mapping
    layer: Layer
    pre_layers: tuple[Projection, ...]
    watermark: WatermarkDef | None
    chain: tuple[Step, ...] = ()
    join: JoinSpec | None = None
    join_layers: tuple[Projection, ...] = ()  # after a static join that a CTE or view holds
    read_as: str = ""  # "CTE 'recent'", "view 'v'", "a subquery": what the SELECT names in FROM

    def what(self) -> str:
        """What the SELECT reads, for a message: ``mapping 'orders'``, or ``CTE 'recent' (over
        mapping 'orders')``."""
        if not self.read_as:
            return f"mapping '{self.source.name}'"
        return f"{self.read_as} (over mapping '{self.source.name}')"


def check_columns(node: exp.Expression, layer: Layer) -> None:
    known = {c.lower() for c in layer.columns}
    for col in node.find_all(exp.Column):
        if col.name.lower() not in known:
            raise PlanError(
                f"unknown column '{col.name}' in {layer.table}; known columns: {', '.join(layer.columns)}"
            )


def output_name(projection: exp.Expression, position: int) -> str:
    if isinstance(projection, exp.Alias):
        return projection.alias
    if isinstance(projection, exp.Column):
        return projection.name
    return f"EXPR${position}"


def unique_names(columns: list[OutputColumn]) -> None:
    seen: set[str] = set()
    for c in columns:
        if c.name.lower() in seen:
            raise PlanError(f"output column '{c.name}' appears twice; give one an alias with AS")
        seen.add(c.name.lower())
