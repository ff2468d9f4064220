"""Compatibility of a snapshot's stages with a new job's stages (DESIGN.md section 4).

Checked before anything is started: a refused stage stops ``CREATE JOB ... FROM SNAPSHOT`` with
the same text that ``EXPLAIN`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from pitstop.planner.plan import AggregateStage, JobPlan, KeyColumn
from pitstop.sql.intervals import format_interval

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
    name = new.name
    if old.window.kind != new.window.kind:
        return StageVerdict(
            name,
            REFUSED,
            f"window kind changed from {old.window.kind.upper()} to "
            f"{new.window.kind.upper()}; state of one kind cannot seed another",
        )
    old_keys = [_key(k) for k in old.keys]
    new_keys = [_key(k) for k in new.keys]
    if old_keys != new_keys:
        return StageVerdict(
            name,
            REFUSED,
            f"group-by keys changed from {_cols(old_keys)} to "
            f"{_cols(new_keys)}; keep the keys or give the stage a new name",
        )
    if old.accumulator_schema != new.accumulator_schema:
        return StageVerdict(
            name,
            REFUSED,
            f"accumulator schema changed from ({', '.join(old.accumulator_schema)}) for "
            f"{', '.join(old.functions)} to ({', '.join(new.accumulator_schema)}) for "
            f"{', '.join(new.functions)}; keep the aggregates' types and order, or give the stage "
            "a new name to start it empty",
        )
    warnings: list[str] = []
    reason = "same window, keys and accumulators"
    old_size, new_size = old.window.size_micros, new.window.size_micros
    if new.window.kind == "session":
        old_gap, new_gap = old.window.gap_micros or 0, new.window.gap_micros or 0
        if old_gap != new_gap:
            reason = (
                f"session gap {format_interval(old_gap)} -> {format_interval(new_gap)}: open sessions "
                "are re-merged on the new gap"
            )
        return StageVerdict(name, RESTORED, reason, tuple(_function_warnings(old, new)))
    if new.window.kind == "hop":
        old_slide, new_slide = old.window.slide_micros or 0, new.window.slide_micros or 0
        if old_slide != new_slide:
            return StageVerdict(
                name,
                REFUSED,
                f"sliding window slide changed from {format_interval(old_slide)} to "
                f"{format_interval(new_slide)}; keep the slide (the size may change), or give the stage "
                "a new name to start it empty",
            )
        if old_size != new_size:
            reason = (
                f"window size {format_interval(old_size)} -> {format_interval(new_size)}, slide kept: each "
                "old window's accumulators go to the new window with the same end"
            )
            warnings.append("windows in flight at the cut may be incomplete until they close")
    elif old_size != new_size:
        if new_size % old_size != 0:
            return StageVerdict(
                name,
                REFUSED,
                f"tumbling window size changed from {format_interval(old_size)} to "
                f"{format_interval(new_size)}, which is not a multiple of the old size; "
                "use a multiple, or give the stage a new name to start it empty",
            )
        reason = (
            f"window size {format_interval(old_size)} -> {format_interval(new_size)}: "
            "old windows fold into the new ones"
        )
    warnings += _function_warnings(old, new)
    return StageVerdict(name, RESTORED, reason, tuple(warnings))


def _function_warnings(old: AggregateStage, new: AggregateStage) -> list[str]:
    old_kinds = [a.kind for a in old.accumulators]
    new_kinds = [a.kind for a in new.accumulators]
    if old_kinds != new_kinds or old.functions != new.functions:
        return [
            f"aggregates changed from {', '.join(old.functions)} to {', '.join(new.functions)} with "
            "the same accumulator types; restored state was accumulated by the old functions"
        ]
    return []


def _key(key: KeyColumn) -> tuple[str, str]:
    """What identifies a group-by key: its column name, or for a computed key (``__k<i>``, named
    by position) its expression, so that ``upper(region)`` -> ``lower(region)`` is a change."""
    return (key.sql if key.name.startswith("__k") else key.name, key.type)


def _cols(cols: list[tuple[str, str]]) -> str:
    return "(" + ", ".join(f"{n} {t}" for n, t in cols) + ")"
