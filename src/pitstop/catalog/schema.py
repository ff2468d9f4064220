"""The catalog's schema: its version and the statements that bring a catalog from each version to the
next (run by :meth:`pitstop.catalog.base.CatalogBase._migrate`)."""

from __future__ import annotations

from pitstop.catalog.lineage import late_rows

SCHEMA_VERSION = 8

MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE SCHEMA IF NOT EXISTS pitstop",
        "CREATE TABLE pitstop.meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
        """CREATE TABLE pitstop.mappings (
            name VARCHAR PRIMARY KEY, type VARCHAR NOT NULL, definition JSON NOT NULL,
            created TIMESTAMP NOT NULL)""",
        """CREATE TABLE pitstop.jobs (
            name VARCHAR PRIMARY KEY, sql VARCHAR NOT NULL, status VARCHAR NOT NULL,
            detail VARCHAR NOT NULL, run_id VARCHAR NOT NULL, snapshot VARCHAR,
            created TIMESTAMP NOT NULL, updated TIMESTAMP NOT NULL)""",
        """CREATE TABLE pitstop.runs (
            run_id VARCHAR PRIMARY KEY, job VARCHAR NOT NULL, folder VARCHAR NOT NULL,
            plan JSON NOT NULL, restore JSON, started TIMESTAMP NOT NULL)""",
        """CREATE TABLE pitstop.snapshots (
            name VARCHAR PRIMARY KEY, job VARCHAR NOT NULL, created TIMESTAMP NOT NULL,
            path VARCHAR NOT NULL, size_bytes BIGINT NOT NULL, rows BIGINT NOT NULL,
            manifest JSON NOT NULL)""",
        """CREATE TABLE pitstop.sink_batches (
            job VARCHAR NOT NULL, run_id VARCHAR NOT NULL, branch INTEGER NOT NULL,
            batch_id BIGINT NOT NULL, rows BIGINT NOT NULL, committed TIMESTAMP NOT NULL,
            PRIMARY KEY (run_id, branch, batch_id))""",
    ],
    2: [
        "ALTER TABLE pitstop.jobs ADD COLUMN options JSON DEFAULT '{}'",
        """CREATE TABLE pitstop.views (
            name VARCHAR PRIMARY KEY, sql VARCHAR NOT NULL, created TIMESTAMP NOT NULL)""",
    ],
    3: [
        # Malformed records kept out of jobs (pitstop.connectors.rejects). The key makes ingesting
        # a source's rejects file twice harmless; line 0 (WHOLE_FILE) is a reject of a whole file
        # (DuckDB key columns cannot be NULL).
        """CREATE TABLE pitstop.rejects (
            job VARCHAR NOT NULL, source VARCHAR NOT NULL, file VARCHAR NOT NULL, line BIGINT NOT NULL,
            raw VARCHAR, raw_bytes BIGINT NOT NULL, reason VARCHAR NOT NULL, run_id VARCHAR NOT NULL,
            seen_at TIMESTAMP NOT NULL, PRIMARY KEY (job, source, file, line))""",
        "COMMENT ON TABLE pitstop.rejects IS 'malformed records that File sources kept out of jobs'",
        "COMMENT ON COLUMN pitstop.rejects.line IS "
        "'line of the record (CSV: where its row starts; Parquet: row number); 0: the whole file'",
        "COMMENT ON COLUMN pitstop.rejects.raw IS "
        "'the record''s text, its first 4 KB; NULL for a mapping with onError = skip'",
        "COMMENT ON COLUMN pitstop.rejects.raw_bytes IS 'the record''s full length in bytes'",
    ],
    4: [
        # Rejects outlive DROP JOB (input records are never lost), and a job created again under
        # the same name reads the same files again: a reject is keyed by the run that read it,
        # not by the job's name, so the new job's rejects are kept beside the old ones.
        """CREATE TABLE pitstop.rejects_v4 (
            job VARCHAR NOT NULL, source VARCHAR NOT NULL, file VARCHAR NOT NULL, line BIGINT NOT NULL,
            raw VARCHAR, raw_bytes BIGINT NOT NULL, reason VARCHAR NOT NULL, run_id VARCHAR NOT NULL,
            seen_at TIMESTAMP NOT NULL, PRIMARY KEY (run_id, source, file, line))""",
        "INSERT INTO pitstop.rejects_v4 SELECT * FROM pitstop.rejects",
        "DROP TABLE pitstop.rejects",
        "ALTER TABLE pitstop.rejects_v4 RENAME TO rejects",
        "COMMENT ON TABLE pitstop.rejects IS 'malformed records that sources kept out of jobs; "
        "kept after their job is dropped'",
        "COMMENT ON COLUMN pitstop.rejects.job IS 'the job whose run read the record (its name then)'",
        "COMMENT ON COLUMN pitstop.rejects.line IS "
        "'line of the record (CSV: where its row starts; Parquet: row number); 0: the whole file'",
        "COMMENT ON COLUMN pitstop.rejects.raw IS "
        "'the record''s text, its first 4 KB; NULL for a mapping with onError = skip'",
        "COMMENT ON COLUMN pitstop.rejects.raw_bytes IS 'the record''s full length in bytes'",
        "COMMENT ON COLUMN pitstop.rejects.run_id IS 'the run that read the record (pitstop.runs)'",
    ],
    5: [
        # What each batch of a DuckDB sink wrote, row by row (a hash of the row as the table holds
        # it), in the batch's own transaction: what rolls the sink back to a snapshot's cut
        # (pitstop.connectors.rollback) finds and removes exactly the rows of the batches after it.
        """CREATE TABLE IF NOT EXISTS pitstop.sink_rows (
            run_id VARCHAR NOT NULL, branch INTEGER NOT NULL, batch_id BIGINT NOT NULL,
            row_hash UBIGINT NOT NULL)""",
        # The last batch each branch of a run committed, recorded when its folder (and checkpoints)
        # goes: how far a job ran past a snapshot (SHOW SNAPSHOTS) whatever its sinks are.
        """CREATE TABLE IF NOT EXISTS pitstop.run_ends (
            run_id VARCHAR PRIMARY KEY, batches JSON NOT NULL, ended TIMESTAMP NOT NULL)""",
        "COMMENT ON TABLE pitstop.sink_rows IS 'per row a DuckDB sink wrote: its run, branch, batch and "
        "hash(columns in table order); rows of batches written before pitstop kept them are absent'",
    ],
    6: [
        # Rows that stateful stages dropped because they were behind the watermark
        # (pitstop.engine.late): counted per run, branch, micro-batch, stage and source, and with
        # 'lateRows'='keep' kept one by one. Like rejects, they outlive DROP JOB.
        """CREATE TABLE IF NOT EXISTS pitstop.late_counts (
            job VARCHAR NOT NULL, run_id VARCHAR NOT NULL, branch INTEGER NOT NULL,
            batch_id BIGINT NOT NULL, stage VARCHAR NOT NULL, source VARCHAR NOT NULL,
            rows BIGINT NOT NULL, seen_at TIMESTAMP NOT NULL,
            PRIMARY KEY (run_id, branch, batch_id, stage, source))""",
        "COMMENT ON TABLE pitstop.late_counts IS 'rows each stage dropped as late (behind the "
        "watermark), per run, branch, micro-batch and source; kept after their job is dropped'",
        """CREATE TABLE IF NOT EXISTS pitstop.late_records (
            job VARCHAR NOT NULL, run_id VARCHAR NOT NULL, branch INTEGER NOT NULL,
            batch_id BIGINT NOT NULL, stage VARCHAR NOT NULL, source VARCHAR NOT NULL,
            part INTEGER NOT NULL, line INTEGER NOT NULL, window_start TIMESTAMP, window_end TIMESTAMP,
            event_time TIMESTAMP, watermark TIMESTAMP NOT NULL, record JSON NOT NULL,
            seen_at TIMESTAMP NOT NULL,
            PRIMARY KEY (run_id, branch, batch_id, stage, source, part, line))""",
        "COMMENT ON TABLE pitstop.late_records IS 'rows stages dropped as late, kept by jobs with "
        "OPTIONS (''lateRows''=''keep''): one per window missed; kept after their job is dropped'",
        "COMMENT ON COLUMN pitstop.late_records.record IS 'the stage''s input row, as JSON'",
        "COMMENT ON COLUMN pitstop.late_records.watermark IS 'the watermark that made the row late'",
        f"CREATE OR REPLACE VIEW pitstop.late_rows AS {late_rows(by_partition=False)}",
        "COMMENT ON VIEW pitstop.late_rows IS 'per existing job, stage and source: the rows dropped "
        "as late by the job and the runs it was restored from (as SHOW JOBS counts them)'",
    ],
    7: [
        # What the manager samples of its running jobs every metrics_s seconds
        # (pitstop.engine.metrics): one row per job, branch and stateful stage and round; only the
        # last metrics_keep rounds are kept (Catalog.add_metrics).
        """CREATE TABLE IF NOT EXISTS pitstop.metrics (
            sampled TIMESTAMP NOT NULL, job VARCHAR NOT NULL, run_id VARCHAR NOT NULL,
            branch INTEGER NOT NULL, sink VARCHAR NOT NULL, stage VARCHAR, batch_id BIGINT,
            input_rows BIGINT, input_rows_per_s DOUBLE, processed_rows_per_s DOUBLE, batch_ms BIGINT,
            watermark TIMESTAMP, state_rows BIGINT, state_bytes BIGINT, late_rows BIGINT,
            lag_records BIGINT, lag JSON, restarts INTEGER NOT NULL)""",
        "COMMENT ON TABLE pitstop.metrics IS 'running jobs sampled every PITSTOP_METRICS_S seconds: one "
        "row per job, branch, stateful stage and sample; the last PITSTOP_METRICS_KEEP samples are kept'",
        "COMMENT ON COLUMN pitstop.metrics.sampled IS 'when the sample was taken (UTC)'",
        "COMMENT ON COLUMN pitstop.metrics.stage IS 'the stateful stage; NULL for a branch without one'",
        "COMMENT ON COLUMN pitstop.metrics.batch_id IS 'the last micro-batch Spark reported on'",
        "COMMENT ON COLUMN pitstop.metrics.input_rows IS 'rows that micro-batch read'",
        "COMMENT ON COLUMN pitstop.metrics.batch_ms IS 'how long that micro-batch took, in ms'",
        "COMMENT ON COLUMN pitstop.metrics.watermark IS 'the branch''s event-time watermark'",
        "COMMENT ON COLUMN pitstop.metrics.state_rows IS 'rows in the stage''s state; NULL where Spark "
        "does not count them (its RocksDB state store, as pitstop runs it)'",
        "COMMENT ON COLUMN pitstop.metrics.state_bytes IS 'memory the stage''s state store uses, in bytes'",
        "COMMENT ON COLUMN pitstop.metrics.late_rows IS 'rows the stage dropped as late (as SHOW JOBS "
        "counts them)'",
        "COMMENT ON COLUMN pitstop.metrics.lag_records IS 'records behind the end of the branch''s "
        "sources (Kafka); NULL where no source tells'",
        "COMMENT ON COLUMN pitstop.metrics.lag IS 'records behind, per source and partition (JSON)'",
        "COMMENT ON COLUMN pitstop.metrics.restarts IS 'restarts of the branch from its checkpoint "
        "since this pitstop process started'",
    ],
    8: [
        # Late rows per partition of a source that has them (Kafka): a batch's count of a stage and
        # source is one row per partition. The key cannot hold the partition (DuckDB key columns
        # cannot be NULL, and a File source has none): Catalog.add_late replaces a batch's rows.
        # Rows counted before this version have no partition (NULL).
        """CREATE OR REPLACE TABLE pitstop.late_counts_v8 (
            job VARCHAR NOT NULL, run_id VARCHAR NOT NULL, branch INTEGER NOT NULL,
            batch_id BIGINT NOT NULL, stage VARCHAR NOT NULL, source VARCHAR NOT NULL,
            partition INTEGER, rows BIGINT NOT NULL, seen_at TIMESTAMP NOT NULL)""",
        # BY NAME: a partition only where the table has one (a home taken back a version or two,
        # whose migrations run again), else NULL.
        "INSERT INTO pitstop.late_counts_v8 BY NAME SELECT * FROM pitstop.late_counts",
        "DROP TABLE pitstop.late_counts",
        "ALTER TABLE pitstop.late_counts_v8 RENAME TO late_counts",
        "COMMENT ON TABLE pitstop.late_counts IS 'rows each stage dropped as late (behind the "
        "watermark), per run, branch, micro-batch, source and partition; kept after their job is dropped'",
        "COMMENT ON COLUMN pitstop.late_counts.partition IS 'the source''s partition (Kafka); NULL for a "
        "source without partitions, and for rows counted before pitstop counted partitions'",
        "ALTER TABLE pitstop.late_records ADD COLUMN IF NOT EXISTS partition INTEGER",
        "COMMENT ON COLUMN pitstop.late_records.partition IS 'the source''s partition the row was read "
        "from (Kafka); NULL for a source without partitions'",
        "COMMENT ON COLUMN pitstop.late_records.part IS 'the Spark partition that read the row'",
        f"CREATE OR REPLACE VIEW pitstop.late_rows AS {late_rows()}",
        "COMMENT ON VIEW pitstop.late_rows IS 'per existing job, stage, source and partition (Kafka; NULL "
        "for a source without partitions): the rows dropped as late by the job and the runs it was "
        "restored from (as SHOW JOBS counts them)'",
    ],
}
