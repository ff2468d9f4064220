"""Queries: views (a query kept by name, planned as a job's input when it is created) and ad-hoc
SELECT over the catalog, ``snapshot_state('s', 'stage')`` included."""

from __future__ import annotations

from sqlglot import exp

from pitstop.catalog.clock import now
from pitstop.catalog.rows import Mapping, View
from pitstop.errors import CatalogError, DuplicateObjectError, PlanError, UnknownObjectError
from pitstop.executor.base import ExecutorBase
from pitstop.executor.results import Result
from pitstop.planner.build import plan_job
from pitstop.snapshots import state
from pitstop.spelling import close_name
from pitstop.sql import nodes
from pitstop.sql.parser import ParsedStatement, name_of, parse_statement


class QueryStatements(ExecutorBase):
    """CREATE VIEW, DROP VIEW, SHOW VIEWS and SELECT."""

    # -- views -------------------------------------------------------------------------------------
    def _create_view(self, node: nodes.CreateView, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        exists = self._view(name) is not None
        if exists and node.args.get("exists"):
            return Result(f"view '{name}' already exists; left as it is")
        if exists and not node.args.get("replace"):
            raise DuplicateObjectError(
                f"view '{name}' already exists; use CREATE OR REPLACE VIEW to change it"
            )
        if self._lookup(name) is not None:
            raise CatalogError(f"'{name}' is a mapping; give the view another name")
        # A view must be readable by a job: plan it as the input of a stateless job now.
        quoted = exp.to_identifier(name, quoted=True).sql()  # "Daily Revenue" is a view name too
        probe = parse_statement(f"CREATE JOB __probe AS INSERT INTO __probe_sink SELECT * FROM {quoted}")
        sink = Mapping("__probe_sink", "console", (), None)
        query = node.expression

        def views(view_name: str) -> exp.Query | None:
            return query if view_name.lower() == name.lower() else self._view(view_name)

        def mappings(mapping_name: str) -> Mapping | None:
            return sink if mapping_name.lower() == "__probe_sink" else self._lookup(mapping_name)

        assert isinstance(probe, nodes.CreateJob)
        plan_job(name, list(probe.args["body"]), mappings, views)
        if self.manager is None:
            self._overlay_views[name.lower()] = query
            return Result("OK")
        assert self.catalog is not None
        self.catalog.put_view(View(name, stmt.text, now()), replace=exists)
        return Result(f"view '{name}' {'replaced' if exists else 'created'}")

    def _drop_view(self, node: nodes.DropView, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        if not self._view_exists(name):
            if node.args.get("exists"):
                return Result(f"view '{name}' does not exist; nothing dropped")
            names = [v.name for v in self.catalog.views()] if self.catalog is not None else []
            raise UnknownObjectError(
                f"unknown view '{name}'{close_name(name, names)}; SHOW VIEWS lists the views"
            )
        if self.manager is None:
            self._overlay_views[name.lower()] = None
            return Result("OK")
        assert self.catalog is not None
        self.catalog.drop_view(name)
        return Result(f"view '{name}' dropped")

    def _show_views(self, node: exp.Expression, stmt: ParsedStatement) -> Result:
        rows = tuple((v.name, v.sql) for v in (self.catalog.views() if self.catalog is not None else []))
        return Result(f"{len(rows)} view(s)", ("name", "definition"), rows)

    # -- ad-hoc queries ----------------------------------------------------------------------------
    def _select(self, node: exp.Expression, stmt: ParsedStatement) -> Result:
        if self.manager is None:  # check mode: the snapshots and stages snapshot_state names exist
            for call in state.calls(stmt.text) if state.mentions(stmt.text) else []:
                stages = self._snapshot_stages(call.snapshot)
                if call.stage.lower() not in {s.lower() for s in stages}:
                    known = ", ".join(f"'{s}'" for s in sorted(stages)) or "none"
                    raise CatalogError(
                        f"snapshot '{call.snapshot}' has no stage '{call.stage}'; its stages: {known}"
                    )
            return Result("OK")
        import duckdb

        assert self.catalog is not None
        # snapshot_state('s', 'stage'): tables pitstop reads for the query (pitstop.snapshots.state).
        sql, tables = state.resolve(stmt.text, self.catalog)
        try:
            columns, rows = self.catalog.query(sql, tables)
        except duckdb.Error as exc:
            raise PlanError(f"query failed in DuckDB: {exc}") from exc
        return Result(f"{len(rows)} row(s)", tuple(columns), tuple(tuple(r) for r in rows))
