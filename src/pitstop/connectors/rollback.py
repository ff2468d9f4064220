"""What a sink's connector says about rolling it back to a snapshot's cut: the spans of batches
written after the cut (:class:`Span`), and what removing them takes (:class:`SinkRollback`).

The protocol that plans and performs a rollback is :mod:`pitstop.snapshots.rollback`; each
connector answers it through :meth:`pitstop.connectors.base.Connector.rollback_plan` and
``rollback``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Span:
    """What one branch of one run wrote after the cut: its batches numbered above ``after``
    (-1: all of them)."""

    run_id: str
    branch: int
    after: int

    def text(self) -> str:
        return f"run {self.run_id} branch {self.branch + 1}" + (
            " (every batch)" if self.after < 0 else f" (batches after {self.after})"
        )


@dataclass(frozen=True)
class RunShare:
    """What one run wrote to a sink after the cut."""

    run_id: str
    batches: int
    rows: int


@dataclass(frozen=True)
class SinkRollback:
    """What rolling one sink back to the cut takes, as its connector found it."""

    mapping: str
    type_name: str
    spans: tuple[Span, ...]
    windowed: bool = False  # the branches that wrote it emit windows (EXPLAIN counts windows)
    rows: int = 0  # rows written after the cut: what the rollback removes
    restores: int = 0  # keys whose value at the cut an upsert sink writes back (running aggregates)
    runs: tuple[RunShare, ...] = ()
    files: tuple[str, ...] = ()  # a File sink's files of batches after the cut
    others: tuple[tuple[str, int], ...] = ()  # (job, rows) of other jobs writing the sink: untouched
    possible: bool = True
    unknown: bool = False  # what it holds could not be read (a server that does not answer)
    note: str = ""  # why it cannot be rolled back, or what happens instead

    @property
    def anything(self) -> bool:
        return bool(self.rows or self.restores or self.files)

    def what(self) -> str:
        """``12 windows`` / ``40 rows`` / ``3 files (40 rows)``."""
        if self.restores and not self.rows:
            return f"{self.restores:,} key(s)"
        unit = "window" if self.windowed else "row"
        count = f"{self.rows:,} {unit}{'' if self.rows == 1 else 's'}"
        if self.restores:  # a keyed table that was appended to before it had its key
            return f"{self.restores:,} key(s) and {count} appended before the table had its key"
        if self.files:
            count = f"{len(self.files):,} file{'' if len(self.files) == 1 else 's'} ({count})"
        return count

    def from_runs(self) -> str:
        return "; ".join(f"run {r.run_id}: {r.batches:,} batch(es), {r.rows:,} row(s)" for r in self.runs)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SinkRollback:
        return cls(
            **{
                **d,
                "spans": tuple(Span(**s) for s in d["spans"]),
                "runs": tuple(RunShare(**r) for r in d.get("runs", ())),
                "files": tuple(d.get("files", ())),
                "others": tuple((str(j), int(n)) for j, n in d.get("others", ())),
            }
        )
