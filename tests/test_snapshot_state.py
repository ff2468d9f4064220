"""``snapshot_state('s', 'stage')`` (issue 11, section 5): a snapshot's state read with plain SQL,
answered by DuckDB over the snapshot's Parquet without Spark, in scripts and over the server.

The snapshot read here is the one committed to the repository (``tests/data/snapshot_format_1``,
written by a real Spark job); tests/test_one_clock.py reads snapshots written in the same run."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from conftest import run
from pitstop.catalog.rows import Snapshot
from pitstop.driver import Driver
from pitstop.errors import CatalogError, PlanError
from pitstop.executor import Executor
from pitstop.manager import Manager
from server_helpers import Served, psql

DATA = Path(__file__).resolve().parent / "data" / "snapshot_format_1" / "windows_v1"


def install(manager: Manager, name: str, change: float = 0) -> Path:
    """A copy of the committed snapshot under ``name``; ``change`` is added to every per-minute
    revenue accumulator of the copy (a later snapshot of the same job, as far as SQL can tell)."""
    folder = manager.home / "snapshots" / name
    shutil.copytree(DATA, folder)
    if change:
        part = folder / "stages" / "per_minute.aggregate" / "part-0.parquet"
        table = pq.read_table(part)
        acc0 = table.column("acc0")
        bumped = pc.add(acc0, pa.scalar(Decimal(str(change)), acc0.type)).cast(acc0.type)
        pq.write_table(table.set_column(table.schema.get_field_index("acc0"), "acc0", bumped), part)
    manifest = json.loads((folder / "manifest.json").read_text())
    snap = Snapshot(name, "windows", datetime.now(UTC), str(folder), int(manifest["bytes"]), 12, manifest)
    with manager.catalog.transaction() as tx:
        manager.catalog.add_snapshot(snap, tx)
    return folder


def parquet_rows(stage: str) -> list[dict[str, object]]:
    """The stage's rows as the Parquet file holds them (pyarrow, not DuckDB)."""
    rows = pq.read_table(DATA / "stages" / stage / "part-0.parquet").to_pylist()
    for r in rows:
        for k in ("window_start", "window_end"):
            r[k] = r[k].replace(tzinfo=None)
    return sorted(rows, key=lambda r: (r["window_start"], r["region"]))


def test_state_rows_hold_keys_windows_finished_columns_and_raw_accumulators(manager: Manager) -> None:
    install(manager, "windows_v1")
    [per_minute] = run(
        manager,
        "SELECT * FROM snapshot_state('windows_v1', 'per_minute.aggregate') ORDER BY window_start, region;",
    )
    assert per_minute.columns == ("region", "window_start", "window_end", "revenue", "n", "acc0", "acc1")
    want = parquet_rows("per_minute.aggregate")
    assert len(want) == 3
    assert [tuple(r) for r in per_minute.rows] == [
        (r["region"], r["window_start"], r["window_end"], r["acc0"], r["acc1"], r["acc0"], r["acc1"])
        for r in want
    ]

    # AVG finished as the job finishes it: sum / count, as DECIMAL(16,6); MAX as itself.
    [sessions] = run(
        manager,
        "SELECT region, window_start, mean, n, acc0, acc1, acc2 FROM snapshot_state('windows_v1', "
        "'sessions.aggregate') ORDER BY window_start, region;",
    )
    want = parquet_rows("sessions.aggregate")
    assert [tuple(r) for r in sessions.rows] == [
        (
            r["region"],
            r["window_start"],
            (r["acc0"] / r["acc1"]).quantize(Decimal("0.000001"), ROUND_HALF_UP),
            r["acc2"],
            r["acc0"],
            r["acc1"],
            r["acc2"],
        )
        for r in want
    ]
    [sliding] = run(
        manager, "SELECT count(*), max(top) FROM snapshot_state('windows_v1', 'sliding.aggregate');"
    )
    top = max(r["acc0"] for r in parquet_rows("sliding.aggregate"))
    assert sliding.rows == ((6, top),)


def test_two_snapshots_of_a_job_compare_in_plain_sql(manager: Manager) -> None:
    install(manager, "windows_v1")
    install(manager, "windows_v2", change=1.5)
    [diff] = run(
        manager,
        """WITH a AS (SELECT * FROM snapshot_state('windows_v1', 'per_minute.aggregate')),
                b AS (SELECT * FROM snapshot_state('WINDOWS_V2', 'per_minute.aggregate'))
        SELECT a.region, b.revenue - a.revenue AS grew, b.n - a.n AS more
        FROM a JOIN b USING (region, window_start)
        WHERE b.revenue <> a.revenue ORDER BY a.region;""",
    )
    regions = sorted(r["region"] for r in parquet_rows("per_minute.aggregate"))
    assert diff.rows == tuple((r, Decimal("1.50"), 0) for r in regions)


def test_unknown_snapshots_and_stages_are_named_with_what_exists(manager: Manager) -> None:
    install(manager, "windows_v1")
    unknown = r"unknown snapshot 'windows_v9' \(did you mean 'windows_v1'\?\) in snapshot_state\(\.\.\.\); "
    with pytest.raises(CatalogError, match=unknown + "snapshots: 'windows_v1'"):
        run(manager, "SELECT * FROM snapshot_state('windows_v9', 'sliding.aggregate');")
    with pytest.raises(CatalogError) as stage:
        run(manager, "SELECT * FROM snapshot_state('windows_v1', 'sliding');")
    assert stage.value.message.startswith(
        "snapshot 'windows_v1' has no stage 'sliding' (did you mean 'sliding.aggregate'?); its stages: "
        "'per_minute.aggregate', 'sessions.aggregate', 'sliding.aggregate'"
    )
    with pytest.raises(PlanError, match=r"snapshot_state\(\.\.\.\) takes two quoted names"):
        run(manager, "SELECT * FROM snapshot_state(windows_v1);")
    shutil.rmtree(manager.home / "snapshots" / "windows_v1" / "stages" / "sliding.aggregate")
    with pytest.raises(CatalogError, match="stage 'sliding.aggregate': its rows .* are missing"):
        run(manager, "SELECT * FROM snapshot_state('windows_v1', 'sliding.aggregate');")
    # A name in a string or a comment is not a call.
    [plain] = run(manager, "SELECT 'snapshot_state(1)' AS s -- snapshot_state('x', 'y')\n;")
    assert plain.rows == (("snapshot_state(1)",),)


def two_snapshots(manager: Manager) -> None:
    install(manager, "windows_v1")
    install(manager, "windows_v2", change=1.5)


@pytest.mark.served(catalog=two_snapshots)
def test_state_is_read_over_the_server_by_psycopg_and_psql(served: Served) -> None:
    want = parquet_rows("per_minute.aggregate")
    query = (
        "SELECT region, window_start, revenue, acc1 FROM snapshot_state('windows_v1', "
        "'per_minute.aggregate') WHERE acc1 >= %s ORDER BY window_start, region"
    )
    with psycopg.connect(served.url(), autocommit=True) as conn:
        for _ in range(2):  # the second time too: a state table is never a kept result
            rows = conn.execute(query, [0]).fetchall()
            assert rows == [(r["region"], r["window_start"], r["acc0"], r["acc1"]) for r in want]
        joined = conn.execute(
            "SELECT count(*) FROM snapshot_state('windows_v1', 'per_minute.aggregate') a "
            "JOIN snapshot_state('windows_v2', 'per_minute.aggregate') b USING (region, window_start) "
            "WHERE b.acc0 - a.acc0 = 1.5"
        ).fetchone()
        assert joined == (len(want),)
        with pytest.raises(psycopg.errors.UndefinedObject) as unknown:
            conn.execute("SELECT * FROM snapshot_state('nope', 'x')")
        assert "unknown snapshot 'nope'" in str(unknown.value)
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the session goes on
        # The server's DuckDB still reads no file itself.
        with pytest.raises(psycopg.Error):
            conn.execute(f"SELECT * FROM read_parquet('{DATA}/stages/sliding.aggregate/part-0.parquet')")
    done = psql(
        served,
        "-A",
        "-t",
        "-c",
        "SELECT region || '|' || n FROM snapshot_state('windows_v1', 'per_minute.aggregate') "
        "ORDER BY window_start, region",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"{r['region']}|{r['acc1']}" for r in want]


@pytest.mark.served(catalog=two_snapshots)
def test_state_is_read_by_a_named_cursor_and_copied_out(served: Served) -> None:
    """A cursor's query runs on a DuckDB connection of its own: the state tables are registered
    there; COPY reads them as any query does."""
    want = [(r["region"], r["acc1"]) for r in parquet_rows("per_minute.aggregate")]
    query = (
        "SELECT region, acc1 FROM snapshot_state('windows_v1', 'per_minute.aggregate') "
        "ORDER BY window_start, region"
    )
    with psycopg.connect(served.url()) as conn:
        with conn.cursor(name="state") as cur:
            cur.execute(query)
            assert cur.fetchmany(2) == want[:2]
            assert conn.execute("SELECT 1").fetchone() == (1,)
            assert cur.fetchall() == want[2:]
        conn.commit()
        with conn.cursor().copy(f"COPY ({query}) TO STDOUT (FORMAT csv)") as copy:
            lines = b"".join(bytes(block) for block in copy).decode().splitlines()
        assert lines == [f"{region},{n}" for region, n in want]


def test_check_mode_names_an_unknown_snapshot_or_stage_before_anything_runs(manager: Manager) -> None:
    install(manager, "windows_v1")
    checker = Driver(Executor(None, manager.catalog))
    ok, errors = checker.check(
        "SELECT * FROM snapshot_state('windows_v1', 'sliding.aggregate');\n"
        "SELECT * FROM snapshot_state('windows_v1', 'daily');\n"
        "SELECT * FROM snapshot_state('windows_v7', 'daily');\n"
    )
    assert ok == 1
    assert [(e.line, e.message) for e in errors] == [
        (
            2,
            "snapshot 'windows_v1' has no stage 'daily'; its stages: 'per_minute.aggregate', "
            "'sessions.aggregate', 'sliding.aggregate'",
        ),
        (3, "unknown snapshot 'windows_v7' (did you mean 'windows_v1'?); SHOW SNAPSHOTS lists the snapshots"),
    ]
