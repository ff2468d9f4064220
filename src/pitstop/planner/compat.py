"""Compatibility of a snapshot's stages with a new job's stages (DESIGN.md section 4).

Checked before anything is started: a refused stage stops ``CREATE JOB ... FROM SNAPSHOT`` with
the same text that ``EXPLAIN`` prints. What is new, dropped or renamed is decided here; what may
change within a stage is its kind's rule (:meth:`pitstop.stages.base.StageKind.compare`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pitstop.plan.model import AggregateStage, JobPlan
from pitstop.stages import registry as kinds

RESTORED = "restored"
EMPTY = "starts empty"
DROPPED = "dropped"
REFUSED = "refused"


@dataclass(frozen=True)
class StageVerdict:
    stage: str
    outcome: str
    reason: str
    warnings: tuple[str, ...] = ()
    how: str = ""  # restored stages: from Spark's state files or from the snapshot's rows, and why

    def detail(self) -> str:
        """The reason, how the stage is restored, and any warnings (EXPLAIN's reason column)."""
        how = f"; {self.how}" if self.how else ""
        return self.reason + how + "".join(f" (warning: {w})" for w in self.warnings)

    def text(self) -> str:
        return f"stage '{self.stage}': {self.outcome}: {self.detail()}"


def check(old: dict[str, AggregateStage], plan: JobPlan, strict: bool = False) -> list[StageVerdict]:
    verdicts: list[StageVerdict] = []
    for stage in plan.stages:
        before = old.get(stage.name)
        if before is None:
            verdicts.append(
                StageVerdict(stage.name, EMPTY, "new stage; reads from the snapshot's source positions")
            )
        else:
            verdicts.append(_compare(before, stage))
    names = {s.name for s in plan.stages}
    for name in old:
        if name not in names:
            if strict:
                verdicts.append(
                    StageVerdict(
                        name,
                        REFUSED,
                        "in the snapshot but not in the new job, and "
                        "'strictRestore' is set; keep the stage or unset the option",
                    )
                )
            else:
                verdicts.append(
                    StageVerdict(
                        name,
                        DROPPED,
                        "in the snapshot but not in the new job; its state "
                        "is ignored (rename it back to keep it)",
                    )
                )
    return verdicts


def refused(verdicts: list[StageVerdict]) -> list[StageVerdict]:
    return [v for v in verdicts if v.outcome == REFUSED]


def _compare(old: AggregateStage, new: AggregateStage) -> StageVerdict:
    """A stage of one kind cannot seed another; otherwise the kind compares (pitstop.stages)."""
    name = new.name
    old_kind, new_kind = kinds.kind_of(old), kinds.kind_of(new)
    if old_kind is not new_kind:
        what = old_kind.family if old_kind.family == new_kind.family else "stage"
        return StageVerdict(
            name,
            REFUSED,
            f"{what} kind changed from {old_kind.title} to {new_kind.title}; state of one kind "
            "cannot seed another",
        )
    change = new_kind.compare(old, new)
    return StageVerdict(name, REFUSED if change.refused else RESTORED, change.reason, change.warnings)
