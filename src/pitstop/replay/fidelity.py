"""The live job's sinks as a check of the replay: the job's own SQL, replayed over the span, must
write what the job wrote over it. Where it does not (a non-deterministic expression, late rows the
job's own batches dropped otherwise, a bug), the replay's differences are not the update's effect
alone, and EXPLAIN ANALYZE says so.

What the job wrote is read from the bookkeeping of its DuckDB sinks: each row's hash, by run,
branch and batch (``pitstop.sink_rows``), over the batches after the snapshot's cut up to the
span's end. The replay's rows (the ``old`` side's capture) are hashed as the sink hashes a row
(:func:`pitstop.connectors.duckdb.sink.row_hash`, over the table's columns and types now), and
the two are compared as multisets. Checked only where that is exact:

1. the sink is a DuckDB table, every branch into it appends (an upsert sink replaces rows), and
   none of its sources lacks input (a partial replay, :func:`.span.retained`);
2. the span lies in one run of the job (the snapshot's), and each branch's batches end exactly at
   the span's end (:attr:`.span.Until.batches`).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

import duckdb

from pitstop.catalog.rows import Mapping
from pitstop.catalog.store import Catalog
from pitstop.connectors.duckdb.sink import constant_defaults, row_hash, table_name
from pitstop.names import quote_ident
from pitstop.plan.model import JobPlan
from pitstop.replay.capture import Capture

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Fidelity:
    """A sink's rows as the job wrote them over the span against its own SQL's replay."""

    sink: str
    live: int  # rows the job wrote over the span
    replayed: int  # rows the replay of its SQL wrote
    only_live: int
    only_replay: int

    @property
    def same(self) -> bool:
        return not (self.only_live or self.only_replay)

    def text(self) -> str:
        if self.same:
            return f"the job's own SQL, replayed, writes the {self.live:,} row(s) the job wrote over the span"
        return (
            f"the job's own SQL, replayed, does not write what the job wrote over the span: "
            f"{self.only_live:,} of the job's {self.live:,} row(s) not in the replay, {self.only_replay:,} "
            f"of the replay's {self.replayed:,} not written by the job (a non-deterministic expression, "
            "late rows the job's batches dropped otherwise, or a bug): the diff of this sink is not the "
            "update's effect alone"
        )


def check(
    catalog: Catalog,
    capture: Capture,
    old_plan: JobPlan,
    mappings: dict[str, Mapping],
    tables: dict[str, str],
    first: tuple[str | None, dict[int, int | None]],
    last: tuple[str | None, dict[int, int | None]],
    partial: set[str],
) -> tuple[Fidelity, ...]:
    """Per sink of ``old_plan`` that the module's rules let be checked: its capture table
    (``tables``: sink -> the old side's capture table) against what the job wrote after the
    cut ``first`` up to ``last`` (each: a run and its branches' last batches)."""
    run_id, ends = last
    if run_id is None or run_id != first[0]:
        return ()
    out: list[Fidelity] = []
    for sink in dict.fromkeys(b.sink for b in old_plan.branches):
        branches = [b for b in old_plan.branches if b.sink == sink]
        mapping = mappings.get(sink)
        if (
            mapping is None
            or mapping.type.lower() != "duckdb"
            or sink in partial
            or any(b.upsert_keys or b.index not in ends or b.index not in first[1] for b in branches)
        ):
            continue
        spans = [(b.index, first[1][b.index], ends[b.index]) for b in branches]
        try:
            live = _live(catalog, run_id, spans)
            replayed = _replayed(catalog, capture, table_name(mapping), tables[sink])
        except duckdb.Error as exc:  # a check that cannot be made does not fail the replay
            log.warning("replay: sink '%s' not checked against what the job wrote: %s", sink, exc)
            continue
        if live is None or replayed is None:
            continue
        out.append(
            Fidelity(
                sink,
                sum(live.values()),
                sum(replayed.values()),
                sum((live - replayed).values()),
                sum((replayed - live).values()),
            )
        )
    return tuple(out)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _live(
    catalog: Catalog, run_id: str, spans: list[tuple[int, int | None, int | None]]
) -> Counter[int] | None:
    """The hashes of the rows the run's branches wrote in batches ``(after, upto]``; None when a
    batch of the span has no bookkeeping (its sink did not keep the rows' hashes then)."""
    where = " OR ".join(
        f"(branch = {int(b)} AND batch_id > {-1 if after is None else int(after)}"
        f" AND batch_id <= {-1 if upto is None else int(upto)})"
        for b, after, upto in spans
    )
    run = _literal(run_id)
    _, batches = catalog.query(
        "SELECT count(*), coalesce(sum(rows), 0) FROM pitstop.sink_batches "
        f"WHERE run_id = {run} AND ({where})"
    )
    _, rows = catalog.query(
        f"SELECT row_hash, count(*) FROM pitstop.sink_rows WHERE run_id = {run} AND ({where}) GROUP BY 1"
    )
    hashes = Counter({int(h): int(n) for h, n in rows})
    if sum(hashes.values()) != int(batches[0][1]):
        return None  # rows written without their hashes: nothing to compare with
    return hashes


def _replayed(catalog: Catalog, capture: Capture, table: str, captured: str) -> Counter[int] | None:
    """The hashes of a capture table's rows as the sink table would hash them; None if the sink
    table is gone."""
    _, columns = catalog.query(
        "SELECT column_name, data_type, column_default FROM information_schema.columns "
        f"WHERE table_schema = 'main' AND lower(table_name) = lower({_literal(table)}) "
        "ORDER BY ordinal_position"
    )
    if not columns:
        return None
    have = capture.columns(captured)
    if not have:
        return Counter()
    defaults = constant_defaults({str(n): str(d) for n, _, d in columns if d is not None})
    expr = row_hash([(str(n), str(t)) for n, t, _ in columns], {n for n, _ in have}, defaults)
    with capture.lock:
        rows = (
            capture.db.cursor()
            .execute(f"SELECT {expr} AS h, count(*) FROM {quote_ident(captured)} GROUP BY 1")
            .fetchall()
        )
    return Counter({int(h): int(n) for h, n in rows})
