"""The supervisor and what watches the running jobs: failed branches restarted (or the job recorded
as failed), rejects and late rows collected and metrics sampled every round, and what SHOW JOBS
and the toolbars read of the runs without a lock."""

from __future__ import annotations

import logging
import time

from pitstop.catalog.clock import now
from pitstop.catalog.rows import RUNNING, MetricSample
from pitstop.engine import metrics
from pitstop.manager.jobs import JobControl

log = logging.getLogger(__name__)
SUPERVISE_S = 1.0


class Supervisor(JobControl):
    """The supervisor's round and the runs' live status."""

    def _supervise(self) -> None:
        """Restart failed branches (and record jobs that keep failing) even when nobody waits."""
        while not self._closed.wait(SUPERVISE_S):
            try:
                self.refresh_failures()
                self.collect_all_rejects()
                self.collect_all_late()
                self.sample_metrics()
                self.supervisor_problem = None
            except Exception as exc:
                if self._closed.is_set():
                    return  # the catalog is closing under it: nothing to report
                # Its own failure is not a job's: logged as a warning and shown by SHOW JOBS
                # until a round succeeds again.
                log.warning(
                    "the job supervisor's round failed; it tries again in %g s", SUPERVISE_S, exc_info=True
                )
                self.supervisor_problem = f"the job supervisor's last round failed: {exc}"

    def sample_metrics(self, force: bool = False) -> tuple[MetricSample, ...]:
        """Sample the jobs running here into ``pitstop.metrics`` (:mod:`pitstop.engine.metrics`),
        every ``metrics_s`` seconds (the supervisor calls this every round; ``force``: now), and
        keep the sample for the metrics endpoint. Returns the last sample."""
        clock = time.monotonic()
        if not force and self._sampled_at is not None and clock - self._sampled_at < self.settings.metrics_s:
            return self.last_sample
        self._sampled_at = clock
        runs = list(self.runs.values())
        late = self.catalog.late_by_stage() if runs else {}  # no job running: no catalog read
        sampled = now()
        rows = tuple(row for run in runs for row in metrics.sample(run, sampled, late))
        self.last_sample = rows
        if rows:  # a round with no job running writes nothing (and leaves the history as it is)
            self.catalog.add_metrics(list(rows), self.settings.metrics_keep)
        return rows

    def refresh_failures(self) -> None:
        """Restart failed branches; record jobs whose Spark query keeps failing. The run table
        and the queries change only here and in the statements, under the manager's lock."""
        with self._lock:
            for run in list(self.runs.values()):
                restarted, reason = run.recover()
                if reason is not None:
                    self._fail(run, reason)
                elif restarted:
                    self.catalog.set_job_status(run.job, RUNNING, "; ".join(restarted))

    def sinks_waiting(self) -> dict[str, str]:
        """Per job (lower-case name), what its sinks wait for now (``waiting for PostgreSQL at
        host:port: ...``), for SHOW JOBS and DESCRIBE JOB. Reads what the sinks already hold: no
        lock, no Spark call (many clients list jobs at once)."""
        out: dict[str, str] = {}
        for key, run in list(self.runs.items()):
            said = [
                f"sink '{bq.branch.sink}' {waiting}"
                for bq in list(run.branches)
                if (waiting := getattr(bq.sink, "waiting", None))
            ]
            if said:
                out[key] = "; ".join(said)
        return out

    def live_status(self) -> list[tuple[str, str, float]]:
        """``(job, status, input rows per second)`` of every job in the catalog, for toolbars.

        Rates come from the running queries' last progress (0.0 for jobs not running here).
        Reads no Spark state beyond what the queries already hold; never starts Spark.
        """
        out = []
        for job in self.catalog.jobs():
            rate = 0.0
            run = self.runs.get(job.name.lower())
            if run is not None:
                for bq in run.branches:
                    progress = bq.query.lastProgress if bq.query is not None else None
                    if progress:
                        rate += float(progress.get("inputRowsPerSecond") or 0.0)
            out.append((job.name, job.status, rate))
        return out
