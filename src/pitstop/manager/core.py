"""The manager: one per process. It owns the catalog, the Spark session (started lazily) and the
runs of the jobs this process is running.

Jobs outlive the process: at exit, running jobs stop at a batch boundary and are marked STOPPED;
the next process that starts Spark on the same home resumes them from their checkpoints. A job
found RUNNING when a process opens the home was running in a process that died; the open marks it
STOPPED (:mod:`pitstop.engine.tidy`) and it is resumed the same way (its sinks skip the batches
they already hold).
"""

from __future__ import annotations

import logging

from pitstop.catalog.clock import now
from pitstop.catalog.rows import STOPPED
from pitstop.engine.runs import ActiveRun
from pitstop.manager.snapshots import SnapshotControl
from pitstop.manager.supervisor import Supervisor

log = logging.getLogger(__name__)


class Manager(Supervisor, SnapshotControl):
    """One per process: the catalog, the Spark session and the runs of the jobs running here."""

    def close(self) -> None:
        """Stop running jobs at a batch boundary and mark them STOPPED; they resume next time.
        The jobs stop side by side: each waits for its batch in flight, not for the others."""
        from concurrent.futures import ThreadPoolExecutor

        def stop(run: ActiveRun) -> None:
            try:
                run.stop()
                self.collect_rejects(run.job, run.run)
                self.collect_late(run)
                self.catalog.set_job_status(
                    run.job,
                    STOPPED,
                    f"stopped when pitstop exited at {now():%Y-%m-%d %H:%M:%S} UTC; resumes from its "
                    "checkpoints when pitstop next starts Spark on this home",
                )
            except Exception:
                log.exception("stopping job '%s'", run.job)

        self._closed.set()
        with self._lock:
            runs = list(self.runs.values())
            if runs:
                with ThreadPoolExecutor(max_workers=min(8, len(runs))) as pool:
                    list(pool.map(stop, runs))
            self.runs.clear()
            self.catalog.close()
