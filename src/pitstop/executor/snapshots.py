"""CREATE, DROP, SHOW and DESCRIBE SNAPSHOT."""

from __future__ import annotations

from sqlglot import exp

from pitstop import describe
from pitstop.catalog.rows import Snapshot
from pitstop.errors import DuplicateObjectError
from pitstop.executor.base import CheckedSnapshot, ExecutorBase
from pitstop.executor.results import Result
from pitstop.snapshots.rollback import cut_text, cut_texts
from pitstop.sql import nodes
from pitstop.sql.parser import ParsedStatement, name_of


class SnapshotStatements(ExecutorBase):
    """CREATE SNAPSHOT, DROP SNAPSHOT, SHOW SNAPSHOTS, DESCRIBE SNAPSHOT."""

    def _create_snapshot(self, node: nodes.CreateSnapshot, stmt: ParsedStatement) -> Result:
        name, job = name_of(node.this), name_of(node.args["job"])
        plan = self._job_plan(job)
        if plan is None:
            raise self._unknown("job", job)
        if self.manager is None:
            existing = self._find_snapshot(name)
            if existing is not None and not node.args.get("replace"):
                raise DuplicateObjectError(
                    f"snapshot '{existing.name}' already exists; use CREATE OR REPLACE SNAPSHOT to replace it"
                )
            self._overlay_snapshots[name.lower()] = CheckedSnapshot(name, job, plan)
            self._dropped.pop(("snapshot", name.lower()), None)
            return Result("OK")
        snap = self.manager.create_snapshot(job, name, bool(node.args.get("replace")), self.cancelled)
        return Result(
            f"snapshot '{snap.name}' of job '{snap.job}' created ({snap.rows} state rows, "
            f"{snap.size_bytes:,} bytes); the job goes on"
        )

    def _drop_snapshot(self, node: nodes.DropSnapshot, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        snap = self._find_snapshot(name)
        if snap is None:
            if node.args.get("exists"):
                return Result(f"snapshot '{name}' does not exist; nothing dropped")
            raise self._unknown("snapshot", name)
        if self.manager is None:
            self._overlay_snapshots[name.lower()] = None
            self._dropped[("snapshot", name.lower())] = self._where(stmt)
            return Result("OK")
        assert isinstance(snap, Snapshot)
        self.manager.drop_snapshot(snap.name)
        return Result(f"snapshot '{snap.name}' dropped" + self._left_outside(snap.path, "snapshots"))

    def _show_snapshots(self, node: exp.Expression, stmt: ParsedStatement) -> Result:
        listing = self.catalog.snapshot_listing() if self.catalog is not None else []
        cuts = self._cut_texts() if listing else {}
        rows = tuple(
            (created.replace(microsecond=0), size, job, name, count, cuts.get(name.lower()))
            for created, size, job, name, count in listing
        )
        return Result(
            f"{len(rows)} snapshot(s)",
            ("time", "size_bytes", "job_name", "snapshot_name", "state_rows", "cut"),
            rows,
        )

    def _describe_snapshot(self, node: nodes.DescribeSnapshot, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        snap = self._find_snapshot(name)
        if snap is None:
            raise self._unknown("snapshot", name)
        if isinstance(snap, CheckedSnapshot):
            rows = (("name", snap.name), ("job", snap.job), ("state", "taken earlier in the checked files"))
            return Result(f"snapshot '{snap.name}'", ("property", "value"), rows)
        described = describe.describe_snapshot(snap)
        cut = self._cut_text(snap.name)
        if cut is not None:
            described += (("cut", cut),)
        return Result(f"snapshot '{snap.name}'", ("property", "value"), described)

    def _cut_text(self, name: str) -> str | None:
        """Whether a snapshot is its job's latest cut (read where a manager owns the home)."""
        if self.manager is None or self.catalog is None:
            return None
        catalog = self.catalog

        def read() -> str | None:
            snap = catalog.get_snapshot(name)
            return None if snap is None else cut_text(catalog, snap)

        # Many clients may list the snapshots at once (a server): read once a second at most.
        return str(catalog.cached_for(f"cut:{name.lower()}", read, 1.0) or "") or None

    def _cut_texts(self) -> dict[str, str]:
        """:meth:`_cut_text` of every snapshot (by lower-case name), read together."""
        if self.manager is None or self.catalog is None:
            return {}
        catalog = self.catalog
        texts: dict[str, str] = catalog.cached_for(
            "cut:*", lambda: cut_texts(catalog, catalog.snapshots()), 1.0
        )
        return texts
