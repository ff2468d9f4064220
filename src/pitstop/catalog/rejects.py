"""Rejects in the catalog: malformed records that sources kept out of jobs, counted per job through
the runs it was restored from (:data:`pitstop.catalog.lineage.LINEAGE`)."""

from __future__ import annotations

from pitstop.catalog.base import CatalogBase
from pitstop.catalog.clock import now
from pitstop.catalog.lineage import LINEAGE
from pitstop.catalog.rows import Reject, RejectSummary


class RejectStore(CatalogBase):
    """Recording rejects and counting them per job and source."""

    def add_rejects(self, job: str, source: str, run_id: str, rejects: list[Reject]) -> None:
        """Record a source's rejects; one already recorded (same run, source, file, line) is left
        as it is, so a rejects file ingested again changes nothing."""
        if not rejects:
            return
        seen = now()
        rows = [[job, source, r.file, r.line, r.raw, r.raw_bytes, r.reason, run_id, seen] for r in rejects]
        with self.transaction() as tx:
            tx.executemany("INSERT OR IGNORE INTO pitstop.rejects VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def reject_counts(self) -> dict[str, int]:
        """Rejects per existing job (lower-case job name): of its runs and of those it was restored
        from (:data:`LINEAGE`), each record once."""
        return dict(self._cached("reject_counts", self._read_reject_counts))

    def _read_reject_counts(self) -> dict[str, int]:
        rows = (
            self.cursor()
            .execute(
                f"""{LINEAGE}
                SELECT l.job, count(DISTINCT (x.source, x.file, x.line))
                FROM (SELECT DISTINCT job, run_id FROM lineage) l
                JOIN pitstop.rejects x ON x.run_id = l.run_id GROUP BY 1"""
            )
            .fetchall()
        )
        return {str(job): int(n) for job, n in rows}

    def reject_summary(self, job: str) -> list[RejectSummary]:
        """Per source of ``job``: how many rejects (counted as :meth:`reject_counts` does), and
        the latest one (read once per change: DESCRIBE JOB from many clients)."""
        return list(
            self._cached(f"reject_summary {job.lower()}", lambda: tuple(self._read_reject_summary(job)))
        )

    def _read_reject_summary(self, job: str) -> list[RejectSummary]:
        rows = (
            self.cursor()
            .execute(
                f"""{LINEAGE}, own AS (
                    SELECT DISTINCT ON (x.source, x.file, x.line) x.*
                    FROM pitstop.rejects x
                    JOIN (SELECT DISTINCT run_id FROM lineage WHERE job = lower(?)) l ON x.run_id = l.run_id
                    ORDER BY x.source, x.file, x.line, x.seen_at DESC)
                SELECT source, count(*) OVER (PARTITION BY source), file, line, raw, raw_bytes, reason
                FROM own
                QUALIFY row_number() OVER (
                    PARTITION BY source ORDER BY seen_at DESC, file DESC, line DESC) = 1
                ORDER BY source""",
                [job],
            )
            .fetchall()
        )
        return [
            RejectSummary(source, int(n), Reject(file, int(line), raw, int(size), reason))
            for source, n, file, line, raw, size, reason in rows
        ]
