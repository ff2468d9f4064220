"""Late rows in the catalog: rows stateful stages dropped behind the watermark, counted per job up to
each snapshot's cut (:data:`pitstop.catalog.lineage.LATE_LINEAGE`), and those jobs kept."""

from __future__ import annotations

from pitstop.catalog.base import CatalogBase
from pitstop.catalog.clock import now
from pitstop.catalog.lineage import LATE_LINEAGE
from pitstop.catalog.rows import LateCount, LateRecord, LateSummary, dumps


class LateStore(CatalogBase):
    """Recording late rows and counting them per job, stage, source and partition."""

    def add_late(self, job: str, run_id: str, counts: list[LateCount], records: list[LateRecord]) -> None:
        """Record late counts (a micro-batch counted again replaces its counts of each stage and
        source, all partitions: the same numbers) and kept late rows (one already recorded is left
        as it is), in one transaction."""
        if not counts and not records:
            return
        seen = now()
        with self.transaction() as tx:
            if counts:
                keys = sorted({(c.branch, c.batch_id, c.stage, c.source) for c in counts})
                tx.executemany(
                    "DELETE FROM pitstop.late_counts "
                    "WHERE run_id = ? AND branch = ? AND batch_id = ? AND stage = ? AND source = ?",
                    [[run_id, *key] for key in keys],
                )
                tx.executemany(
                    "INSERT INTO pitstop.late_counts "
                    "(job, run_id, branch, batch_id, stage, source, partition, rows, seen_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        [job, run_id, c.branch, c.batch_id, c.stage, c.source, c.partition, c.rows, seen]
                        for c in counts
                    ],
                )
            if records:
                tx.executemany(
                    "INSERT OR IGNORE INTO pitstop.late_records (job, run_id, branch, batch_id, stage, "
                    "source, part, line, window_start, window_end, event_time, watermark, record, seen_at, "
                    "partition) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                            r.partition,
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
                SELECT stage, source, partition, sum(rows), min(seen_at), max(seen_at) FROM owned
                WHERE job = lower(?) AND rows > 0 GROUP BY ALL ORDER BY stage, source, partition""",
                [job],
            )
            .fetchall()
        )
        out: list[LateSummary] = []
        for stage, source, part, n, first, last in rows:
            parts = () if part is None else ((int(part), int(n)),)
            if out and (out[-1].stage, out[-1].source) == (stage, source):
                prev = out[-1]
                out[-1] = LateSummary(
                    stage,
                    source,
                    prev.rows + int(n),
                    min(prev.first_seen, first),
                    max(prev.last_seen, last),
                    prev.partitions + parts,
                )
            else:
                out.append(LateSummary(stage, source, int(n), first, last, parts))
        return out

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
