"""The PostgreSQL functions clients call, as templates of DuckDB expressions that the rewrite
inlines: ``format_type``, ``pg_get_userbyid``, ``pg_table_is_visible``, ``to_regclass``... and
those of ``pg_stat_activity`` (:mod:`pitstop.server.activity`).

A template's ``{0}``, ``{1}``... are the call's arguments. A template's subquery reads a derived
table whose columns are all named ``__pgc_*``, so that a client's unqualified column in an
argument (``pg_table_is_visible(oid)``) still refers to the client's table. The relations a
template reads (``pgc_pg_class``...) are added to the statement as CTEs, as for a relation the
client names.
"""

from __future__ import annotations

from pitstop.server import activity
from pitstop.server.params import VERSION_TEXT
from pitstop.server.pgcatalog.oids import DATABASE, PG_CATALOG_OID, PUBLIC_OID, VISIBLE_SCHEMAS
from pitstop.server.pgcatalog.relation import lit


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
    "octet_length": "CAST(strlen(CAST({0} AS VARCHAR)) AS INTEGER)",
    "quote_literal": (  # E'...' when there is a backslash, as PostgreSQL writes it
        r"(CASE WHEN contains(CAST({0} AS VARCHAR), '\') THEN 'E' ELSE '' END || '''' || "
        r"replace(replace(CAST({0} AS VARCHAR), '\', '\\'), '''', '''''') || '''')"
    ),
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
