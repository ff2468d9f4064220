"""How far a job is behind its sources (Kafka: records behind the end offsets its driver last
learnt), read from the run's folder: nothing is asked of a broker. ``SHOW JOBS`` and ``DESCRIBE
JOB`` say it in words per source; ``pitstop.metrics`` and the metrics endpoint give it in numbers
per branch, source and partition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pitstop.catalog.rows import Mapping, Run
from pitstop.connectors import positions, registry
from pitstop.connectors.base import Connector
from pitstop.engine import checkpoint
from pitstop.plan.model import Branch, JobPlan


def tells_lag(mapping_type: str) -> bool:
    """Whether mappings of this type report a consumer lag (their connector defines ``lag``)."""
    found = registry.find(mapping_type)
    return found is not None and type(found).lag is not Connector.lag


def branch_position(folder: Path, branch: int, src: str, start: dict[str, Any], zero: Any) -> Any:
    """Where one branch of the run in ``folder`` stands in ``src``: what its checkpoint has
    committed, else where the run started reading it."""
    ckpt = folder / "branches" / str(branch) / "checkpoint"
    try:
        return checkpoint.progress(ckpt, start).positions.get(src, start.get(src, zero))
    except (OSError, ValueError):
        return start.get(src, zero)


def source_lags(run: Run, plan: JobPlan, mappings: dict[str, Mapping]) -> list[tuple[str, str]]:
    """``(source, lag in words)`` for each source whose type tells, or says the broker does not
    answer. The job's position in a source is the least that any branch reading it has committed."""
    folder = Path(run.folder)
    start = dict((run.restore or {}).get("start_positions", {}))
    out = []
    for src in plan.sources:
        mapping = mappings.get(src)
        if mapping is None or not tells_lag(mapping.type):
            continue
        connector = registry.connector(mapping.type)
        at: Any = None
        for b in plan.branches:
            if src in b.sources:
                pos = branch_position(folder, b.index, src, start, connector.positions.zero)
                at = pos if at is None else connector.positions.least(at, pos)
        text = connector.lag(positions.source_dir(folder, src), mapping, at)
        if text is not None:
            out.append((src, text))
    return out


def branch_lag(run: Run, branch: Branch, mappings: dict[str, Mapping]) -> dict[str, dict[str, int]]:
    """Per source of ``branch`` whose type tells (and knows now), records behind per partition,
    at the branch's own committed position."""
    folder = Path(run.folder)
    start = dict((run.restore or {}).get("start_positions", {}))
    out: dict[str, dict[str, int]] = {}
    for src in branch.sources:
        mapping = mappings.get(src)
        if mapping is None or not tells_lag(mapping.type):
            continue
        connector = registry.connector(mapping.type)
        at = branch_position(folder, branch.index, src, start, connector.positions.zero)
        behind = connector.lag_records(positions.source_dir(folder, src), mapping, at)
        if behind is not None:
            out[src] = behind
    return out
