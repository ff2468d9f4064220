"""The server's batch encoder (server/bulk.py) against the value-by-value encoder (pgtypes).

Every result column the batch encoder takes must come out byte for byte as ``pgtypes.encode``
gives it, in text and in binary, on edge values: NULLs, extremes of each integer width, negative
and wide decimals, floats PostgreSQL prints specially, dates and timestamps before 1970 and
before the year 1000, fractions of a second, time zones. No server and no Spark: a real DuckDB.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from pitstop.server.bulk import RowEncoder
from pitstop.server.pgtypes import encode, pg_type_of
from pitstop.server.replies import data_row

COLUMNS = {
    "b": "BOOLEAN",
    "ti": "TINYINT",
    "si": "SMALLINT",
    "i": "INTEGER",
    "bi": "BIGINT",
    "ut": "UTINYINT",
    "us": "USMALLINT",
    "ui": "UINTEGER",
    "ub": "UBIGINT",
    "hi": "HUGEINT",
    "d": "DECIMAL(12,2)",
    "wd": "DECIMAL(38,10)",
    "f": "FLOAT",
    "db": "DOUBLE",
    "v": "VARCHAR",
    "dt": "DATE",
    "ts": "TIMESTAMP",
    "tss": "TIMESTAMP_S",
    "tsm": "TIMESTAMP_MS",
    "tz": "TIMESTAMPTZ",
}
ROWS = [
    "true, -128, -32768, -2147483648, -9223372036854775808, 0, 0, 0, 0, "
    "-170141183460469231731687303715884105727, "
    "-0.50, -12345678901234567890.0123456789, -1.5, -0.0, '', '0044-03-15', '0044-03-15 01:02:03.000001', "
    "'1969-12-31 23:59:59', '1969-12-31 23:59:59.999', '1969-12-31 23:59:59.999999+00'",
    "false, 127, 32767, 2147483647, 9223372036854775807, 255, 65535, 4294967295, 18446744073709551615, "
    "170141183460469231731687303715884105727, 9999999999.99, 0.0000000001, 0.1, 1e300, "
    "'ünïcode ✓ \"q\" ''s', "
    "'9999-12-31', '9999-12-31 23:59:59.5', '2024-02-29 12:00:00', '2024-02-29 12:00:00.120', "
    "'2024-06-01 12:00:00.25+02'",
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL",
    "true, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0.00, 0, 'nan', 'inf', 'a\\x00b', '1970-01-01', '1970-01-01 00:00:00', "
    "'2000-01-01 00:00:00', '2000-01-01 00:00:00', '2000-01-01 00:00:00+00'",
    "false, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1.00, 1, '-inf', 1.0, 'x', '2000-01-01', "
    "'2000-01-01 00:00:00.100000', "
    "'2000-01-01 00:00:01', '2000-01-01 00:00:00.001', '1999-12-31 23:59:59.000001-05'",
]


@pytest.fixture(scope="module")
def db() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'America/New_York'")  # timestamptz is sent in UTC whatever the zone
    con.execute("CREATE TABLE t (" + ", ".join(f"{c} {t}" for c, t in COLUMNS.items()) + ")")
    for row in ROWS:
        con.execute(f"INSERT INTO t VALUES ({row})")
    return con


def _value_by_value(db: duckdb.DuckDBPyConnection, sql: str, binary: bool) -> tuple[list[str], bytes]:
    rel = db.execute(sql)
    duckdb_types = [str(d[1]) for d in rel.description]
    types = [pg_type_of(t) for t in duckdb_types]
    rows = rel.fetchall()
    return duckdb_types, b"".join(
        data_row([encode(v, t, binary) for v, t in zip(row, types, strict=True)]) for row in rows
    )


def _batched(db: duckdb.DuckDBPyConnection, sql: str, binary: bool, slices: bool) -> bytes | None:
    rel = db.execute(sql)
    duckdb_types = [str(d[1]) for d in rel.description]
    types = [pg_type_of(t) for t in duckdb_types]
    encoder = RowEncoder.of(duckdb_types, types, [binary] * len(types))
    if encoder is None:
        return None
    table = pa.Table.from_batches(list(rel.to_arrow_reader(1000)))
    out = b""
    for batch in table.to_batches():
        # Portals cut batches: slices start at an offset inside Arrow's buffers.
        parts = [batch.slice(i, 2) for i in range(0, batch.num_rows, 2)] if slices else [batch]
        out += b"".join(encoder.encode(part) for part in parts)
    return out


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("column", list(COLUMNS))
def test_each_column_is_encoded_as_value_by_value(
    db: duckdb.DuckDBPyConnection, column: str, binary: bool
) -> None:
    sql = f"SELECT {column} FROM t"
    duckdb_types, expected = _value_by_value(db, sql, binary)
    got = _batched(db, sql, binary, slices=True)
    assert got == expected


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_whole_rows_of_many_columns_match(db: duckdb.DuckDBPyConnection, binary: bool) -> None:
    sql = "SELECT * FROM t, range(3)"  # 15 rows, NULLs among them
    _, expected = _value_by_value(db, sql, binary)
    assert _batched(db, sql, binary, slices=False) == expected
    assert _batched(db, sql, binary, slices=True) == expected


def test_columns_it_cannot_encode_go_value_by_value(db: duckdb.DuckDBPyConnection) -> None:
    for sql in [
        "SELECT [1, 2]",
        "SELECT INTERVAL 1 DAY",
        "SELECT uuid()",
        "SELECT 'a'::BLOB",
        "SELECT {'a': 1}",
    ]:
        assert _batched(db, sql, False, slices=False) is None, sql


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("decimal", ["DECIMAL(18,6)", "DECIMAL(4,0)", "DECIMAL(9,9)", "DECIMAL(18,17)"])
def test_decimals_of_every_shape_match(decimal: str, binary: bool) -> None:
    # Base-10000 groups around the point (binary) and digits either side of it (text): values
    # with zero groups inside, at either end, only a fraction, only an integer, the extremes.
    con = duckdb.connect()
    precision, scale = (int(x) for x in decimal[8:-1].split(","))
    values = [
        "0",
        "1",
        "-1",
        "10000",
        "0.0001",
        "100000001",
        "0.00010001",
        "123456789012.345678",
        "-0.000001",
    ]
    values += ["9" * (precision - scale) + ("." + "9" * scale if scale else ""), "NULL"]
    con.execute(f"CREATE TABLE d (x {decimal})")
    for v in values:
        try:
            con.execute(f"INSERT INTO d VALUES (CAST({v} AS {decimal}))")
        except duckdb.Error:  # does not fit this precision
            pass
    sql = "SELECT x FROM d"
    _, expected = _value_by_value(con, sql, binary)
    assert _batched(con, sql, binary, slices=True) == expected


def test_numeric_send_format_reads_back_as_the_value() -> None:
    # Checked against the decoder of bound parameters, not only against the batch encoder: both
    # encoders once sent 0.0001 as 0.1 (the fraction lost its leading zeros).
    from decimal import Decimal

    from pitstop.server.bindvalues import decode_params
    from pitstop.server.pgtypes import _bin_numeric

    for text in [
        "0",
        "0.0001",
        "0.000100",
        "-0.000001",
        "0.00010001",
        "12.34",
        "-1000000.5",
        "1E+5",
        "7",
        "1E-17",
    ]:
        value = Decimal(text)
        assert decode_params([_bin_numeric(value)], [1700], [True]) == [value], text
