"""The catalog's lineage queries: which runs' rejects and late rows are a job's own, through the
snapshots it was restored from (SHOW JOBS counts them, the ``pitstop.late_rows`` view lists them)."""

from __future__ import annotations

LATE_LINEAGE = """WITH RECURSIVE lineage(job, run_id, cut, depth) AS (
        SELECT lower(name), run_id, CAST(NULL AS JSON), 0 FROM pitstop.jobs
        UNION ALL
        SELECT l.job,
               coalesce(json_extract_string(r.restore, '$.from_run'),
                        json_extract_string(s.manifest, '$.run_id')),
               coalesce(json_extract(r.restore, '$.from_cut'), json_extract(s.manifest, '$.cut.batches')),
               l.depth + 1
        FROM lineage l JOIN pitstop.runs r ON r.run_id = l.run_id
        LEFT JOIN pitstop.snapshots s
          ON lower(s.name) = lower(json_extract_string(r.restore, '$.snapshot'))
        WHERE r.restore IS NOT NULL AND l.depth < 1000
    ), owned AS (
        SELECT l.job, c.* FROM lineage l JOIN pitstop.late_counts c ON c.run_id = l.run_id
        WHERE l.cut IS NULL
           OR c.batch_id <= CAST(json_extract_string(l.cut, '$."' || c.branch || '"') AS BIGINT)
    )"""
"""Each job (lower-case name) with the late counts that are its own (``owned``): its run's, and
for a run restored from a snapshot, the counts of the run the snapshot was taken of up to the
snapshot's cut (``from_cut``, the cut's last batch per branch, recorded when the job is created;
for a run recorded before that, the snapshot's manifest if it is still listed), and so on back.
Batches of the old run after the cut are not the restored job's: it read that input again."""


def late_rows(by_partition: bool = True) -> str:
    """The ``pitstop.late_rows`` view: per job, stage, source and partition (``by_partition``, from
    schema version 8; before it, the counts had no partition)."""
    partition = " o.partition," if by_partition else ""
    return f"""{LATE_LINEAGE}
        SELECT j.name AS job, o.stage, o.source,{partition} sum(o.rows) AS rows,
               min(o.seen_at) AS first_seen, max(o.seen_at) AS last_seen
        FROM owned o JOIN pitstop.jobs j ON lower(j.name) = o.job
        WHERE o.rows > 0
        GROUP BY ALL"""


LINEAGE = """WITH RECURSIVE lineage(job, run_id, depth) AS (
        SELECT lower(name), run_id, 0 FROM pitstop.jobs
        UNION ALL
        SELECT l.job,
               coalesce(json_extract_string(r.restore, '$.from_run'),
                        json_extract_string(s.manifest, '$.run_id')),
               l.depth + 1
        FROM lineage l JOIN pitstop.runs r ON r.run_id = l.run_id
        LEFT JOIN pitstop.snapshots s
          ON lower(s.name) = lower(json_extract_string(r.restore, '$.snapshot'))
        WHERE r.restore IS NOT NULL AND l.depth < 1000
    )"""
"""Each job (lower-case name) with the runs whose rejects are its own: its run, and for a run
restored from a snapshot, the run the snapshot was taken of (``from_run``, recorded when the job
is created; for a run recorded before that, the snapshot's manifest if it is still listed), and
so on back. A job created again under an old name, not from a snapshot, has none of the old
job's runs."""
