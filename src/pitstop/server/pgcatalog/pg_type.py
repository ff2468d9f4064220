"""The emulated ``pg_type``, and DuckDB SQL that gives a DuckDB column's type its PostgreSQL OID
and typmod.

``pg_type`` lists the types of :mod:`pitstop.server.pgtypes` (what result sets are described
as), a few more that clients name (``int2vector``, ``regnamespace``...), their array types and
the pseudo-types. A column's type is worked out in DuckDB from the type name ``duckdb_columns()``
prints, as :func:`pitstop.server.pgtypes.pg_type_of` works it out in Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from pitstop.server import pgtypes
from pitstop.server.pgcatalog.oids import PG_CATALOG_OID
from pitstop.server.pgcatalog.relation import CatalogView, lit, values


@dataclass(frozen=True)
class TypeRow:
    """One row of the emulated ``pg_type``."""

    oid: int
    name: str
    size: int
    format_type: str
    element: int = 0
    array: int = 0
    category: str = "U"
    pseudo: bool = False


# Types pgtypes does not list that clients name (pg_index.indkey is an int2vector, psql casts to
# regnamespace, pgcli compares with 'trigger'::regtype).
_EXTRA_SCALARS = (
    pgtypes.PgType(22, "int2vector", -1, "int2vector"),
    pgtypes.PgType(30, "oidvector", -1, "oidvector"),
    pgtypes.PgType(142, "xml", -1, "xml"),
    pgtypes.PgType(194, "pg_node_tree", -1, "pg_node_tree"),
    pgtypes.PgType(1033, "aclitem", 12, "aclitem"),
    pgtypes.PgType(1266, "timetz", 12, "time with time zone"),
    pgtypes.PgType(1560, "bit", -1, "bit"),
    pgtypes.PgType(1562, "varbit", -1, "bit varying"),
    pgtypes.PgType(2202, "regprocedure", 4, "regprocedure"),
    pgtypes.PgType(4089, "regnamespace", 4, "regnamespace"),
    pgtypes.PgType(4096, "regrole", 4, "regrole"),
)
_EXTRA_ARRAYS = {22: 1006, 30: 1013, 142: 143, 1033: 1034, 1266: 1270, 1560: 1561, 1562: 1563, 24: 1008}
_PSEUDO = (
    (2249, "record"),
    (2275, "cstring"),
    (2276, "any"),
    (2277, "anyarray"),
    (2278, "void"),
    (2279, "trigger"),
    (2283, "anyelement"),
    (2287, "_record"),
)
_CATEGORY = {
    16: "B", 17: "U", 18: "Z", 19: "S", 20: "N", 21: "N", 22: "A", 23: "N", 24: "N", 25: "S", 26: "N",
    30: "A", 114: "U", 142: "U", 194: "Z", 700: "N", 701: "N", 705: "X", 1033: "U", 1042: "S", 1043: "S",
    1082: "D", 1083: "D", 1114: "D", 1184: "D", 1186: "T", 1266: "D", 1560: "V", 1562: "V", 1700: "N",
    2202: "N", 2205: "N", 2206: "N", 2950: "U", 3802: "U", 4089: "N", 4096: "N",
}  # fmt: skip
_COLLATABLE = {25: 100, 1042: 100, 1043: 100, 19: 950}


def _type_rows() -> tuple[TypeRow, ...]:
    arrays = {t.element: t.oid for t in pgtypes.ARRAYS} | _EXTRA_ARRAYS
    rows = []
    for t in pgtypes.SCALARS + _EXTRA_SCALARS:
        rows.append(
            TypeRow(t.oid, t.name, t.size, t.format_type, 0, arrays.get(t.oid, 0), _CATEGORY.get(t.oid, "U"))
        )
    names = {t.oid: t for t in pgtypes.SCALARS + _EXTRA_SCALARS}
    for element, oid in sorted(arrays.items(), key=lambda item: item[1]):
        if element in names:
            base = names[element]
            rows.append(TypeRow(oid, "_" + base.name, -1, base.format_type + "[]", element, 0, "A"))
    rows.extend(
        TypeRow(oid, name, 4 if name != "cstring" else -2, name, category="P", pseudo=True)
        for oid, name in _PSEUDO
    )
    return tuple(rows)


TYPES: tuple[TypeRow, ...] = _type_rows()


# Every DuckDB type name duckdb_columns() prints for a scalar column (DECIMAL, arrays, nested and
# ENUM types are handled by pattern, as pg_type_of does).
DUCKDB_TYPE_NAMES = (
    "BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UHUGEINT", "UTINYINT",
    "USMALLINT", "UINTEGER", "UBIGINT", "VARINT", "BIGNUM", "FLOAT", "DOUBLE", "VARCHAR", "BLOB",
    "BIT", "DATE", "TIME", "TIME WITH TIME ZONE", "TIME_NS", "TIMESTAMP", "TIMESTAMP_S",
    "TIMESTAMP_MS", "TIMESTAMP_NS", "TIMESTAMP WITH TIME ZONE", "INTERVAL", "UUID", "JSON",
)  # fmt: skip
_DECIMAL_RE = r"DECIMAL\(\s*(\d+)\s*,\s*(\d+)\s*\)"


def scalar_oid_sql(t: str) -> str:
    """DuckDB type name -> PostgreSQL type OID, as pgtypes.pg_type_of maps it (arrays: -1)."""
    pairs = ", ".join(f"{lit(name)}: {pgtypes.pg_type_of(name).oid}" for name in DUCKDB_TYPE_NAMES)
    return (
        f"(CASE WHEN ends_with({t}, '[]') THEN -1 "
        f"WHEN regexp_full_match({t}, '{_DECIMAL_RE}') THEN {pgtypes.NUMERIC.oid} "
        f"WHEN regexp_matches({t}, '^(STRUCT|MAP|UNION)') OR regexp_matches({t}, '\\[\\d+\\]$') "
        f"THEN {pgtypes.JSON.oid} "
        f"ELSE coalesce(MAP {{{pairs}}}[{t}], {pgtypes.TEXT.oid}) END)"
    )


def array_oid_sql(element_oid: str) -> str:
    """The array type of a type OID (``pg_type_of`` sends json for arrays with no PostgreSQL type)."""
    arrays = ", ".join(f"{t_.element}: {t_.oid}" for t_ in pgtypes.ARRAYS)
    return f"coalesce(MAP {{{arrays}}}[{element_oid}], {pgtypes.JSON.oid})"


def typmod_sql(t: str) -> str:
    """pgtypes.pg_type_of(t).modifier: ((p << 16) | s) + 4 for DECIMAL(p,s), else -1."""
    p = f"CAST(regexp_extract({t}, '{_DECIMAL_RE}', 1) AS INTEGER)"
    s = f"CAST(regexp_extract({t}, '{_DECIMAL_RE}', 2) AS INTEGER)"
    return f"(CASE WHEN regexp_full_match({t}, '{_DECIMAL_RE}') THEN (({p} << 16) | {s}) + 4 ELSE -1 END)"


# Names to_regtype() and 'name'::regtype accept besides typname and format_type.
_TYPE_ALIASES = {
    "int": 23, "integer": 23, "smallint": 21, "bigint": 20, "real": 700, "float": 701,
    "double precision": 701, "boolean": 16, "decimal": 1700, "character varying": 1043,
    "varchar": 1043, "character": 1042, "char": 1042, '"char"': 18, "timestamp": 1114,
    "timestamp without time zone": 1114, "timestamptz": 1184, "timestamp with time zone": 1184,
    "time": 1083, "time without time zone": 1083, "timetz": 1266, "time with time zone": 1266,
    "bit varying": 1562,
}  # fmt: skip


def _type_names() -> list[tuple[str, int]]:
    names: dict[str, int] = {}
    for t in TYPES:
        names.setdefault(t.name, t.oid)
        names.setdefault(t.format_type, t.oid)
    for alias, oid in _TYPE_ALIASES.items():
        names.setdefault(alias, oid)
    by_oid = {t.oid: t for t in TYPES}
    for name, oid in list(names.items()):
        array = by_oid[oid].array if oid in by_oid else 0
        if array:
            names.setdefault(name + "[]", array)
    return sorted(names.items())


def _typlen_align(size: int) -> tuple[bool, str, str]:
    """typbyval, typalign, typstorage of a type of ``size`` bytes (-1: variable)."""
    by_value = size in (1, 2, 4, 8)
    align = {1: "c", 2: "s", 4: "i", 8: "d"}.get(size, "i" if size < 0 else "d")
    return by_value, align, "p" if size > 0 else "x"


_STORAGE = {1700: "m", 19: "p"}


def _pg_type_sql() -> str:
    rows = []
    for t in TYPES:
        by_value, align, storage = _typlen_align(t.size)
        storage = _STORAGE.get(t.oid, storage)
        rows.append((
            t.oid, t.name, PG_CATALOG_OID, 10, t.size, by_value, "p" if t.pseudo else "b", t.category,
            False, True, ",", 0, t.element, t.array, f"{t.name}in", f"{t.name}out", f"{t.name}recv",
            f"{t.name}send", align, storage, False, 0, -1, 0, _COLLATABLE.get(t.oid, 0), None, None, None,
        ))  # fmt: skip
    columns = (
        ("oid", "OID"), ("typname", "VARCHAR"), ("typnamespace", "OID"), ("typowner", "OID"),
        ("typlen", "SMALLINT"), ("typbyval", "BOOLEAN"), ("typtype", "VARCHAR"), ("typcategory", "VARCHAR"),
        ("typispreferred", "BOOLEAN"), ("typisdefined", "BOOLEAN"), ("typdelim", "VARCHAR"),
        ("typrelid", "OID"), ("typelem", "OID"), ("typarray", "OID"), ("typinput", "VARCHAR"),
        ("typoutput", "VARCHAR"), ("typreceive", "VARCHAR"), ("typsend", "VARCHAR"), ("typalign", "VARCHAR"),
        ("typstorage", "VARCHAR"), ("typnotnull", "BOOLEAN"), ("typbasetype", "OID"),
        ("typtypmod", "INTEGER"), ("typndims", "INTEGER"), ("typcollation", "OID"),
        ("typdefaultbin", "VARCHAR"), ("typdefault", "VARCHAR"), ("typacl", "VARCHAR[]"),
    )  # fmt: skip
    return values(rows, columns)


INTERNAL: dict[str, str] = {
    "pgc__typenames": values(_type_names(), (("name", "VARCHAR"), ("oid", "OID"))),
    "pgc__typefmt": values([(t.oid, t.format_type) for t in TYPES], (("oid", "OID"), ("fmt", "VARCHAR"))),
}
"""The internal relations of types: what ``'name'::regtype`` finds, what ``format_type`` prints."""
VIEWS: dict[tuple[str, str], CatalogView] = {
    ("pg_catalog", "pg_type"): CatalogView("pgc_pg_type", _pg_type_sql())
}
