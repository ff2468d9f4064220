"""Hostile and broken clients over real loopback sockets: truncated, oversized, out-of-order and
random messages never crash the server nor leave a connection behind, and a real client is
served after each case. Bounded in count; the random part has a fixed seed."""

from __future__ import annotations

import math
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from decimal import Decimal

import psycopg
import pytest

from conftest import settings
from server_helpers import Served, serving

SEED = 20261123
ROUNDS = 150


def startup(user: str = "fuzz", version: int = 196608) -> bytes:
    body = struct.pack(">i", version) + b"user\x00" + user.encode() + b"\x00database\x00pitstop\x00\x00"
    return struct.pack(">i", len(body) + 4) + body


def message(kind: bytes, payload: bytes) -> bytes:
    return kind + struct.pack(">i", len(payload) + 4) + payload


def query(sql: str) -> bytes:
    return message(b"Q", sql.encode() + b"\x00")


SYNC = message(b"S", b"")


ANSWER_S = 30  # how long a client waits for the server to answer or close before the test fails


class Raw:
    """A client that writes whatever it is given and reads the server's messages."""

    def __init__(self, served: Served) -> None:
        self.sock = socket.create_connection((served.host, served.port), timeout=ANSWER_S)
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self) -> tuple[bytes, bytes] | None:
        """One server message (type, payload), or None when the server closed; fails the test
        when the server does neither within ANSWER_S."""
        while True:
            if len(self.buffer) >= 5:
                length = struct.unpack(">i", self.buffer[1:5])[0]
                if len(self.buffer) >= 1 + length:
                    kind, payload = self.buffer[:1], self.buffer[5 : 1 + length]
                    self.buffer = self.buffer[1 + length :]
                    return kind, payload
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            except TimeoutError:
                raise AssertionError(f"the server neither answered nor closed within {ANSWER_S} s") from None
            if not data:
                return None
            self.buffer += data

    def until(self, kind: bytes) -> list[tuple[bytes, bytes]]:
        seen = []
        while True:
            got = self.read()
            if got is None:
                return seen
            seen.append(got)
            if got[0] == kind:
                return seen

    def ready(self) -> None:
        self.send(startup())
        kinds = [k for k, _ in self.until(b"Z")]
        assert kinds[0] == b"R" and kinds[-1] == b"Z", kinds

    def close(self) -> None:
        self.sock.close()


def error_code(payload: bytes) -> str:
    for field in payload.split(b"\x00"):
        if field[:1] == b"C":
            return field[1:].decode()
    return ""


def still_serving(served: Served) -> None:
    with psycopg.connect(served.url(), autocommit=True, connect_timeout=10) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.execute("SHOW JOBS").fetchall() == []


def client_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("pitstop-client-")]


def no_client_left(served: Served) -> None:
    deadline = time.monotonic() + 20
    while (served.server.connections or client_threads()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert served.server.connections == 0
    assert client_threads() == []


def test_broken_startups_are_refused_and_leave_nothing(served: Served) -> None:
    cases = [
        startup()[:3],
        startup()[:9],
        struct.pack(">i", 2**31 - 1) + b"\x00\x03\x00\x00",
        struct.pack(">i", 4),
        struct.pack(">ii", 8, 12345678),  # an unknown request code
        startup(version=0x00020000),  # protocol 2
        startup(user=""),
        b"\xff" * 64,
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    ]
    for data in cases:
        raw = Raw(served)
        raw.send(data)
        if data is cases[0] or data is cases[1]:
            raw.sock.shutdown(socket.SHUT_WR)  # truncated: the client gives up
        got = raw.until(b"E")
        raw.close()
        if got:
            assert got[-1][0] == b"E" and error_code(got[-1][1]) in ("08P01", "0A000", "28000"), got
        still_serving(served)
    no_client_left(served)


def test_out_of_order_and_bad_messages_get_errors_and_the_session_goes_on(served: Served) -> None:
    raw = Raw(served)
    raw.ready()
    steps = [
        message(b"B", b"portal\x00nosuch\x00" + struct.pack(">hhh", 0, 0, 0)) + SYNC,  # Bind to nothing
        message(b"E", b"nosuch\x00" + struct.pack(">i", 0)) + SYNC,  # Execute before Bind
        message(b"D", b"Pnosuch\x00") + SYNC,  # Describe a missing portal
        message(b"P", b"s1\x00SELECT $1\x00" + struct.pack(">h", 0))
        + message(b"B", b"\x00s1\x00" + struct.pack(">hh", 0, 0) + struct.pack(">h", 0))  # 0 of 1 params
        + SYNC,
        message(b"P", b"two\x00SELECT 1; SELECT 2\x00" + struct.pack(">h", 0)) + SYNC,
    ]
    for step in steps:
        raw.send(step)
        got = raw.until(b"Z")
        kinds = [k for k, _ in got]
        assert b"E" in kinds and kinds[-1] == b"Z", kinds
    raw.send(query("SELECT 41 + 1"))
    got = raw.until(b"Z")
    assert any(k == b"D" and b"42" in p for k, p in got)
    raw.send(SYNC * 2000)  # a flood of Syncs: one ReadyForQuery each
    count = 0
    while count < 2000:
        got_one = raw.read()
        assert got_one is not None
        count += got_one[0] == b"Z"
    raw.send(query("SELECT '" + "x" * 1_000_000 + "' AS big"))
    got = raw.until(b"Z")
    assert any(k == b"D" and len(p) > 1_000_000 for k, p in got)
    raw.send(message(b"X", b"") + query("SELECT 1"))  # nothing after Terminate is run
    assert raw.read() is None
    raw.close()
    still_serving(served)
    no_client_left(served)


def test_oversized_and_unknown_messages_close_only_their_connection(served: Served) -> None:
    for data in (
        struct.pack(">ci", b"Q", 100 * 1024 * 1024) + b"x" * (70 * 1024 * 1024),
        message(b"~", b"whatever"),
        struct.pack(">ci", b"Q", 2),  # a length shorter than its own field
    ):
        raw = Raw(served)
        raw.ready()
        try:
            raw.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed while the client was still sending
        got = raw.until(b"E")
        raw.close()
        assert got and error_code(got[-1][1]) == "08P01", got
        still_serving(served)
    no_client_left(served)


def test_a_silent_client_and_half_closed_sockets_hold_no_one_up(served: Served) -> None:
    silent = socket.create_connection((served.host, served.port))
    half = Raw(served)
    half.ready()
    half.sock.shutdown(socket.SHUT_WR)
    assert half.read() is None  # the server saw the end and closed
    half.close()
    still_serving(served)  # while the silent client says nothing
    silent.close()
    no_client_left(served)


def test_random_messages_never_crash_the_server(served: Served) -> None:
    rng = random.Random(SEED)
    kinds = [b"Q", b"P", b"B", b"D", b"E", b"C", b"S", b"H", b"F", b"X", b"d", b"c", b"f", b"p", b"?"]
    valid = [query("SELECT 1"), SYNC, message(b"H", b""), message(b"P", b"\x00SELECT 1\x00\x00\x00")]
    for _ in range(ROUNDS):
        raw = Raw(served)
        if rng.random() < 0.8:
            raw.ready()
        parts = []
        for _ in range(rng.randint(1, 6)):
            choice = rng.random()
            if choice < 0.3:
                parts.append(rng.choice(valid))
            elif choice < 0.7:
                payload = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))
                parts.append(message(rng.choice(kinds), payload))
            else:
                parts.append(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 30))))
        data = b"".join(parts)
        if rng.random() < 0.3:
            data = data[: rng.randint(0, len(data))]
        try:
            raw.send(data)
            raw.sock.shutdown(socket.SHUT_WR)
            while raw.read() is not None:  # until the server closes (read fails the test if it never does)
                pass
        except OSError:
            pass
        raw.close()
    still_serving(served)
    no_client_left(served)


# -- bound parameters that cannot be read -----------------------------------------------------------
# PostgreSQL's infinities of timestamp (int64) and date (int32); year 20000, past Python's 9999.
TS_INFINITY, TS_MINUS_INFINITY = struct.pack(">q", 2**63 - 1), struct.pack(">q", -(2**63))
DATE_INFINITY, DATE_MINUS_INFINITY = struct.pack(">i", 2**31 - 1), struct.pack(">i", -(2**31))
TS_YEAR_20000 = struct.pack(">q", 18000 * 365 * 86400 * 10**6)


def numeric(ndigits: int, weight: int, sign: int, dscale: int, *digits: int) -> bytes:
    """PostgreSQL's numeric send format, any field as given (ndigits need not match the digits)."""
    return struct.pack(f">HhHH{len(digits)}H", ndigits, weight, sign, dscale, *digits)


def bind_one(raw: Raw, oid: int, data: bytes, binary: bool = True) -> tuple[str, str, bytes | None]:
    """``SELECT $1`` with a parameter of type ``oid`` bound to ``data``: the error's SQLSTATE and
    message, or ("", "", the value of the row)."""
    raw.send(
        message(b"P", b"\x00SELECT $1\x00" + struct.pack(">hi", 1, oid))
        + message(b"B", b"\x00\x00" + struct.pack(">hhhi", 1, int(binary), 1, len(data)) + data + b"\x00\x00")
        + message(b"E", b"\x00" + struct.pack(">i", 0))
        + SYNC
    )
    got = raw.until(b"Z")
    assert got and got[-1][0] == b"Z", f"the connection died: {got}"
    for kind, payload in got:
        if kind == b"E":
            fields = {f[:1]: f[1:].decode() for f in payload.split(b"\x00") if f}
            return fields[b"C"], fields[b"M"], None
    row = next(p for k, p in got if k == b"D")
    length = struct.unpack(">i", row[2:6])[0]
    return "", "", row[6 : 6 + length]


def still_answers(raw: Raw) -> None:
    raw.send(query("SELECT 1"))
    got = raw.until(b"Z")
    assert any(k == b"D" for k, _ in got) and got[-1][0] == b"Z", got


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(settings(tmp_path_factory.mktemp("params") / "home")) as s:
        yield s


# What PostgreSQL 15 answers (measured): the same SQLSTATE, except that it answers a value shorter
# than its type with 08P01 "insufficient data left in message" (pitstop: 22P03, see bindvalues.py),
# and accepts infinity, years past 9999 and 24:00:00, which pitstop cannot hold (22008).
UNREADABLE = [
    pytest.param(1114, TS_INFINITY, "22008", "timestamp out of range", id="timestamp-infinity"),
    pytest.param(1114, TS_MINUS_INFINITY, "22008", "-infinity", id="timestamp-minus-infinity"),
    pytest.param(1114, TS_YEAR_20000, "22008", "after year 9999", id="timestamp-year-20000"),
    pytest.param(1184, TS_INFINITY, "22008", "infinity", id="timestamptz-infinity"),
    pytest.param(1082, DATE_INFINITY, "22008", "date out of range", id="date-infinity"),
    pytest.param(1082, DATE_MINUS_INFINITY, "22008", "-infinity", id="date-minus-infinity"),
    pytest.param(1083, struct.pack(">q", 86400 * 10**6), "22008", "time out of range", id="time-24h"),
    pytest.param(1700, numeric(1, 0, 0, 0x4000, 1), "22P03", "invalid scale", id="numeric-scale"),
    pytest.param(1700, numeric(0, 0, 0x1234, 0), "22P03", "invalid sign", id="numeric-sign"),
    pytest.param(1700, numeric(1, 0, 0, 0, 10000), "22P03", "invalid digit", id="numeric-digit"),
    pytest.param(1700, numeric(3, 0, 0, 0, 1), "22P03", "3 digits", id="numeric-missing-digits"),
    pytest.param(1700, numeric(1, 0, 0, 0, 1, 1), "22P03", "1 digit", id="numeric-extra-bytes"),
    pytest.param(1700, b"\x00\x01", "22P03", "numeric", id="numeric-short"),
    pytest.param(23, b"\x00\x01", "22P03", "integer is 4 bytes", id="int4-short"),
    pytest.param(23, b"\x00\x00\x00\x01\x00", "22P03", "integer is 4 bytes", id="int4-long"),
    pytest.param(20, b"\x00", "22P03", "bigint is 8 bytes", id="int8-short"),
    pytest.param(21, b"", "22P03", "smallint is 2 bytes", id="int2-empty"),
    pytest.param(16, b"\x01\x01", "22P03", "boolean is 1 byte", id="bool-long"),
    pytest.param(16, b"", "22P03", "boolean is 1 byte", id="bool-empty"),
    pytest.param(701, b"\x00" * 4, "22P03", "double precision is 8 bytes", id="float8-short"),
    pytest.param(1082, b"\x00", "22P03", "date is 4 bytes", id="date-short"),
    pytest.param(1114, b"\x00" * 4, "22P03", "is 8 bytes", id="timestamp-short"),
    pytest.param(2950, b"\x00" * 15, "22P03", "uuid is 16 bytes", id="uuid-short"),
    pytest.param(3802, b"\x02{}", "22P03", "jsonb version", id="jsonb-version"),
    pytest.param(3802, b"", "22P03", "jsonb version", id="jsonb-empty"),
    pytest.param(25, b"caf\xff", "22021", 'invalid byte sequence for encoding "UTF8": 0xff', id="text-utf8"),
]


@pytest.mark.parametrize(("oid", "data", "code", "words"), UNREADABLE)
def test_a_binary_parameter_that_cannot_be_read_is_an_error_and_the_session_goes_on(
    shared: Served, oid: int, data: bytes, code: str, words: str
) -> None:
    raw = Raw(shared)
    raw.ready()
    got_code, text, _ = bind_one(raw, oid, data)
    assert (got_code, words in text, "bind parameter 1" in text) == (code, True, True), text
    still_answers(raw)
    raw.close()


def test_a_text_timestamp_past_pitstops_range_is_an_error_and_the_session_goes_on(shared: Served) -> None:
    raw = Raw(shared)
    raw.ready()  # 0001-01-01 00:00+05 is 1 BC in UTC: PostgreSQL holds it, Python's datetime cannot
    got = bind_one(raw, 1184, b"0001-01-01 00:00:00+05", binary=False)
    assert got[:2] == ("22008", "timestamp out of range in bind parameter 1: 0001-01-01 00:00:00+05"), got
    still_answers(raw)
    raw.close()


# Values PostgreSQL reads (measured on 15) that pitstop read wrongly: numeric's infinities as 0,
# digits hidden by dscale rounded instead of truncated, a binary time as UTF-8 text.
READABLE = [
    pytest.param(1700, numeric(0, 0, 0xD000, 0), b"Infinity", id="numeric-infinity"),
    pytest.param(1700, numeric(0, 0, 0xF000, 0), b"-Infinity", id="numeric-minus-infinity"),
    pytest.param(1700, numeric(1, -1, 0, 0, 6000), b"0", id="numeric-hidden-digits-truncated"),
    pytest.param(1700, numeric(1, -1, 0, 1, 6600), b"0.6", id="numeric-hidden-digits-dscale-1"),
    pytest.param(1700, numeric(1, 9, 0x4000, 0, 1), b"-1" + b"0" * 36, id="numeric-37-digits"),
    pytest.param(1083, struct.pack(">q", (12 * 3600 + 34 * 60 + 56) * 10**6), b"12:34:56", id="time"),
]


@pytest.mark.parametrize(("oid", "data", "value"), READABLE)
def test_binary_parameters_postgres_reads_bind_as_postgres_reads_them(
    shared: Served, oid: int, data: bytes, value: bytes
) -> None:
    raw = Raw(shared)
    raw.ready()
    assert bind_one(raw, oid, data) == ("", "", value)
    still_answers(raw)
    raw.close()


def test_psycopg_binds_binary_numerics_of_any_size_and_infinity(shared: Served) -> None:
    """psycopg sends Decimal parameters in numeric's binary format with ``%b``; pitstop read more
    than 28 digits with the default decimal context, which raised and closed the connection."""
    with psycopg.connect(shared.url(), autocommit=True) as conn:
        for value in (Decimal("1234567890.12345678901234567890123"), Decimal("-0.000001")):
            assert conn.execute("SELECT %b", [value]).fetchone() == (value,)
        assert conn.execute("SELECT %b", [Decimal("1E+40")]).fetchone() == (1e40,)
        assert conn.execute("SELECT %b", [Decimal("Infinity")]).fetchone() == (float("inf"),)
        nan = conn.execute("SELECT %b", [Decimal("NaN")]).fetchone()
        assert nan is not None and math.isnan(nan[0])
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_random_parameter_bytes_are_a_value_or_an_error_never_an_exception() -> None:
    """Every type pitstop describes, in both formats, with random bytes (of the type's own size
    half the time, numeric with a header that fits): a value, or a WireError with a SQLSTATE of
    class 22; nothing else may escape to close the connection."""
    from pitstop.server.bindvalues import decode_params
    from pitstop.server.pgtypes import ARRAYS, SCALARS
    from pitstop.server.sqlstate import WireError

    rng = random.Random(SEED)
    oids = [0] + [t.oid for t in SCALARS + ARRAYS]
    sizes = {t.oid: t.size for t in SCALARS if t.size > 0}
    for _ in range(20_000):
        oid, binary = rng.choice(oids), rng.random() < 0.7
        size = sizes.get(oid, 0) if rng.random() < 0.5 else rng.randint(0, 24)
        data = bytes(rng.getrandbits(8) for _ in range(size))
        if oid == 1700 and rng.random() < 0.5:
            ndigits = rng.randint(0, 6)
            weight = rng.randint(-(2**15), 2**15 - 1)
            sign = rng.choice([0, 0x4000, 0xC000, 0xD000, 0xF000, 1])
            dscale = rng.choice([0, 3, 0x3FFF, 0x4000])
            data = numeric(ndigits, weight, sign, dscale, *(rng.randint(0, 10001) for _ in range(ndigits)))
        try:
            decode_params([data], [oid], [binary])
        except WireError as exc:
            assert exc.code.startswith("22"), (oid, binary, data, exc)
