"""Late rows in the catalog: rows stateful stages dropped behind the watermark, counted per job up to
each snapshot's cut (:data:`pitstop.catalog.lineage.LATE_LINEAGE`), and those jobs kept."""

from __future__ import annotations

from pitstop.catalog.base import CatalogBase
from pitstop.catalog.clock import now
from pitstop.catalog.lineage import LATE_LINEAGE
from pitstop.catalog.rows import LateCount, LateRecord, LateSummary, dumps


class LateStore(CatalogBase):
    """Recording late rows and counting them per job, stage and source."""

    def add_late(self, job: str, run_id: str, counts: list[LateCount], records: list[LateRecord]) -> None:
        """Record late counts (a micro-batch counted again replaces its count: the same number)
        and kept late rows (one already recorded is left as it is), in one transaction."""
        if not counts and not records:
            return
        seen = now()
        with self.transaction() as tx:
            if counts:
                tx.executemany(
                    "INSERT OR REPLACE INTO pitstop.late_counts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [[job, run_id, c.branch, c.batch_id, c.stage, c.source, c.rows, seen] for c in counts],
                )
            if records:
                tx.executemany(
                    "INSERT OR IGNORE INTO pitstop.late_records "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        [
                            job,
                            run_id,
                            r.branch,
                            r.batch_id,
                            r.stage,
                            r.source,
                            r.part,
                            r.line,
                            r.window_start,
                            r.window_end,
                            r.event_time,
                            r.watermark,
                            dumps(r.record),
                            seen,
                        ]
                        for r in records
                    ],
                )

    def late_counts(self) -> dict[str, int]:
        """Late rows per existing job (lower-case job name): of its runs and, up to each
        snapshot's cut, of the runs it was restored from (:data:`LATE_LINEAGE`)."""
        return dict(self._cached("late_counts", self._read_late_counts))

    def _read_late_counts(self) -> dict[str, int]:
        rows = self.cursor().execute(f"{LATE_LINEAGE} SELECT job, sum(rows) FROM owned GROUP BY 1").fetchall()
        return {str(job): int(n or 0) for job, n in rows}

    def late_summary(self, job: str) -> list[LateSummary]:
        """Per stage and source of ``job``: its late rows (counted as :meth:`late_counts` does)
        and when the first and the last were seen (read once per change: DESCRIBE JOB from many
        clients)."""
        return list(self._cached(f"late_summary {job.lower()}", lambda: tuple(self._read_late_summary(job))))

    def _read_late_summary(self, job: str) -> list[LateSummary]:
        rows = (
            self.cursor()
            .execute(
                f"""{LATE_LINEAGE}
                SELECT stage, source, sum(rows), min(seen_at), max(seen_at) FROM owned
                WHERE job = lower(?) AND rows > 0 GROUP BY ALL ORDER BY stage, source""",
                [job],
            )
            .fetchall()
        )
        return [LateSummary(stage, source, int(n), first, last) for stage, source, n, first, last in rows]

    def late_by_stage(self) -> dict[tuple[str, str], int]:
        """Late rows per existing job (lower-case name) and stage, counted as :meth:`late_counts`
        does (what ``pitstop.metrics`` and the metrics endpoint show)."""
        return dict(self._cached("late_by_stage", self._read_late_by_stage))

    def _read_late_by_stage(self) -> dict[tuple[str, str], int]:
        rows = (
            self.cursor()
            .execute(f"{LATE_LINEAGE} SELECT job, stage, sum(rows) FROM owned GROUP BY ALL")
            .fetchall()
        )
        return {(str(job), str(stage)): int(n or 0) for job, stage, n in rows}
