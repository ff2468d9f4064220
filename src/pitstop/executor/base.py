"""What every statement handler stands on: the manager (``None``: check mode), the session, and
the catalog's jobs, snapshots, mappings and views as the statements checked so far leave them.

Check mode changes nothing: what a checked statement would create or drop goes into an overlay
keyed by lower-case name, which hides the catalog's entry of the same name. Each statement's
handlers (:mod:`.mappings`, :mod:`.jobs`, ...) are a mixin over :class:`ExecutorBase`, and
:class:`~pitstop.executor.core.Executor` is all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from pitstop.catalog.rows import Mapping, Snapshot
from pitstop.errors import CatalogError, UnknownObjectError
from pitstop.names import within
from pitstop.plan.model import AggregateStage, JobPlan
from pitstop.spelling import close_name
from pitstop.sql import nodes
from pitstop.sql.parser import ParsedStatement, parse_statement
from pitstop.stages import registry as kinds

if TYPE_CHECKING:
    from pitstop.catalog.store import Catalog
    from pitstop.manager import Manager


@dataclass(frozen=True)
class CheckedSnapshot:
    """Check mode: a snapshot that an earlier statement of the checked files takes (CREATE
    SNAPSHOT, DROP JOB ... WITH SNAPSHOT). It has no state yet; its stages are the plan of the
    job it belongs to, as that job stands at that statement."""

    name: str
    job: str
    plan: JobPlan


class ExecutorBase:
    """The state of an :class:`~pitstop.executor.Executor` and the lookups that see check mode's
    overlay; the handlers' mixins derive from it."""

    def __init__(self, manager: Manager | None, catalog: Catalog | None = None) -> None:
        self.manager = manager
        self.catalog = manager.catalog if manager is not None else catalog
        # Check mode: what the statements checked so far would have created (None: dropped),
        # keyed by lower-case name; it hides the catalog's entry of the same name.
        self._overlay: dict[str, Mapping | None] = {}
        self._overlay_jobs: dict[str, JobPlan | None] = {}
        self._overlay_snapshots: dict[str, CheckedSnapshot | None] = {}
        self._overlay_views: dict[str, exp.Query | None] = {}
        self._dropped: dict[tuple[str, str], str] = {}  # (kind, name) -> "line 7 of a.sql"
        self.session: dict[str, str] = {}  # SET 'key' = 'value'
        self.cancelled: Callable[[], bool] | None = None

    def _lookup(self, name: str) -> Mapping | None:
        key = name.lower()
        if key in self._overlay:
            return self._overlay[key]
        return None if self.catalog is None else self.catalog.get_mapping(name)

    def _view(self, name: str) -> exp.Query | None:
        key = name.lower()
        if key in self._overlay_views:
            return self._overlay_views[key]
        view = self.catalog.get_view(name) if self.catalog is not None else None
        if view is None:
            return None
        node = parse_statement(view.sql)
        assert isinstance(node, nodes.CreateView)
        query = node.expression
        assert isinstance(query, exp.Query)
        return query

    def _view_exists(self, name: str) -> bool:
        """Without parsing the view's SQL (a view an older pitstop named outside the rule)."""
        if name.lower() in self._overlay_views:
            return self._overlay_views[name.lower()] is not None
        return self.catalog is not None and self.catalog.get_view(name) is not None

    def _job_plan(self, name: str) -> JobPlan | None:
        """The plan of an existing job (check mode: as created earlier in the checked script)."""
        key = name.lower()
        if key in self._overlay_jobs:
            return self._overlay_jobs[key]
        if self.catalog is None:
            return None
        job = self.catalog.get_job(name)
        return None if job is None else JobPlan.from_json(self.catalog.get_run(job.run_id).plan)

    def _find_snapshot(self, name: str) -> Snapshot | CheckedSnapshot | None:
        """The snapshot of that name (check mode: as the statements checked so far leave it)."""
        key = name.lower()
        if key in self._overlay_snapshots:
            return self._overlay_snapshots[key]
        return None if self.catalog is None else self.catalog.get_snapshot(name)

    def _snapshot_stages(self, snapshot_name: str) -> dict[str, AggregateStage]:
        snap = self._find_snapshot(snapshot_name)
        if snap is None:
            raise self._unknown("snapshot", snapshot_name)
        if isinstance(snap, CheckedSnapshot):
            return {s.name: s for s in snap.plan.stages}
        return kinds.manifest_stages(snap.name, snap.manifest)

    def _unknown(self, kind: str, name: str) -> CatalogError:
        """``unknown job 'x'`` with a "did you mean" from the catalog's names."""
        names: list[str] = []
        overlay: dict[str, Any]
        if kind == "job":
            names = [j.name for j in self.catalog.jobs()] if self.catalog is not None else []
            overlay = self._overlay_jobs
        elif kind == "snapshot":
            names = self.catalog.snapshot_names() if self.catalog is not None else []
            overlay = self._overlay_snapshots
        else:
            names = [m.name for m in self.catalog.mappings()] if self.catalog is not None else []
            overlay = self._overlay
        names = [n for n in names if overlay.get(n.lower(), n) is not None]  # not dropped earlier
        names += [k for k, v in overlay.items() if v is not None]
        where = self._dropped.get((kind, name.lower()))
        if where is not None:
            return UnknownObjectError(
                f"unknown {kind} '{name}': it is dropped at {where}, earlier in the checked files; "
                "use it before that statement or create it again"
            )
        listing = {"job": "SHOW JOBS", "snapshot": "SHOW SNAPSHOTS", "mapping": "SHOW MAPPINGS"}[kind]
        return UnknownObjectError(
            f"unknown {kind} '{name}'{close_name(name, names)}; {listing} lists the {kind}s"
        )

    def _where(self, stmt: ParsedStatement) -> str:
        return f"line {stmt.line}" + (f" of {stmt.file}" if stmt.file else "")

    def _left_outside(self, folder: str, root: str) -> str:
        """What a DROP says of a folder it did not delete: one outside ``<home>/<root>``, which an
        older pitstop made from a name the rule now refuses (:meth:`Manager._remove`)."""
        assert self.manager is not None
        if within(self.manager.home / root, folder) or not Path(folder).exists():
            return ""
        return (
            f"; its folder {folder} lies outside {self.manager.home / root}, so pitstop left it in "
            "place: delete it yourself once nothing else uses it"
        )
