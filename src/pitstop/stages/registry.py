"""Every stateful stage kind pitstop knows, by name: the one list the planner, export, restore,
compatibility check and EXPLAIN / DESCRIBE consult (:mod:`pitstop.stages.base` says what a kind
declares)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pitstop.errors import CompatibilityError, PlanError
from pitstop.plan.model import AggregateStage, Branch, stage_from_json
from pitstop.stages import dedup, hop, interval_join, running, session, tumble
from pitstop.stages.base import StageKind

if TYPE_CHECKING:
    from sqlglot import exp

KINDS: tuple[StageKind, ...] = (
    tumble.KIND,
    hop.KIND,
    session.KIND,
    running.KIND,
    dedup.KIND,
    interval_join.KIND,
)
_BY_NAME = {k.name: k for k in KINDS}


def kind_named(name: str) -> StageKind:
    """The kind of that name; PlanError for a kind this pitstop lacks (a plan or snapshot
    written by a newer pitstop)."""
    found = _BY_NAME.get(name)
    if found is None:
        raise PlanError(
            f"stage kind '{name}' is unknown to this pitstop (known: {', '.join(_BY_NAME)}); "
            "was it written by a newer version?"
        )
    return found


def kind_of(stage: AggregateStage) -> StageKind:
    return kind_named(stage.kind)


def recognize(select: exp.Select, tvf: exp.Expression | None) -> StageKind | None:
    """The kind whose stage ``select`` runs (``tvf``: the window function of its FROM, if any),
    each kind asked in turn (:meth:`StageKind.recognize`); None for a stateless SELECT. Flink's
    ROW_NUMBER deduplication and interval joins span more than one SELECT or a JOIN: the planner
    finds them itself (:mod:`pitstop.planner.build`, :mod:`pitstop.planner.joins`)."""
    found = [k for k in KINDS if k.recognize(select, tvf)]
    assert len(found) <= 1, f"kinds {[k.name for k in found]} all recognise one SELECT"
    return found[0] if found else None


# -- snapshot manifests ----------------------------------------------------------------------------
def manifest_entry(stage: AggregateStage) -> dict[str, Any]:
    """What a manifest records of a stage's kind: its name and the format of its rows."""
    kind = kind_of(stage)
    return {"kind": kind.name, "format_version": kind.format_version}


def entry_format(entry: dict[str, Any]) -> tuple[str, int]:
    """A manifest stage entry's kind and format version. An entry without them was written before
    kinds had modules: a window aggregate (its plan's window kind) in format 1."""
    kind = entry.get("kind") or stage_from_json(entry["plan"]).kind
    return str(kind), int(entry.get("format_version", 1))


def manifest_stages(snapshot: str, manifest: dict[str, Any]) -> dict[str, AggregateStage]:
    """A snapshot's stages as their kinds read them; CompatibilityError naming the stage when a
    stage's kind or format is one this pitstop cannot read."""
    out: dict[str, AggregateStage] = {}
    for name, entry in manifest["stages"].items():
        kind_name, version = entry_format(entry)
        try:
            kind = kind_named(kind_name)
        except PlanError as err:
            raise CompatibilityError(f"snapshot '{snapshot}', stage '{name}': {err.message}") from None
        if version not in kind.reads_formats:
            readable = ", ".join(str(v) for v in sorted(kind.reads_formats))
            raise CompatibilityError(
                f"snapshot '{snapshot}', stage '{name}': its state is in format {version} of kind "
                f"'{kind.name}', and this pitstop reads format(s) {readable}; restore it with a newer "
                "pitstop, or give the stage a new name to start it empty"
            )
        out[name] = stage_from_json(entry["plan"])
    return out


def operator_ids(branch: Branch) -> dict[str, list[int]]:
    """The Spark stateful operator ids of each stage of a branch. Spark numbers a query's stateful
    operators from the end of its plan, so the stage nearest the sink has the lowest ids."""
    out: dict[str, list[int]] = {}
    next_id = 0
    for stage in reversed(branch.stages):
        count = kind_of(stage).operators
        out[stage.name] = list(range(next_id, next_id + count))
        next_id += count
    return out
