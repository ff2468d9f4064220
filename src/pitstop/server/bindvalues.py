"""The values of Bind's parameters, read from the text or binary format the client sent them in.

A client controls every byte here, so a value that cannot be read is an ErrorResponse with
PostgreSQL's SQLSTATE and the session goes on; never an exception that closes the connection:

- 22P02 invalid_text_representation: a text value that does not parse as its type;
- 22P03 invalid_binary_representation: a binary value of the wrong length, or malformed.
  PostgreSQL 15 answers a value *shorter* than its type with 08P01 ("insufficient data left in
  message", measured); pitstop answers 22P03 for it too: the value is what is wrong, and drivers
  and pools take a class 08 code for a broken connection (pgjdbc, HikariCP drop it);
- 22008 datetime_field_overflow: a date or time PostgreSQL holds but pitstop cannot (infinity,
  a year past 9999, 24:00:00), as PostgreSQL answers a date or time it cannot hold;
- 22021 character_not_in_repertoire: text that is not UTF-8.

An array (``$1::oid[]``, ``$1::int4[]``: asyncpg binds a list in binary) is read into a list, in
either format, its elements by the rules above; DuckDB binds a list as a LIST.

Binary values of a fixed size are read by psycopg's loaders (``psycopg.adapters``: the C ones with
``psycopg[binary]``), after their length is checked here: the loaders are written for what a
PostgreSQL server sends, and read as many bytes as their type has without counting what they were
given (an int4 loader given 2 bytes reads past them). numeric is read here, after PostgreSQL's
``numeric_recv``: psycopg's loader also trusts the digit count, and raises ValueError for a value
whose scale hides some of its digits (PostgreSQL truncates them).
"""

from __future__ import annotations

import math
import re
import struct
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import psycopg
from psycopg.abc import Loader
from psycopg.pq import Format

from pitstop.server import sqlstate
from pitstop.server.pgtypes import pg_type_by_oid
from pitstop.server.sqlstate import WireError

_BINARY_HINT = "send the value in PostgreSQL's binary format of its type, or in text format"
_RANGE_HINT = (
    "pitstop holds dates and timestamps from year 1 to 9999 (no infinity) and times up to "
    "23:59:59.999999; send a value in that range"
)


class Bound(list[Any]):
    """Bind's parameter values, decoded, and the type OIDs the client declared for them (0: left
    to the server): psycopg declares a small Python int ``int2``, and ``%s / %s`` of two is then
    PostgreSQL's int2 division (:func:`pitstop.server.paramtypes.of_values`)."""

    def __init__(self, values: list[Any], oids: Sequence[int]) -> None:
        super().__init__(values)
        self.oids = tuple(oids)


def decode_params(values: Sequence[bytes | None], oids: Sequence[int], binary: Sequence[bool]) -> Bound:
    """Bind's parameter values as Python values (unknown types stay text, for DuckDB to cast).

    Raises WireError, naming the parameter, for the first value that cannot be read.
    """
    decoded = [
        None if data is None else _decode(bytes(data), oid, is_binary, f"bind parameter {number}")
        for number, (data, oid, is_binary) in enumerate(zip(values, oids, binary, strict=True), start=1)
    ]
    return Bound(decoded, oids)


def _decode(data: bytes, oid: int, binary: bool, where: str) -> Any:
    element = pg_type_by_oid(oid).element
    if element:
        return (
            _binary_array(data, element, where) if binary else _text_array(_utf8(data, where), element, where)
        )
    if not binary:
        return _from_text(_utf8(data, where), oid, where)
    if oid in _SIZES:
        return _fixed_size(data, oid, where)
    if oid == 1700:
        return _numeric(data, where)
    if oid == 3802:
        if not data or data[0] != 1:
            found = f"version number {data[0]}" if data else "an empty value"
            raise _malformed(where, f"a binary jsonb starts with its jsonb version number, 1; got {found}")
        return _utf8(data[1:], where)
    if oid == 17:
        return data
    return _utf8(data, where)  # text, varchar, name, json...: their binary format is their text


def _malformed(where: str, detail: str) -> WireError:
    return WireError(
        sqlstate.INVALID_BINARY_REPRESENTATION,
        f"incorrect binary data format in {where}: {detail}",
        hint=_BINARY_HINT,
    )


def _utf8(data: bytes, where: str) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        bad = " ".join(f"0x{b:02x}" for b in exc.object[exc.start : exc.end])
        raise WireError(
            sqlstate.CHARACTER_NOT_IN_REPERTOIRE,
            f'invalid byte sequence for encoding "UTF8": {bad} in {where}',
            hint="pitstop speaks UTF-8 only (client_encoding UTF8)",
        ) from None


# -- binary, fixed size: psycopg's loaders --------------------------------------------------------
_SIZES = {16: 1, 20: 8, 21: 2, 23: 4, 26: 4, 700: 4, 701: 8, 1082: 4, 1083: 8, 1114: 8, 1184: 8, 2950: 16}
_DATETIMES = {1082: "date", 1083: "time", 1114: "timestamp", 1184: "timestamp"}


def _loader(oid: int) -> Loader:
    cls = psycopg.adapters.get_loader(oid, Format.BINARY)
    assert cls is not None, f"psycopg has no binary loader for type {oid}"
    return cls(oid)


_LOADERS = {oid: _loader(oid) for oid in _SIZES}  # stateless: shared by the connections' threads


def _fixed_size(data: bytes, oid: int, where: str) -> Any:
    size = _SIZES[oid]
    if len(data) != size:
        name = pg_type_by_oid(oid).format_type
        unit = "byte" if size == 1 else "bytes"
        raise _malformed(where, f"a binary {name} is {size} {unit}, this one is {len(data)}")
    try:
        return _LOADERS[oid].load(data)
    except psycopg.DataError:  # a date or time past Python's (see _beyond)
        raise WireError(
            sqlstate.DATETIME_FIELD_OVERFLOW,
            f"{_DATETIMES[oid]} out of range in {where}: {_beyond(oid, data)}",
            hint=_RANGE_HINT,
        ) from None


def _beyond(oid: int, data: bytes) -> str:
    """What a date or time that pitstop cannot hold is, in words (PostgreSQL's infinities are the
    largest and smallest values of the type's integer)."""
    value = int.from_bytes(data, "big", signed=True)
    largest = 2 ** (8 * len(data) - 1) - 1
    if value == largest:
        return "infinity"
    if value == -largest - 1:
        return "-infinity"
    if oid == 1083:
        return "before 00:00:00" if value < 0 else "24:00:00 or later"
    return "before year 1" if value < 0 else "after year 9999"


# -- binary numeric -------------------------------------------------------------------------------
_NUMERIC_SIGNS = {0x0000: "", 0x4000: "-", 0xC000: "NaN", 0xD000: "Infinity", 0xF000: "-Infinity"}


def _numeric(data: bytes, where: str) -> Decimal:
    """numeric's send format: ``ndigits, weight, sign, dscale`` (16 bits each), then ``ndigits``
    base-10000 digits, the first one worth 10000^weight; read as ``numeric_recv`` reads it."""
    if len(data) < 8:
        raise _malformed(where, f"a binary numeric has an 8-byte header, this one is {len(data)} bytes")
    ndigits, weight, sign, dscale = struct.unpack_from(">HhHH", data)
    if len(data) != 8 + 2 * ndigits:
        plural = "digit" if ndigits == 1 else "digits"
        raise _malformed(
            where, f"the numeric's header counts {ndigits} {plural} of 2 bytes, {len(data) - 8} bytes follow"
        )
    if sign not in _NUMERIC_SIGNS:
        raise _malformed(where, 'invalid sign in external "numeric" value')
    if dscale & 0x3FFF != dscale:
        raise _malformed(where, 'invalid scale in external "numeric" value')
    digits = struct.unpack_from(f">{ndigits}H", data, 8)
    if any(d >= 10000 for d in digits):
        raise _malformed(where, 'invalid digit in external "numeric" value')
    if sign not in (0x0000, 0x4000):
        return Decimal(_NUMERIC_SIGNS[sign])
    # The decimal digits, the last one worth 10^exponent; then exactly ``dscale`` places after the
    # point: digits the scale hides are truncated (as PostgreSQL does), missing ones are zeros. The
    # Decimal is made from a tuple, exact whatever the decimal context's precision.
    text = "".join(f"{d:04d}" for d in digits)
    exponent = 4 * (weight + 1 - ndigits)
    if exponent < -dscale:
        text = text[: len(text) - (-dscale - exponent)]
    else:
        text += "0" * (exponent + dscale)
    return Decimal((sign == 0x4000, tuple(map(int, text or "0")), -dscale))


# -- arrays ---------------------------------------------------------------------------------------
def _binary_array(data: bytes, element: int, where: str) -> list[Any]:
    """array_send's format: ``ndim, has-nulls flag, element OID`` (32 bits each), a ``length,
    lower bound`` pair per dimension, then each element as its length (-1: NULL) and bytes."""
    if len(data) < 12:
        raise _malformed(where, f"a binary array has a 12-byte header, this one is {len(data)} bytes")
    ndim, _, sent = struct.unpack_from(">iiI", data)
    if ndim == 0:
        return []
    if not 0 < ndim <= 6 or len(data) < 12 + 8 * ndim:  # PostgreSQL's MAXDIM is 6
        raise _malformed(where, f"a binary array of {ndim} dimensions")
    if sent != element:
        name = pg_type_by_oid(element).format_type
        raise _malformed(where, f"an array of {name} holds elements of type OID {sent}")
    dims = [struct.unpack_from(">i", data, 12 + 8 * i)[0] for i in range(ndim)]
    offset = 12 + 8 * ndim
    items: list[Any] = []
    for _ in range(math.prod(dims)):
        if offset + 4 > len(data):
            raise _malformed(where, "the array ends before its last element")
        (size,) = struct.unpack_from(">i", data, offset)
        offset += 4
        if size < 0:
            items.append(None)
            continue
        if offset + size > len(data):
            raise _malformed(where, "the array ends inside an element")
        items.append(_decode(data[offset : offset + size], element, True, where))
        offset += size
    for size in reversed(dims[1:]):  # nested lists, innermost dimension first
        items = [items[i : i + size] for i in range(0, len(items), size)]
    return items


_ARRAY_ITEM = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^,{}"]*?))\s*(?=[,}])', re.S)


def _text_array(text: str, element: int, where: str) -> list[Any]:
    """An array literal, ``{1,2,NULL}`` or ``{{"a b",c},{d,e}}``, its items read as ``element``."""

    def items(pos: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        if text[pos : pos + 1] != "{":
            raise ValueError
        pos += 1
        while True:
            while text[pos : pos + 1].isspace():
                pos += 1
            if text[pos : pos + 1] == "}" and not out:
                return out, pos + 1
            if text[pos : pos + 1] == "{":
                nested, pos = items(pos)
                out.append(nested)
            else:
                found = _ARRAY_ITEM.match(text, pos)
                if found is None:
                    raise ValueError
                quoted, bare = found.groups()
                if quoted is not None:
                    out.append(_from_text(re.sub(r"\\(.)", r"\1", quoted), element, where))
                elif bare.upper() == "NULL":
                    out.append(None)
                else:
                    out.append(_from_text(bare, element, where))
                pos = found.end()
            while text[pos : pos + 1].isspace():
                pos += 1
            if text[pos : pos + 1] == "}":
                return out, pos + 1
            if text[pos : pos + 1] != ",":
                raise ValueError
            pos += 1

    try:
        start = len(text) - len(text.lstrip())
        value, end = items(start)
        if text[end:].strip():
            raise ValueError
    except (ValueError, IndexError):
        raise WireError(
            sqlstate.INVALID_TEXT_REPRESENTATION,
            f'malformed array literal in {where}: "{text}"',
            hint='write an array as PostgreSQL does: {1,2,3} or {"a b",NULL}',
        ) from None
    return value


# -- text -----------------------------------------------------------------------------------------
def _parse_timestamp(text: str) -> datetime:
    text = text.strip().replace("T", " ")
    tz = None
    match = re.search(r"([+-]\d{2})(?::?(\d{2}))?$", text)
    if match and " " in text and text.rfind(match.group(0)) > text.index(" "):
        text = text[: match.start()]
        hours, minutes = int(match.group(1)), int(match.group(2) or 0)
        sign = -1 if hours < 0 or match.group(1).startswith("-") else 1
        tz = timedelta(hours=abs(hours), minutes=minutes) * sign
    value = datetime.fromisoformat(text)
    if tz is not None:
        value = (value - tz).replace(tzinfo=UTC)
    return value


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("t", "true", "y", "yes", "on", "1"):
        return True
    if lowered in ("f", "false", "n", "no", "off", "0"):
        return False
    raise ValueError(f'invalid input syntax for type boolean: "{text}"')


_TEXT_PARSERS: dict[int, Callable[[str], Any]] = {
    16: _parse_bool,
    20: int,
    21: int,
    23: int,
    26: int,
    700: float,
    701: float,
    1700: Decimal,
    1082: date.fromisoformat,
    1083: time.fromisoformat,
    1114: _parse_timestamp,
    1184: _parse_timestamp,
    2950: uuid.UUID,
}


def _from_text(text: str, oid: int, where: str) -> Any:
    parser = _TEXT_PARSERS.get(oid)
    if parser is None:
        return text
    try:
        return parser(text)
    except (ValueError, InvalidOperation):
        name = pg_type_by_oid(oid).format_type
        raise WireError(
            sqlstate.INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type {name}: "{text}"'
        ) from None
    except OverflowError:  # a time zone moved a timestamp past Python's years 1 to 9999
        raise WireError(
            sqlstate.DATETIME_FIELD_OVERFLOW,
            f"{_DATETIMES[oid]} out of range in {where}: {text}",
            hint=_RANGE_HINT,
        ) from None
