"""Hostile and broken clients over real loopback sockets: truncated, oversized, out-of-order and
random messages never crash the server nor leave a connection behind, and a real client is
served after each case. Bounded in count; the random part has a fixed seed."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time

import psycopg

from server_helpers import Served

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
