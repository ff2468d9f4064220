"""PostgreSQL's answers to a BI tool's SQL, not DuckDB's (server/pgsemantics.py): the same text gives
the same numbers, types and errors as on PostgreSQL.

Real server, real clients over a socket (psycopg; psql where it has a say). Every expected value
below is what PostgreSQL 15 answered to the same statement over the same rows (checked once
against a real server started with tests/pg_helpers.py), with the type psycopg makes of it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from command_helpers import start
from conftest import settings
from pitstop.server import pgmath, pgnumeric
from server_helpers import Served, psql, serving

INT4, INT8, NUMERIC, TEXT = 23, 20, 1700, 25


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(settings(tmp_path_factory.mktemp("pgsem") / "home")) as s:
        with s.manager.catalog.transaction() as tx:  # what a DuckDB sink writes
            tx.execute(
                "CREATE TABLE main.daily (region VARCHAR, revenue DECIMAL(12,2), orders BIGINT, "
                "qty INTEGER, ts TIMESTAMP)"
            )
            tx.execute(
                "INSERT INTO main.daily VALUES ('eu', 1234.50, 3, 5, '2024-01-01 13:05:06'), "
                "('us', 12345.00, 4, 7, '2024-03-09 08:00:00')"
            )
        yield s


@pytest.fixture
def conn(served: Served) -> Iterator[psycopg.Connection]:
    with psycopg.connect(served.url(), autocommit=True) as c:
        yield c


def answer(conn: psycopg.Connection, sql: str, params: list[object] | None = None) -> tuple[list, list[int]]:
    cur = conn.execute(sql, params)
    return cur.fetchall(), [d.type_code for d in cur.description or []]


def test_integer_division_truncates_toward_zero_and_stays_integer(conn: psycopg.Connection) -> None:
    rows, types = answer(conn, "SELECT 10/4, -7/2, qty/2, orders/qty FROM daily ORDER BY ts")
    assert rows == [(2, -3, 2, 0), (2, -3, 3, 0)]
    assert [type(v) for v in rows[0]] == [int, int, int, int]
    assert types == [INT4, INT4, INT4, INT8]


def test_unconstrained_numeric_keeps_the_scale_of_its_value(conn: psycopg.Connection) -> None:
    rows, types = answer(conn, "SELECT '3.14159'::numeric, 2.50::numeric, '-0.001'::numeric")
    assert [str(v) for v in rows[0]] == ["3.14159", "2.50", "-0.001"]
    assert types == [NUMERIC] * 3
    for value in (Decimal("3.14159"), "3.14159"):  # a numeric parameter and a text one
        rows, types = answer(conn, "SELECT %s::numeric", [value])
        assert rows == [(Decimal("3.14159"),)] and str(rows[0][0]) == "3.14159"
        assert types == [NUMERIC]


@pytest.mark.parametrize(
    "sql",
    ["SELECT 1/0", "SELECT 1.0/0", "SELECT 2.5::float8 / 0", "SELECT 5 % 0", "SELECT 1.5 % 0",
     "SELECT revenue / (qty - qty) FROM daily", "SELECT orders % 0 FROM daily",
     "SELECT avg(qty) / 0 FROM daily"],
)  # fmt: skip
def test_division_by_zero_is_postgresqls_error_and_the_session_goes_on(
    conn: psycopg.Connection, sql: str
) -> None:
    with pytest.raises(psycopg.errors.DivisionByZero) as caught:
        conn.execute(sql).fetchall()
    assert caught.value.sqlstate == "22012"
    assert caught.value.diag.message_primary == "division by zero"
    assert conn.execute("SELECT 1").fetchone() == (1,)
    with conn.transaction():  # in a block, the error aborts the block only
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute(sql).fetchall()
    assert conn.execute("SELECT 2").fetchone() == (2,)


def test_a_numeric_column_divided_stays_numeric_with_postgresqls_scale(conn: psycopg.Connection) -> None:
    rows, types = answer(conn, "SELECT region, revenue/7 AS r FROM daily ORDER BY r DESC")
    assert rows == [("us", Decimal("1763.5714285714285714")), ("eu", Decimal("176.3571428571428571"))]
    assert [str(r) for _, r in rows] == ["1763.5714285714285714", "176.3571428571428571"]
    assert types == [TEXT, NUMERIC]
    rows, types = answer(conn, "SELECT avg(orders), avg(revenue), sum(qty), sum(revenue)/count(*) FROM daily")
    assert [str(v) for v in rows[0]] == [
        "3.5000000000000000", "6789.7500000000000000", "12", "6789.7500000000000000"
    ]  # fmt: skip
    assert types == [NUMERIC, NUMERIC, INT8, NUMERIC]
    rows, _ = answer(conn, "SELECT round(revenue/7, 2), 1::numeric/3, 10::numeric/4 FROM daily ORDER BY ts")
    assert [str(v) for v in rows[0]] == ["176.36", "0.33333333333333333333", "2.5000000000000000"]


def test_a_quotient_kept_by_coalesce_or_case_keeps_its_scale(conn: psycopg.Connection) -> None:
    rows, types = answer(
        conn,
        "SELECT coalesce(sum(revenue) / nullif(sum(qty), 0), 0), "
        "CASE WHEN sum(qty) > 0 THEN sum(revenue) / sum(qty) ELSE 0 END FROM daily",
    )
    assert [str(v) for v in rows[0]] == ["1131.6250000000000000", "1131.6250000000000000"]
    assert types == [NUMERIC, NUMERIC]


def test_intervals_and_floats_divide_as_before(conn: psycopg.Connection) -> None:
    rows, _ = answer(
        conn, "SELECT interval '1 hour' / 2, 7.5::float8 / 2, 100.0 * qty / orders FROM daily ORDER BY ts"
    )
    assert rows[0] == (timedelta(minutes=30), 3.75, Decimal("166.6666666666666667"))


def test_a_numeric_quotient_travels_in_binary_too(served: Served) -> None:
    with psycopg.connect(served.url(), autocommit=True) as conn:
        cur = conn.cursor(binary=True)
        assert cur.execute("SELECT revenue/7 FROM daily ORDER BY ts").fetchall() == [
            (Decimal("176.3571428571428571"),), (Decimal("1763.5714285714285714"),)
        ]  # fmt: skip


def test_to_char_prints_postgresqls_template_patterns(conn: psycopg.Connection) -> None:
    rows, types = answer(
        conn,
        "SELECT to_char(ts, 'Mon DD'), to_char(ts, 'YYYY-MM-DD HH24:MI:SS'), "
        "to_char(ts, 'FMMonth FMDDth, YYYY (Dy) \"Q\"Q IW HH12:MI AM') FROM daily ORDER BY ts",
    )
    assert rows == [
        ("Jan 01", "2024-01-01 13:05:06", "January 1st, 2024 (Mon) Q1 01 01:05 PM"),
        ("Mar 09", "2024-03-09 08:00:00", "March 9th, 2024 (Sat) Q1 10 08:00 AM"),
    ]
    assert types == [TEXT] * 3
    rows, _ = answer(
        conn,
        "SELECT to_char(revenue, '999G999D99'), to_char(revenue, 'FM999G999D99'), to_char(orders, 'FM999'), "
        "to_char(-revenue, 'FM999G990D00') FROM daily ORDER BY ts",
    )
    assert rows == [
        ("   1,234.50", "1,234.5", "3", "-1,234.50"), ("  12,345.00", "12,345.", "4", "-12,345.00")
    ]  # fmt: skip


def test_to_char_prints_time_zones_and_fractions_as_postgresql_with_timezone_utc(
    conn: psycopg.Connection,
) -> None:
    """pgAdmin's activity query asks for 'YYYY-MM-DD HH24:MI:SS TZ' (refused until now). PostgreSQL 15,
    TimeZone UTC: a timestamp has no zone name, a timestamptz and a date (read as timestamptz) are
    UTC; 'of' and 'tz' are keywords in lower case too, 'Of' and 'Tz' are text."""
    pattern = "HH24 TZ tz OF of Of Tz TZH:TZM FF1 FF3 FF6 ff2 IDDD"
    rows, _ = answer(
        conn,
        f"SELECT to_char(x, '{pattern}'), to_char(x::timestamptz, '{pattern}'), to_char(DATE '2024-07-01', "
        "'TZ OF TZH TZM FF3 IDDD') FROM (VALUES (TIMESTAMP '2024-07-01 13:05:06.123456')) v(x)",
    )
    assert rows == [
        (
            "13   +00 +00 Of Tz +00:00 1 123 123456 12 183",
            "13 UTC utc +00 +00 Of Tz +00:00 1 123 123456 12 183",
            "UTC +00 +00 00 000 183",
        )
    ]
    rows, _ = answer(
        conn, "SELECT to_char(ts, 'YYYY-MM-DD HH24:MI:SS TZ'), to_char(ts, 'FMFF6') FROM daily ORDER BY ts"
    )
    assert rows == [("2024-01-01 13:05:06 ", "000000"), ("2024-03-09 08:00:00 ", "000000")]


def test_a_to_char_pattern_pitstop_cannot_print_is_an_error_not_other_text(conn: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="needs its pattern as a literal"):
        conn.execute("SELECT to_char(ts, region) FROM daily").fetchall()
    assert conn.execute("SELECT 1").fetchone() == (1,)
    # SP (spell mode) is not implemented by PostgreSQL either: it prints the number.
    assert conn.execute("SELECT to_char(ts, 'HH24 DDSP') FROM daily ORDER BY ts").fetchall() == [
        ("13 01",),
        ("08 09",),
    ]


@pytest.mark.parametrize(
    ("sql", "near", "position"),
    [("SELECT region,, revenue FROM daily", ",", 15), ("SELECT region, FROM daily", "FROM", 16),
     ("SELECT 1;\n  select region,, revenue FROM daily", ",", 27)],
)  # fmt: skip
def test_an_empty_list_item_is_a_syntax_error_at_its_position(
    conn: psycopg.Connection, sql: str, near: str, position: int
) -> None:
    with pytest.raises(psycopg.errors.SyntaxError) as caught:
        conn.execute(sql).fetchall()
    assert caught.value.diag.message_primary == f'syntax error at or near "{near}"'
    assert caught.value.diag.statement_position == str(position)
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_psql_shows_postgresqls_numbers_and_errors(served: Served) -> None:
    query = "SELECT 10/4, '3.14159'::numeric, to_char(ts, 'Mon DD') FROM daily ORDER BY ts"
    done = psql(served, "-A", "-t", "-c", query)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["2|3.14159|Jan 01", "2|3.14159|Mar 09"]
    done = psql(served, "-c", "SELECT region,, revenue FROM daily")
    assert done.returncode == 1
    assert 'ERROR:  syntax error at or near ","' in done.stderr
    assert "LINE 1: SELECT region,, revenue FROM daily\n                      ^" in done.stderr
    done = psql(served, "-c", "SELECT 1/0")
    assert "ERROR:  division by zero" in done.stderr


# -- the arithmetic itself, without a server ---------------------------------------------------------
@pytest.mark.parametrize(
    ("dividend", "divisor", "quotient"),
    [("10", "4", "2.5000000000000000"), ("1", "7", "0.14285714285714285714"),
     ("-7", "2", "-3.5000000000000000"), ("1", "70000", "0.000014285714285714285714"),
     ("12345.00", "7", "1763.5714285714285714"),
     ("1.5", "1.2", "1.25000000000000000000"), ("0", "3", "0.00000000000000000000"),
     ("99999999", "0.001", "99999999000.00000000"), ("-0.001", "3", "-0.00033333333333333333")],
)  # fmt: skip
def test_numeric_division_rounds_at_postgresqls_scale(dividend: str, divisor: str, quotient: str) -> None:
    assert pgnumeric.numeric_div(dividend, divisor) == quotient


@pytest.mark.parametrize(
    ("function", "args", "result"),
    [("sqrt", ("2.0",), "1.414213562373095"), ("sqrt", ("0.0001",), "0.01000000000000000"),
     ("exp", ("1.5",), "4.4816890703380648"), ("exp", ("50.0",), "5184705528587072464087.5"),
     ("ln", ("2.0",), "0.6931471805599453"), ("ln", ("1.05",), "0.048790164169432003"),
     ("ln", ("0.95",), "-0.051293294387550533"), ("ln", ("0.0001",), "-9.2103403719761827"),
     ("ln", ("123456789.123",), "18.631401767164318"), ("log", ("2", "8"), "3.0000000000000000"),
     ("log", ("1.0001", "2.0"), "6931.818373413795"), ("log", ("10", "100.0"), "2.0000000000000000"),
     ("power", ("2.0", "0.5"), "1.4142135623730950"), ("power", ("10.5", "-2"), "0.0090702947845805"),
     ("power", ("-2.0", "3"), "-8.0000000000000000"), ("power", ("1.0001", "10000"), "2.7181459268252249"),
     ("power", ("0.5", "100"), "0.0000000000000000"), ("power", ("2.0", "0"), "1.0000000000000000")],
)  # fmt: skip
def test_numeric_functions_have_postgresqls_scale_and_digits(
    function: str, args: tuple[str, ...], result: str
) -> None:
    """The answers of PostgreSQL 15 (psql), to the digit."""
    assert getattr(pgmath, f"numeric_{function}")(*args) == result


@pytest.mark.parametrize(
    ("function", "args", "code"),
    [("sqrt", ("-1.0",), "2201F"), ("ln", ("0.0",), "2201E"), ("log", ("-1", "2"), "2201E"),
     ("log", ("1", "2"), "22012"), ("power", ("0.0", "-1"), "2201F"), ("power", ("-8.0", "0.5"), "2201F"),
     ("exp", ("6000",), "22003")],
)  # fmt: skip
def test_numeric_functions_refuse_what_postgresql_refuses(
    function: str, args: tuple[str, ...], code: str
) -> None:
    with pytest.raises(pgnumeric.NumericError, match=f"SQLSTATE {code}"):
        getattr(pgmath, f"numeric_{function}")(*args)


@pytest.mark.parametrize(
    ("value", "pattern", "text"),
    [("0.5", "999D99", "    .50"), ("0", "999", "   0"), ("12345", "999", " ###"), ("5", "FM999D99", "5."),
     ("12", "000", " 012"), ("-12.5", "999D9", " -12.5"), ("1234567", "999G999", " ###,###"),
     ("12", "9G999", "    12"), ("-0.5", "FM999D99", "-.5"), ("2.675", "FM0.00", "2.68")],
)  # fmt: skip
def test_to_char_of_a_number_pads_and_rounds_as_postgresql(value: str, pattern: str, text: str) -> None:
    assert pgnumeric.to_char_number(value, pattern, False) == text


def test_times_with_a_zone_are_utc_whatever_the_machines_zone(tmp_path: Path) -> None:
    """On a machine whose zone is Europe/Paris, DuckDB computed in Paris time while the server said
    TimeZone UTC and printed +00: `::date` of 23:30 UTC was the next day, its hour 1, its day began
    at 22:00 UTC. PostgreSQL 15 with TimeZone UTC: 2024-07-01, 23, 2024-07-01 00:00:00+00. A real
    `pitstop serve` process started with TZ=Europe/Paris, and psycopg."""
    home = tmp_path / "home"
    proc = start("serve", "--port", "0", home=home, env={"TZ": "Europe/Paris"}, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        port = int(line.split("127.0.0.1:")[1].split("/")[0])
        with psycopg.connect(f"postgresql://tester@127.0.0.1:{port}/pitstop", autocommit=True) as conn:
            row = conn.execute(
                "SELECT CAST(t AS DATE)::text, extract(hour FROM t)::int, date_trunc('day', t)::text, "
                "current_setting('TimeZone') FROM (VALUES (TIMESTAMPTZ '2024-07-01 23:30:00+00')) v(t)"
            ).fetchone()
        assert row == ("2024-07-01", 23, "2024-07-01 00:00:00+00", "UTC")
    finally:
        proc.terminate()
        proc.wait(60)


ZONED = (
    "SELECT t::text, CAST(t AS DATE)::text, extract(hour FROM t)::int, date_trunc('day', t)::text, "
    "to_char(t, 'HH24 TZ OF TZH:TZM'), "
    "(TIMESTAMP '2024-07-01 12:00' < TIMESTAMPTZ '2024-07-01 11:00:00+00'), "
    "to_char(DATE '2024-07-01', 'TZ OF'), to_char(TIMESTAMP '2024-07-01 12:00', 'TZ|OF'), "
    "current_setting('TimeZone') FROM (VALUES (TIMESTAMPTZ '2024-07-01 23:30:00+00')) v(t)"
)


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("UTC", ("2024-07-01 23:30:00+00", "2024-07-01", 23, "2024-07-01 00:00:00+00", "23 UTC +00 +00:00",
                 False, "UTC +00", "|+00", "UTC")),
        ("Europe/Paris", ("2024-07-02 01:30:00+02", "2024-07-02", 1, "2024-07-02 00:00:00+02",
                          "01 CEST +02 +02:00", True, "CEST +02", "|+00", "Europe/Paris")),
        ("asia/kolkata", ("2024-07-02 05:00:00+05:30", "2024-07-02", 5, "2024-07-02 00:00:00+05:30",
                          "05 IST +05:30 +05:30", True, "IST +05:30", "|+00", "Asia/Kolkata")),
        ("America/St_Johns", ("2024-07-01 21:00:00-02:30", "2024-07-01", 21, "2024-07-01 00:00:00-02:30",
                              "21 NDT -02:30 -02:30", False, "NDT -02:30", "|+00", "America/St_Johns")),
    ],
)  # fmt: skip
def test_a_sessions_time_zone_is_the_one_times_are_shown_and_computed_in(
    served: Served, zone: str, expected: tuple[object, ...]
) -> None:
    """SET TimeZone was shown by current_setting but ignored: every time was shown and computed in
    UTC. The expected rows are PostgreSQL 15's to the same statement after the same SET; the text
    and binary formats and psql see the same instants."""
    with psycopg.connect(served.url(), autocommit=True) as conn:
        conn.execute(f"SET TimeZone = '{zone}'")
        assert conn.execute(ZONED).fetchone() == expected
        (text_form,) = conn.execute("SELECT TIMESTAMPTZ '2024-01-15 10:00:00.5+00'").fetchone() or (None,)
        (binary_form,) = conn.cursor(binary=True).execute(
            "SELECT TIMESTAMPTZ '2024-01-15 10:00:00.5+00'"
        ).fetchone() or (None,)
    assert text_form == binary_form
    assert text_form is not None and text_form.timestamp() == 1705312800.5


def test_a_time_zone_pitstop_does_not_take_is_postgresqls_error(served: Served) -> None:
    with psycopg.connect(served.url(), autocommit=True) as conn:
        with pytest.raises(
            psycopg.errors.InvalidParameterValue, match='invalid value for parameter "TimeZone": "xyz"'
        ):
            conn.execute("SET TimeZone = 'xyz'")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="such as 'UTC' or 'Europe/Paris'"):
            conn.execute("SET TIME ZONE '+02:00'")  # POSIX: PostgreSQL reads it as UTC-2
        assert conn.execute("SHOW TimeZone").fetchone() == ("UTC",)
    with pytest.raises(psycopg.OperationalError, match='invalid value for parameter "TimeZone"'):
        psycopg.connect(served.url(), options="-c TimeZone=Mars/Olympus")
    with psycopg.connect(served.url(), options="-c TimeZone=europe/paris", autocommit=True) as conn:
        assert conn.execute("SELECT (TIMESTAMPTZ '2024-07-01 23:30:00+00')::text").fetchone() == (
            "2024-07-02 01:30:00+02",
        )


@pytest.mark.parametrize(
    ("sql", "code", "position", "message"),
    [
        ("SELECT regio, revenue FROM daily", "42703", 8, 'column "regio" does not exist'),
        ("SELECT region FROM dailly", "42P01", 20, 'relation "dailly" does not exist'),
        ("SELECT d.regio FROM daily d", "42703", 8, "column d.regio does not exist"),
        (
            "SELECT region, revenu FROM daily WHERE region = 'revenu'",
            "42703",
            16,
            'column "revenu" does not exist',
        ),
        ("SELECT foo (region) FROM daily", "42883", 8, "function foo does not exist"),
        ('SELECT 1; SELECT "Regio" FROM daily', "42703", 18, 'column "Regio" does not exist'),
    ],
)
def test_an_unknown_name_is_postgresqls_error_under_the_name(
    conn: psycopg.Connection, sql: str, code: str, position: int, message: str
) -> None:
    """DuckDB's errors of an unknown column, table or function carried a SQLSTATE but no position
    (psql drew no caret) and DuckDB's words. PostgreSQL 15's SQLSTATE, position and (but for the
    function's argument types) message; DuckDB's suggestion is the hint."""
    for prepare in (False, True):  # the simple protocol, and Parse/Describe (the extended one)
        with pytest.raises(psycopg.Error) as raised:
            conn.execute(sql, prepare=prepare if ";" not in sql else None)
        diag = raised.value.diag
        assert (diag.sqlstate, diag.statement_position, diag.message_primary) == (
            code,
            str(position),
            message,
        )
    if code == "42703":
        assert diag.message_hint is not None and diag.message_hint.startswith(
            "Perhaps you meant to reference the column"
        )
