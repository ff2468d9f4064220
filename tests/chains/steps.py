"""The steps of a chain, and which chains are valid (for the shrinker)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chains.model import Job


# -- steps ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Input:
    """One file of ``n`` events: most within ``advance`` minutes after the latest event time so
    far, a share ``late`` up to 90 minutes before it, a share ``dup`` copies of earlier events."""

    seed: int
    n: int
    advance: int
    late: float
    dup: float = 0.0  # a share sent again: exact copies of events of earlier files


@dataclass(frozen=True)
class Start:
    job: Job
    early: bool = False  # OPTIONS ('earlyResultsMillis'='200'): windows' rows as they change


@dataclass(frozen=True)
class Update:
    """``DROP JOB c WITH SNAPSHOT``, then ``CREATE JOB c FROM SNAPSHOT`` it with ``job``."""

    job: Job
    fmt: str = "auto"
    early: bool = False
    delay: int = 5  # minutes: ev's WATERMARK delay (CREATE OR REPLACE MAPPING ev first if changed)


@dataclass(frozen=True)
class Snapshot:
    """``CREATE SNAPSHOT`` of the running job; the job goes on."""


@dataclass(frozen=True)
class Restore:
    """``DROP JOB c``, then ``CREATE JOB c FROM SNAPSHOT`` the ``which``-th snapshot (an older one)."""

    which: int
    job: Job
    rollback: bool
    fmt: str = "auto"
    early: bool = False
    # 'acceptSinkGap': the snapshot was taken past a cut the sinks were rolled back to since
    # (what the job wrote between the two is gone from the sinks and is not written again)
    accept_gap: bool = False
    delay: int = 5  # as :class:`Update`'s


@dataclass(frozen=True)
class Suspend:
    pass


@dataclass(frozen=True)
class Resume:
    pass


@dataclass(frozen=True)
class Kill:
    """A ``pitstop run`` process resumes the job, ``input`` arrives, and the process is killed
    with SIGKILL ``after_ms`` later."""

    input: Input
    after_ms: int


@dataclass(frozen=True)
class Serve:
    """``pitstop serve`` resumes the job, ``input`` arrives, a client awaits it; SIGTERM."""

    input: Input


@dataclass(frozen=True)
class Analyze:
    """``EXPLAIN ANALYZE CREATE JOB c FROM SNAPSHOT`` the ``which``-th snapshot ``AS`` the SQL of the
    job it was taken of: the replay of the same SQL writes the same rows to every sink and ends with
    the same state in every stage, and the job and its sinks are as they were."""

    which: int


@dataclass(frozen=True)
class Crash:
    """A pit stop (``step``) run by a ``pitstop run`` process that is killed with SIGKILL at the
    named step of pitstop's protocol (``at``, :mod:`pitstop.faults`); this process then finds
    the home as the crash matrix says it must be (:data:`CRASH_OUTCOMES`) and finishes the pit
    stop, which ends as ``step`` alone would have."""

    step: Update | Restore | Snapshot
    at: str


CRASH_OUTCOMES = {
    # DROP JOB c WITH SNAPSHOT s, then CREATE JOB c FROM SNAPSHOT s (an Update)
    "drain.fenced": "job resumable, no snapshot",
    "export.stage_written": "job resumable, no snapshot",
    "export.renamed": "job resumable, no snapshot",
    "drop.recorded": "snapshot listed, no job",
    # CREATE JOB c FROM SNAPSHOT s (an Update or a Restore)
    "restore.prepared": "snapshot listed, no job",
    # ... OPTIONS ('sinkRollback'='true') (a Restore; reached only when a sink holds rows after
    # the cut: otherwise the statement completes)
    "rollback.deleted": "snapshot listed, no job",
    "rollback.committed": "job created",
    # CREATE SNAPSHOT s FOR JOB c (a Snapshot; also drain.fenced, export.*: no snapshot)
    "snapshot.recorded": "job resumable, snapshot listed",
}
UPDATE_CRASHES = (
    "drain.fenced",
    "export.stage_written",
    "export.renamed",
    "drop.recorded",
    "restore.prepared",
)
RESTORE_CRASHES = ("restore.prepared", "rollback.deleted", "rollback.committed")
STAGE_WRITTEN = "export.stage_written"


def exports_a_stage(job: Job) -> bool:
    """Whether a snapshot of ``job`` writes a stage's state (one of appended joined rows alone has
    none: a process to be killed at :data:`STAGE_WRITTEN` would end well)."""
    return any(not b.enrich for b in job)


SNAPSHOT_CRASHES = ("drain.fenced", "export.stage_written", "export.renamed", "snapshot.recorded")


Step = Input | Start | Update | Snapshot | Restore | Suspend | Resume | Kill | Serve | Analyze | Crash


# -- shrinking -----------------------------------------------------------------------------------
def shrink(chain: list[Step], fails: Any) -> list[Step]:
    """A smaller chain that still fails (``fails(chain) -> bool``): drop steps, one at a time,
    from the end, keeping each removal that still fails and is still a valid chain."""
    best = list(chain)
    changed = True
    while changed:
        changed = False
        for i in range(len(best) - 1, -1, -1):
            candidate = best[:i] + best[i + 1 :]
            if valid(candidate) and fails(candidate):
                best = candidate
                changed = True
    return best


def valid(chain: list[Step]) -> bool:
    """Whether every step can run where it stands."""
    state, snapshots = "none", 0
    gapped: set[int] = set()
    job: Job = ()
    for s in chain:
        if isinstance(s, Crash):
            points = {Update: UPDATE_CRASHES, Restore: RESTORE_CRASHES, Snapshot: SNAPSHOT_CRASHES}
            if s.at not in points[type(s.step)]:
                return False
            if s.at.startswith("rollback.") and not (isinstance(s.step, Restore) and s.step.rollback):
                return False
            if s.at == STAGE_WRITTEN and not exports_a_stage(job):
                return False
            s = s.step
        if isinstance(s, Start | Update | Restore):
            job = s.job
        if isinstance(s, Start):
            if state != "none":
                return False
            state = "running"
        elif isinstance(s, Snapshot):
            if state != "running":  # CREATE SNAPSHOT of a suspended job is refused
                return False
            snapshots += 1
        elif isinstance(s, Update):
            if state == "none":
                return False
            snapshots += 1
            state = "running"
        elif isinstance(s, Restore):
            if state == "none" or s.which >= snapshots or (s.which in gapped and not s.accept_gap):
                return False
            if s.rollback and s.accept_gap:
                return False
            if s.rollback:
                gapped.update(range(s.which + 1, snapshots))
            state = "running"
        elif isinstance(s, Suspend):
            if state != "running":
                return False
            state = "suspended"
        elif isinstance(s, Kill | Serve):
            if state != "running":
                return False
        elif isinstance(s, Resume):
            if state != "suspended":
                return False
            state = "running"
        elif isinstance(s, Analyze):
            if state == "none" or s.which >= snapshots:
                return False
    return True
