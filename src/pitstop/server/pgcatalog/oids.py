"""The OIDs clients see, in Python and as DuckDB SQL expressions.

Clients join PostgreSQL's catalog on OIDs (``pg_class.oid = pg_attribute.attrelid``...) and keep
them between statements. PostgreSQL's fixed ones are kept (``pg_catalog`` 11, ``public`` 2200, the
owner 10); every other object's OID is an md5 hash of its kind and name (:func:`stable_oid`), the
same in every process: computed here in Python for rows pitstop writes itself, and by
:func:`oid_sql` in DuckDB for what DuckDB's own catalog lists.
"""

from __future__ import annotations

import hashlib

DATABASE = "pitstop"
OWNER = "pitstop"
"""The role that owns every object (OID 10, PostgreSQL's bootstrap superuser)."""
FIRST_USER_OID = 16384
_OID_SPAN = 2**31 - FIRST_USER_OID
PG_CATALOG_OID = 11
PUBLIC_OID = 2200
VISIBLE_SCHEMAS = ("pg_catalog", "public")


def stable_oid(key: str) -> int:
    """An OID in PostgreSQL's user range derived from ``key`` (md5): the same in every process."""
    return FIRST_USER_OID + int(hashlib.md5(key.encode()).hexdigest()[:8], 16) % _OID_SPAN


def relation_oid(schema: str, name: str) -> int:
    """The OID clients see for relation ``schema.name`` (``public`` for DuckDB's ``main``)."""
    return stable_oid(f"{'public' if schema == 'main' else schema}.{name}")


def oid_sql(key_sql: str) -> str:
    """:func:`stable_oid` as a DuckDB expression over a VARCHAR expression."""
    return (
        f"({FIRST_USER_OID} + CAST(CAST('0x' || substr(md5({key_sql}), 1, 8) AS UBIGINT) "
        f"% {_OID_SPAN} AS UINTEGER))"
    )


def nsp_sql(duck_schema_sql: str) -> str:
    return f"(CASE {duck_schema_sql} WHEN 'main' THEN 'public' ELSE {duck_schema_sql} END)"


def nsp_oid_sql(nspname_sql: str) -> str:
    hashed = oid_sql("'namespace:' || " + nspname_sql)
    return (
        f"CAST(CASE {nspname_sql} WHEN 'pg_catalog' THEN {PG_CATALOG_OID} WHEN 'public' THEN {PUBLIC_OID} "
        f"ELSE {hashed} END AS UINTEGER)"
    )


def role_oid_sql(name_sql: str) -> str:
    """The OID ``pg_roles`` gives the role named by a VARCHAR expression."""
    hashed = oid_sql("'role:' || " + name_sql)
    return f"(CASE {name_sql} WHEN '{OWNER}' THEN 10 ELSE {hashed} END)"
