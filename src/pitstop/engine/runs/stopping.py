"""Stopping a run: at a batch boundary, or at a clean cut (the same source positions in every
branch, one committed batch each) that a snapshot is taken at."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from pitstop.connectors import positions
from pitstop.engine import checkpoint
from pitstop.engine.runs.branch import BranchQuery
from pitstop.engine.runs.watching import RunWatching
from pitstop.errors import PitstopError
from pitstop.faults import crash_point


@dataclass(frozen=True)
class Cut:
    """Where a stopped run stands: the same positions in every branch, one committed batch each."""

    positions: dict[str, Any]  # per source, as its connector defines
    batches: dict[int, int | None]  # branch index -> last committed batch id
    watermarks_ms: dict[int, int]  # branch index -> watermark after that batch


class RunStopping(RunWatching):
    """Stopping, draining to a cut, and checking the cut held."""

    def stop(self) -> None:
        """Stop every branch at a batch boundary: no sink write is cut in half. From here on
        nothing restarts a branch of this run (:meth:`recover`)."""
        with self._lock:  # a restart in flight finishes first; its query is stopped below
            self._stopping = True
        if self._catalog is not None:
            self._catalog.remove_commit_hook(self._publish_all)
        for bq in self.branches:
            interrupt = getattr(bq.sink, "interrupt", None)
            if interrupt is not None:  # a batch waiting for its sink's server stops waiting
                interrupt()
            bq.gate.refuse()
        for bq in self.branches:
            if bq.query is not None and bq.query.isActive:
                bq.query.stop()
            close = getattr(bq.sink, "close", None)
            if close is not None:  # a sink holding a client (Kafka's producer) lets it go
                close()

    def drain_to_cut(self, timeout_s: float, cancelled: Callable[[], bool] | None = None) -> Cut:
        """Bring every branch to the same source positions and hold it there (the job keeps
        running, idle, until :meth:`release` or :meth:`stop`).

        1. Fence each source at the furthest position any branch has planned.
        2. Wait until every branch has committed up to the fence and has no batch pending
           (windows that the input closes are emitted). If a branch planned a batch past the
           fence while it was being set, raise the fence to that position and wait again.
        3. Read the cut from the checkpoints.
        """
        # Step 1. Fence every source.
        fence = self.planned_positions()
        # Step 2. Drain to the fence; raise it if a branch went past it.
        while True:
            try:
                for src, pos in fence.items():
                    positions.write_fence(positions.source_dir(self.folder, src), pos)
                    crash_point("drain.fenced", positions.source_dir(self.folder, src))
            except OSError as exc:  # a full disk, most often: no cut, and nothing lost
                self.release()
                raise PitstopError(
                    f"job '{self.job}' could not hold its sources at a cut: {exc}. Nothing is lost: "
                    f"the job reads on; free space in {self.folder} (or make it writable) and try again"
                ) from exc
            try:
                self.wait(partial(self.caught_up, dict(fence)), timeout_s, "reach a clean cut", cancelled)
            except PitstopError:
                self.release()  # nothing is lost: the job reads on from where it stood
                raise
            # A trigger that listed its sources before the fence was written plans past it, and
            # its batch may appear only now: read the planned offsets as well as the committed.
            beyond = dict(fence)
            settled = True
            for bq in self.branches:
                p = checkpoint.progress(bq.checkpoint, self.start_positions)
                settled = settled and p.settled
                planned = checkpoint.latest_planned(bq.checkpoint)
                offsets = checkpoint.read_offsets(bq.checkpoint, planned) if planned is not None else None
                for src, pos in (*p.positions.items(), *(offsets.positions.items() if offsets else ())):
                    beyond[src] = self._positions(src).furthest(beyond.get(src, self.start_of(src)), pos)
            if not all(
                self._positions(src).same(beyond[src], fence.get(src, self.start_of(src))) for src in beyond
            ):
                fence = beyond
            elif settled:
                break
        # Step 3. The cut.
        try:
            return self._cut(fence)
        except PitstopError:
            self.release()
            raise

    def _cut(self, fence: dict[str, Any]) -> Cut:
        batches: dict[int, int | None] = {}
        watermarks: dict[int, int] = {}
        for bq in self.branches:
            p = checkpoint.progress(bq.checkpoint, self.start_positions)
            if not p.settled or not all(
                self._positions(src).same(
                    p.positions.get(src, self.start_of(src)), fence.get(src, self.start_of(src))
                )
                for src in bq.branch.sources
            ):
                raise PitstopError(
                    f"job '{self.job}': INSERT INTO {bq.branch.sink} is at {p.positions}, not at the cut "
                    f"{fence}; no snapshot was written"
                )
            self._refuse_sink_past(bq, p.committed, "the checkpoint's last commit")
            batches[bq.branch.index] = p.committed
            watermarks[bq.branch.index] = p.watermark_ms
        return Cut(dict(fence), batches, watermarks)

    def release(self) -> None:
        """Lift the fences set by :meth:`drain_to_cut`: the job reads new input again."""
        for src in self.plan.sources:
            positions.clear_fence(positions.source_dir(self.folder, src))

    def stop_at_cut(self, timeout_s: float, cancelled: Callable[[], bool] | None = None) -> Cut:
        """Stop with every branch at the same source positions, nothing processed after the cut:
        drain to a cut, refuse further batches at the sinks, stop the queries, and check that the
        checkpoints and the sinks still stand at the cut."""
        cut = self.drain_to_cut(timeout_s, cancelled)
        self.stop()
        self.check_stopped_at(cut)
        return cut

    @property
    def stopped(self) -> bool:
        return self._stopping

    def check_stopped_at(self, cut: Cut) -> None:
        """Check, the queries stopped, that no branch committed a batch after the cut and no sink
        holds one.

        A batch planned but never committed is harmless, and it happens: a trigger that listed its
        source before the fence was written plans past it, and stopping the query interrupts it.
        Its sink refused it, and a snapshot copies the checkpoint only up to the cut's batch.
        """
        for bq in self.branches:
            at_cut = cut.batches.get(bq.branch.index)
            committed = checkpoint.latest_commit(bq.checkpoint)
            if committed != at_cut:
                raise PitstopError(
                    f"job '{self.job}': INSERT INTO {bq.branch.sink} has committed batch {committed} "
                    f"once stopped, not the cut's batch {at_cut}; no snapshot was written"
                )
            self._refuse_sink_past(bq, at_cut, "the cut's batch")

    def _refuse_sink_past(self, bq: BranchQuery, batch: int | None, what: str) -> None:
        """PitstopError if the branch's sink holds a batch after ``batch`` (None: any batch)."""
        written = bq.sink.last_batch() if hasattr(bq.sink, "last_batch") else None
        if written is not None and (batch is None or written > batch):
            raise PitstopError(
                f"job '{self.job}': sink '{bq.branch.sink}' holds batch {written}, beyond {what} "
                f"{batch}; no snapshot was written"
            )
