"""Malformed records never stop a job and are never dropped silently: the File source's fallback
over a corpus of bad files (no Spark), then jobs on real Spark that keep, skip or fail on them."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import (
    DELAY,
    batch_windows,
    closed,
    make_orders,
    orders_mapping,
    revenue_select,
    run,
    settings,
    sink_windows,
)
from pitstop.catalog.rows import WHOLE_FILE, Reject
from pitstop.catalog.schema import MIGRATIONS, SCHEMA_VERSION
from pitstop.catalog.store import Catalog
from pitstop.connectors import rejects
from pitstop.connectors.file.source import read_records
from pitstop.engine import checkpoint
from pitstop.errors import JobFailedError
from pitstop.manager import Manager
from server_helpers import serving

SCHEMA = pa.schema(
    [
        ("order_id", pa.int64()),
        ("region", pa.string()),
        ("amount", pa.decimal128(12, 2)),
        ("ts", pa.timestamp("us", tz="UTC")),
    ]
)


def good_line(i: int) -> bytes:
    return json.dumps(
        {"order_id": i, "region": "eu", "amount": 1.5, "ts": f"2024-01-01T00:{i % 60:02d}:00"}
    ).encode()


@dataclass(frozen=True)
class Bad:
    """A malformed record: the bytes of its line, and words its reason must contain."""

    raw: bytes
    reason: str


# Each is written as line 2 of a file whose lines 1 and 3 are good.
JSON_CORPUS = {
    "broken_json": Bad(b'{"order_id": 2, "region": "eu",, }', "not valid JSON"),
    "wrong_type": Bad(b'{"order_id": "two", "region": "eu"}', "column 'order_id' is BIGINT"),
    "bad_time": Bad(b'{"order_id": 2, "ts": "yesterday"}', "column 'ts' is TIMESTAMP"),
    "bad_decimal": Bad(b'{"order_id": 2, "amount": 1.234}', "column 'amount' is DECIMAL(12,2)"),
    "invalid_utf8": Bad(b'{"order_id": 2, "region": "\xff\xfeu"}', "not valid UTF-8"),
    "an_array": Bad(b"[2, 3]", "an array, not a JSON object"),
    "huge_line": Bad(b'{"order_id": 2, "region": "' + b"x" * (10 * 1024 * 1024) + b'"}', "over the limit"),
    # One garbage line holding NUL bytes rejected a whole 10 MB file as binary (issue 26).
    "nul_bytes": Bad(b'{"order_id": 2, "region": "e\x00u"}\x00\x00garbage', "holds a NUL byte (at byte 29)"),
}


def read(path: Path, fmt: str = "json", header: bool = True) -> rejects.FileRead:
    return read_records(str(path), fmt, SCHEMA, header)


@pytest.mark.parametrize("case", sorted(JSON_CORPUS))
def test_a_bad_json_line_is_rejected_with_its_line_and_reason_and_the_others_go_on(
    tmp_path: Path, case: str
) -> None:
    bad = JSON_CORPUS[case]
    path = tmp_path / f"{case}.json"
    path.write_bytes(good_line(1) + b"\n" + bad.raw + b"\n" + good_line(3) + b"\n")
    got = read(path)
    assert got.table.column("order_id").to_pylist() == [1, 3]
    assert got.table.schema == SCHEMA
    [reject] = got.rejects
    assert (reject.file, reject.line, reject.raw_bytes) == (str(path), 2, len(bad.raw))
    assert bad.reason in reject.reason
    assert reject.raw is not None and len(reject.raw.encode()) <= rejects.RAW_LIMIT + 16
    assert reject.raw.startswith(bad.raw[:20].decode("utf-8", "backslashreplace"))


def test_a_file_of_good_records_takes_the_fast_path_and_has_no_rejects(tmp_path: Path) -> None:
    path = tmp_path / "good.json"
    path.write_bytes(b"".join(good_line(i) + b"\n" for i in range(5)))
    got = read(path)
    assert got.rejects == () and got.table.num_rows == 5
    assert got.table.column("amount").to_pylist() == [Decimal("1.50")] * 5


def test_a_truncated_last_line_is_rejected_as_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "truncated.json"
    path.write_bytes(good_line(1) + b"\n" + good_line(2)[:15])
    got = read(path)
    assert got.table.column("order_id").to_pylist() == [1]
    [reject] = got.rejects
    assert reject.line == 2 and "last line is cut short" in reject.reason


def test_an_empty_or_blank_file_holds_zero_records(tmp_path: Path) -> None:
    for fmt, data in [("json", b""), ("json", b"\n\n"), ("csv", b""), ("parquet", b"")]:
        path = tmp_path / f"empty.{fmt}"
        path.write_bytes(data)
        got = read(path, fmt)
        assert got.table.num_rows == 0 and got.rejects == (), (fmt, data)


def test_a_file_that_is_not_json_lines_is_one_reject_for_the_whole_file(tmp_path: Path) -> None:
    text = tmp_path / "notes.json"
    text.write_bytes(b"order_id,region\n1,eu\n2,us\n")
    binary = tmp_path / "image.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 30)
    for path, reason in [(text, "not JSON lines: none of its 3 lines"), (binary, "binary")]:
        got = read(path)
        assert got.table.num_rows == 0
        [reject] = got.rejects
        assert reject.line == WHOLE_FILE and reason in reject.reason
        assert reject.raw_bytes == path.stat().st_size
        assert reject.raw is not None and len(reject.raw) <= 4 * rejects.RAW_LIMIT


CSV_HEAD = b"order_id,region,amount,ts\n"


def test_nul_bytes_reject_their_line_or_row_and_never_a_file_s_good_records(tmp_path: Path) -> None:
    """A NUL byte is garbage in one line, not a verdict on the file: the lines around it go on.
    (A file whose lines are all garbage and hold NUL bytes is still one reject, "binary".)"""
    path = tmp_path / "big.json"
    lines = [good_line(i) for i in range(1, 2001)]
    lines[1] = b"\x00\x00\x00\x01 not a record"
    path.write_bytes(b"\n".join(lines) + b"\n")
    got = read(path)
    assert got.table.num_rows == 1999
    [reject] = got.rejects
    assert reject.line == 2 and "holds a NUL byte (at byte 1)" in reject.reason
    csv_path = tmp_path / "orders.csv"
    csv_path.write_bytes(
        CSV_HEAD
        + b"1,eu,1.50,2024-01-01T00:00:00Z\n"
        + b"2,e\x00u,1.50,2024-01-01T00:00:00Z\n"
        + b"3,us,3.00,2024-01-01T00:04:00Z\n"
    )
    got = read(csv_path, "csv")
    assert got.table.column("order_id").to_pylist() == [1, 3]
    [reject] = got.rejects
    assert reject.line == 3 and "holds a NUL byte (at byte 4)" in reject.reason
    binary = tmp_path / "blob.csv"
    binary.write_bytes(CSV_HEAD + b"\x00\x01\x02,\x03\n\x00\x00\n\xff\x00,\x00,\x00\n")
    [reject] = read(binary, "csv").rejects
    assert reject.line == WHOLE_FILE and "binary" in reject.reason


def test_a_csv_row_with_the_wrong_fields_or_values_is_rejected_and_the_others_go_on(tmp_path: Path) -> None:
    path = tmp_path / "orders.csv"
    path.write_bytes(
        CSV_HEAD
        + b"1,eu,1.50,2024-01-01T00:00:00Z\n"
        + b"2,eu\n"  # line 3: short row
        + b'3,"two\nlines",2.50,2024-01-01T00:01:00Z\n'  # lines 4-5: one row, quoted newline
        + b"four,eu,1.00,2024-01-01T00:02:00Z\n"  # line 6: wrong type
        + b"5,\xff,1.00,2024-01-01T00:03:00Z\n"  # line 7: invalid UTF-8
        + b"6,us,3.00,2024-01-01T00:04:00Z\n"
    )
    got = read(path, "csv")
    assert got.table.column("order_id").to_pylist() == [1, 3, 6]
    assert got.table.column("region").to_pylist() == ["eu", "two\nlines", "us"]
    assert [(r.line, r.raw) for r in got.rejects] == [
        (3, "2,eu"),
        (6, "four,eu,1.00,2024-01-01T00:02:00Z"),
        (7, "5,\\xff,1.00,2024-01-01T00:03:00Z"),
    ]
    reasons = [r.reason for r in got.rejects]
    assert reasons[0] == "the row has 2 field(s); the header has 4"
    assert reasons[1] == "column 'order_id' is BIGINT but the value is \"four\""
    assert "not valid UTF-8" in reasons[2]


def test_a_record_without_its_event_time_is_a_reject_and_the_others_go_on(tmp_path: Path) -> None:
    """A mapping with a WATERMARK declares its event-time column: a record without it (missing,
    null, empty) is malformed for that mapping, in every format (Spark's window and watermark
    dropped it silently). Without a WATERMARK the same record is a good one."""
    late = b'{"order_id": 2, "region": "eu", "amount": 1.5}'
    null = b'{"order_id": 4, "region": "eu", "amount": 1.5, "ts": null}'
    path = tmp_path / "orders.json"
    path.write_bytes(b"\n".join([good_line(1), late, good_line(3), null, good_line(5), b""]))
    reason = "the record has no event time: column 'ts' (the mapping's WATERMARK) is missing or null"
    got = read_records(str(path), "json", SCHEMA, event_time="ts")
    assert got.table.column("order_id").to_pylist() == [1, 3, 5]
    assert [(r.line, r.reason) for r in got.rejects] == [(2, reason), (4, reason)]
    assert read(path).table.column("order_id").to_pylist() == [1, 2, 3, 4, 5]
    csv_path = tmp_path / "orders.csv"
    csv_path.write_bytes(
        CSV_HEAD + b"1,eu,1.50,2024-01-01T00:00:00Z\n2,eu,1.50,\n3,us,3.00,2024-01-01T00:04:00Z\n"
    )
    got = read_records(str(csv_path), "csv", SCHEMA, event_time="ts")
    assert got.table.column("order_id").to_pylist() == [1, 3]
    assert [(r.line, r.reason) for r in got.rejects] == [(3, reason)]
    parquet = tmp_path / "orders.parquet"
    ts = pa.array([datetime(2024, 1, 1), None, datetime(2024, 1, 2)], pa.timestamp("us", tz="UTC"))
    write_parquet(parquet, {"order_id": pa.array([1, 2, 3]), "ts": ts})
    got = read_records(str(parquet), "parquet", SCHEMA, event_time="ts")
    assert got.table.column("order_id").to_pylist() == [1, 3]
    assert [(r.line, r.unit, r.reason) for r in got.rejects] == [(2, "row", reason)]


def test_a_csv_without_a_mapped_column_in_its_header_is_rejected_whole(tmp_path: Path) -> None:
    path = tmp_path / "other.csv"
    path.write_bytes(b"id,region\n1,eu\n")
    [reject] = read(path, "csv").rejects
    assert reject.line == WHOLE_FILE and "the header has no column 'order_id'" in reject.reason


def write_parquet(path: Path, columns: dict[str, pa.Array]) -> None:
    pq.write_table(pa.table(columns), path)


def test_parquet_rows_that_do_not_fit_the_mapping_are_rejected_by_row(tmp_path: Path) -> None:
    path = tmp_path / "orders.parquet"
    write_parquet(path, {"order_id": pa.array(["1", "two", "3"]), "region": pa.array(["eu", "us", "eu"])})
    got = read(path, "parquet")
    assert got.table.column("order_id").to_pylist() == [1, 3]
    [reject] = got.rejects
    assert (reject.line, reject.unit) == (2, "row")
    assert reject.where() == f"file {path}, row 2"
    assert reject.reason == "column 'order_id' is BIGINT but the value is \"two\""
    assert json.loads(str(reject.raw)) == {"order_id": "two", "region": "us"}


def test_a_parquet_file_of_the_wrong_shape_or_no_parquet_is_rejected_whole(tmp_path: Path) -> None:
    listy = tmp_path / "listy.parquet"
    write_parquet(listy, {"order_id": pa.array([[1], [2]])})
    other = tmp_path / "other.parquet"
    write_parquet(other, {"id": pa.array([1])})
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"PAR1 not really")
    cases = [(listy, "cannot become the mapping's BIGINT"), (other, "none of the mapping's columns")]
    for path, reason in cases + [(junk, "not readable Parquet")]:
        got = read(path, "parquet")
        [reject] = got.rejects
        assert got.table.num_rows == 0 and reject.line == WHOLE_FILE and reason in reject.reason, path


def test_on_error_must_name_a_policy() -> None:
    from pitstop.connectors.registry import connector
    from pitstop.errors import PlanError

    file = connector("file")
    assert file.check_options("orders", {"path": "/d", "OnError": "SKIP"}) == {
        "path": "/d",
        "onError": "skip",
    }
    with pytest.raises(PlanError) as err:
        file.check_options("orders", {"path": "/d", "onError": "ignore"})
    assert (
        str(err.value)
        == "mapping 'orders' (TYPE File): option 'onError' is 'ignore'; it takes keep | skip | fail"
    )


def test_rejects_files_are_rewritten_whole_and_collected_once(tmp_path: Path) -> None:
    folder = tmp_path / "rejects"
    found = [Reject("/d/a.json", 2, "x", 1, "bad"), Reject("/d/a.json", 5, "y", 1, "worse")]
    rejects.record(folder, "orders", "/d/a.json", found, "keep")
    seen: dict[str, tuple[int, int]] = {}
    assert rejects.collect(folder, seen) == found
    assert rejects.collect(folder, seen) == []  # nothing new
    rejects.record(folder, "orders", "/d/a.json", found, "skip")  # read again: the same file
    assert [r.raw for r in rejects.collect(folder, seen)] == [None, None]
    assert [p.name for p in folder.iterdir()] == ["a.json.jsonl"]
    with pytest.raises(Exception, match=r"file /d/a.json, line 2: bad"):
        rejects.record(folder, "orders", "/d/a.json", found, "fail")


def test_raw_text_is_cut_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "long.json"
    line = b'{"order_id": "' + b"9" * 100_000 + b'"}'
    path.write_bytes(line + b"\n")
    [reject] = read(path).rejects
    assert reject.raw_bytes == len(line) and reject.raw == line[: rejects.RAW_LIMIT].decode()


def test_an_older_home_gains_the_rejects_table(tmp_path: Path) -> None:
    path = tmp_path / "home" / "catalog.duckdb"
    Catalog(path).close()
    db = duckdb.connect(str(path))  # back to how version 2 left a home
    db.execute("DROP TABLE pitstop.rejects")
    db.execute("UPDATE pitstop.meta SET value = '2' WHERE key = 'schema_version'")
    db.close()
    catalog = Catalog(path)
    try:
        catalog.add_rejects("j", "orders", "run-1", [Reject("/d/a.json", 2, "x", 1, "bad")])
        catalog.add_rejects("j", "orders", "run-1", [Reject("/d/a.json", 2, "x", 1, "bad")])  # again
        assert catalog.query("SELECT job, run_id, line FROM pitstop.rejects")[1] == [("j", "run-1", 2)]
        version = catalog.query("SELECT value FROM pitstop.meta WHERE key = 'schema_version'")[1]
        assert version == [(str(SCHEMA_VERSION),)]
    finally:
        catalog.close()


def test_a_version_3_home_keeps_its_rejects_keyed_by_run(tmp_path: Path) -> None:
    """Version 3 keyed rejects by job name: a job created again under that name and reading the
    same file had its rejects ignored as already known. Version 4 keys them by run."""
    path = tmp_path / "home" / "catalog.duckdb"
    path.parent.mkdir()
    db = duckdb.connect(str(path))
    for version in (1, 2, 3):
        for statement in MIGRATIONS[version]:
            db.execute(statement)
    db.execute("INSERT INTO pitstop.meta VALUES ('schema_version', '3')")
    db.execute(
        "INSERT INTO pitstop.rejects VALUES ('j', 'orders', '/d/a.json', 2, 'x', 1, 'bad', 'run-1', now())"
    )
    db.close()
    catalog = Catalog(path)
    try:
        catalog.add_rejects("j", "orders", "run-2", [Reject("/d/a.json", 2, "x", 1, "bad")])
        catalog.add_rejects("j", "orders", "run-2", [Reject("/d/a.json", 2, "x", 1, "bad")])  # again
        rows = catalog.query("SELECT run_id, raw FROM pitstop.rejects ORDER BY run_id")[1]
        assert rows == [("run-1", "x"), ("run-2", "x")]
        assert catalog.reject_counts() == {}  # no job 'j' in this catalog: nobody's count
    finally:
        catalog.close()


def test_rejects_are_queryable_through_pitstop_serve(tmp_path: Path) -> None:
    with serving(settings(tmp_path / "home")) as served:
        whole = Reject("/d/notes.json", WHOLE_FILE, "a,b", 3, "the file is not JSON lines")
        served.manager.catalog.add_rejects("j", "orders", "run-1", [whole])
        with psycopg.connect(served.url(), autocommit=True) as conn:
            rows = conn.execute("SELECT job, source, file, line, reason FROM pitstop.rejects").fetchall()
            shown = conn.execute("SHOW JOBS").fetchall()
    assert rows == [("j", "orders", "/d/notes.json", 0, "the file is not JSON lines")]
    assert shown == []


# -- jobs on real Spark ------------------------------------------------------------------------------
HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class Expected:
    """The malformed lines a test wrote, and the good orders around them."""

    good: list[dict[str, object]]
    bad: dict[tuple[str, int], str]  # (file, line) -> words of the reason


def write_mixed(folder: Path, name: str, first: int, last: int) -> Expected:
    """Orders ``first..last-1`` as good lines with four malformed ones among them (a wrong type,
    broken JSON, invalid UTF-8 and a truncated last line). Each bad line has a time far ahead: a
    bad record taken as good would move the watermark and close every window."""
    good = [make_orders.order(i) for i in range(first, last)]
    ahead = "2030-01-01 00:00:00"
    lines = [json.dumps(o).encode() for o in good]
    lines.insert(1, json.dumps({"order_id": "x", "region": "eu", "amount": 1, "ts": ahead}).encode())
    lines.insert(3, b'{"order_id": 1, "region": "eu", "ts": "' + ahead.encode() + b'",,}')
    lines.insert(5, b'{"order_id": 2, "region": "\xff", "amount": 1, "ts": "' + ahead.encode() + b'"}')
    data = b"\n".join(lines) + b'\n{"order_id": 3, "ts": "' + ahead.encode() + b'", "amo'
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, folder / name)
    path = str(folder / name)
    bad = {
        (path, 2): "column 'order_id' is BIGINT",
        (path, 4): "not valid JSON",
        (path, 6): "not valid UTF-8",
        (path, len(lines) + 1): "last line is cut short",
    }
    return Expected(good, bad)


def rejects_of(manager: Manager, job: str) -> list[tuple[str, int, str | None, str]]:
    _, rows = manager.catalog.query(
        f"SELECT file, line, raw, reason FROM pitstop.rejects WHERE job = '{job}' ORDER BY file, line"
    )
    return [(str(f), int(n), raw, str(reason)) for f, n, raw, reason in rows]


def assert_rejects(manager: Manager, job: str, *expected: Expected, raw: bool = True) -> None:
    got = rejects_of(manager, job)
    bad = {k: v for e in expected for k, v in e.bad.items()}
    assert [(f, n) for f, n, _, _ in got] == sorted(bad), "each bad line once, no other"
    for f, n, text, reason in got:
        assert bad[(f, n)] in reason
        assert (text is not None) == raw


def job_row(manager: Manager, job: str) -> dict[str, object]:
    shown = run(manager, "SHOW JOBS;")[0]
    [row] = [dict(zip(shown.columns, r, strict=True)) for r in shown.rows if r[0] == job]
    return row


def windowed_job(folder: Path, options: str = "") -> str:
    return (
        orders_mapping(folder).replace("'format'='json'", f"'format'='json'{options}")
        + f"""
        CREATE MAPPING revenue TYPE DuckDB;
        CREATE JOB j AS INSERT INTO revenue {revenue_select("'1' HOUR")};
        AWAIT JOB j;
        """
    )


def expected_windows(*parts: Expected) -> dict:
    good = [o for p in parts for o in p.good]
    last = max(datetime.fromisoformat(str(o["ts"])) for o in good)
    return closed(batch_windows(good, HOUR), HOUR, last - DELAY)


@pytest.mark.spark
def test_a_windowed_job_sums_the_good_records_and_keeps_each_bad_one(
    manager: Manager, tmp_path: Path
) -> None:
    data = tmp_path / "orders"
    first = write_mixed(data, "a.json", 0, 100)
    second = write_mixed(data, "b.json", 100, 200)
    (data / "empty.json").write_bytes(b"")
    # The rest of the corpus: a file that is not JSON lines, and a 10 MB line among good ones.
    notes, huge = data / "notes.json", data / "huge.json"
    notes.write_bytes(b"order_id,region\n1,eu\n2,us\n")
    good = [make_orders.order(i) for i in (200, 201)]
    long_line = b'{"order_id": 7, "region": "' + b"x" * (10 << 20) + b'"}'
    huge.write_bytes(b"\n".join([json.dumps(good[0]).encode(), long_line, json.dumps(good[1]).encode(), b""]))
    # And records without their event time (the mapping's WATERMARK column ts): they were dropped
    # by the window in silence.
    timeless = data / "timeless.json"
    more = [make_orders.order(i) for i in (202, 203)]
    no_ts = {k: v for k, v in make_orders.order(204).items() if k != "ts"}
    null_ts = {**make_orders.order(205), "ts": None}
    timeless.write_bytes(
        b"\n".join(json.dumps(o).encode() for o in [more[0], no_ts, more[1], null_ts]) + b"\n"
    )
    third = Expected(
        good + more,
        {
            (str(notes), WHOLE_FILE): "not JSON lines",
            (str(huge), 2): "over the limit",
            (str(timeless), 2): "has no event time",
            (str(timeless), 4): "has no event time",
        },
    )
    run(manager, windowed_job(data))
    assert sink_windows(manager, "revenue") == expected_windows(first, second, third)
    assert_rejects(manager, "j", first, second, third)
    assert job_row(manager, "j")["rejects"] == 12
    described = dict(run(manager, "DESCRIBE JOB j;")[0].rows)
    summary = described["rejects from orders"]
    assert summary.startswith("12 malformed record(s) in pitstop.rejects; latest: file ")
    # Through the ad-hoc SELECT of `pitstop run -c` too.
    [(count,)] = run(manager, "SELECT count(*) FROM pitstop.rejects WHERE job = 'j';")[0].rows
    assert count == 12


@pytest.mark.spark
def test_rejects_outlive_drop_job_and_a_new_job_of_that_name_counts_only_its_own(
    manager: Manager, tmp_path: Path
) -> None:
    """Input records are never lost: a dropped job's rejects stay in pitstop.rejects (with the run
    that read them). A job created again under the name, not from a snapshot, counts its own only,
    also when it reads the same files again (its rejects are kept beside the old ones)."""
    first_folder, second_folder = tmp_path / "orders", tmp_path / "orders2"
    first = write_mixed(first_folder, "a.json", 0, 100)
    run(manager, windowed_job(first_folder))
    assert job_row(manager, "j")["rejects"] == 4
    run(manager, "DROP JOB j;")
    assert len(rejects_of(manager, "j")) == 4  # kept

    second = write_mixed(second_folder, "b.json", 100, 200)
    hourly = revenue_select("'1' HOUR")
    run(
        manager,
        orders_mapping(second_folder, "orders2")
        + f"CREATE JOB j AS INSERT INTO revenue {hourly.replace('TABLE orders,', 'TABLE orders2,')};"
        + "AWAIT JOB j;",
    )
    assert job_row(manager, "j")["rejects"] == 4  # b.json's, not 8
    described = dict(run(manager, "DESCRIBE JOB j;")[0].rows)
    assert "rejects from orders" not in described
    assert described["rejects from orders2"].startswith("4 malformed record(s)")

    run(manager, "DROP JOB j;")
    run(manager, f"CREATE JOB j AS INSERT INTO revenue {hourly}; AWAIT JOB j;")
    assert job_row(manager, "j")["rejects"] == 4  # a.json's again: its own, not the first job's
    _, rows = manager.catalog.query(
        "SELECT file, line, count(DISTINCT run_id) FROM pitstop.rejects GROUP BY ALL ORDER BY ALL"
    )
    assert rows == sorted([(f, n, 2) for f, n in first.bad] + [(f, n, 1) for f, n in second.bad])


@pytest.mark.spark
def test_on_error_skip_counts_bad_records_without_their_text(manager: Manager, tmp_path: Path) -> None:
    data = tmp_path / "orders"
    mixed = write_mixed(data, "a.json", 0, 100)
    run(manager, windowed_job(data, ", 'onError'='skip'"))
    assert sink_windows(manager, "revenue") == expected_windows(mixed)
    assert_rejects(manager, "j", mixed, raw=False)
    assert job_row(manager, "j")["rejects"] == 4


@pytest.mark.spark
def test_on_error_fail_fails_the_job_at_once_naming_file_line_and_reason(
    manager: Manager, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Reading the file again meets the same record: the job is not restarted from its
    checkpoint (as a branch that failed for another reason is, up to 3 times)."""
    caplog.set_level(logging.WARNING, logger="pitstop")
    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 10, files=1)
    ts = '"ts": "2024-01-01T00:00:00"'
    (data / "broken.json").write_text(
        f'{{"order_id": 1, "region": "eu", {ts}}}\n{{"order_id": "two", {ts}}}\n'
    )
    with pytest.raises(JobFailedError) as failed:
        run(manager, windowed_job(data, ", 'onError'='fail'").replace("AWAIT JOB j;", ""))
        run(manager, "AWAIT JOB j TIMEOUT INTERVAL '300' SECOND;")
    said = (
        f"mapping 'orders' met a malformed record in file {data / 'broken.json'}, line 2: "
        "column 'order_id' is BIGINT but the value is \"two\""
    )
    assert said in str(failed.value)
    row = job_row(manager, "j")
    assert row["status"] == "FAILED" and said in str(row["detail"]) and row["rejects"] == 0
    assert said in dict(run(manager, "DESCRIBE JOB j;")[0].rows)["status"]
    said_in_log = [r.getMessage() for r in caplog.records]
    assert [m for m in said_in_log if "restarting it from its checkpoint" in m] == []


def crash(manager: Manager) -> None:
    """What a killed process leaves behind: the queries stopped without any bookkeeping, the job
    still RUNNING in the catalog, and rejects files the catalog has not ingested."""
    manager._closed.set()  # the supervisor goes (it would ingest)
    for active in manager.runs.values():
        active.stop()
    manager.catalog.close()


def uncommit_last_data_batch(home: Path, rejects_file: Path) -> None:
    """As if the process died after the batch that read the last file wrote its rejects and its
    sink rows, but before Spark committed it: that batch, and what came after, are forgotten by
    the checkpoint (Spark runs it again), and the reader's rejects file is gone too."""
    [ckpt] = home.glob("runs/*/branches/0/checkpoint")
    last = checkpoint.latest_commit(ckpt)
    assert last is not None
    at_end = checkpoint.read_offsets(ckpt, last)
    assert at_end is not None
    batch = last
    while batch > 0 and (checkpoint.read_offsets(ckpt, batch - 1) or at_end).positions == at_end.positions:
        batch -= 1  # back to the batch that first read up to the last file
    for log in ("commits", "offsets"):
        for n in range(batch + (1 if log == "offsets" else 0), last + 1):
            for name in (str(n), f".{n}.crc"):
                (ckpt / log / name).unlink(missing_ok=True)
    rejects_file.unlink()


@pytest.mark.spark
def test_every_reject_is_recorded_once_across_a_crash_and_a_restore_from_snapshot(tmp_path: Path) -> None:
    home, data = tmp_path / "home2", tmp_path / "orders"
    first = write_mixed(data, "a.json", 0, 100)
    before = Manager(settings(home))
    run(before, windowed_job(data))
    second = write_mixed(data, "b.json", 100, 200)
    run(before, "AWAIT JOB j;")
    with before.catalog.transaction() as tx:  # as if it died before ingesting b.json's rejects
        tx.execute("DELETE FROM pitstop.rejects WHERE file LIKE '%b.json'")
    crash(before)
    [b_rejects] = home.glob("runs/*/sources/orders/rejects/b.json.jsonl")
    uncommit_last_data_batch(home, b_rejects)

    after = Manager(settings(home))
    try:
        run(after, "AWAIT JOB j;")  # resumes the job: it reads b.json again
        assert b_rejects.exists()
        assert_rejects(after, "j", first, second)
        assert sink_windows(after, "revenue") == expected_windows(first, second)

        run(after, "DROP JOB j WITH SNAPSHOT s1;")
        assert_rejects(after, "j", first, second)
        third = write_mixed(data, "c.json", 200, 300)
        hourly = revenue_select("'1' HOUR")
        run(after, f"CREATE JOB j FROM SNAPSHOT s1 AS INSERT INTO revenue {hourly};")
        run(after, "AWAIT JOB j;")
        assert_rejects(after, "j", first, second, third)
        assert job_row(after, "j")["rejects"] == 12
        assert sink_windows(after, "revenue") == expected_windows(first, second, third)
    finally:
        after.close()
