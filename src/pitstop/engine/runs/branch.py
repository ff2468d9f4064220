"""One branch's streaming query: the gate between its batches and its sink, what this process knows
of it (restarts, failures), and how Spark runs it (its output mode, the watermark a batch runs with,
whether a stage can drop a row as late)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pitstop.connectors.base import Sink
from pitstop.engine import checkpoint
from pitstop.plan.model import Branch
from pitstop.stages import registry as kinds

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery


class StopRequested(Exception):
    """Raised by a sink before it writes anything, once the run is stopping."""


class Gate:
    """Lets batches through to the sink until the run stops; counts batches being written."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.refusing = False
        self.inflight = 0

    def enter(self, batch_id: int) -> None:
        with self._cond:
            if self.refusing:
                raise StopRequested(f"batch {batch_id} refused: the job is stopping")
            self.inflight += 1

    def leave(self) -> None:
        with self._cond:
            self.inflight -= 1
            self._cond.notify_all()

    def refuse(self, timeout: float = 60.0) -> None:
        with self._cond:
            self.refusing = True
            self._cond.wait_for(lambda: self.inflight == 0, timeout)


@dataclass
class BranchQuery:
    branch: Branch
    checkpoint: Path
    gate: Gate
    sink: Sink
    query: StreamingQuery | None = None
    restarts: int = 0  # restarts from the checkpoint after a failure, counted toward MAX_RESTARTS
    failures: int = 0  # every failure in this process (each one's whole trace is logged once)
    restarted_at: float = 0.0  # time.monotonic() of the last restart
    restarted_batch: int | None = None  # the last committed batch when it was last restarted
    last_reason: str | None = None  # why it last failed (Spark may stop a query before it says why)
    final: bool = False  # it failed for a reason a restart cannot change ('onError'='fail')
    kept_seen: set[str] = field(default_factory=set)  # files of kept late rows already recorded
    triggered: StreamingQuery | None = None  # ``query`` once it has run a trigger (see _has_run)


def late_possible(branch: Branch) -> bool:
    """Whether a stage of the branch can drop a row as late (one with a watermark)."""
    for stage in branch.stages:
        kind = kinds.kind_of(stage)
        if kind.lateness(stage, None, "0") is not None or kind.join_lateness(stage, None, "0") is not None:
            return True
    return False


def output_mode(branch: Branch) -> str:
    """Spark's output mode of a branch. ``update`` where its stage's rows change as input arrives
    (a running aggregate): each batch hands the sink the groups it changed, which the sink
    replaces by key. Spark refuses ``append`` for an aggregation without a watermark, and
    ``complete`` would hand every group to every batch (see :mod:`pitstop.stages.running`); and
    a window branch with early results (:mod:`pitstop.planner.early`): each batch hands the sink
    the windows it changed. Otherwise ``append``: a window's row once, when it closes."""
    return "update" if branch.upsert_keys else "append"


def batch_watermark(checkpoint_dir: Path, batch_id: int) -> int:
    """The event-time watermark (ms) that batch ``batch_id`` runs with: Spark writes the batch's
    offsets, with it, before it runs the batch."""
    offsets = checkpoint.read_offsets(checkpoint_dir, batch_id)
    return 0 if offsets is None else offsets.watermark_ms


def two_streams(branch: Branch) -> bool:
    """Whether the branch reads two watermarked streams (an interval join), whose own watermarks
    Spark keeps in memory only (:mod:`pitstop.engine.clocks`)."""
    return branch.join is not None and branch.join.kind == "interval"
