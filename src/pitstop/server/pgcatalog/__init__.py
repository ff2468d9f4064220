"""PostgreSQL's catalog, emulated over DuckDB: what clients ask ``pg_catalog`` and
``information_schema`` when they connect and browse, answered from pitstop's home.

psql, JDBC, SQLAlchemy, asyncpg, pgcli and Superset list tables and columns by querying
``pg_class``, ``pg_attribute``, ``pg_type``... and calling ``format_type``, ``pg_get_expr``,
``::regclass``. DuckDB's own ``pg_catalog`` answers few of those statements, and some wrongly
(DuckDB type ids in ``atttypid``, schema ``main``, OIDs that change per process), and refuses new
entries. So every statement a client sends is rewritten before it reaches DuckDB:

1. it is parsed as PostgreSQL (sqlglot, with ``::oid[]``-style array casts added);
2. the top-level result columns get PostgreSQL's names (``count``, ``format_type``, ``?column?``);
3. references to emulated ``pg_catalog`` / ``information_schema`` relations become references to
   CTEs (``pgc_pg_class``...) that are added to the statement with the CTEs they need;
   ``public`` becomes DuckDB's ``main``;
4. emulated functions (``format_type``, ``pg_get_userbyid``, ``current_schemas``...) are inlined
   as DuckDB expressions; ``::regclass``/``::regtype`` casts become look-ups or names;
   ``OPERATOR(pg_catalog.~)`` a regex match; ``COLLATE pg_catalog.default`` disappears;
5. the result is generated as DuckDB SQL.

Nothing is created in DuckDB but four per-connection macros (``prepare``: the user, the backend
process id and key, the session's settings) and the server's functions behind ``pg_stat_activity``
(:mod:`pitstop.server.activity`): creating temporary views and macros costs ~0.3 ms each, so a
catalog of them would cost every client ~40 ms on connect. Static tables (``pg_type``,
``pg_settings``...) travel as one JSON string each, which DuckDB binds far faster than VALUES.

What the emulated catalog shows: DuckDB schema ``main`` as ``public`` (the sink tables), the
``pitstop`` schema (pitstop's own catalog tables), ``pg_catalog`` and ``information_schema``;
tables with PostgreSQL type OIDs and typmods (from :mod:`pitstop.server.pgtypes`), primary keys,
unique and check constraints with their indexes, comments. Relation OIDs are md5 hashes of
``schema.name`` (:func:`relation_oid`), the same in every process. Every OID column (and
``::oid``, ``::regclass``...) is a DuckDB UINTEGER, which result sets describe as PostgreSQL's oid
(:mod:`pitstop.server.pgtypes`), and a list of them as oid[]. The search path is ``public`` (after
``pg_catalog``): ``pitstop.jobs`` must be qualified.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import duckdb
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from pitstop.server import activity, pgsemantics
from pitstop.server.params import PARAMETERS, VERSION_TEXT
from pitstop.server.pgcatalog import pg_type
from pitstop.server.pgcatalog.oids import (
    DATABASE,
    OWNER,
    PG_CATALOG_OID,
    PUBLIC_OID,
    VISIBLE_SCHEMAS,
    nsp_oid_sql,
    nsp_sql,
    oid_sql,
    relation_oid,
    role_oid_sql,
    stable_oid,
)
from pitstop.server.pgcatalog.pg_type import array_oid_sql, scalar_oid_sql, typmod_sql
from pitstop.server.pgcatalog.relation import CatalogView, empty, lit, values

__all__ = ["DATABASE", "DIALECT", "PgCatalog", "relation_oid", "translate"]

log = logging.getLogger(__name__)


# -- relations -------------------------------------------------------------------------------------
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

_PG_CLASS = f"""
SELECT r.oid, r.relname, {nsp_oid_sql("r.nspname")} AS relnamespace, CAST(0 AS UINTEGER) AS reltype,
  CAST(0 AS UINTEGER) AS reloftype, CAST(10 AS UINTEGER) AS relowner,
  CAST(CASE r.relkind WHEN 'r' THEN 2 WHEN 'i' THEN 403 ELSE 0 END AS UINTEGER) AS relam,
  CAST(CASE WHEN r.relkind = 'v' THEN 0 ELSE r.oid END AS UINTEGER) AS relfilenode,
  CAST(0 AS UINTEGER) AS reltablespace, CAST(0 AS INTEGER) AS relpages,
  CAST(r.ntuples AS FLOAT) AS reltuples, CAST(0 AS INTEGER) AS relallvisible,
  CAST(0 AS UINTEGER) AS reltoastrelid, r.hasindex AS relhasindex, false AS relisshared,
  'p' AS relpersistence, r.relkind, CAST(r.ncols AS SMALLINT) AS relnatts,
  CAST(r.nchecks AS SMALLINT) AS relchecks, false AS relhasrules, false AS relhastriggers,
  false AS relhassubclass, false AS relrowsecurity, false AS relforcerowsecurity,
  true AS relispopulated, CASE WHEN r.relkind = 'r' THEN 'd' ELSE 'n' END AS relreplident,
  false AS relispartition, CAST(0 AS UINTEGER) AS relrewrite, CAST(0 AS BIGINT) AS relfrozenxid,
  CAST(0 AS BIGINT) AS relminmxid, CAST(NULL AS VARCHAR[]) AS relacl,
  CAST(NULL AS VARCHAR[]) AS reloptions, CAST(NULL AS VARCHAR) AS relpartbound
FROM (
  SELECT r.oid, r.relname, r.nspname, r.relkind, r.ntuples, coalesce(k.hasindex, false) AS hasindex,
         r.ncols, coalesce(k.nchecks, 0) AS nchecks
  FROM pgc__rel AS r LEFT JOIN (
    SELECT nspname, relname, bool_or(contype IN ('p', 'u')) AS hasindex,
           count(*) FILTER (WHERE contype = 'c') AS nchecks
    FROM pgc__keys GROUP BY nspname, relname) AS k ON k.nspname = r.nspname AND k.relname = r.relname
  UNION ALL
  SELECT indexoid, conname, nspname, 'i', 0, false, len(conkey), 0 FROM pgc__keys WHERE contype IN ('p', 'u')
  UNION ALL
  SELECT oid, relname, nspname, relkind, 0, false, 0, 0 FROM pgc__catalog_relations
) AS r"""

_PG_NAMESPACE = f"""
SELECT CAST({PG_CATALOG_OID} AS UINTEGER) AS oid, 'pg_catalog' AS nspname,
       CAST(10 AS UINTEGER) AS nspowner, CAST(NULL AS VARCHAR[]) AS nspacl
UNION ALL SELECT CAST({PUBLIC_OID} AS UINTEGER), 'public', CAST(10 AS UINTEGER), NULL
UNION ALL
SELECT CAST({stable_oid("namespace:information_schema")} AS UINTEGER), 'information_schema',
       CAST(10 AS UINTEGER), NULL
UNION ALL
SELECT {nsp_oid_sql("s.schema_name")}, s.schema_name, CAST(10 AS UINTEGER), NULL
FROM duckdb_schemas() AS s
WHERE s.database_name = current_database() AND NOT s.internal AND s.schema_name <> 'main'"""

_PG_ATTRIBUTE = """
SELECT c.attrelid, c.attname, c.typoid AS atttypid, -1 AS attstattarget, t.typlen AS attlen, c.attnum,
  CAST(CASE WHEN t.typelem <> 0 AND t.typlen = -1 THEN 1 ELSE 0 END AS INTEGER) AS attndims,
  -1 AS attcacheoff, c.typmod AS atttypmod, t.typbyval AS attbyval, t.typalign AS attalign,
  t.typstorage AS attstorage, '' AS attcompression, c.notnull AS attnotnull,
  c.def IS NOT NULL AS atthasdef, false AS atthasmissing, '' AS attidentity, '' AS attgenerated,
  false AS attisdropped, true AS attislocal, 0 AS attinhcount, t.typcollation AS attcollation,
  CAST(NULL AS VARCHAR[]) AS attacl, CAST(NULL AS VARCHAR[]) AS attoptions,
  CAST(NULL AS VARCHAR[]) AS attfdwoptions, CAST(NULL AS VARCHAR) AS attmissingval
FROM pgc__columns AS c JOIN pgc_pg_type AS t ON t.oid = c.typoid"""

_PG_ATTRDEF = f"""
SELECT {oid_sql("'attrdef:' || c.nspname || '.' || c.relname || '.' || c.attname")} AS oid,
       c.attrelid AS adrelid, c.attnum AS adnum, c.def AS adbin
FROM pgc__columns AS c WHERE c.def IS NOT NULL"""

_PG_CONSTRAINT = f"""
SELECT k.conoid AS oid, k.conname, {nsp_oid_sql("k.nspname")} AS connamespace, k.contype,
  false AS condeferrable, false AS condeferred, true AS convalidated, k.reloid AS conrelid,
  CAST(0 AS UINTEGER) AS contypid, CAST(k.indexoid AS UINTEGER) AS conindid,
  CAST(0 AS UINTEGER) AS conparentid, CAST(0 AS UINTEGER) AS confrelid, ' ' AS confupdtype,
  ' ' AS confdeltype, ' ' AS confmatchtype,
  true AS conislocal, 0 AS coninhcount, false AS connoinherit, k.conkey,
  CAST(NULL AS SMALLINT[]) AS confkey, CAST(NULL AS UINTEGER[]) AS conpfeqop,
  CAST(NULL AS UINTEGER[]) AS conppeqop, CAST(NULL AS UINTEGER[]) AS conffeqop,
  CAST(NULL AS SMALLINT[]) AS confdelsetcols, CAST(NULL AS UINTEGER[]) AS conexclop,
  CASE WHEN k.contype = 'c' THEN k.expression END AS conbin
FROM pgc__keys AS k"""

_PG_INDEX = """
SELECT k.indexoid AS indexrelid, k.reloid AS indrelid, CAST(len(k.conkey) AS SMALLINT) AS indnatts,
  CAST(len(k.conkey) AS SMALLINT) AS indnkeyatts, true AS indisunique, false AS indnullsnotdistinct,
  k.contype = 'p' AS indisprimary, false AS indisexclusion, true AS indimmediate,
  false AS indisclustered, true AS indisvalid, false AS indcheckxmin, true AS indisready,
  true AS indislive, false AS indisreplident, k.conkey AS indkey,
  list_transform(k.conkey, lambda i: CAST(0 AS UINTEGER)) AS indcollation,
  list_transform(k.conkey, lambda i: CAST(0 AS UINTEGER)) AS indclass,
  list_transform(k.conkey, lambda i: CAST(0 AS SMALLINT)) AS indoption,
  CAST(NULL AS VARCHAR) AS indexprs, CAST(NULL AS VARCHAR) AS indpred
FROM pgc__keys AS k WHERE k.contype IN ('p', 'u')"""

_PG_DESCRIPTION = """
SELECT r.oid AS objoid, CAST(1259 AS UINTEGER) AS classoid, 0 AS objsubid, r.comment AS description
FROM pgc__rel AS r WHERE r.comment IS NOT NULL AND r.comment <> ''
UNION ALL
SELECT c.attrelid, CAST(1259 AS UINTEGER), c.attnum, c.comment
FROM pgc__columns AS c WHERE c.comment IS NOT NULL AND c.comment <> ''"""

_ROLE_COLUMNS = (
    "rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, "
    "rolconnlimit, rolpassword, rolvaliduntil, rolbypassrls, rolconfig, oid"
)
_PG_ROLES = f"""
SELECT '{OWNER}' AS rolname, true AS rolsuper, true AS rolinherit, true AS rolcreaterole,
  true AS rolcreatedb, true AS rolcanlogin, false AS rolreplication, -1 AS rolconnlimit,
  '********' AS rolpassword, CAST(NULL AS TIMESTAMPTZ) AS rolvaliduntil, false AS rolbypassrls,
  CAST(NULL AS VARCHAR[]) AS rolconfig, CAST(10 AS UINTEGER) AS oid
UNION ALL
SELECT pgc_user(), false, true, false, false, true, false, -1, '********', NULL, false, NULL,
  {oid_sql("'role:' || pgc_user()")}
WHERE pgc_user() <> '{OWNER}'"""


_PG_USER = """
SELECT rolname AS usename, oid AS usesysid, rolcreatedb AS usecreatedb, rolsuper AS usesuper,
  rolreplication AS userepl, rolbypassrls AS usebypassrls, rolpassword AS passwd,
  rolvaliduntil AS valuntil, rolconfig AS useconfig
FROM pgc_pg_roles"""

_PG_AUTHID = """
SELECT oid, rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication,
  rolbypassrls, rolconnlimit, CAST(NULL AS VARCHAR) AS rolpassword, rolvaliduntil
FROM pgc_pg_roles"""

_PG_DATABASE = values(
    [
        (stable_oid(f"database:{DATABASE}"), DATABASE, 10, 6, "c", False, True, -1, 0, 1, 1663, "C", "C")
        + (None, None, None)
    ],
    (
        ("oid", "OID"), ("datname", "VARCHAR"), ("datdba", "OID"), ("encoding", "INTEGER"),
        ("datlocprovider", "VARCHAR"), ("datistemplate", "BOOLEAN"), ("datallowconn", "BOOLEAN"),
        ("datconnlimit", "INTEGER"), ("datfrozenxid", "BIGINT"), ("datminmxid", "BIGINT"),
        ("dattablespace", "OID"), ("datcollate", "VARCHAR"), ("datctype", "VARCHAR"),
        ("daticulocale", "VARCHAR"), ("datcollversion", "VARCHAR"), ("datacl", "VARCHAR[]"),
    ),
)  # fmt: skip

_EXTRA_SETTINGS = (
    ("default_table_access_method", "heap", "default access method of new tables"),
    ("max_index_keys", "32", "most columns of an index"),
    ("server_encoding", "UTF8", "server character set"),
    ("datestyle", "ISO, MDY", "date output style"),
)


def _vartype(value: str) -> str:
    if value in ("on", "off"):
        return "bool"
    return "integer" if re.fullmatch(r"-?\d+", value) else "string"


def _pg_settings_sql() -> str:
    """PostgreSQL's settings with pitstop's defaults, and this connection's values where its
    session set them (:meth:`PgCatalog.set_parameters`)."""
    columns = (
        "name, setting, unit, category, short_desc, extra_desc, context, vartype, source, boot_val, reset_val"
    )
    current = (
        "coalesce(pgc_settings()[lower(d.name)], d.setting) AS setting, d.unit, d.category, d.short_desc, "
        "d.extra_desc, d.context, d.vartype, CASE WHEN pgc_settings()[lower(d.name)] IS NULL THEN d.source "
        "ELSE 'session' END AS source, d.boot_val, d.reset_val"
    )
    return f"SELECT d.name, {current} FROM ({_pg_settings_defaults_sql()}) AS d({columns})"


def _pg_settings_defaults_sql() -> str:
    seen: set[str] = set()
    rows = []
    for name, setting, description in [(p.name, p.default, p.description) for p in PARAMETERS] + list(
        _EXTRA_SETTINGS
    ):
        if name.lower() in seen:
            continue
        seen.add(name.lower())
        vartype = _vartype(setting)
        rows.append(
            (name, setting, None, "pitstop", description, None, "user", vartype, "default", setting, setting)
        )
    return values(
        rows,
        (
            ("name", "VARCHAR"), ("setting", "VARCHAR"), ("unit", "VARCHAR"), ("category", "VARCHAR"),
            ("short_desc", "VARCHAR"), ("extra_desc", "VARCHAR"), ("context", "VARCHAR"),
            ("vartype", "VARCHAR"), ("source", "VARCHAR"), ("boot_val", "VARCHAR"), ("reset_val", "VARCHAR"),
        ),
    )  # fmt: skip


_PG_TABLES = """
SELECT n.nspname AS schemaname, c.relname AS tablename,
  (SELECT r.rolname FROM pgc_pg_roles AS r WHERE r.oid = c.relowner) AS tableowner,
  CAST(NULL AS VARCHAR) AS tablespace, c.relhasindex AS hasindexes, c.relhasrules AS hasrules,
  c.relhastriggers AS hastriggers, c.relrowsecurity AS rowsecurity
FROM pgc_pg_class AS c JOIN pgc_pg_namespace AS n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p')"""
_PG_VIEWS = """
SELECT r.nspname AS schemaname, r.relname AS viewname, '{owner}' AS viewowner, r.definition
FROM pgc__rel AS r WHERE r.relkind = 'v'""".replace("{owner}", OWNER)
_PG_INDEXES = """
SELECT k.nspname AS schemaname, k.relname AS tablename, k.conname AS indexname,
  CAST(NULL AS VARCHAR) AS tablespace, k.indexdef
FROM pgc__keys AS k WHERE k.contype IN ('p', 'u')"""

# information_schema ------------------------------------------------------------------------------
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


# Internal building blocks, then what clients name, by (schema, name).
_INTERNAL: dict[str, str] = {
    "pgc__catalog_relations": _catalog_relations_sql(),
    "pgc__keys": _KEYS,
    "pgc__rel": _REL,
    "pgc__columns": _COLUMNS,
    **pg_type.INTERNAL,
}
VIEWS: dict[tuple[str, str], CatalogView] = {
    **pg_type.VIEWS,
    ("pg_catalog", "pg_namespace"): CatalogView("pgc_pg_namespace", _PG_NAMESPACE),
    ("pg_catalog", "pg_class"): CatalogView("pgc_pg_class", _PG_CLASS),
    ("pg_catalog", "pg_attribute"): CatalogView("pgc_pg_attribute", _PG_ATTRIBUTE),
    ("pg_catalog", "pg_attrdef"): CatalogView("pgc_pg_attrdef", _PG_ATTRDEF),
    ("pg_catalog", "pg_constraint"): CatalogView("pgc_pg_constraint", _PG_CONSTRAINT),
    ("pg_catalog", "pg_index"): CatalogView("pgc_pg_index", _PG_INDEX),
    ("pg_catalog", "pg_description"): CatalogView("pgc_pg_description", _PG_DESCRIPTION),
    ("pg_catalog", "pg_roles"): CatalogView("pgc_pg_roles", _PG_ROLES),
    ("pg_catalog", "pg_user"): CatalogView("pgc_pg_user", _PG_USER),
    ("pg_catalog", "pg_authid"): CatalogView("pgc_pg_authid", _PG_AUTHID),
    ("pg_catalog", "pg_database"): CatalogView("pgc_pg_database", _PG_DATABASE),
    ("pg_catalog", "pg_settings"): CatalogView("pgc_pg_settings", _pg_settings_sql()),
    ("pg_catalog", "pg_stat_activity"): CatalogView(
        "pgc_pg_stat_activity",
        activity.view_sql(
            stable_oid(f"database:{DATABASE}"),
            DATABASE,
            role_oid_sql,
        ),
    ),
    ("pg_catalog", "pg_tables"): CatalogView("pgc_pg_tables", _PG_TABLES),
    ("pg_catalog", "pg_views"): CatalogView("pgc_pg_views", _PG_VIEWS),
    ("pg_catalog", "pg_indexes"): CatalogView("pgc_pg_indexes", _PG_INDEXES),
    ("pg_catalog", "pg_matviews"): CatalogView(
        "pgc_pg_matviews",
        empty("schemaname VARCHAR", "matviewname VARCHAR", "matviewowner VARCHAR", "tablespace VARCHAR",
              "hasindexes BOOLEAN", "ispopulated BOOLEAN", "definition VARCHAR"),
    ),
    ("pg_catalog", "pg_am"): CatalogView(
        "pgc_pg_am",
        values(
            [(2, "heap", "heap_tableam_handler", "t"), (403, "btree", "bthandler", "i"),
             (405, "hash", "hashhandler", "i"), (783, "gist", "gisthandler", "i"),
             (2742, "gin", "ginhandler", "i"), (4000, "spgist", "spghandler", "i"),
             (3580, "brin", "brinhandler", "i")],
            (("oid", "OID"), ("amname", "VARCHAR"), ("amhandler", "VARCHAR"), ("amtype", "VARCHAR")),
        ),
    ),
    ("pg_catalog", "pg_collation"): CatalogView(
        "pgc_pg_collation",
        values(
            [(100, "default", 11, 10, "d", True, -1, None, None, None, None),
             (950, "C", 11, 10, "c", True, -1, "C", "C", None, None),
             (951, "POSIX", 11, 10, "c", True, -1, "POSIX", "POSIX", None, None)],
            (("oid", "OID"), ("collname", "VARCHAR"), ("collnamespace", "OID"), ("collowner", "OID"),
             ("collprovider", "VARCHAR"), ("collisdeterministic", "BOOLEAN"), ("collencoding", "INTEGER"),
             ("collcollate", "VARCHAR"), ("collctype", "VARCHAR"), ("colliculocale", "VARCHAR"),
             ("collversion", "VARCHAR")),
        ),
    ),
    ("pg_catalog", "pg_tablespace"): CatalogView(
        "pgc_pg_tablespace",
        values(
            [(1663, "pg_default", 10, None, None), (1664, "pg_global", 10, None, None)],
            (("oid", "OID"), ("spcname", "VARCHAR"), ("spcowner", "OID"), ("spcacl", "VARCHAR[]"),
             ("spcoptions", "VARCHAR[]")),
        ),
    ),
    ("pg_catalog", "pg_extension"): CatalogView(
        "pgc_pg_extension",
        values(
            [(stable_oid("extension:plpgsql"), "plpgsql", 10, PG_CATALOG_OID, False, "1.0", None, None)],
            (("oid", "OID"), ("extname", "VARCHAR"), ("extowner", "OID"), ("extnamespace", "OID"),
             ("extrelocatable", "BOOLEAN"), ("extversion", "VARCHAR"), ("extconfig", "OID[]"),
             ("extcondition", "VARCHAR[]")),
        ),
    ),
    ("pg_catalog", "pg_proc"): CatalogView(
        "pgc_pg_proc",
        empty("oid OID", "proname VARCHAR", "pronamespace OID", "proowner OID", "prolang OID",
              "procost FLOAT", "prorows FLOAT", "provariadic OID", "prosupport VARCHAR",
              "prokind VARCHAR", "prosecdef BOOLEAN", "proleakproof BOOLEAN", "proisstrict BOOLEAN",
              "proretset BOOLEAN", "provolatile VARCHAR", "proparallel VARCHAR", "pronargs SMALLINT",
              "pronargdefaults SMALLINT", "prorettype OID", "proargtypes OID[]",
              "proallargtypes OID[]", "proargmodes VARCHAR[]", "proargnames VARCHAR[]",
              "proargdefaults VARCHAR", "protrftypes OID[]", "prosrc VARCHAR", "probin VARCHAR",
              "prosqlbody VARCHAR", "proconfig VARCHAR[]", "proacl VARCHAR[]"),
    ),
    ("pg_catalog", "pg_inherits"): CatalogView(
        "pgc_pg_inherits",
        empty("inhrelid OID", "inhparent OID", "inhseqno INTEGER", "inhdetachpending BOOLEAN"),
    ),
    ("pg_catalog", "pg_range"): CatalogView(
        "pgc_pg_range",
        empty("rngtypid OID", "rngsubtype OID", "rngmultitypid OID", "rngcollation OID",
              "rngsubopc OID", "rngcanonical VARCHAR", "rngsubdiff VARCHAR"),
    ),
    ("pg_catalog", "pg_enum"): CatalogView(
        "pgc_pg_enum", empty("oid OID", "enumtypid OID", "enumsortorder FLOAT", "enumlabel VARCHAR")
    ),
    ("pg_catalog", "pg_policy"): CatalogView(
        "pgc_pg_policy",
        empty("oid OID", "polname VARCHAR", "polrelid OID", "polcmd VARCHAR", "polpermissive BOOLEAN",
              "polroles OID[]", "polqual VARCHAR", "polwithcheck VARCHAR"),
    ),
    ("pg_catalog", "pg_statistic_ext"): CatalogView(
        "pgc_pg_statistic_ext",
        empty("oid OID", "stxrelid OID", "stxname VARCHAR", "stxnamespace OID", "stxowner OID",
              "stxstattarget INTEGER", "stxkeys SMALLINT[]", "stxkind VARCHAR[]", "stxexprs VARCHAR"),
    ),
    ("pg_catalog", "pg_publication"): CatalogView(
        "pgc_pg_publication",
        empty("oid OID", "pubname VARCHAR", "pubowner OID", "puballtables BOOLEAN",
              "pubinsert BOOLEAN",
              "pubupdate BOOLEAN", "pubdelete BOOLEAN", "pubtruncate BOOLEAN", "pubviaroot BOOLEAN"),
    ),
    ("pg_catalog", "pg_publication_rel"): CatalogView(
        "pgc_pg_publication_rel",
        empty("oid OID", "prpubid OID", "prrelid OID", "prqual VARCHAR", "prattrs SMALLINT[]"),
    ),
    ("pg_catalog", "pg_publication_namespace"): CatalogView(
        "pgc_pg_publication_namespace", empty("oid OID", "pnpubid OID", "pnnspid OID")
    ),
    ("pg_catalog", "pg_sequence"): CatalogView(
        "pgc_pg_sequence",
        empty("seqrelid OID", "seqtypid OID", "seqstart BIGINT", "seqincrement BIGINT",
              "seqmax BIGINT",
              "seqmin BIGINT", "seqcache BIGINT", "seqcycle BOOLEAN"),
    ),
    ("pg_catalog", "pg_foreign_table"): CatalogView(
        "pgc_pg_foreign_table", empty("ftrelid OID", "ftserver OID", "ftoptions VARCHAR[]")
    ),
    ("pg_catalog", "pg_partitioned_table"): CatalogView(
        "pgc_pg_partitioned_table",
        empty("partrelid OID", "partstrat VARCHAR", "partnatts SMALLINT", "partdefid OID",
              "partattrs SMALLINT[]", "partclass OID[]", "partcollation OID[]", "partexprs VARCHAR"),
    ),
    ("pg_catalog", "pg_depend"): CatalogView(
        "pgc_pg_depend",
        empty("classid OID", "objid OID", "objsubid INTEGER", "refclassid OID", "refobjid OID",
              "refobjsubid INTEGER", "deptype VARCHAR"),
    ),
    ("pg_catalog", "pg_trigger"): CatalogView(
        "pgc_pg_trigger",
        empty("oid OID", "tgrelid OID", "tgparentid OID", "tgname VARCHAR", "tgfoid OID",
              "tgtype SMALLINT", "tgenabled VARCHAR", "tgisinternal BOOLEAN", "tgconstrrelid OID",
              "tgconstrindid OID", "tgconstraint OID", "tgdeferrable BOOLEAN",
              "tginitdeferred BOOLEAN", "tgnargs SMALLINT", "tgattr SMALLINT[]", "tgargs BLOB",
              "tgqual VARCHAR", "tgoldtable VARCHAR", "tgnewtable VARCHAR"),
    ),
    ("pg_catalog", "pg_rewrite"): CatalogView(
        "pgc_pg_rewrite",
        empty("oid OID", "rulename VARCHAR", "ev_class OID", "ev_type VARCHAR", "ev_enabled VARCHAR",
              "is_instead BOOLEAN", "ev_qual VARCHAR", "ev_action VARCHAR"),
    ),
    ("pg_catalog", "pg_opclass"): CatalogView(
        "pgc_pg_opclass",
        empty("oid OID", "opcmethod OID", "opcname VARCHAR", "opcnamespace OID", "opcowner OID",
              "opcfamily OID", "opcintype OID", "opcdefault BOOLEAN", "opckeytype OID"),
    ),
    ("pg_catalog", "pg_shdescription"): CatalogView(
        "pgc_pg_shdescription", empty("objoid OID", "classoid OID", "description VARCHAR")
    ),
    ("pg_catalog", "pg_auth_members"): CatalogView(
        "pgc_pg_auth_members",
        empty("oid OID", "roleid OID", "member OID", "grantor OID", "admin_option BOOLEAN"),
    ),
    ("pg_catalog", "pg_cast"): CatalogView(
        "pgc_pg_cast",
        empty("oid OID", "castsource OID", "casttarget OID", "castfunc OID",
              "castcontext VARCHAR", "castmethod VARCHAR"),
    ),  # fmt: skip
    ("pg_catalog", "pg_operator"): CatalogView(
        "pgc_pg_operator",
        empty("oid OID", "oprname VARCHAR", "oprnamespace OID", "oprowner OID", "oprkind VARCHAR",
              "oprcanmerge BOOLEAN", "oprcanhash BOOLEAN", "oprleft OID", "oprright OID",
              "oprresult OID", "oprcom OID", "oprnegate OID", "oprcode VARCHAR"),
    ),  # fmt: skip
    ("pg_catalog", "pg_conversion"): CatalogView(
        "pgc_pg_conversion",
        empty("oid OID", "conname VARCHAR", "connamespace OID", "conowner OID",
              "conforencoding INTEGER", "contoencoding INTEGER", "conproc VARCHAR", "condefault BOOLEAN"),
    ),  # fmt: skip
    ("pg_catalog", "pg_event_trigger"): CatalogView(
        "pgc_pg_event_trigger",
        empty("oid OID", "evtname VARCHAR", "evtevent VARCHAR", "evtowner OID", "evtfoid OID",
              "evtenabled VARCHAR", "evttags VARCHAR[]"),
    ),  # fmt: skip
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
_CTE_SQL: dict[str, str] = _INTERNAL | {view.cte: view.sql for view in VIEWS.values()}
_CTE_NAME = re.compile(r"\bpgc_[a-z_]+\b")


@functools.cache
def _needed(cte: str) -> tuple[str, ...]:
    """``cte`` and every CTE (or function template) it refers to, dependencies first."""
    ordered: list[str] = []
    for name in _CTE_NAME.findall(_CTE_SQL[cte]):
        if name in _CTE_SQL and name != cte:
            ordered.extend(n for n in _needed(name) if n not in ordered)
    return tuple(ordered) + (cte,)


# -- functions ------------------------------------------------------------------------------------
# Function templates are DuckDB expressions over their arguments {0}, {1}... A template's subquery
# reads a derived table whose columns are all named __pgc_*, so that a client's unqualified
# column in an argument (pg_table_is_visible(oid)) still refers to the client's table.
def _lookup(cte: str, value: str, key: str, arg: str, **more: str) -> str:
    """``value`` of the row of ``cte`` whose ``key`` equals ``arg`` (and ``more`` column = value)."""
    columns = "".join(f", {column} AS __pgc_{column}" for column in more)
    extra = "".join(f" AND __pgc_l.__pgc_{column} = {value_}" for column, value_ in more.items())
    return (
        f"(SELECT __pgc_l.__pgc_v FROM (SELECT {value} AS __pgc_v, {key} AS __pgc_k{columns} FROM {cte}) "
        f"AS __pgc_l WHERE __pgc_l.__pgc_k = {arg}{extra} LIMIT 1)"
    )


def _ident(part: str) -> str:
    """A name as PostgreSQL reads it: unquoted names fold to lower case."""
    return (
        f"(CASE WHEN starts_with({part}, '\"') "
        f"THEN replace(substr({part}, 2, length({part}) - 2), '\"\"', '\"') "
        f"ELSE lower({part}) END)"
    )


def _quote_ident(name: str) -> str:
    return (
        f"(CASE WHEN regexp_full_match({name}, '[a-z_][a-z0-9_$]*') THEN {name} "
        f"ELSE '\"' || replace({name}, '\"', '\"\"') || '\"' END)"
    )


_RELATIONS = (
    "(SELECT c.oid AS __pgc_k, c.relname AS __pgc_r, n.nspname AS __pgc_n FROM pgc_pg_class AS c "
    "JOIN pgc_pg_namespace AS n ON n.oid = c.relnamespace) AS __pgc_l"
)


def _regclass_lookup(arg: str) -> str:
    """OID of the relation named by the text ``arg`` (``name``, ``schema.name``, quoted or not;
    digits are an OID), searched in pg_catalog, then public."""
    qualified = f"contains({arg}, '.')"
    name = _ident(f"(CASE WHEN {qualified} THEN split_part({arg}, '.', 2) ELSE {arg} END)")
    schema = _ident(f"split_part({arg}, '.', 1)")
    return (
        f"(CASE WHEN regexp_full_match({arg}, '\\d+') THEN CAST({arg} AS UINTEGER) ELSE "
        f"(SELECT __pgc_l.__pgc_k FROM {_RELATIONS} WHERE __pgc_l.__pgc_r = {name} AND "
        f"CASE WHEN {qualified} THEN __pgc_l.__pgc_n = {schema} "
        f"ELSE __pgc_l.__pgc_n IN {VISIBLE_SCHEMAS} END "
        f"ORDER BY __pgc_l.__pgc_n = 'pg_catalog' DESC LIMIT 1) END)"
    )


_REGCLASS_NAME = (
    f"coalesce((SELECT CASE WHEN __pgc_l.__pgc_n IN {VISIBLE_SCHEMAS} THEN {_quote_ident('__pgc_l.__pgc_r')} "
    f"ELSE {_quote_ident('__pgc_l.__pgc_n')} || '.' || {_quote_ident('__pgc_l.__pgc_r')} END "
    f"FROM {_RELATIONS} WHERE __pgc_l.__pgc_k = {{0}}), CAST({{0}} AS VARCHAR))"
)
_TYPE_NAME_ARG = (
    "regexp_replace(regexp_replace(lower(trim({0})), '^pg_catalog\\.', ''), '\\s*\\([0-9, ]*\\)', '')"
)
_FORMAT_TYPE = (
    "(CASE WHEN {0} IS NULL THEN NULL "
    "WHEN {0} IN (1700, 1231) AND {1} >= 4 THEN 'numeric(' || CAST((({1} - 4) >> 16) AS VARCHAR) || ',' "
    "|| CAST((({1} - 4) & 65535) AS VARCHAR) || ')' || CASE WHEN {0} = 1231 THEN '[]' ELSE '' END "
    "WHEN {0} IN (1043, 1015) AND {1} >= 4 THEN 'character varying(' || CAST({1} - 4 AS VARCHAR) || ')' "
    "|| CASE WHEN {0} = 1015 THEN '[]' ELSE '' END "
    "WHEN {0} IN (1042, 1014) AND {1} >= 4 THEN 'character(' || CAST({1} - 4 AS VARCHAR) || ')' "
    "|| CASE WHEN {0} = 1014 THEN '[]' ELSE '' END "
    "WHEN {0} = 1042 AND {1} IS NULL THEN 'bpchar' "
    f"ELSE coalesce({_lookup('pgc__typefmt', 'fmt', 'oid', '{0}')}, '???') END)"
)
_ARRAY_BODY = "trim(regexp_replace(CAST({0} AS VARCHAR), '^\\s*[\\[{](.*)[\\]}]\\s*$', '\\1'))"
# A list (an array parameter Bind has read: server/bindvalues.py) as it is; a text, parsed.
_TEXT_ARRAY = (
    "(CASE WHEN typeof({0}) LIKE '%[]' THEN CAST({0} AS VARCHAR[]) "
    f"WHEN {{0}} IS NULL THEN NULL WHEN {_ARRAY_BODY} = '' THEN CAST([] AS VARCHAR[]) "
    f"ELSE string_split(regexp_replace(regexp_replace({_ARRAY_BODY}, '\\s*,\\s*', ',', 'g'), "
    "'\"', '', 'g'), ',') END)"
)
_TRUE = "true"
_NULL_TEXT = "CAST(NULL AS VARCHAR)"

# PostgreSQL function name -> DuckDB expression ({0}, {1}... are the arguments). A name may have
# a template per number of arguments ("name/3"); the plain name serves every other count.
FUNCTIONS: dict[str, str] = {
    "version": lit(VERSION_TEXT),
    "current_database": lit(DATABASE),
    "current_catalog": lit(DATABASE),
    "current_user": "pgc_user()",
    "session_user": "pgc_user()",
    "user": "pgc_user()",
    "current_role": "pgc_user()",
    "current_schema": "'public'",
    "current_schemas": "(CASE WHEN {0} THEN ['pg_catalog', 'public'] ELSE ['public'] END)",
    "pg_backend_pid": "pgc_backend_pid()",
    "pg_is_in_recovery": "false",
    "pg_postmaster_start_time": "CAST(get_current_timestamp() AS TIMESTAMPTZ)",
    "pg_my_temp_schema": "CAST(0 AS UINTEGER)",
    "pg_is_other_temp_schema": "false",
    "txid_current": "CAST(1 AS BIGINT)",
    "inet_server_addr": _NULL_TEXT,
    "inet_server_port": "CAST(NULL AS INTEGER)",
    "pg_get_userbyid": (
        f"coalesce({_lookup('pgc_pg_roles', 'rolname', 'oid', '{0}')}, "
        "'unknown (OID=' || CAST({0} AS VARCHAR) || ')')"
    ),
    "format_type": _FORMAT_TYPE,
    "pg_table_is_visible": _lookup(
        "pgc_pg_class", f"relnamespace IN ({PG_CATALOG_OID}, {PUBLIC_OID})", "oid", "{0}"
    ),
    "pg_type_is_visible": _lookup("pgc_pg_type", f"typnamespace = {PG_CATALOG_OID}", "oid", "{0}"),
    "pg_function_is_visible": _TRUE,
    "pg_collation_is_visible": _TRUE,
    "pg_opclass_is_visible": _TRUE,
    "pg_operator_is_visible": _TRUE,
    "pg_conversion_is_visible": _TRUE,
    "has_table_privilege": _TRUE,
    "has_schema_privilege": _TRUE,
    "has_database_privilege": _TRUE,
    "has_column_privilege": _TRUE,
    "has_any_column_privilege": _TRUE,
    "has_function_privilege": _TRUE,
    "has_sequence_privilege": _TRUE,
    "has_tablespace_privilege": _TRUE,
    "has_type_privilege": _TRUE,
    "pg_has_role": _TRUE,
    "obj_description": _lookup("pgc_pg_description", "description", "objoid", "{0}", objsubid="0"),
    "col_description": _lookup("pgc_pg_description", "description", "objoid", "{0}", objsubid="{1}"),
    "shobj_description": _NULL_TEXT,
    "pg_get_expr": "{0}",
    "pg_get_constraintdef": _lookup("pgc__keys", "condef", "conoid", "{0}"),
    "pg_get_indexdef": _lookup("pgc__keys", "indexdef", "indexoid", "{0}"),
    "pg_get_indexdef/3": (
        f"(CASE WHEN {{1}} = 0 THEN {_lookup('pgc__keys', 'indexdef', 'indexoid', '{0}')} "
        f"ELSE ({_lookup('pgc__keys', 'colnames', 'indexoid', '{0}')})[{{1}}] END)"
    ),
    "pg_get_viewdef": _lookup("pgc__rel", "definition", "oid", "{0}"),
    "pg_get_serial_sequence": _NULL_TEXT,
    "pg_get_statisticsobjdef_columns": _NULL_TEXT,
    "pg_get_partkeydef": _NULL_TEXT,
    "pg_get_triggerdef": _NULL_TEXT,
    "pg_get_ruledef": _NULL_TEXT,
    "pg_get_function_arguments": "''",
    "pg_get_function_identity_arguments": "''",
    "pg_get_function_result": _NULL_TEXT,
    "pg_get_functiondef": _NULL_TEXT,
    "pg_tablespace_location": "''",
    "pg_database_size": "CAST(0 AS BIGINT)",
    "pg_tablespace_size": "CAST(0 AS BIGINT)",
    "pg_relation_is_publishable": "false",
    "pg_encoding_to_char": "(CASE {0} WHEN 6 THEN 'UTF8' WHEN 0 THEN 'SQL_ASCII' ELSE '' END)",
    "pg_char_to_encoding": "(CASE upper({0}) WHEN 'UTF8' THEN 6 WHEN 'SQL_ASCII' THEN 0 ELSE -1 END)",
    "to_regtype": _lookup("pgc__typenames", "oid", "name", _TYPE_NAME_ARG),
    "to_regclass": _regclass_lookup("{0}"),
    "to_regnamespace": _lookup("pgc_pg_namespace", "oid", "nspname", _ident("{0}")),
    "to_regrole": _lookup("pgc_pg_roles", "oid", "rolname", _ident("{0}")),
    "to_regproc": "CAST(NULL AS UINTEGER)",
    "to_regprocedure": "CAST(NULL AS UINTEGER)",
    "set_config": "{1}",
    "current_setting": _lookup("pgc_pg_settings", "setting", "lower(name)", "lower({0})"),
    "pg_relation_size": "CAST(0 AS BIGINT)",
    "pg_total_relation_size": "CAST(0 AS BIGINT)",
    "pg_table_size": "CAST(0 AS BIGINT)",
    "pg_indexes_size": "CAST(0 AS BIGINT)",
    "pg_size_pretty": "(CAST({0} AS VARCHAR) || ' bytes')",
    "array_upper": "(CASE WHEN len({0}) > 0 THEN len({0}) END)",
    "array_lower": "(CASE WHEN len({0}) > 0 THEN 1 END)",
    "array_ndims": "(CASE WHEN len({0}) > 0 THEN 1 END)",
    "cardinality": "len({0})",
    "quote_ident": _quote_ident("{0}"),
    "_pg_expandarray": (
        "unnest(list_transform(generate_series(1, len({0})), "
        "lambda __pgc_i: {'x': ({0})[__pgc_i], 'n': __pgc_i}))"
    ),
    # Internal: the name a regclass prints as; an array parameter or literal in PostgreSQL's syntax.
    "pgc_regclass_name": _REGCLASS_NAME,
    "pgc_namespace_name": _lookup("pgc_pg_namespace", "nspname", "oid", "{0}"),
    "pgc_text_array": _TEXT_ARRAY,
    **activity.FUNCTIONS,
}


def _template_ctes(template: str) -> tuple[str, ...]:
    ordered: list[str] = []
    for name in _CTE_NAME.findall(template):
        if name in _CTE_SQL:
            ordered.extend(n for n in _needed(name) if n not in ordered)
    return tuple(ordered)


# -- parsing ---------------------------------------------------------------------------------------
class _PgDialect(Postgres):
    """PostgreSQL as clients write it (strict where PostgreSQL is: :mod:`pgsemantics`), plus arrays
    of OID-like types (``::oid[]``, ``::regtype[]``)."""

    class Parser(pgsemantics.StrictParser):
        def _parse_types(
            self,
            check_func: bool = False,
            schema: bool = False,
            allow_identifiers: bool = True,
            with_collation: bool = False,
        ) -> exp.Expr | None:
            this = super()._parse_types(check_func, schema, allow_identifiers, with_collation)
            if isinstance(this, exp.ObjectIdentifier) and self._match_pair(
                TokenType.L_BRACKET, TokenType.R_BRACKET
            ):
                return exp.DataType(this=exp.DType.ARRAY, expressions=[this], nested=True)
            return this


DIALECT = _PgDialect()
"""How client statements are parsed (here, and for their parameters' casts in paramtypes)."""
_PLACEHOLDER = re.compile(r"\{(\d+)\}")


@functools.cache
def _template(sql: str) -> exp.Expr:
    """A function template parsed as DuckDB, its arguments as columns ``__pgc_arg_N``."""
    parsed: exp.Expr = exp.maybe_parse(_PLACEHOLDER.sub(r"__pgc_arg_\1", sql), dialect="duckdb")
    return parsed


def _instantiate(sql: str, args: list[exp.Expr]) -> exp.Expr:
    """The template with the call's arguments in place. An argument the template does not use but
    that holds a bound parameter is kept (DuckDB refuses parameters a statement does not use)."""

    def fill(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name.startswith("__pgc_arg_"):
            index = int(node.name[len("__pgc_arg_") :])
            return args[index].copy() if index < len(args) else exp.null()
        return node

    result = _template(sql).copy().transform(fill)
    used = {int(i) for i in _PLACEHOLDER.findall(sql)}
    for index, arg in enumerate(args):
        if index not in used and arg.find(exp.Parameter, exp.Placeholder) is not None:
            unused = exp.Case(
                ifs=[exp.If(this=exp.Is(this=arg.copy(), expression=exp.null()), true=exp.null())]
            )
            result = exp.Coalesce(this=result, expressions=[unused])
    return result


# -- the rewrite -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Context:
    """What one statement's rewrite collects: the CTEs it needs, in dependency order."""

    ctes: list[str]
    user_ctes: frozenset[str]

    def need(self, names: Iterable[str]) -> None:
        for name in names:
            if name not in self.ctes:
                self.ctes.append(name)


_CATALOG_SCHEMAS = ("pg_catalog", "information_schema")
_PG_TYPE = "pg_type"
"""Key of ``Expression.meta`` naming the reg* type of a rewritten cast (``regclass``...)."""


def _schema_of(node: exp.Expr, key: str = "db") -> str:
    part = node.args.get(key)
    return part.name.lower() if isinstance(part, exp.Identifier) else ""


# Functions that PostgreSQL calls in FROM and that DuckDB knows as table functions; any other
# function there (Grafana: FROM string_to_array(...) s) is a one-row table of its value.
_TABLE_FUNCTIONS = frozenset(
    {"generate_series", "unnest", "explode", "generate_subscripts", "range", "regexp_split_to_table",
     "json_each", "json_each_text", "json_array_elements", "json_array_elements_text", "json_object_keys"}
)  # fmt: skip


def _from_function(table: exp.Table, schema: str) -> exp.Expr:
    """``FROM f(...) [AS a(c)]``: DuckDB's table function, or a one-row table of a scalar's value."""
    if schema in _CATALOG_SCHEMAS:
        table.set("db", None)
    func = table.this
    alias = table.args.get("alias")
    if isinstance(alias, exp.TableAlias) and not alias.columns:  # PostgreSQL: AS a names the column too
        alias.set("columns", [exp.to_identifier(alias.name)])
    if isinstance(func, exp.Explode | exp.Unnest | exp.GenerateSeries | exp.ExplodingGenerateSeries):
        return table
    name = str(func.this).lower() if isinstance(func, exp.Anonymous) else type(func).__name__.lower()
    if name in _TABLE_FUNCTIONS:
        return table
    columns = alias.columns if isinstance(alias, exp.TableAlias) else []
    column = columns[0].name if columns else alias.name if isinstance(alias, exp.TableAlias) else name
    subquery_alias = exp.TableAlias(this=exp.to_identifier(alias.name if alias else name))
    value = exp.select(exp.alias_(func.copy(), column, quoted=True))
    return exp.Subquery(this=value, alias=subquery_alias)


def _rewrite_table(table: exp.Table, ctx: _Context) -> exp.Expr:
    schema, name = _schema_of(table), table.name.lower()
    if not isinstance(table.this, exp.Identifier):  # a function in FROM
        return _from_function(table, schema)
    if not schema and name in ctx.user_ctes:
        return table
    view = VIEWS.get((schema or "pg_catalog", name))
    if view is not None and (schema in _CATALOG_SCHEMAS or not schema):
        ctx.need(_needed(view.cte))
        alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(name))
        return exp.Table(this=exp.to_identifier(view.cte), alias=alias)
    if _schema_of(table, "catalog") == DATABASE:
        table.set("catalog", None)
    if schema == "public":
        table.set("db", exp.to_identifier("main"))
    return table


# Reserved words of PostgreSQL that read like columns: never a column unless quoted.
_SQL_VALUE_WORDS = {
    "user": "current_user",
    "current_role": "current_user",
    "current_catalog": "current_catalog",
}


def _rewrite_column(column: exp.Column, ctx: _Context) -> exp.Expr:
    word = column.name.lower()
    if word in _SQL_VALUE_WORDS and not column.table and not column.this.quoted:
        return _call(_SQL_VALUE_WORDS[word], [], ctx)
    schema = _schema_of(column)
    if schema in _CATALOG_SCHEMAS:
        column.set("db", None)
        column.set("catalog", None)
    elif schema == "public":
        column.set("db", exp.to_identifier("main"))
    return column


_TYPED_FUNCTIONS: dict[type[exp.Expr], str] = {
    exp.CurrentUser: "current_user",
    exp.SessionUser: "session_user",
    exp.CurrentSchema: "current_schema",
    exp.CurrentSchemas: "current_schemas",
    exp.CurrentDatabase: "current_database",
    exp.CurrentCatalog: "current_catalog",
    exp.CurrentVersion: "version",
}
_RENAMED = {"json_build_object": "json_object", "jsonb_build_object": "json_object"}


def _function_args(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    this = node.args.get("this")
    return [this] if isinstance(this, exp.Expr) else []


def _call(name: str, args: list[exp.Expr], ctx: _Context) -> exp.Expr:
    template = FUNCTIONS.get(f"{name}/{len(args)}", FUNCTIONS[name])
    ctx.need(_template_ctes(template))
    return _instantiate(template, args)


def _rewrite_anonymous(node: exp.Anonymous, ctx: _Context) -> exp.Expr:
    name = str(node.this).lower()
    if name in _RENAMED:
        return exp.Anonymous(this=_RENAMED[name], expressions=list(node.expressions))
    if name not in FUNCTIONS:
        return node
    return _call(name, _function_args(node), ctx)


def _rewrite_typed_function(node: exp.Expr, ctx: _Context) -> exp.Expr:
    return _call(_TYPED_FUNCTIONS[type(node)], _function_args(node), ctx)


def _unwrap_qualified(node: exp.Dot, ctx: _Context) -> exp.Expr:
    """``pg_catalog.format_type(...)`` -> ``format_type(...)`` (already rewritten, bottom-up)."""
    if isinstance(node.this, exp.Identifier) and node.this.name.lower() in _CATALOG_SCHEMAS:
        if not isinstance(node.expression, exp.Identifier):
            return node.expression
    return node


# Casts ------------------------------------------------------------------------------------------------
_OID_TYPES = frozenset(
    {"oid", "regclass", "regtype", "regnamespace", "regproc", "regprocedure", "regrole", "regoper",
     "regoperator", "regconfig", "regdictionary", "regcollation", "xid", "cid", "xid8"}
)  # fmt: skip
_TEXT_TYPES = frozenset({"text", "varchar", "name", "char", "bpchar", "character varying", "character"})
_VECTOR_COLUMNS = frozenset({"indkey", "indclass", "indcollation", "indoption", "stxkeys", "partattrs"})
# Catalog columns holding arrays, compared by clients with array literals ('{0}').
_ARRAY_COLUMNS = frozenset(
    {"polroles", "stxkind", "proargtypes", "proallargtypes", "proargmodes", "proargnames"}
)
_DUCKDB_TYPES = {
    "int2": "SMALLINT", "int4": "INTEGER", "int8": "BIGINT", "float4": "FLOAT", "float8": "DOUBLE",
    "bool": "BOOLEAN", "text": "VARCHAR", "varchar": "VARCHAR", "name": "VARCHAR", "char": "VARCHAR",
    "bpchar": "VARCHAR", "numeric": "DECIMAL", "json": "JSON", "jsonb": "JSON", "bytea": "BLOB",
    "timestamp": "TIMESTAMP", "timestamptz": "TIMESTAMPTZ", "date": "DATE", "time": "TIME",
    "interval": "INTERVAL", "uuid": "UUID", "aclitem": "VARCHAR", "int2vector": "SMALLINT[]",
    "oidvector": "UINTEGER[]", "pg_node_tree": "VARCHAR", "anyarray": "VARCHAR[]",
}  # fmt: skip


def _type_name(to: exp.Expr) -> str:
    """A cast target as PostgreSQL names it, lower case, without ``pg_catalog.``: ``regclass``,
    ``int2[]``, ``text``."""
    if isinstance(to, exp.ObjectIdentifier):
        return str(to.this).lower()
    if isinstance(to, exp.DataType) and to.this == exp.DType.ARRAY and to.expressions:
        return _type_name(to.expressions[0]) + "[]"
    if isinstance(to, exp.DataType) and to.this == exp.DType.USERDEFINED:
        kind = to.args.get("kind")
        name = kind.name if isinstance(kind, exp.Dot | exp.Identifier) else str(kind)
        return name.lower().strip('"')
    return to.sql(dialect="postgres").lower()


def _is_name_source(node: exp.Expr) -> bool:
    """True for text that names an object (a string literal or a bound parameter)."""
    return (isinstance(node, exp.Literal) and node.is_string) or isinstance(
        node, exp.Parameter | exp.Placeholder
    )


_LOOKUPS = {
    "regclass": "to_regclass",
    "regtype": "to_regtype",
    "regnamespace": "to_regnamespace",
    "regrole": "to_regrole",
}


def _to_oid(kind: str, operand: exp.Expr, ctx: _Context) -> exp.Expr:
    """``operand::regclass`` (and the other OID types): the OID, marked with its type."""
    oid = exp.DataType.build("UINTEGER", dialect="duckdb")
    if isinstance(operand, exp.Literal) and operand.is_string and operand.name.strip().isdigit():
        result: exp.Expr = exp.cast(exp.Literal.number(operand.name.strip()), oid)
    elif not _is_name_source(operand):
        result = exp.cast(operand, oid)
    elif kind in _LOOKUPS:
        result = exp.Paren(
            this=_call(_LOOKUPS[kind], [exp.cast(operand, exp.DataType.build("VARCHAR"))], ctx)
        )
    elif isinstance(operand, exp.Parameter | exp.Placeholder):  # $1::oid: the number bound
        result = exp.cast(operand, oid)
    else:
        result = exp.cast(exp.null(), oid)
    result.meta[_PG_TYPE] = kind
    return result


_NAME_OF: dict[str, Callable[[exp.Expr, _Context], exp.Expr]] = {
    "regclass": lambda oid, ctx: _call("pgc_regclass_name", [oid], ctx),
    "regtype": lambda oid, ctx: _call("format_type", [oid, exp.null()], ctx),
    "regnamespace": lambda oid, ctx: _call("pgc_namespace_name", [oid], ctx),
    "regrole": lambda oid, ctx: _call("pg_get_userbyid", [oid], ctx),
}


def _named(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """The text PostgreSQL prints for a rewritten reg* cast (a table's name...; OID 0 prints as
    ``-``), else None."""
    inner = node.unnest() if isinstance(node, exp.Paren) else node
    builder = _NAME_OF.get(inner.meta.get(_PG_TYPE, "")) or _NAME_OF.get(node.meta.get(_PG_TYPE, ""))
    if builder is None:
        return None
    zero = exp.If(
        this=exp.EQ(this=node.copy(), expression=exp.Literal.number(0)), true=exp.Literal.string("-")
    )
    return exp.Case(ifs=[zero], default=builder(node, ctx))


def _rewrite_cast(cast: exp.Cast, ctx: _Context) -> exp.Expr:
    kind = _type_name(cast.to)
    operand = cast.this
    if kind in _TEXT_TYPES:
        inner = operand.unnest() if isinstance(operand, exp.Paren) else operand
        named = _named(operand, ctx)
        if named is not None:
            return named
        if isinstance(inner, exp.Column) and inner.name.lower() in _VECTOR_COLUMNS:
            return exp.func("array_to_string", inner, exp.Literal.string(" "))
        return exp.cast(operand, exp.DataType.build("VARCHAR"))
    if kind in _OID_TYPES:
        return _to_oid(kind, operand, ctx)
    if kind.endswith("[]"):
        element = kind[:-2]
        duck = "UINTEGER" if element in _OID_TYPES else _DUCKDB_TYPES.get(element)
        if duck is None:
            return cast
        source = _call("pgc_text_array", [operand], ctx) if _is_name_source(operand) else operand
        return exp.cast(source, exp.DataType.build(f"{duck}[]", dialect="duckdb"))
    if kind in _DUCKDB_TYPES:
        return exp.cast(operand, exp.DataType.build(_DUCKDB_TYPES[kind], dialect="duckdb"))
    return cast


# Operators and array literals ---------------------------------------------------------------------
_OPERATORS: dict[str, Callable[[exp.Expr, exp.Expr], exp.Expr]] = {
    "~": lambda a, b: exp.RegexpLike(this=a, expression=b),
    "~*": lambda a, b: exp.RegexpILike(this=a, expression=b),
    "!~": lambda a, b: exp.not_(exp.RegexpLike(this=a, expression=b)),
    "!~*": lambda a, b: exp.not_(exp.RegexpILike(this=a, expression=b)),
    "~~": lambda a, b: exp.Like(this=a, expression=b),
    "~~*": lambda a, b: exp.ILike(this=a, expression=b),
    "!~~": lambda a, b: exp.not_(exp.Like(this=a, expression=b)),
    "!~~*": lambda a, b: exp.not_(exp.ILike(this=a, expression=b)),
    "=": lambda a, b: exp.EQ(this=a, expression=b),
    "<>": lambda a, b: exp.NEQ(this=a, expression=b),
}


def _rewrite_operator(node: exp.Operator, ctx: _Context) -> exp.Expr:
    """``a OPERATOR(pg_catalog.~) b``, as psql writes a regex match."""
    op = str(node.args.get("operator", "")).split(".")[-1].strip()
    builder = _OPERATORS.get(op)
    return builder(node.this, node.expression) if builder else node


def _array_literal(text: str) -> exp.Array | None:
    """``'{r,p,""}'`` -> ``['r', 'p', '']``; None when the text is not an array literal."""
    match = re.fullmatch(r"\s*\{(.*)\}\s*", text, re.S)
    if match is None:
        return None
    body = match.group(1).strip()
    items = [item.strip().strip('"') for item in body.split(",")] if body else []
    return exp.Array(expressions=[exp.Literal.string(item) for item in items])


def _rewrite_any(node: exp.Any, ctx: _Context) -> exp.Expr:
    """``x = ANY('{r,p}')`` and ``x = ANY($1)`` (a parameter in PostgreSQL's array syntax)."""
    inner = node.this.unnest() if isinstance(node.this, exp.Paren) else node.this
    if isinstance(inner, exp.Literal) and inner.is_string:
        array = _array_literal(inner.name)
        return exp.Any(this=array) if array is not None else node
    if isinstance(inner, exp.Parameter | exp.Placeholder):
        return exp.Any(this=_call("pgc_text_array", [inner], ctx))
    return node


def _rewrite_comparison(node: exp.Expr, ctx: _Context) -> exp.Expr:
    """``pol.polroles = '{0}'``: an array column of the catalog compared with an array literal."""
    for side, other in (("expression", node.this), ("this", node.args.get("expression"))):
        value = node.args.get(side)
        if isinstance(other, exp.Column) and other.name.lower() in _ARRAY_COLUMNS:
            if isinstance(value, exp.Literal) and value.is_string:
                array = _array_literal(value.name)
                if array is not None:
                    node.set(side, array)
    return node


def _display_reg_casts(select: exp.Select, ctx: _Context) -> exp.Expr:
    """``SELECT c.oid::regclass``: a reg* cast that is a result column shows the name, as
    PostgreSQL prints it."""
    for projection in select.expressions:
        target = projection.this if isinstance(projection, exp.Alias) else projection
        named = _named(target, ctx)
        if named is not None:
            target.replace(named)
    return select


_Rewrite = Callable[[Any, _Context], exp.Expr]
_REWRITES: dict[type[exp.Expr], _Rewrite] = {
    exp.Dot: _unwrap_qualified,
    exp.Table: _rewrite_table,
    exp.Column: _rewrite_column,
    exp.Anonymous: _rewrite_anonymous,
    exp.Cast: _rewrite_cast,
    exp.Operator: _rewrite_operator,
    exp.Collate: lambda node, ctx: node.this,  # COLLATE pg_catalog.default
    exp.Any: _rewrite_any,
    exp.EQ: _rewrite_comparison,
    exp.NEQ: _rewrite_comparison,
    exp.Select: _display_reg_casts,
}
_REWRITES.update({cls: _rewrite_typed_function for cls in _TYPED_FUNCTIONS})


def _rewrite(node: exp.Expr, ctx: _Context) -> exp.Expr:
    """Rewrite bottom-up: a node's children are rewritten before the node is."""
    for child in list(node.iter_expressions()):
        new = _rewrite(child, ctx)
        if new is not child:
            child.replace(new)
    handler = _REWRITES.get(type(node))
    return handler(node, ctx) if handler else node


# Result column names ---------------------------------------------------------------------------------
# PostgreSQL's FigureColname: a name and its strength (2: a column or function name, 1: a type name
# or "case", 0: none, which prints as ?column?).
_PG_TYPE_NAMES = {
    "int": "int4", "integer": "int4", "smallint": "int2", "bigint": "int8", "boolean": "bool",
    "double precision": "float8", "real": "float4", "character varying": "varchar",
    "decimal": "numeric",
}  # fmt: skip
_NAMED_NODES: dict[type[exp.Expr], str] = {
    exp.Exists: "exists", exp.Array: "array", exp.Coalesce: "coalesce", exp.Nullif: "nullif",
    exp.Greatest: "greatest", exp.Least: "least",
}  # fmt: skip
_NOT_CALLS = (exp.Connector, exp.Binary, exp.Unary, exp.Predicate)


def _figure(node: exp.Expr) -> tuple[str, int]:
    handler = _FIGURES.get(type(node))
    if handler is not None:
        return handler(node)
    if type(node) in _NAMED_NODES:
        return _NAMED_NODES[type(node)], 2
    if type(node) in _TYPED_FUNCTIONS:
        return _TYPED_FUNCTIONS[type(node)], 2
    if isinstance(node, exp.Func) and not isinstance(node, _NOT_CALLS):
        match = re.match(r"\s*([A-Za-z_][A-Za-z_0-9]*)\s*\(", node.sql(dialect="postgres"))
        if match:
            return match.group(1).lower(), 2
    return "?column?", 0


def _figure_cast(node: exp.Cast) -> tuple[str, int]:
    name, strength = _figure(node.this)
    if strength > 1:
        return name, strength
    kind = _type_name(node.to)
    return _PG_TYPE_NAMES.get(kind, kind).removesuffix("[]"), 1


def _figure_case(node: exp.Case) -> tuple[str, int]:
    default = node.args.get("default")
    name, strength = _figure(default) if isinstance(default, exp.Expr) else ("", 0)
    return (name, strength) if strength > 1 else ("case", 1)


def _figure_subquery(node: exp.Subquery) -> tuple[str, int]:
    select = node.this
    if isinstance(select, exp.Select) and select.expressions:
        first = select.expressions[0]
        if isinstance(first, exp.Alias):
            return first.alias, 2
        name, strength = _figure(first)
        return (name, 2) if strength else ("?column?", 0)
    return "?column?", 0


def _figure_dot(node: exp.Dot) -> tuple[str, int]:
    if isinstance(node.this, exp.Identifier):  # pg_catalog.f(...)
        return _figure(node.expression)
    return (node.expression.name, 2) if isinstance(node.expression, exp.Identifier) else ("?column?", 0)


_FIGURES: dict[type[exp.Expr], Callable[[Any], tuple[str, int]]] = {
    exp.Column: lambda node: (node.name if node.this.quoted else node.name.lower(), 2),
    exp.Anonymous: lambda node: (str(node.this).lower(), 2),
    exp.Cast: _figure_cast,
    exp.Case: _figure_case,
    exp.Subquery: _figure_subquery,
    exp.Dot: _figure_dot,
    exp.Paren: lambda node: _figure(node.this),
    exp.Bracket: lambda node: _figure(node.this),
    exp.Collate: lambda node: _figure(node.this),
    exp.Window: lambda node: _figure(node.this),
}


def pg_column_name(node: exp.Expr) -> str:
    """The name PostgreSQL gives a result column (aliases fold to lower case unless quoted)."""
    if isinstance(node, exp.Alias):
        identifier = node.args.get("alias")
        quoted = isinstance(identifier, exp.Identifier) and identifier.quoted
        return node.alias if quoted else node.alias.lower()
    name, strength = _figure(node)
    return name if strength else "?column?"


def _name_results(tree: exp.Expr) -> None:
    """Name the outermost SELECT's result columns as PostgreSQL does (DuckDB would print
    ``count_star()`` for ``count(*)``, keep ``AS TABLE_SCHEM`` upper case...)."""
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    if not isinstance(select, exp.Select):
        return
    projections: list[exp.Expr] = []
    for projection in select.expressions:
        if (
            isinstance(projection, exp.Star)
            or isinstance(projection, exp.Column)
            and isinstance(projection.this, exp.Star)
        ):
            projections.append(projection)
            continue
        name = pg_column_name(projection)
        target = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(target, exp.Column) and name == target.name and name not in _SQL_VALUE_WORDS:
            projections.append(target)
        else:
            projections.append(exp.alias_(target, name, quoted=True))
    select.set("expressions", projections)


def _values_names(tree: exp.Expr) -> exp.Expr:
    """A top-level VALUES list: PostgreSQL names its columns column1, column2..."""
    if not isinstance(tree, exp.Values) or not tree.expressions:
        return tree
    first = tree.expressions[0]
    width = len(first.expressions) if isinstance(first, exp.Tuple) else 1
    alias = exp.TableAlias(
        this=exp.to_identifier("v"), columns=[exp.to_identifier(f"column{i + 1}") for i in range(width)]
    )
    return exp.select("*").from_(exp.Subquery(this=tree, alias=alias))


# -- translate ---------------------------------------------------------------------------------------
def _user_ctes(tree: exp.Expr) -> frozenset[str]:
    return frozenset(cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE))


def _with_ctes(tree: exp.Expr, ctes: list[str]) -> str:
    """The statement as DuckDB SQL with the catalog CTEs it needs in front of its own."""
    if not ctes:
        return tree.sql(dialect="duckdb")
    ours = ", ".join(f"{name} AS ({_CTE_SQL[name].strip()})" for name in ctes)
    with_ = tree.args.get("with_")
    if not isinstance(with_, exp.With):
        return f"WITH {ours} {tree.sql(dialect='duckdb')}"
    tree.set("with_", None)
    theirs = re.sub(r"^WITH\s+(RECURSIVE\s+)?", "", with_.sql(dialect="duckdb"))
    keyword = "WITH RECURSIVE" if with_.args.get("recursive") else "WITH"
    return f"{keyword} {ours}, {theirs} {tree.sql(dialect='duckdb')}"


def translate(sql: str) -> str:
    """:func:`translate_query` without the sink tables' types (tests, catalog statements)."""
    return translate_query(sql, pgsemantics.NO_SCHEMA).sql


@functools.lru_cache(maxsize=1024)
def translate_query(sql: str, schema: pgsemantics.Schema) -> pgsemantics.Translation:
    """One PostgreSQL query (SELECT / WITH / VALUES) as DuckDB SQL over the emulated catalog, with
    PostgreSQL's semantics (:mod:`pitstop.server.pgsemantics`, given the sink tables' ``schema``).

    A statement sqlglot cannot parse is returned unchanged (DuckDB may still run it); one that
    PostgreSQL refuses and sqlglot would accept raises ``pgsemantics.PgError``. Kept by text: clients
    send the same queries again and again (a dashboard's, a driver's catalog queries), and the
    parse and rewrite cost more than running most of them.
    """
    lead = len(sql) - len(sql.lstrip())
    try:
        tree: exp.Expr = exp.maybe_parse(sql.strip().rstrip(";"), dialect=DIALECT)
    except pgsemantics.PgError as exc:
        raise pgsemantics.PgError(exc.code, exc.message, exc.position + lead if exc.position else 0) from None
    except SqlglotError as exc:
        log.debug("not translated (%s): %s", exc, sql)
        return pgsemantics.Translation(sql)
    if not isinstance(tree, exp.Query | exp.Values):
        return pgsemantics.Translation(sql)
    try:
        tree = _values_names(tree)
        _name_results(tree)
        tree, numeric = pgsemantics.apply(tree, schema)
        ctx = _Context([], _user_ctes(tree))
        return pgsemantics.Translation(_with_ctes(_rewrite(tree, ctx), ctx.ctes), numeric)
    except pgsemantics.PgError:
        raise
    except Exception:  # a rewrite that trips must not cost the client its query: DuckDB may run it
        log.warning("could not translate, running it as sent: %s", sql, exc_info=True)
        return pgsemantics.Translation(sql)


def _settings_macro(settings: Mapping[str, str]) -> str:
    pairs = ", ".join(f"{lit(name.lower())}: {lit(value)}" for name, value in settings.items())
    return f"CREATE OR REPLACE TEMP MACRO pgc_settings() AS CAST(MAP {{{pairs}}} AS MAP(VARCHAR, VARCHAR))"


class PgCatalog:
    """The catalog emulation of one server: shared by its sessions, safe from any thread.

    ``backend_key`` gives a session's key, by its process id, for ``pg_stat_activity`` and
    ``pg_cancel_backend`` (:mod:`pitstop.server.activity`); without it, sessions have none."""

    def __init__(self, backend_key: Callable[[int], str] | None = None) -> None:
        self.backend_key = backend_key

    def prepare(
        self,
        cursor: duckdb.DuckDBPyConnection,
        user: str = OWNER,
        backend_pid: int = 0,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        """Set up a fresh client cursor: the connection's user, process id (``pg_backend_pid()``),
        key (``pgc_backend_key()``) and session settings (``current_setting()``, ``pg_settings``)
        as four macros (~1 ms)."""
        key = self.backend_key(backend_pid) if self.backend_key is not None else ""
        cursor.execute(
            f"CREATE OR REPLACE TEMP MACRO pgc_user() AS {lit(user)}; "
            f"CREATE OR REPLACE TEMP MACRO pgc_backend_pid() AS CAST({int(backend_pid)} AS INTEGER); "
            f"CREATE OR REPLACE TEMP MACRO pgc_backend_key() AS {lit(key)}; "
            + _settings_macro(settings or {})
        )

    def set_parameters(self, cursor: duckdb.DuckDBPyConnection, settings: Mapping[str, str]) -> None:
        """The session's settings changed (SET, RESET): ``current_setting()`` and ``pg_settings``
        answer ``settings`` from now on, pitstop's defaults for any other name. Not inside a
        read-only transaction."""
        cursor.execute(_settings_macro(settings))

    def translate(self, sql: str) -> str:
        """One PostgreSQL statement (a SELECT / WITH / VALUES) -> DuckDB SQL for a prepared cursor."""
        return translate(sql)

    def translate_query(self, sql: str, schema: pgsemantics.Schema) -> pgsemantics.Translation:
        """:meth:`translate`, typed by the sink tables' ``schema``, with its numeric text columns."""
        return translate_query(sql, schema)
