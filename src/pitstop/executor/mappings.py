"""CREATE, DROP and SHOW MAPPINGS, and the mapping a CREATE MAPPING declares."""

from __future__ import annotations

from sqlglot import exp

from pitstop import dsn
from pitstop.catalog.rows import ColumnDef, Mapping, WatermarkDef
from pitstop.connectors import registry
from pitstop.errors import CatalogError, DuplicateObjectError, PlanError
from pitstop.executor.base import ExecutorBase
from pitstop.executor.results import Result
from pitstop.intervals import interval_micros
from pitstop.plan.types import spark_type
from pitstop.spelling import close_name
from pitstop.sql import nodes
from pitstop.sql.parser import ParsedStatement, name_of, option_dict


class MappingStatements(ExecutorBase):
    """CREATE MAPPING, DROP MAPPING, SHOW MAPPINGS."""

    def _create_mapping(self, node: nodes.CreateMapping, stmt: ParsedStatement) -> Result:
        mapping = mapping_from_node(node, stmt.text)
        exists = self._lookup(mapping.name) is not None
        if exists and node.args.get("exists"):
            return Result(f"mapping '{mapping.name}' already exists; left as it is")
        if exists and not node.args.get("replace"):
            raise DuplicateObjectError(
                f"mapping '{mapping.name}' already exists; use CREATE OR REPLACE MAPPING to change it"
            )
        if self.manager is None:
            self._overlay[mapping.name.lower()] = mapping
            return Result("OK")
        assert self.catalog is not None
        self.catalog.put_mapping(mapping, replace=exists)
        said = registry.connector(mapping.type).created(mapping)
        return Result(
            f"mapping '{mapping.name}' {'replaced' if exists else 'created'}" + (f"; {said}" if said else "")
        )

    def _drop_mapping(self, node: nodes.DropMapping, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        mapping = self._lookup(name)
        if mapping is None:
            if node.args.get("exists"):
                return Result(f"mapping '{name}' does not exist; nothing dropped")
            raise self._unknown("mapping", name)
        jobs = {j.name.lower(): j.name for j in (self.catalog.jobs() if self.catalog is not None else [])}
        jobs.update({k: k for k in self._overlay_jobs})
        for job_name in jobs.values():
            plan = self._job_plan(job_name)
            if plan is None:
                continue
            used = {m.lower() for b in plan.branches for m in b.mappings}
            if name.lower() in used:
                raise CatalogError(
                    f"mapping '{mapping.name}' is used by job '{job_name}'; drop the job first"
                )
        if self.manager is None:
            self._overlay[name.lower()] = None
            return Result("OK")
        assert self.catalog is not None
        self.catalog.drop_mapping(mapping.name)
        return Result(f"mapping '{mapping.name}' dropped")

    def _show_mappings(self, node: exp.Expression, stmt: ParsedStatement) -> Result:
        rows = []
        for m in self.catalog.mappings() if self.catalog is not None else []:
            cols = ", ".join(f"{c.name} {c.type}" for c in m.columns)
            shown = (
                registry.connector(m.type).shown_options(m.options) if registry.find(m.type) else m.options
            )
            opts = ", ".join(f"{k}={v}" for k, v in sorted(shown.items()))
            rows.append((m.name, registry.display_name(m.type), cols, opts))
        return Result(f"{len(rows)} mapping(s)", ("name", "type", "columns", "options"), tuple(rows))


def mapping_from_node(node: nodes.CreateMapping, sql: str) -> Mapping:
    """The mapping a ``CREATE MAPPING`` declares, checked against its type's declaration
    (:mod:`pitstop.connectors.base`): columns, watermark and every option."""
    name = name_of(node.this)
    kind_text = name_of(node.args["kind"])
    connector = registry.find(kind_text)
    if connector is None:
        close = close_name(kind_text, list(registry.TYPE_NAMES))
        raise PlanError(
            f"mapping '{name}': unknown TYPE {kind_text}{close}; "
            f"known types: {', '.join(registry.TYPE_NAMES)}"
        )
    options = connector.check_options(name, option_dict(node.args.get("options")))
    columns: list[ColumnDef] = []
    for cd in node.args.get("columns") or []:
        type_sql = cd.args["kind"].sql("spark")
        try:
            spark_type(type_sql)
        except Exception as exc:  # noqa: BLE001 - sqlglot raises several types
            raise PlanError(f"mapping '{name}': unknown type {type_sql} for column '{cd.name}'") from exc
        if any(c.name.lower() == cd.name.lower() for c in columns):
            raise PlanError(f"mapping '{name}': column '{cd.name}' is declared twice")
        columns.append(ColumnDef(cd.name, type_sql))
    watermark = None
    wm = node.args.get("watermark")
    if wm is not None:
        col = name_of(wm.this)
        declared = next((c for c in columns if c.name.lower() == col.lower()), None)
        if declared is None:
            raise PlanError(f"mapping '{name}': WATERMARK FOR {col}: there is no column '{col}'")
        if spark_type(declared.type) != "TIMESTAMP":
            raise PlanError(
                f"mapping '{name}': WATERMARK FOR {col}: the column is {declared.type}, not TIMESTAMP"
            )
        watermark = WatermarkDef(declared.name, interval_micros(wm.expression))
    connector.check_mapping(name, tuple(columns), options)
    kind = connector.key
    return Mapping(name, kind, tuple(columns), watermark, options, dsn.mask(sql))  # kept without passwords
