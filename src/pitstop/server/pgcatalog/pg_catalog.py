"""The ``pg_catalog`` relations whose rows come from pitstop's home and the client's session:
``pg_class``, ``pg_attribute``, ``pg_namespace``, constraints and indexes, comments, roles,
settings, ``pg_stat_activity`` (:mod:`pitstop.server.activity`), and the ``pg_tables`` family of
views. Relations with fixed rows are in :mod:`pitstop.server.pgcatalog.fixed`.
"""

from __future__ import annotations

import re

from pitstop.server import activity
from pitstop.server.params import PARAMETERS
from pitstop.server.pgcatalog.oids import (
    DATABASE,
    OWNER,
    PG_CATALOG_OID,
    PUBLIC_OID,
    nsp_oid_sql,
    oid_sql,
    role_oid_sql,
    stable_oid,
)
from pitstop.server.pgcatalog.relation import CatalogView, values

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


VIEWS: dict[tuple[str, str], CatalogView] = {
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
    ("pg_catalog", "pg_settings"): CatalogView("pgc_pg_settings", _pg_settings_sql()),
    ("pg_catalog", "pg_stat_activity"): CatalogView(
        "pgc_pg_stat_activity",
        activity.view_sql(
            stable_oid(f"database:{DATABASE}"),
            DATABASE,
            role_oid_sql,
        ),
    ),
    ("pg_catalog", "pg_cursors"): CatalogView("pgc_pg_cursors", activity.CURSORS_SQL),
    ("pg_catalog", "pg_tables"): CatalogView("pgc_pg_tables", _PG_TABLES),
    ("pg_catalog", "pg_views"): CatalogView("pgc_pg_views", _PG_VIEWS),
    ("pg_catalog", "pg_indexes"): CatalogView("pgc_pg_indexes", _PG_INDEXES),
}  # fmt: skip
