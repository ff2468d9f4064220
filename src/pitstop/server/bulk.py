"""Result rows to DataRow messages a batch at a time: DuckDB's Arrow batches, encoded with NumPy.

Encoding value by value in Python (``pgtypes.encode`` and a ``struct.pack`` per field) sent about
120,000 rows/s to psycopg, a tenth of what PostgreSQL sends on the same machine. Here a query's
rows come from DuckDB as Arrow record batches and each column is turned into its PostgreSQL text
or binary form a whole column at once: digits, dates and timestamps written into a byte matrix by
NumPy arithmetic (Arrow's own strftime and decimal text are slow or print otherwise), fixed-size
binary values by a big-endian view. Arrow's ``binary_join_element_wise`` then joins each row's
pieces — ``'D'``, length, field count, and each field's length and bytes — into the batch's
messages, back to back in one buffer.

Only columns whose encoding here is byte for byte what ``pgtypes.encode`` gives are taken (the
test suite compares the two on edge values); a result with any other column — intervals, lists,
uuids, blobs, ... — goes the value-by-value way, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pitstop.server import pgtypes
from pitstop.server.pgtypes import PgType

__all__ = ["RowEncoder"]

_PG_EPOCH_S = 946_684_800  # 2000-01-01 in Unix seconds
_PG_EPOCH_DAYS = 10_957
_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1}

Field = tuple[np.ndarray, pa.Array]
"""A column's fields: the length of each (int64, -1 for NULL) and their bytes (a large_binary
array; a NULL is null or empty there)."""
Encode = Callable[[pa.Array], Field]
_EMPTY = pa.scalar(b"", pa.large_binary())


def _variable(arr: pa.Array) -> Field:
    """The fields of a string or binary array, as they are."""
    arr = arr.cast(pa.large_binary())
    lengths = pc.binary_length(arr).to_numpy(zero_copy_only=False)
    if arr.null_count:
        lengths = np.where(arr.is_null().to_numpy(zero_copy_only=False), -1, lengths)
    return lengths.astype(np.int64, copy=False), arr


def _binary_array(data: np.ndarray, widths: np.ndarray) -> pa.Array:
    """A large_binary array of consecutive pieces of ``data``, ``widths`` bytes each."""
    offsets = np.zeros(len(widths) + 1, dtype=np.int64)
    np.cumsum(widths, out=offsets[1:])
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    return pa.Array.from_buffers(pa.large_binary(), len(widths), buffers)


def _rows(chars: np.ndarray, widths: np.ndarray, arr: pa.Array, right: bool = False) -> Field:
    """A field per row of ``chars``: its first (or, ``right``, last) ``widths`` bytes, or NULL
    where ``arr`` is."""
    lengths = widths.astype(np.int64)
    if arr.null_count:
        lengths = np.where(arr.is_null().to_numpy(zero_copy_only=False), -1, lengths)
    width = chars.shape[1]
    if not arr.null_count and (lengths == width).all():
        return lengths, _binary_array(chars.reshape(-1), lengths)
    columns = np.arange(width)[None, :]
    if right:
        keep = (columns >= width - lengths[:, None]) & (lengths[:, None] >= 0)
    else:
        keep = columns < lengths[:, None]
    return lengths, _binary_array(chars[keep], np.maximum(lengths, 0))


def _fixed(values: np.ndarray, arr: pa.Array, big_endian: str) -> Field:
    """Fixed-size fields: ``values`` (one per row) in the big-endian dtype ``big_endian``."""
    width = np.dtype(big_endian).itemsize
    chars = np.ascontiguousarray(values.astype(big_endian)).view(np.uint8).reshape(len(arr), width)
    return _rows(chars, np.full(len(arr), width), arr)


def _numbers(arr: pa.Array, dtype: str) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, 0).to_numpy(zero_copy_only=False)).astype(dtype, copy=False)


def _micros(arr: pa.Array) -> np.ndarray:
    """Microseconds since 1970 of a timestamp array (s, ms or us), in UTC."""
    unit = arr.type.unit
    return _numbers(arr.cast(pa.int64()), "int64") * _MICROS[unit]


# -- text format ----------------------------------------------------------------------------------
def _text_bool(arr: pa.Array) -> Field:
    return _variable(pc.if_else(arr, "t", "f"))


def _text_cast(arr: pa.Array) -> Field:
    return _variable(pc.cast(arr, pa.large_string()))


def _civil(days: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Year, month and day of days since 1970-01-01 (proleptic Gregorian; H. Hinnant's
    ``civil_from_days``, in NumPy)."""
    z = days + 719_468
    era = np.floor_divide(z, 146_097)
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = np.where(mp < 10, mp + 3, mp - 9)
    return yoe + era * 400 + (month <= 2), month, day


def _digits(out: np.ndarray, column: int, values: np.ndarray, width: int) -> None:
    """``values`` as zero-padded decimal digits in ``out[:, column : column + width]``."""
    for i in range(width):
        out[:, column + width - 1 - i] = ord("0") + (values // 10**i) % 10


def _date_chars(out: np.ndarray, days: np.ndarray) -> None:
    """``YYYY-MM-DD`` into the first 10 columns of ``out`` (years 1 to 9999, as pgtypes prints)."""
    year, month, day = _civil(days)
    _digits(out, 0, year, 4)
    out[:, 4] = out[:, 7] = ord("-")
    _digits(out, 5, month, 2)
    _digits(out, 8, day, 2)


def _text_date(arr: pa.Array) -> Field:
    days = _numbers(arr.cast(pa.int32()), "int64")
    chars = np.empty((len(arr), 10), dtype=np.uint8)
    _date_chars(chars, days)
    return _rows(chars, np.full(len(arr), 10), arr)


def _text_timestamp(suffix: str) -> Encode:
    """``YYYY-MM-DD HH:MM:SS``, then ``.ffffff`` without trailing zeros when there is a fraction,
    then ``+00`` for timestamptz (in UTC): ``pgtypes._text_timestamp``. Arrow's strftime formats
    through a C++ stream per value (it was half the time of a streamed SELECT); this writes the
    digits of whole columns with NumPy."""
    tail = np.frombuffer(suffix.encode(), dtype=np.uint8)

    def encode(arr: pa.Array) -> Field:
        n = len(arr)
        micros = _micros(arr)
        seconds = np.floor_divide(micros, 1_000_000)
        fraction = micros - seconds * 1_000_000
        days = np.floor_divide(seconds, 86_400)
        clock = seconds - days * 86_400
        chars = np.empty((n, 26 + len(tail)), dtype=np.uint8)
        _date_chars(chars, days)
        chars[:, 10] = ord(" ")
        _digits(chars, 11, clock // 3600, 2)
        chars[:, 13] = chars[:, 16] = ord(":")
        _digits(chars, 14, clock // 60 % 60, 2)
        _digits(chars, 17, clock % 60, 2)
        chars[:, 19] = ord(".")
        _digits(chars, 20, fraction, 6)
        zeros = sum((fraction % 10**k == 0).astype(np.int64) for k in range(1, 7))
        dotted = np.where(fraction == 0, 0, 7 - zeros)  # ".", then the digits up to the last non-zero
        widths = 19 + dotted + len(tail)
        if len(tail):
            rows = np.arange(n)
            for j, byte in enumerate(tail):
                chars[rows, 19 + dotted + j] = byte
        return _rows(chars, widths, arr)

    return encode


def _text_decimal(arr: pa.Array) -> Field:
    """Decimals as ``format(value, "f")`` prints them (Arrow's own text turns 1E-10 scientific):
    digits written from the unscaled integer when it fits in 64 bits (precision <= 18), else value
    by value."""
    precision, scale = arr.type.precision, arr.type.scale
    if precision > 18 or not pa.types.is_decimal128(arr.type):
        texts = [None if v is None else pgtypes._text_decimal(v) for v in arr.to_pylist()]
        return _variable(pa.array(texts, pa.large_string()))
    n = len(arr)
    unscaled = _unscaled(arr)
    magnitude = np.abs(unscaled)
    whole, fraction = np.divmod(magnitude, 10**scale)
    point = 1 + 18  # a sign, then up to 18 integer digits (right-aligned), then '.' and the scale
    chars = np.empty((n, point + (1 + scale if scale else 0)), dtype=np.uint8)
    _digits(chars, 1, whole, 18)
    if scale:
        chars[:, point] = ord(".")
        _digits(chars, point + 1, fraction, scale)
    count = 1 + sum((whole >= 10**k).astype(np.int64) for k in range(1, 18))
    negative = unscaled < 0
    chars[np.arange(n), point - count - 1] = np.where(negative, ord("-"), ord(" "))
    widths = count + negative + (1 + scale if scale else 0)
    return _rows(chars, widths, arr, right=True)


def _text_float(arr: pa.Array) -> Field:
    # Arrow prints floats its own way (1.0 as "1"): the exact text is Python's, as pgtypes gives it.
    texts = [None if v is None else pgtypes._text_float(v) for v in arr.to_pylist()]
    return _variable(pa.array(texts, pa.large_string()))


def _text_float4(arr: pa.Array) -> Field:
    texts = [None if v is None else pgtypes._text_float4(v) for v in arr.to_pylist()]
    return _variable(pa.array(texts, pa.large_string()))


# -- binary format --------------------------------------------------------------------------------
def _binary_numeric(arr: pa.Array) -> Field:
    """PostgreSQL's numeric send format (``pgtypes._bin_numeric``): int16 count of base-10000
    digit groups, int16 weight of the first, int16 sign, int16 display scale, then the groups
    without leading or trailing zero ones. Written from the unscaled integer of a decimal of
    precision <= 18; others value by value."""
    if not pa.types.is_decimal128(arr.type) or arr.type.precision > 18:
        values = [None if v is None else pgtypes._bin_numeric(v) for v in arr.to_pylist()]
        return _variable(pa.array(values, pa.large_binary()))
    n, scale = len(arr), arr.type.scale
    unscaled = _unscaled(arr)
    whole, fraction = np.divmod(np.abs(unscaled), 10**scale)
    tail = -(-scale // 4)  # fraction groups
    groups = np.empty((n, 5 + tail), dtype=np.int64)  # weights 4 .. -tail; whole < 10**18
    for i in range(5):
        groups[:, 4 - i] = whole // 10_000**i % 10_000
    for j in range(tail):
        below = scale - 4 * (j + 1)  # fraction digits after this group
        if below >= 0:
            groups[:, 5 + j] = fraction // 10**below % 10_000
        else:  # the last group, filled with zeros on the right (taken before scaling: no overflow)
            groups[:, 5 + j] = fraction % 10 ** (4 + below) * 10**-below
    nonzero = groups != 0
    first = np.where(nonzero.any(axis=1), nonzero.argmax(axis=1), 0)
    count = np.where(nonzero.any(axis=1), groups.shape[1] - nonzero[:, ::-1].argmax(axis=1) - first, 0)
    head = np.stack([count, np.where(count > 0, 4 - first, 0), np.where(unscaled < 0, 0x4000, 0)], axis=1)
    chars = np.empty((n, 8 + 2 * groups.shape[1]), dtype=np.uint8)
    chars[:, 0:6] = head.astype(">i2").view(np.uint8).reshape(n, 6)
    chars[:, 6:8] = np.array([scale], dtype=">i2").view(np.uint8)
    chars[:, 8:] = groups.astype(">u2").view(np.uint8).reshape(n, -1)
    position = (np.arange(chars.shape[1])[None, :] - 8) // 2
    keep = (position < 0) | ((position >= first[:, None]) & (position < (first + count)[:, None]))
    lengths = 8 + 2 * count
    if arr.null_count:
        lengths = np.where(arr.is_null().to_numpy(zero_copy_only=False), -1, lengths)
        keep &= (lengths >= 0)[:, None]
    return lengths, _binary_array(chars[keep], np.maximum(lengths, 0))


def _unscaled(arr: pa.Array) -> np.ndarray:
    """The unscaled integers of a decimal128 array of precision <= 18 (0 where NULL)."""
    words = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=2 * (arr.offset + len(arr)))
    return words[2 * arr.offset :: 2]  # the low word; the high one only repeats the sign


def _binary_number(big_endian: str) -> Encode:
    return lambda arr: _fixed(_numbers(arr, big_endian.replace(">", "=")), arr, big_endian)


def _binary_bool(arr: pa.Array) -> Field:
    return _fixed(_numbers(arr.cast(pa.uint8()), "uint8"), arr, "u1")


def _binary_date(arr: pa.Array) -> Field:
    return _fixed(_numbers(arr.cast(pa.int32()), "int32") - _PG_EPOCH_DAYS, arr, ">i4")


def _binary_timestamp(arr: pa.Array) -> Field:
    return _fixed(_micros(arr) - _PG_EPOCH_S * 1_000_000, arr, ">i8")


_INTEGERS = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "HUGEINT"}
)
_TIMESTAMPS = frozenset({"TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS"})
_BIG_ENDIAN = {
    pgtypes.INT2.oid: ">i2",
    pgtypes.INT4.oid: ">i4",
    pgtypes.INT8.oid: ">i8",
    pgtypes.OID.oid: ">u4",  # DuckDB's UINTEGER (pgtypes)
    pgtypes.FLOAT4.oid: ">f4",
    pgtypes.FLOAT8.oid: ">f8",
}


def _encoder(duckdb_type: str, pgtype: PgType, binary: bool) -> Encode | None:
    """How to encode a DuckDB column of ``duckdb_type`` sent as ``pgtype``; None: value by value."""
    name = duckdb_type.upper()
    oid = pgtype.oid
    if name == "VARCHAR" and oid == pgtypes.TEXT.oid:
        return _variable
    if name == "BOOLEAN" and oid == pgtypes.BOOL.oid:
        return _binary_bool if binary else _text_bool
    if name == "DATE" and oid == pgtypes.DATE.oid:
        return _binary_date if binary else _text_date
    if binary:
        if (name in _INTEGERS or name in ("FLOAT", "DOUBLE")) and oid in _BIG_ENDIAN:
            return _binary_number(_BIG_ENDIAN[oid])
        if oid == pgtypes.NUMERIC.oid and (name in _INTEGERS or name.startswith("DECIMAL(")):
            return _binary_numeric
        if (name in _TIMESTAMPS and oid == pgtypes.TIMESTAMP.oid) or (
            name == "TIMESTAMP WITH TIME ZONE" and oid == pgtypes.TIMESTAMPTZ.oid
        ):
            return _binary_timestamp
        return None
    if name.startswith("DECIMAL(") and oid == pgtypes.NUMERIC.oid:
        return _text_decimal
    if name in _INTEGERS and oid in (*_BIG_ENDIAN, pgtypes.NUMERIC.oid):
        return _text_cast
    if name in ("FLOAT", "DOUBLE") and oid == pgtypes.FLOAT4.oid:
        return _text_float4
    if name in ("FLOAT", "DOUBLE") and oid == pgtypes.FLOAT8.oid:
        return _text_float
    if name in _TIMESTAMPS and oid == pgtypes.TIMESTAMP.oid:
        return _text_timestamp("")
    if name == "TIMESTAMP WITH TIME ZONE" and oid == pgtypes.TIMESTAMPTZ.oid:
        return _text_timestamp("+00")
    return None


class RowEncoder:
    """The DataRow messages of a result's batches, for one set of columns and formats."""

    def __init__(self, encoders: list[Encode]) -> None:
        self._encoders = encoders

    @classmethod
    def of(
        cls, duckdb_types: Sequence[str], types: Sequence[PgType], binary: Sequence[bool], zone: str = "UTC"
    ) -> RowEncoder | None:
        """The encoder of a result, or None when a column must be encoded value by value (here: a
        time with a zone in text, when the session's ``TimeZone`` is not UTC)."""
        if not (len(duckdb_types) == len(types) == len(binary)):
            return None
        encoders = []
        for duckdb_type, pgtype, is_binary in zip(duckdb_types, types, binary, strict=True):
            if zone != "UTC" and pgtype.oid == pgtypes.TIMESTAMPTZ.oid and not is_binary:
                return None
            encode = _encoder(duckdb_type, pgtype, is_binary)
            if encode is None:
                return None
            encoders.append(encode)
        return cls(encoders)

    def encode(self, batch: pa.RecordBatch) -> bytes | memoryview:
        """The DataRow messages of every row of ``batch``, back to back: Arrow joins each row's
        pieces (``'D'``, length and field count; then each field's length and bytes)."""
        n = batch.num_rows
        if n == 0:
            return b""
        fields = [encode(column) for encode, column in zip(self._encoders, batch.columns, strict=True)]
        size = np.full(n, 4 + 2 + 4 * len(fields), dtype=np.int64)  # the message's length
        pieces = []
        for lengths, data in fields:
            size += np.maximum(lengths, 0)
            pieces += [_int32s(lengths), data]
        head = np.empty((n, 7), dtype=np.uint8)
        head[:, 0] = ord("D")
        head[:, 1:5] = size.astype(">i4").view(np.uint8).reshape(n, 4)
        head[:, 5] = len(fields) >> 8
        head[:, 6] = len(fields) & 0xFF
        joined = pc.binary_join_element_wise(
            _binary_array(head.reshape(-1), np.full(n, 7)),
            *pieces,
            _EMPTY,
            null_handling="replace",
            null_replacement=b"",
        )
        offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64, count=n + 1, offset=joined.offset * 8)
        return memoryview(joined.buffers()[2])[offsets[0] : offsets[-1]]


def _int32s(values: np.ndarray) -> pa.Array:
    """Big-endian int32 ``values`` as 4-byte pieces."""
    return _binary_array(values.astype(">i4").view(np.uint8), np.full(len(values), 4))
