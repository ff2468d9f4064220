"""Watching a run: a failed branch restarted from its checkpoint (up to ``MAX_RESTARTS``, counted
again after it ran well), the failure that ends a job, and waiting until the branches have caught
up with their input (AWAIT JOB)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from pitstop.connectors import positions, registry
from pitstop.engine import checkpoint
from pitstop.engine.runs.branch import BranchQuery
from pitstop.engine.runs.failures import CHECKPOINT_FAILURE, full_text, rejected_record, spark_reason
from pitstop.engine.runs.starting import RunStarting
from pitstop.errors import AwaitTimeoutError, CancelledError, JobFailedError
from pitstop.logs import FILE_ONLY

log = logging.getLogger(__name__)
POLL_S = 0.05
FAILURE_POLL_S = 0.25
"""How often a wait asks Spark whether a branch has failed, where it looks at the checkpoint every
:data:`POLL_S`: each ask is a few JVM calls per branch, on the cores the batches run on."""
MAX_RESTARTS = 3
HEALTHY_S = 600.0
"""A branch that failed after running well this long since its last restart, committing a batch,
has its restarts counted from 0 again (Flink's exponential-delay strategy resets its backoff after
a stable hour, ``reset-backoff-threshold``): a long-lived job survives a transient failure now and
then, and a job failing again and again right after each restart still fails for good."""


class RunWatching(RunStarting):
    """Restarts, failures and waiting."""

    def failure(self) -> str | None:
        """Why the job has failed for good, or None. A read: it restarts nothing and changes
        nothing (AWAIT JOB and the drain of DROP JOB ... WITH SNAPSHOT poll it)."""
        if self.failed_for_good is not None:  # recorded by the manager (its supervisor) meanwhile
            return self.failed_for_good
        for bq in list(self.branches):
            reason = self._dead(bq)
            if reason is not None and (
                self.fail_fast or bq.final or (bq.restarts >= MAX_RESTARTS and not self._ran_well(bq))
            ):
                return self._failed_text(bq, reason)
        return None

    def recover(self) -> tuple[list[str], str | None]:
        """Restart each failed branch from its checkpoint, up to ``MAX_RESTARTS`` times, as a
        cluster restarts a failed job: its sink skips the batches it already holds, so nothing is
        read twice or lost. Returns what was restarted (one sentence each) and, when a branch
        keeps failing, why the job has failed for good. A branch that failed on a malformed
        record under ``'onError'='fail'`` fails the job at once: reading the same file again
        meets the same record.

        Only the manager's supervisor calls this, under the manager's lock; :meth:`stop` takes
        this run's lock too and marks the run stopping, so a restart can never start a query
        for a run that is being stopped or dropped (no orphan query)."""
        restarted: list[str] = []
        with self._lock:
            if self._stopping:
                return restarted, None
            for bq in self.branches:
                reason = self._dead(bq)
                if reason is None:
                    continue
                if bq.restarts and self._ran_well(bq):
                    log.info(
                        "job '%s': INSERT INTO %s ran well for %.0f s after its last restart; its restarts "
                        "are counted from 0 again",
                        self.job,
                        bq.branch.sink,
                        time.monotonic() - bq.restarted_at,
                    )
                    bq.restarts = 0
                if bq.final or bq.restarts >= MAX_RESTARTS:
                    return restarted, self._failed_text(bq, reason)
                bq.restarts += 1
                bq.failures += 1
                bq.restarted_at, bq.restarted_batch = (
                    time.monotonic(),
                    checkpoint.latest_commit(bq.checkpoint),
                )
                log.warning(
                    "job '%s': INSERT INTO %s failed (%s); restarting it from its checkpoint (%d of %d)",
                    self.job,
                    bq.branch.sink,
                    reason,
                    bq.restarts,
                    MAX_RESTARTS,
                )
                try:
                    bq.query = self._start_query(self._frame(bq.branch), bq, self._trigger_ms)
                except Exception as again:  # noqa: BLE001 - any failure to restart is reported
                    log.error(
                        "job '%s': restarting INSERT INTO %s failed", self.job, bq.branch.sink, exc_info=True
                    )
                    bq.restarts = MAX_RESTARTS
                    return restarted, self._failed_text(
                        bq, f"{reason}; restarting failed: {spark_reason(again)}"
                    )
                restarted.append(
                    f"INSERT INTO {bq.branch.sink} failed ({reason}); restarted from its checkpoint "
                    f"({bq.restarts} of {MAX_RESTARTS})"
                )
        return restarted, None

    @staticmethod
    def _ran_well(bq: BranchQuery) -> bool:
        """Whether the branch ran :data:`HEALTHY_S` since its last restart and committed a batch."""
        if time.monotonic() - bq.restarted_at < HEALTHY_S:
            return False
        last = checkpoint.latest_commit(bq.checkpoint)
        return last is not None and (bq.restarted_batch is None or last > bq.restarted_batch)

    def _dead(self, bq: BranchQuery) -> str | None:
        """Spark's reason if the branch's query has stopped by itself (not by pitstop's stop)."""
        q = bq.query
        if q is None or bq.gate.refusing or self._stopping:
            return None
        exc = q.exception()
        if exc is None and q.isActive:
            return None
        if exc is None:
            return bq.last_reason or "stopped unexpectedly"
        if (bq.branch.index, bq.failures) not in self._logged:  # each failure's whole trace once
            self._logged.add((bq.branch.index, bq.failures))  # in the log; one sentence elsewhere
            # A replay's failure is its statement's error, said there: the whole trace in the log only.
            log.error(
                "job '%s' (run %s): INSERT INTO %s failed:\n%s",
                self.job,
                self.run.run_id,
                bq.branch.sink,
                full_text(exc),
                extra=FILE_ONLY if self.fail_fast else None,
            )
        bq.last_reason = spark_reason(exc)
        bq.final = rejected_record(exc)
        return bq.last_reason

    def _failed_text(self, bq: BranchQuery, reason: str) -> str:
        """The one sentence a failed branch is reported with. A branch that started on a
        snapshot's native copy and failed on what that copy holds (before committing a batch past
        it, or Spark names its checkpoint or state) is told how to restore it from the rows
        instead; any other failure (a malformed record, a later batch's) is not its copy's."""
        restore = self.run.restore or {}
        native = restore.get("native") or []
        batches = restore.get("native_batches") or {}
        committed = checkpoint.latest_commit(bq.checkpoint) if batches else None
        on_copy = any(  # nothing committed past the copy: it failed on what the copy holds
            batches.get(s.name) is not None and committed == batches[s.name] for s in bq.branch.stages
        )
        if (on_copy and not bq.final) or CHECKPOINT_FAILURE.search(reason):
            for stage in (s for s in bq.branch.stages if s.name in native):
                reason += (
                    f" (stage '{stage.name}' started on the snapshot's native state files, which Spark "
                    "refused; OPTIONS ('restoreFormat'='canonical') restores it from the snapshot's rows "
                    "instead)"
                )
        return f"INSERT INTO {bq.branch.sink} failed: {reason}"

    def available(self) -> dict[str, Any]:
        """Each source's position once all input available now is read."""
        out: dict[str, Any] = {}
        for src in self.plan.sources:
            mapping = self.mappings[src]
            directory = positions.source_dir(self.folder, src)
            out[src] = registry.connector(mapping.type).available(self.folder, mapping, self.start_of(src))
            fence = positions.read_fence(directory)
            if fence is not None:
                out[src] = self._positions(src).least(out[src], fence)
        return out

    def caught_up(self, targets: dict[str, Any]) -> bool:
        for bq in self.branches:
            if not self._has_run(bq):
                return False
            p = checkpoint.progress(bq.checkpoint, self.start_positions)
            seeded = (s.name in self.seeds and not self.seeds[s.name].clock_only for s in bq.branch.stages)
            if p.committed is None and any(seeded):
                return False  # the seeds' batch has not run yet
            for src in bq.branch.sources:
                if src in targets and not self._positions(src).covers(
                    p.positions.get(src, self.start_of(src)), targets[src]
                ):
                    return False
            if not p.settled:
                return False
        return True

    def _has_run(self, bq: BranchQuery) -> bool:
        """Whether the branch's query is running and has run a trigger in this process. Its
        checkpoint alone can say "caught up" (one copied from a snapshot, or a resumed one, holds
        the positions already) while the query is still starting, restarting after a failure, or
        about to fail on its first trigger, where Spark checks the checkpoint against the query."""
        q = bq.query
        if q is None or not q.isActive:
            return False
        if bq.triggered is not q:  # (a query that has run a trigger has a progress from then on)
            if q.lastProgress is None:
                return False
            bq.triggered = q
        return True

    def wait(
        self,
        predicate: Callable[[], bool],
        timeout_s: float,
        what: str,
        cancelled: Callable[[], bool] | None = None,
    ) -> None:
        def failed() -> None:
            failure = self.failure()
            if failure is not None:
                raise JobFailedError(f"job '{self.job}' failed: {failure}")

        deadline = time.monotonic() + timeout_s
        asked = 0.0  # when Spark was last asked about failures (a few JVM calls per branch)
        while True:
            if time.monotonic() - asked >= FAILURE_POLL_S:
                failed()
                asked = time.monotonic()
            if predicate():
                failed()  # never done while a branch has failed for good
                return
            if cancelled is not None and cancelled():
                raise CancelledError(
                    f"cancelled: job '{self.job}' did not {what}; it keeps running, unchanged"
                )
            if time.monotonic() > deadline:
                raise AwaitTimeoutError(
                    f"job '{self.job}' did not {what} within {timeout_s:g} s; it is still running. "
                    "Wait longer with AWAIT JOB ... TIMEOUT INTERVAL 'n' SECOND, or look at SHOW JOBS."
                )
            time.sleep(POLL_S)

    def await_input(self, timeout_s: float, cancelled: Callable[[], bool] | None = None) -> dict[str, Any]:
        targets = self.available()
        self.wait(lambda: self.caught_up(targets), timeout_s, "catch up with its input", cancelled)
        return targets
