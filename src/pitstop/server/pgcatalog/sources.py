"""The internal relations (``pgc__*``) the emulated catalog is built from: what DuckDB's own
catalog (``duckdb_tables()``, ``duckdb_columns()``, ``duckdb_constraints()``...) says of pitstop's
home, in PostgreSQL's terms (``public`` for ``main``, stable OIDs, PostgreSQL's types), and the
relations of ``pg_catalog`` and ``information_schema`` themselves, which ``pg_class`` lists too.
"""

from __future__ import annotations

from pitstop.server.pgcatalog.oids import nsp_sql, oid_sql, stable_oid
from pitstop.server.pgcatalog.pg_type import array_oid_sql, scalar_oid_sql, typmod_sql
from pitstop.server.pgcatalog.relation import values

# The PostgreSQL catalog relations this module emulates, with PostgreSQL's OIDs where they are fixed.
_CATALOG_RELATIONS: dict[str, tuple[int, str]] = {
    "pg_type": (1247, "r"), "pg_attribute": (1249, "r"), "pg_proc": (1255, "r"), "pg_class": (1259, "r"),
    "pg_authid": (1260, "r"), "pg_database": (1262, "r"), "pg_tablespace": (1213, "r"),
    "pg_am": (2601, "r"), "pg_attrdef": (2604, "r"), "pg_constraint": (2606, "r"), "pg_depend": (2608, "r"),
    "pg_description": (2609, "r"), "pg_index": (2610, "r"), "pg_inherits": (2611, "r"),
    "pg_opclass": (2616, "r"), "pg_rewrite": (2618, "r"), "pg_trigger": (2620, "r"),
    "pg_namespace": (2615, "r"), "pg_sequence": (2224, "r"), "pg_shdescription": (2396, "r"),
    "pg_extension": (3079, "r"), "pg_foreign_table": (3118, "r"), "pg_policy": (3256, "r"),
    "pg_partitioned_table": (3350, "r"), "pg_statistic_ext": (3381, "r"), "pg_collation": (3456, "r"),
    "pg_enum": (3501, "r"), "pg_range": (3541, "r"), "pg_publication": (6104, "r"),
    "pg_publication_rel": (6106, "r"), "pg_publication_namespace": (6237, "r"),
    "pg_auth_members": (1261, "r"), "pg_cast": (2605, "r"), "pg_operator": (2617, "r"),
    "pg_conversion": (2607, "r"), "pg_event_trigger": (3466, "r"),
    "pg_roles": (0, "v"), "pg_user": (0, "v"), "pg_settings": (0, "v"), "pg_tables": (0, "v"),
    "pg_views": (0, "v"), "pg_indexes": (0, "v"), "pg_matviews": (0, "v"),
}  # fmt: skip
_INFORMATION_SCHEMA = (
    "schemata", "tables", "columns", "views", "table_constraints", "key_column_usage",
    "constraint_column_usage", "referential_constraints", "check_constraints", "routines",
    "parameters", "sequences",
)  # fmt: skip


def _catalog_relations_sql() -> str:
    rows = [
        ("pg_catalog", name, oid or stable_oid(f"pg_catalog.{name}"), kind)
        for name, (oid, kind) in _CATALOG_RELATIONS.items()
    ]
    rows += [
        ("information_schema", name, stable_oid(f"information_schema.{name}"), "v")
        for name in _INFORMATION_SCHEMA
    ]
    return values(
        rows, (("nspname", "VARCHAR"), ("relname", "VARCHAR"), ("oid", "OID"), ("relkind", "VARCHAR"))
    )


_USER_RELATIONS = f"""
SELECT {nsp_sql("t.schema_name")} AS nspname, t.table_name AS relname, 'r' AS relkind,
       t.comment AS comment, t.column_count AS ncols, t.estimated_size AS ntuples,
       CAST(NULL AS VARCHAR) AS definition
FROM duckdb_tables() AS t
WHERE t.database_name = current_database() AND NOT t.internal AND NOT t.temporary
UNION ALL
SELECT {nsp_sql("v.schema_name")}, v.view_name, 'v', v.comment, v.column_count, 0, v.sql
FROM duckdb_views() AS v
WHERE v.database_name = current_database() AND NOT v.internal AND NOT v.temporary"""

_KEYS = f"""
SELECT k.*, {oid_sql("'constraint:' || k.nspname || '.' || k.relname || '.' || k.conname")} AS conoid,
       CASE WHEN k.contype IN ('p', 'u') THEN {oid_sql("k.nspname || '.' || k.conname")} ELSE 0 END
         AS indexoid,
       {oid_sql("k.nspname || '.' || k.relname")} AS reloid,
       CASE k.contype
         WHEN 'p' THEN 'PRIMARY KEY (' || k.collist || ')'
         WHEN 'u' THEN 'UNIQUE (' || k.collist || ')'
         ELSE 'CHECK ((' || k.expression || '))' END AS condef,
       CASE WHEN k.contype IN ('p', 'u') THEN
         'CREATE UNIQUE INDEX ' || k.conname || ' ON ' || k.nspname || '.' || k.relname
         || ' USING btree (' || k.collist || ')' END AS indexdef
FROM (
  SELECT {nsp_sql("c.schema_name")} AS nspname, c.table_name AS relname,
         CASE c.constraint_type WHEN 'PRIMARY KEY' THEN 'p' WHEN 'UNIQUE' THEN 'u' ELSE 'c' END AS contype,
         CASE c.constraint_type
           WHEN 'PRIMARY KEY' THEN c.table_name || '_pkey'
           WHEN 'UNIQUE' THEN c.table_name || '_' || array_to_string(c.constraint_column_names, '_') || '_key'
           ELSE c.table_name || '_' || coalesce(c.constraint_column_names[1], '') || '_check'
             || CASE WHEN c.constraint_index > 0 THEN CAST(c.constraint_index AS VARCHAR) ELSE '' END
         END AS conname,
         list_transform(c.constraint_column_indexes, lambda __pgc_i: CAST(__pgc_i + 1 AS SMALLINT)) AS conkey,
         c.constraint_column_names AS colnames,
         array_to_string(c.constraint_column_names, ', ') AS collist,
         c.expression AS expression
  FROM duckdb_constraints() AS c
  WHERE c.database_name = current_database()
    AND c.constraint_type IN ('PRIMARY KEY', 'UNIQUE', 'CHECK')
) AS k"""

_REL = f"""
SELECT u.*, {oid_sql("u.nspname || '.' || u.relname")} AS oid FROM ({_USER_RELATIONS}) AS u"""

_COLUMN_RELATION_OID = oid_sql(nsp_sql("c.schema_name") + " || '.' || c.table_name")


# pgtypes.pg_type_of(data_type).oid: arrays map their element, so the element's type is worked out once.
_COLUMNS = f"""
SELECT e.*, CAST(
    CASE WHEN e.is_array THEN {array_oid_sql("e.element_oid")} ELSE e.element_oid END AS UINTEGER
  ) AS typoid
FROM (
  SELECT x.*, {scalar_oid_sql("x.element")} AS element_oid
  FROM (
    SELECT {nsp_sql("c.schema_name")} AS nspname, c.table_name AS relname,
           {_COLUMN_RELATION_OID} AS attrelid,
           c.column_name AS attname, CAST(c.column_index AS SMALLINT) AS attnum, c.data_type,
           CAST({typmod_sql("c.data_type")} AS INTEGER) AS typmod,
           NOT c.is_nullable AS notnull, c.column_default AS def, c.comment AS comment,
           ends_with(c.data_type, '[]') AS is_array,
           CASE WHEN ends_with(c.data_type, '[]') THEN substr(c.data_type, 1, length(c.data_type) - 2)
                ELSE c.data_type END AS element
    FROM duckdb_columns() AS c
    WHERE c.database_name = current_database() AND NOT c.internal
  ) AS x
) AS e"""


INTERNAL: dict[str, str] = {
    "pgc__catalog_relations": _catalog_relations_sql(),
    "pgc__keys": _KEYS,
    "pgc__rel": _REL,
    "pgc__columns": _COLUMNS,
}
