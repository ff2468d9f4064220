"""The ``information_schema`` views (what JDBC, SQLAlchemy and BI tools read), over the same
internal relations as ``pg_catalog``; those pitstop has nothing for are empty.
"""

from __future__ import annotations

from pitstop.server.pgcatalog.oids import DATABASE, OWNER
from pitstop.server.pgcatalog.relation import CatalogView, empty

_IS_SCHEMATA = f"""
SELECT '{DATABASE}' AS catalog_name, n.nspname AS schema_name, '{OWNER}' AS schema_owner,
  CAST(NULL AS VARCHAR) AS default_character_set_catalog,
  CAST(NULL AS VARCHAR) AS default_character_set_schema,
  CAST(NULL AS VARCHAR) AS default_character_set_name, CAST(NULL AS VARCHAR) AS sql_path
FROM pgc_pg_namespace AS n"""
_IS_TABLES = f"""
SELECT '{DATABASE}' AS table_catalog, n.nspname AS table_schema, c.relname AS table_name,
  CASE WHEN c.relkind = 'v' THEN 'VIEW' ELSE 'BASE TABLE' END AS table_type,
  CAST(NULL AS VARCHAR) AS self_referencing_column_name, CAST(NULL AS VARCHAR) AS reference_generation,
  CAST(NULL AS VARCHAR) AS user_defined_type_catalog, CAST(NULL AS VARCHAR) AS user_defined_type_schema,
  CAST(NULL AS VARCHAR) AS user_defined_type_name,
  CASE WHEN c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') THEN 'YES' ELSE 'NO' END
    AS is_insertable_into,
  'NO' AS is_typed, CAST(NULL AS VARCHAR) AS commit_action
FROM pgc_pg_class AS c JOIN pgc_pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'v', 'p', 'f')"""
_IS_COLUMNS = f"""
SELECT '{DATABASE}' AS table_catalog, c.nspname AS table_schema, c.relname AS table_name,
  c.attname AS column_name, CAST(c.attnum AS INTEGER) AS ordinal_position, c.def AS column_default,
  CASE WHEN c.notnull THEN 'NO' ELSE 'YES' END AS is_nullable,
  CASE WHEN t.typcategory = 'A' THEN 'ARRAY' ELSE f.fmt END AS data_type,
  CAST(CASE WHEN c.typoid IN (1042, 1043) AND c.typmod >= 4 THEN c.typmod - 4 END AS INTEGER)
    AS character_maximum_length,
  CAST(CASE WHEN c.typoid IN (25, 1042, 1043) THEN 1073741824 END AS INTEGER) AS character_octet_length,
  CAST(CASE c.typoid WHEN 21 THEN 16 WHEN 23 THEN 32 WHEN 20 THEN 64 WHEN 700 THEN 24 WHEN 701 THEN 53
    WHEN 1700 THEN CASE WHEN c.typmod >= 4 THEN (c.typmod - 4) >> 16 END END AS INTEGER) AS numeric_precision,
  CAST(CASE WHEN c.typoid IN (20, 21, 23, 700, 701) THEN 2 WHEN c.typoid = 1700 THEN 10 END AS INTEGER)
    AS numeric_precision_radix,
  CAST(CASE WHEN c.typoid IN (20, 21, 23) THEN 0
    WHEN c.typoid = 1700 AND c.typmod >= 4 THEN (c.typmod - 4) & 65535 END AS INTEGER) AS numeric_scale,
  CAST(CASE WHEN c.typoid = 1082 THEN 0 WHEN c.typoid IN (1083, 1114, 1184, 1186, 1266) THEN 6 END AS INTEGER)
    AS datetime_precision,
  CAST(NULL AS VARCHAR) AS interval_type, CAST(NULL AS INTEGER) AS interval_precision,
  CAST(NULL AS VARCHAR) AS character_set_catalog, CAST(NULL AS VARCHAR) AS character_set_schema,
  CAST(NULL AS VARCHAR) AS character_set_name, CAST(NULL AS VARCHAR) AS collation_catalog,
  CAST(NULL AS VARCHAR) AS collation_schema, CAST(NULL AS VARCHAR) AS collation_name,
  CAST(NULL AS VARCHAR) AS domain_catalog, CAST(NULL AS VARCHAR) AS domain_schema,
  CAST(NULL AS VARCHAR) AS domain_name, '{DATABASE}' AS udt_catalog, 'pg_catalog' AS udt_schema,
  t.typname AS udt_name, CAST(NULL AS VARCHAR) AS scope_catalog, CAST(NULL AS VARCHAR) AS scope_schema,
  CAST(NULL AS VARCHAR) AS scope_name, CAST(NULL AS INTEGER) AS maximum_cardinality,
  CAST(c.attnum AS VARCHAR) AS dtd_identifier, 'NO' AS is_self_referencing, 'NO' AS is_identity,
  CAST(NULL AS VARCHAR) AS identity_generation, CAST(NULL AS VARCHAR) AS identity_start,
  CAST(NULL AS VARCHAR) AS identity_increment, CAST(NULL AS VARCHAR) AS identity_maximum,
  CAST(NULL AS VARCHAR) AS identity_minimum, CAST(NULL AS VARCHAR) AS identity_cycle,
  'NEVER' AS is_generated, CAST(NULL AS VARCHAR) AS generation_expression, 'YES' AS is_updatable
FROM pgc__columns AS c JOIN pgc_pg_type AS t ON t.oid = c.typoid JOIN pgc__typefmt AS f ON f.oid = c.typoid"""
_IS_VIEWS = f"""
SELECT '{DATABASE}' AS table_catalog, r.nspname AS table_schema, r.relname AS table_name,
  r.definition AS view_definition, 'NONE' AS check_option, 'NO' AS is_updatable,
  'NO' AS is_insertable_into, 'NO' AS is_trigger_updatable, 'NO' AS is_trigger_deletable,
  'NO' AS is_trigger_insertable_into
FROM pgc__rel AS r WHERE r.relkind = 'v'"""
_IS_TABLE_CONSTRAINTS = f"""
SELECT '{DATABASE}' AS constraint_catalog, k.nspname AS constraint_schema, k.conname AS constraint_name,
  '{DATABASE}' AS table_catalog, k.nspname AS table_schema, k.relname AS table_name,
  CASE k.contype WHEN 'p' THEN 'PRIMARY KEY' WHEN 'u' THEN 'UNIQUE' ELSE 'CHECK' END AS constraint_type,
  'NO' AS is_deferrable, 'NO' AS initially_deferred, 'YES' AS enforced,
  CASE WHEN k.contype = 'u' THEN 'YES' END AS nulls_distinct
FROM pgc__keys AS k"""
_IS_KEY_COLUMN_USAGE = f"""
SELECT '{DATABASE}' AS constraint_catalog, k.nspname AS constraint_schema, k.conname AS constraint_name,
  '{DATABASE}' AS table_catalog, k.nspname AS table_schema, k.relname AS table_name,
  k.colnames[i] AS column_name, CAST(i AS INTEGER) AS ordinal_position,
  CAST(NULL AS INTEGER) AS position_in_unique_constraint
FROM pgc__keys AS k, generate_series(1, len(k.colnames)) AS g(i) WHERE k.contype IN ('p', 'u')"""
_IS_CONSTRAINT_COLUMN_USAGE = f"""
SELECT '{DATABASE}' AS table_catalog, k.nspname AS table_schema, k.relname AS table_name,
  k.colnames[i] AS column_name, '{DATABASE}' AS constraint_catalog, k.nspname AS constraint_schema,
  k.conname AS constraint_name
FROM pgc__keys AS k, generate_series(1, len(k.colnames)) AS g(i)"""
_IS_CHECK_CONSTRAINTS = f"""
SELECT '{DATABASE}' AS constraint_catalog, k.nspname AS constraint_schema, k.conname AS constraint_name,
  k.expression AS check_clause
FROM pgc__keys AS k WHERE k.contype = 'c'"""


VIEWS: dict[tuple[str, str], CatalogView] = {
    ("information_schema", "schemata"): CatalogView("pgc_is_schemata", _IS_SCHEMATA),
    ("information_schema", "tables"): CatalogView("pgc_is_tables", _IS_TABLES),
    ("information_schema", "columns"): CatalogView("pgc_is_columns", _IS_COLUMNS),
    ("information_schema", "views"): CatalogView("pgc_is_views", _IS_VIEWS),
    ("information_schema", "table_constraints"): CatalogView(
        "pgc_is_table_constraints", _IS_TABLE_CONSTRAINTS
    ),
    ("information_schema", "key_column_usage"): CatalogView("pgc_is_key_column_usage", _IS_KEY_COLUMN_USAGE),
    ("information_schema", "constraint_column_usage"): CatalogView(
        "pgc_is_constraint_column_usage", _IS_CONSTRAINT_COLUMN_USAGE
    ),
    ("information_schema", "check_constraints"): CatalogView(
        "pgc_is_check_constraints", _IS_CHECK_CONSTRAINTS
    ),
    ("information_schema", "referential_constraints"): CatalogView(
        "pgc_is_referential_constraints",
        empty("constraint_catalog VARCHAR", "constraint_schema VARCHAR", "constraint_name VARCHAR",
              "unique_constraint_catalog VARCHAR", "unique_constraint_schema VARCHAR",
              "unique_constraint_name VARCHAR", "match_option VARCHAR", "update_rule VARCHAR",
              "delete_rule VARCHAR"),
    ),
    ("information_schema", "routines"): CatalogView(
        "pgc_is_routines",
        empty("specific_catalog VARCHAR", "specific_schema VARCHAR", "specific_name VARCHAR",
              "routine_catalog VARCHAR", "routine_schema VARCHAR", "routine_name VARCHAR",
              "routine_type VARCHAR", "data_type VARCHAR", "type_udt_name VARCHAR",
              "routine_definition VARCHAR", "external_language VARCHAR"),
    ),
    ("information_schema", "parameters"): CatalogView(
        "pgc_is_parameters",
        empty("specific_catalog VARCHAR", "specific_schema VARCHAR", "specific_name VARCHAR",
              "ordinal_position INTEGER", "parameter_mode VARCHAR", "parameter_name VARCHAR",
              "data_type VARCHAR", "udt_name VARCHAR"),
    ),
    ("information_schema", "sequences"): CatalogView(
        "pgc_is_sequences",
        empty("sequence_catalog VARCHAR", "sequence_schema VARCHAR", "sequence_name VARCHAR",
              "data_type VARCHAR", "start_value VARCHAR", "minimum_value VARCHAR", "maximum_value VARCHAR",
              "increment VARCHAR", "cycle_option VARCHAR"),
    ),
}  # fmt: skip
