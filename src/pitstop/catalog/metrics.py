"""Metrics in the catalog: the rounds the manager samples of its running jobs, the last few kept."""

from __future__ import annotations

from pitstop.catalog.base import CatalogBase
from pitstop.catalog.rows import MetricSample, dumps


class MetricStore(CatalogBase):
    """Recording a sampling round."""

    def add_metrics(self, samples: list[MetricSample], keep: int) -> None:
        """Record one sampling round and forget all but the last ``keep`` rounds, in one
        transaction: the table stays bounded however long jobs run (or jobs come and go)."""
        with self.transaction() as tx:
            if samples:
                tx.executemany(
                    f"INSERT INTO pitstop.metrics VALUES ({', '.join('?' * 18)})",
                    [
                        [
                            s.sampled,
                            s.job,
                            s.run_id,
                            s.branch,
                            s.sink,
                            s.stage,
                            s.batch_id,
                            s.input_rows,
                            s.input_rows_per_s,
                            s.processed_rows_per_s,
                            s.batch_ms,
                            s.watermark,
                            s.state_rows,
                            s.state_bytes,
                            s.late_rows,
                            s.lag_records,
                            None if s.lag is None else dumps(s.lag),
                            s.restarts,
                        ]
                        for s in samples
                    ],
                )
            tx.execute(
                """DELETE FROM pitstop.metrics WHERE sampled < (
                    SELECT min(sampled) FROM (
                        SELECT DISTINCT sampled FROM pitstop.metrics ORDER BY sampled DESC LIMIT ?))""",
                [keep],
            )
