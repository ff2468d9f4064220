"""PostgreSQL types of result columns and parameters: OIDs, text and binary encodings.

Clients decide how to read a column from its type OID, so every column a pitstop server sends
carries PostgreSQL's real OID (int8 for BIGINT, numeric with its precision and scale, timestamp,
...), never text for everything. Values are encoded in the format each client asks for: text as
PostgreSQL prints it, or PostgreSQL's binary send format (asyncpg asks for binary for every type
it knows).
"""

from __future__ import annotations

import json
import math
import re
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

__all__ = [
    "Column",
    "PgType",
    "encode",
    "pg_type_by_oid",
    "pg_type_of",
    "pg_type_of_value",
]

PG_EPOCH = datetime(2000, 1, 1)
PG_EPOCH_DATE = date(2000, 1, 1)


@dataclass(frozen=True)
class PgType:
    oid: int
    name: str
    """``pg_type.typname``."""
    size: int
    """``pg_type.typlen``: bytes of a fixed-size type, -1 for a variable one."""
    format_type: str
    """What PostgreSQL's ``format_type(oid, typmod)`` prints, e.g. ``numeric(12,2)``."""
    modifier: int = -1
    """``atttypmod``: ``((precision << 16) | scale) + 4`` for numeric, -1 when there is none."""
    element: int = 0
    """The element type's OID of an array type, else 0."""

    @property
    def is_array(self) -> bool:
        return self.element != 0


@dataclass(frozen=True)
class Column:
    """A result column: its name and the type clients are told (RowDescription)."""

    name: str
    type: PgType


def _t(oid: int, name: str, size: int, format_type: str, element: int = 0) -> PgType:
    return PgType(oid, name, size, format_type, -1, element)


BOOL = _t(16, "bool", 1, "boolean")
BYTEA = _t(17, "bytea", -1, "bytea")
CHAR = _t(18, "char", 1, '"char"')
NAME = _t(19, "name", 64, "name")
INT8 = _t(20, "int8", 8, "bigint")
INT2 = _t(21, "int2", 2, "smallint")
INT4 = _t(23, "int4", 4, "integer")
REGPROC = _t(24, "regproc", 4, "regproc")
TEXT = _t(25, "text", -1, "text")
OID = _t(26, "oid", 4, "oid")
JSON = _t(114, "json", -1, "json")
FLOAT4 = _t(700, "float4", 4, "real")
FLOAT8 = _t(701, "float8", 8, "double precision")
UNKNOWN = _t(705, "unknown", -2, "unknown")
BPCHAR = _t(1042, "bpchar", -1, "character")
VARCHAR = _t(1043, "varchar", -1, "character varying")
DATE = _t(1082, "date", 4, "date")
TIME = _t(1083, "time", 8, "time without time zone")
TIMESTAMP = _t(1114, "timestamp", 8, "timestamp without time zone")
TIMESTAMPTZ = _t(1184, "timestamptz", 8, "timestamp with time zone")
INTERVAL = _t(1186, "interval", 16, "interval")
NUMERIC = _t(1700, "numeric", -1, "numeric")
REGCLASS = _t(2205, "regclass", 4, "regclass")
REGTYPE = _t(2206, "regtype", 4, "regtype")
UUID = _t(2950, "uuid", 16, "uuid")
JSONB = _t(3802, "jsonb", -1, "jsonb")

SCALARS: tuple[PgType, ...] = (
    BOOL, BYTEA, CHAR, NAME, INT8, INT2, INT4, REGPROC, TEXT, OID, JSON, FLOAT4, FLOAT8, UNKNOWN,
    BPCHAR, VARCHAR, DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, NUMERIC, REGCLASS, REGTYPE, UUID,
    JSONB,
)  # fmt: skip
_ARRAY_OIDS = {
    16: 1000, 17: 1001, 18: 1002, 19: 1003, 20: 1016, 21: 1005, 23: 1007, 25: 1009, 26: 1028,
    114: 199, 700: 1021, 701: 1022, 1042: 1014, 1043: 1015, 1082: 1182, 1083: 1183, 1114: 1115,
    1184: 1185, 1186: 1187, 1700: 1231, 2950: 2951, 3802: 3807,
}  # fmt: skip
ARRAYS: tuple[PgType, ...] = tuple(
    _t(_ARRAY_OIDS[s.oid], "_" + s.name, -1, s.format_type + "[]", s.oid)
    for s in SCALARS
    if s.oid in _ARRAY_OIDS
)
_BY_OID: dict[int, PgType] = {t.oid: t for t in SCALARS + ARRAYS}
_BY_NAME: dict[str, PgType] = {t.format_type: t for t in SCALARS + ARRAYS}  # a regtype's text

# DuckDB type names (as ``str(description type)`` prints them) -> PostgreSQL type. UINTEGER is
# PostgreSQL's oid, an unsigned 32-bit number: the emulated catalog holds its OIDs as UINTEGER
# (pgcatalog), so that ``pg_type.oid`` is described as oid and ``array_agg(atttypid)`` as oid[], as
# clients expect (asyncpg decodes its type introspection's answer by them). No sink table has a
# UINTEGER column: Spark, which writes them, has no unsigned types.
_DUCKDB: dict[str, PgType] = {
    "BOOLEAN": BOOL,
    "TINYINT": INT2,
    "SMALLINT": INT2,
    "UTINYINT": INT2,
    "INTEGER": INT4,
    "USMALLINT": INT4,
    "BIGINT": INT8,
    "UINTEGER": OID,
    "UBIGINT": NUMERIC,
    "HUGEINT": NUMERIC,
    "UHUGEINT": NUMERIC,
    "VARINT": NUMERIC,
    "BIGNUM": NUMERIC,
    "FLOAT": FLOAT4,
    "DOUBLE": FLOAT8,
    "VARCHAR": TEXT,
    "BLOB": BYTEA,
    "BIT": TEXT,
    "DATE": DATE,
    "TIME": TIME,
    "TIME WITH TIME ZONE": TIME,
    "TIMESTAMP": TIMESTAMP,
    "TIMESTAMP_S": TIMESTAMP,
    "TIMESTAMP_MS": TIMESTAMP,
    "TIMESTAMP_NS": TIMESTAMP,
    "TIMESTAMP WITH TIME ZONE": TIMESTAMPTZ,
    "INTERVAL": INTERVAL,
    "UUID": UUID,
    "JSON": JSON,
    "NULL": TEXT,
    '"NULL"': TEXT,
}
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


def pg_type_by_oid(oid: int) -> PgType:
    """The type of an OID pitstop knows; text for any other (clients read it as a string)."""
    return _BY_OID.get(oid, TEXT)


def pg_type_of(duckdb_type: str) -> PgType:
    """The PostgreSQL type of a DuckDB column type (``BIGINT``, ``DECIMAL(12,2)``, ``INTEGER[]``).

    Nested types with no PostgreSQL equivalent (STRUCT, MAP, UNION) are sent as json text.
    """
    text = str(duckdb_type).strip()
    upper = text.upper()
    if upper.endswith("[]"):
        element = pg_type_of(text[:-2])
        if element.oid in _ARRAY_OIDS:
            return _BY_OID[_ARRAY_OIDS[element.oid]]
        return JSON
    match = _DECIMAL.fullmatch(upper)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        return PgType(
            NUMERIC.oid, "numeric", -1, f"numeric({precision},{scale})", ((precision << 16) | scale) + 4
        )
    if upper.startswith(("STRUCT", "MAP", "UNION")) or re.search(r"\[\d+\]$", upper):
        return JSON
    if upper.startswith("ENUM"):
        return TEXT
    return _DUCKDB.get(upper, TEXT)


def pg_type_of_value(values: list[Any]) -> PgType:
    """The type of a column of Python values (results that do not come from DuckDB: SHOW JOBS...)."""
    for value in values:
        if value is None:
            continue
        if isinstance(value, bool):
            return BOOL
        if isinstance(value, int):
            return INT8
        if isinstance(value, float):
            return FLOAT8
        if isinstance(value, Decimal):
            return NUMERIC
        if isinstance(value, datetime):
            return TIMESTAMPTZ if value.tzinfo is not None else TIMESTAMP
        if isinstance(value, date):
            return DATE
        if isinstance(value, time):
            return TIME
        if isinstance(value, timedelta):
            return INTERVAL
        if isinstance(value, uuid.UUID):
            return UUID
        if isinstance(value, bytes):
            return BYTEA
        return TEXT
    return TEXT


# -- text format ----------------------------------------------------------------------------------
def _text_float(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def _text_float4(value: float) -> str:
    """A real as PostgreSQL prints it: the fewest digits that read back as the same 4-byte float
    (``42331.08``, not the 8-byte float's ``42331.078125``)."""
    if math.isnan(value) or math.isinf(value):
        return _text_float(value)
    single = struct.unpack(">f", struct.pack(">f", value))[0]
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if struct.unpack(">f", struct.pack(">f", float(text)))[0] == single:
            return repr(float(text))
    return repr(single)


def _text_decimal(value: Decimal) -> str:
    if value.is_nan():
        return "NaN"
    if value.is_infinite():
        return "Infinity" if value > 0 else "-Infinity"
    return format(value, "f")


def _text_timestamp(value: datetime, zone: str = "UTC") -> str:
    """As PostgreSQL prints it; a time with a zone in the session's ``TimeZone``, with its offset
    (``+02``, ``+05:30``, ``-02:30``)."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC if zone == "UTC" else ZoneInfo(zone))
        suffix = _offset(value.utcoffset() or timedelta(0))
        value = value.replace(tzinfo=None)
    else:
        suffix = ""
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    if value.year < 1000:
        text = f"{value.year:04d}" + text[text.index("-") :]
    return text + suffix


def _offset(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}"
    if minutes or secs:
        text += f":{minutes:02d}"
    if secs:
        text += f":{secs:02d}"
    return text


def _text_interval(value: timedelta) -> str:
    days, seconds = value.days, value.seconds
    micros = value.microseconds
    negative = days < 0
    if negative:  # PostgreSQL prints -1 days +23:00:00 as "-1 days +23:00:00"; use a plain sign
        total = -(days * 86400_000000 + seconds * 1_000000 + micros)
        days, rest = divmod(total, 86400_000000)
        seconds, micros = divmod(rest, 1_000000)
    hours, rem = divmod(seconds, 3600)
    minutes, secs = divmod(rem, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}" + (f".{micros:06d}".rstrip("0") if micros else "")
    sign = "-" if negative else ""
    if days:
        return f"{sign}{days} day{'s' if days != 1 else ''} {sign}{clock}"
    return f"{sign}{clock}"


def _array_item(value: Any, element: PgType, zone: str) -> str:
    if value is None:
        return "NULL"
    text = _text(value, element, zone)
    if text == "" or any(c in text for c in ' {},"\\') or text.upper() == "NULL":
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _text(value: Any, pgtype: PgType, zone: str = "UTC") -> str:
    if pgtype.is_array and isinstance(value, list | tuple):
        element = _BY_OID[pgtype.element]
        return "{" + ",".join(_array_item(v, element, zone) for v in value) + "}"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, float):
        return _text_float4(value) if pgtype.oid == FLOAT4.oid else _text_float(value)
    if isinstance(value, Decimal):
        return _text_decimal(value)
    if isinstance(value, datetime):
        return _text_timestamp(value, zone)
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return _text_interval(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=str)
    return str(value)


# -- binary format --------------------------------------------------------------------------------
def _bin_numeric(value: Any) -> bytes:
    dec = Decimal(value)
    if dec.is_nan():
        return struct.pack(">hhHh", 0, 0, 0xC000, 0)
    if dec.is_infinite():  # PostgreSQL 14's NUMERIC_PINF / NUMERIC_NINF
        return struct.pack(">hhHh", 0, 0, 0xD000 if dec > 0 else 0xF000, 0)
    sign, digits, exponent = dec.as_tuple()
    assert isinstance(exponent, int)
    dscale = max(-exponent, 0)
    # Group the decimal digits in base 10000 around the decimal point. The digits after the point
    # are the last ``dscale`` ones, with zeros in front when there are fewer digits than that
    # (0.0001 is digits "1", exponent -4: fraction "0001").
    text = "".join(map(str, digits))
    if exponent > 0:
        text += "0" * exponent
    text = text.zfill(dscale)
    int_part = text[: len(text) - dscale]
    frac_part = text[len(text) - dscale :]
    int_part = int_part.lstrip("0")
    int_part = "0" * (-len(int_part) % 4) + int_part
    frac_part = frac_part + "0" * (-len(frac_part) % 4)
    groups = [int(int_part[i : i + 4]) for i in range(0, len(int_part), 4)]
    weight = len(groups) - 1
    groups += [int(frac_part[i : i + 4]) for i in range(0, len(frac_part), 4)]
    while groups and groups[0] == 0:  # leading zero groups move the weight
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    return struct.pack(f">hhHh{len(groups)}H", len(groups), weight, 0x4000 if sign else 0, dscale, *groups)


def _micros(delta: timedelta) -> int:
    return (delta.days * 86400 + delta.seconds) * 1_000000 + delta.microseconds


def _bin_timestamp(value: datetime) -> bytes:
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return struct.pack(">q", _micros(value - PG_EPOCH))


def _bin_time(value: time) -> bytes:
    return struct.pack(
        ">q", ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000000 + value.microsecond
    )


def _bin_interval(value: timedelta) -> bytes:
    return struct.pack(">qii", value.seconds * 1_000000 + value.microseconds, value.days, 0)


def _bin_text(value: Any) -> bytes:
    if isinstance(value, dict | list):
        return json.dumps(value, default=str).encode()
    return str(value).encode()


_BINARY: dict[int, Callable[[Any], bytes]] = {
    16: lambda v: b"\x01" if v else b"\x00",
    17: bytes,
    18: lambda v: str(v).encode()[:1],
    19: _bin_text,
    20: lambda v: struct.pack(">q", int(v)),
    21: lambda v: struct.pack(">h", int(v)),
    23: lambda v: struct.pack(">i", int(v)),
    24: lambda v: struct.pack(">I", int(v)),
    25: _bin_text,
    26: lambda v: struct.pack(">I", int(v)),
    114: _bin_text,
    700: lambda v: struct.pack(">f", float(v)),
    701: lambda v: struct.pack(">d", float(v)),
    705: _bin_text,
    1042: _bin_text,
    1043: _bin_text,
    1082: lambda v: struct.pack(">i", (v - PG_EPOCH_DATE).days),
    1083: _bin_time,
    1114: _bin_timestamp,
    1184: _bin_timestamp,
    1186: _bin_interval,
    1700: _bin_numeric,
    2205: lambda v: struct.pack(">I", int(v)),
    2206: lambda v: struct.pack(">I", v if isinstance(v, int) else _BY_NAME.get(str(v), TEXT).oid),
    2950: lambda v: (v if isinstance(v, uuid.UUID) else uuid.UUID(str(v))).bytes,
    3802: lambda v: b"\x01" + _bin_text(v),
}


def _bin_array(value: list[Any], pgtype: PgType) -> bytes:
    element = pgtype.element
    items = [None if v is None else _binary(v, _BY_OID[element]) for v in value]
    head = struct.pack(">iiiii", 1, int(any(i is None for i in items)), element, len(items), 1)
    if not items:
        return struct.pack(">iii", 0, 0, element)
    body = b"".join(struct.pack(">i", -1) if i is None else struct.pack(">i", len(i)) + i for i in items)
    return head + body


def _binary(value: Any, pgtype: PgType) -> bytes:
    if pgtype.is_array:
        return _bin_array(list(value), pgtype)
    encoder = _BINARY.get(pgtype.oid, _bin_text)
    return encoder(value)


def encode(value: Any, pgtype: PgType, binary: bool = False, zone: str = "UTC") -> bytes | None:
    """One value in PostgreSQL's text or binary format (None stays NULL); ``zone``: the session's
    ``TimeZone``, in which a time with a zone is printed (the binary format is UTC)."""
    if value is None:
        return None
    if binary:
        return _binary(value, pgtype)
    return _text(value, pgtype, zone).encode()
