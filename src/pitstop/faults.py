"""Deterministic faults for the crash matrix: kill pitstop, or fail a write, at a named step.

``PITSTOP_CRASH_AT=<step>`` (or ``<step>:<n>``, the n-th time the step is reached; default the
first) makes :func:`crash_point` log ``crash point <step>``, flush the logs and send SIGKILL to its
own process: nothing after it runs, no ``finally``, no ``atexit``, as when the machine loses power
or the kernel's OOM killer strikes.

``PITSTOP_FAULT_AT=<step>:<ERRNO>`` (or ``<step>:<n>:<ERRNO>``, e.g. ``export.stage_written:ENOSPC``)
makes the step raise ``OSError(errno.<ERRNO>, ..., <the step's folder>)`` instead, as a full disk or
an unwritable folder would; several such specs may be given, separated by commas.

Both are read at every call, so a test sets them for one process only. Unset (the normal case),
a step costs two dictionary look-ups.

The steps, in protocol order:

Micro-batches (the DuckDB and Postgres sinks, appending or upserting, by the one protocol of
:mod:`pitstop.connectors.exactly_once`; Kafka sink, :mod:`pitstop.connectors.kafka.sink`)
    ``sink.half_written``        Kafka: half the batch's records are delivered (in its open
                                 transaction, or visible without transactions), the rest not sent
    ``sink.before_commit``       a batch's rows and bookkeeping row are inserted, not committed
                                 (Kafka: every record delivered, the transaction not committed)
    ``sink.after_commit``        the batch is committed in the sink's database (Kafka: the
                                 transaction is committed, the sink's ledger not updated); Spark
                                 has not committed it yet
    ``restore.batch``            a batch of a run restored from a snapshot is about to be written
                                 (``restore.batch:2``: the run's first batch is committed)

Stop at a cut (``DROP JOB ... WITH SNAPSHOT``, ``CREATE SNAPSHOT``; :mod:`pitstop.engine.runs`)
    ``drain.fenced``             a source's fence is written (each in turn); the branches drain to them

Export (:mod:`pitstop.snapshots.export`)
    ``export.stage_written``     the first stateful stage's Parquet files are in the temp folder

Catalog (:mod:`pitstop.manager`)
    ``export.renamed``           the snapshot's folder is in place; its catalog row is not committed
    ``drop.recorded``            ``DROP JOB ... WITH SNAPSHOT``: the snapshot row is added and the job
                                 deleted (one transaction); the run folder is not removed yet
    ``snapshot.recorded``        ``CREATE SNAPSHOT``: the snapshot row is committed; the job is
                                 still fenced, and a replaced snapshot's old folder not removed yet
    ``restore.prepared``         ``CREATE JOB ... FROM SNAPSHOT``: the run folder is prepared from
                                 the snapshot; no query started, no catalog row
    ``rollback.deleted``         ``... OPTIONS ('sinkRollback'='true')``: the DuckDB sinks' rows after
                                 the cut are deleted in the transaction that adds the job; not
                                 committed (:mod:`pitstop.connectors.rollback`)
    ``rollback.committed``       that transaction is committed; the File sinks' files after the cut
                                 are not moved to the trash yet, no query started
    ``suspend.recorded``         ``ALTER JOB ... SUSPEND``: the catalog says SUSPENDED; the
                                 queries are not stopped yet

Replay (``EXPLAIN ANALYZE CREATE JOB``, :mod:`pitstop.replay.sandbox`)
    ``replay.captured``          the job's own SQL is replayed into the scratch tables in
                                 ``<home>/replays/``; the new SQL's replay has not started
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import sys
import threading
from pathlib import Path

log = logging.getLogger(__name__)

CRASH_ENV = "PITSTOP_CRASH_AT"
FAULT_ENV = "PITSTOP_FAULT_AT"
STEPS = (
    "sink.half_written",
    "sink.before_commit",
    "sink.after_commit",
    "restore.batch",
    "drain.fenced",
    "export.stage_written",
    "export.renamed",
    "drop.recorded",
    "snapshot.recorded",
    "restore.prepared",
    "rollback.deleted",
    "rollback.committed",
    "suspend.recorded",
    "replay.captured",
)

_hits: dict[str, int] = {}
_lock = threading.Lock()


def _wanted(spec: str, name: str, hit: int) -> bool:
    step, _, count = spec.partition(":")
    return step == name and hit == (int(count) if count else 1)


def crash_point(name: str, path: str | os.PathLike[str] | None = None) -> None:
    """Die here (SIGKILL) or fail here (OSError about ``path``) when the environment says so."""
    crash, fault = os.environ.get(CRASH_ENV), os.environ.get(FAULT_ENV)
    if not crash and not fault:
        return
    assert name in STEPS, f"crash point '{name}' is not listed in pitstop.faults.STEPS"
    with _lock:
        hit = _hits[name] = _hits.get(name, 0) + 1
    for one in (fault or "").split(","):
        spec, _, code = one.strip().rpartition(":")
        if _wanted(spec, name, hit):
            number = getattr(errno, code)
            log.warning("fault point %s: raising %s (%s)", name, code, FAULT_ENV)
            raise OSError(number, os.strerror(number), None if path is None else str(Path(path)))
    if crash and _wanted(crash, name, hit):
        log.error("crash point %s (time %d): killing pitstop with SIGKILL (%s)", name, hit, CRASH_ENV)
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
