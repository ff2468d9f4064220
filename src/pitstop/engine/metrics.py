"""Metrics for operators: what the manager samples of each running job every ``metrics_s``
seconds, into ``pitstop.metrics`` (the last ``metrics_keep`` samples) and for the Prometheus
endpoint of ``pitstop serve`` (the last sample).

A sample costs no more than its round of the manager's supervisor can afford, and nothing per
micro-batch. Per branch (one Spark query) and sample, where each figure comes from:

- ``batch_id``, ``input_rows``, ``input_rows_per_s``, ``processed_rows_per_s``, ``batch_ms``,
  ``watermark``: the query's ``lastProgress`` (one JVM call and its JSON), i.e. the last
  micro-batch Spark reported on. Spark reports a batch that read nothing too (0 rows; when the
  query is idle, every 10 s at most), so the rates fall to 0 when the input stops.
- ``state_rows``, ``state_bytes``: the same progress's ``stateOperators`` (``numRowsTotal``,
  ``memoryUsedBytes``), summed over the operators of each stage (:func:`pitstop.stages.registry.
  operator_ids`). pitstop runs RocksDB without counting its rows
  (:data:`pitstop.engine.session.STATE_ROWS_COUNTED`), where Spark's ``numRowsTotal`` reads 0: the
  sample says None (not known) rather than 0.
- ``late_rows``: the catalog's late counts (as ``SHOW JOBS`` counts them, the runs the job was
  restored from included), recorded by the supervisor every second (:mod:`pitstop.engine.late`).
- ``lag``: records behind the end of each source, per partition, at the branch's committed
  position (:func:`pitstop.engine.lag.branch_lag`; Kafka only, from what the source's driver last
  learnt; never a request to a broker).
- ``restarts``: how often the supervisor restarted the branch from its checkpoint since its
  queries started in this process (:meth:`pitstop.engine.runs.ActiveRun.recover`).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from pitstop.catalog.rows import MetricSample
from pitstop.engine.lag import branch_lag
from pitstop.engine.runs import ActiveRun, BranchQuery
from pitstop.engine.session import STATE_ROWS_COUNTED
from pitstop.stages import registry as kinds

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1)


def sample(run: ActiveRun, sampled: datetime, late: dict[tuple[str, str], int]) -> list[MetricSample]:
    """One sample of a running job: a row per branch and stateful stage (one row with no stage
    for a branch without one). ``late``: late rows per (lower-case job, stage)."""
    out: list[MetricSample] = []
    for bq in list(run.branches):
        progress = _progress(run.job, bq)
        try:
            lag = branch_lag(run.run, bq.branch, run.mappings) or None
        except Exception:  # noqa: BLE001 - a sample shows what it can
            log.warning(
                "job '%s': cannot tell the lag of INSERT INTO %s", run.job, bq.branch.sink, exc_info=True
            )
            lag = None
        durations = progress.get("durationMs") or {}
        common: dict[str, Any] = {
            "sampled": sampled,
            "job": run.job,
            "run_id": run.run.run_id,
            "branch": bq.branch.index,
            "sink": bq.branch.sink,
            "batch_id": _int(progress.get("batchId")),
            "input_rows": _int(progress.get("numInputRows")),
            "input_rows_per_s": _float(progress.get("inputRowsPerSecond")),
            "processed_rows_per_s": _float(progress.get("processedRowsPerSecond")),
            "batch_ms": _int(durations.get("triggerExecution")),
            "watermark": _watermark((progress.get("eventTime") or {}).get("watermark")),
            "lag_records": None if lag is None else sum(sum(p.values()) for p in lag.values()),
            "lag": lag,
            "restarts": bq.failures,
        }
        operators = progress.get("stateOperators") or []
        ids = kinds.operator_ids(bq.branch)
        for stage in bq.branch.stages:
            ops = [operators[i] for i in ids.get(stage.name, []) if i < len(operators)]
            out.append(
                MetricSample(
                    stage=stage.name,
                    state_rows=_sum(ops, "numRowsTotal") if STATE_ROWS_COUNTED else None,
                    state_bytes=_sum(ops, "memoryUsedBytes"),
                    late_rows=late.get((run.job.lower(), stage.name), 0),
                    **common,
                )
            )
        if not bq.branch.stages:
            out.append(MetricSample(stage=None, state_rows=None, state_bytes=None, late_rows=None, **common))
    return out


def _progress(job: str, bq: BranchQuery) -> dict[str, Any]:
    """The branch's query's last progress as plain JSON data ({} before its first batch, or when
    the query cannot be asked: a sample shows what it can)."""
    query = bq.query
    if query is None:
        return {}
    try:
        progress = query.lastProgress
    except Exception:  # noqa: BLE001 - a query stopping under the sample
        log.info("job '%s': no progress of INSERT INTO %s", job, bq.branch.sink, exc_info=True)
        return {}
    if progress is None:
        return {}
    data: dict[str, Any] = json.loads(progress.json)
    return data


def _sum(operators: list[dict[str, Any]], key: str) -> int | None:
    values = [int(op[key]) for op in operators if op.get(key) is not None]
    return sum(values) if values else None


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _float(value: Any) -> float | None:
    """Spark writes NaN and infinities of a rate as strings in its JSON."""
    if value is None:
        return None
    number = float(value)
    return number if number == number and abs(number) != float("inf") else None


def _watermark(text: str | None) -> datetime | None:
    """Spark's ``2026-11-27T08:00:00.000Z`` as the catalog keeps times (naive UTC); None for a
    query without a watermark, and for Spark's 1970-01-01 of one that has none yet (its first
    batches): a dashboard would draw it as a fall of 56 years."""
    if not text:
        return None
    at = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).replace(tzinfo=None)
    return None if at == _EPOCH else at
