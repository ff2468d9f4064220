"""Jobs outlive the process: a `pitstop` process killed with SIGKILL mid-stream, and a run that ends
normally, both resume from their checkpoints in the next run, with every sink row exactly once.
The killed ones are real processes; the runs after them are `pitstop` in this process, on its Spark
session (another JVM than the killed process's)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from command_helpers import pitstop, start
from conftest import wait_until_gone
from pitstop.engine import checkpoint

pytestmark = pytest.mark.spark  # every test here runs jobs on real Spark

EVENTS = 10000
# Events are all available at once; max_per_batch spreads them over many micro-batches, so the
# kill after a few commits is mid-stream however slow the machine is.
SCRIPT = f"""
CREATE MAPPING events (
    id BIGINT, k VARCHAR, v DOUBLE, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) TYPE Generator OPTIONS (
    'rate'='1000000', 'limit'='{EVENTS}', 'max_per_batch'='1000', 'keys'='5', 'step_ms'='200');
CREATE MAPPING copies TYPE DuckDB;
CREATE MAPPING per_minute TYPE DuckDB;
CREATE JOB feed AS BEGIN
    INSERT INTO copies SELECT id, k, v, ts FROM events;
    INSERT INTO per_minute
    SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS total
    FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
    GROUP BY window_start, window_end, k;
END;
"""


def query(home: Path, sql: str) -> list[dict[str, object]]:
    done = pitstop("run", "--format", "json", "-c", sql, home=home)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def wait_for_commits(home: Path, count: int, process: subprocess.Popen[str], timeout_s: float = 180) -> Path:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        for ckpt in home.glob("runs/*/branches/0/checkpoint"):
            committed = checkpoint.latest_commit(ckpt)
            if committed is not None and committed + 1 >= count:
                return ckpt
        time.sleep(0.05)
    raise AssertionError(f"no {count} committed batches within {timeout_s} s")


def running(home: Path, script: str) -> subprocess.Popen[str]:
    """``pitstop run -`` as a real process with ``script`` on its stdin, which stays open: the
    process keeps running its jobs until stdin is closed (or the process is killed)."""
    process = start(
        "run", "-", home=home, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdin is not None
    process.stdin.write(script)
    process.stdin.flush()
    return process


def kill(process: subprocess.Popen[str]) -> None:
    """SIGKILL, and wait until its JVM and Python workers are gone too (they notice their parent
    is gone; none may go on writing checkpoints beside the next run)."""
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    wait_until_gone(process.pid)


def assert_closed_windows_match(home: Path) -> None:
    """Every closed minute window in ``per_minute`` once, equal to a batch computation over the
    events in ``copies``."""
    [diff] = query(
        home,
        """
        WITH expected AS (
            SELECT date_trunc('minute', ts) AS ws, k, count(*) AS n, sum(v) AS total
            FROM copies GROUP BY ALL),
        horizon AS (SELECT max(ts) - INTERVAL 1 SECOND AS wm FROM copies)
        SELECT
          (SELECT count(*) FROM per_minute) AS emitted,
          (SELECT count(DISTINCT (window_start, k)) FROM per_minute) AS distinct_windows,
          (SELECT count(*) FROM expected, horizon WHERE ws + INTERVAL 1 MINUTE <= wm) AS closed,
          (SELECT count(*) FROM per_minute p JOIN expected e ON p.window_start = e.ws AND p.k = e.k
             WHERE p.n = e.n AND abs(p.total - e.total) < 1e-6) AS matching
    """,
    )
    assert diff["emitted"] == diff["distinct_windows"] == diff["closed"] == diff["matching"]
    assert diff["emitted"] >= 5 * 20


def test_killed_process_resumes_with_every_row_exactly_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = running(home, SCRIPT)  # stdin stays open: the process keeps running its job
    ckpt = wait_for_commits(home, 3, first)
    kill(first)
    at_kill = checkpoint.progress(ckpt, {})
    assert at_kill.positions.get("events", 0) < EVENTS, "the job had finished before the kill"

    # The next run (in this process) finds the job RUNNING in a dead process, resumes it and
    # catches up.
    second = pitstop("run", "-c", "AWAIT JOB feed TIMEOUT INTERVAL '240' SECOND;", home=home)
    assert second.returncode == 0, second.stderr
    assert "caught up" in second.stdout

    # It exited normally: the job is STOPPED, and says it resumes (no Spark needed to see it).
    jobs = query(home, "SHOW JOBS")
    assert [(j["name"], j["status"]) for j in jobs] == [("feed", "STOPPED")]
    assert "resumes" in str(jobs[0]["detail"])

    [copies] = query(
        home, "SELECT count(*) AS n, count(DISTINCT id) AS d, min(id) AS lo, max(id) AS hi FROM copies"
    )
    assert copies == {"n": EVENTS, "d": EVENTS, "lo": 0, "hi": EVENTS - 1}

    # Closed minute windows equal a batch computation over the copied events.
    assert_closed_windows_match(home)

    # A third run resumes the STOPPED job again when it needs Spark.
    third = pitstop("run", "-c", "AWAIT JOB feed; SHOW JOBS;", home=home)
    assert third.returncode == 0, third.stderr
    assert "RUNNING" in third.stdout
    [again] = query(home, "SELECT count(*) AS n FROM copies")
    assert again["n"] == EVENTS


def test_killed_process_resumes_a_natively_restored_job_with_every_row_exactly_once(tmp_path: Path) -> None:
    """A job restored on a snapshot's native copy is a run like any other: killed mid-stream with
    SIGKILL, the next process resumes it from its own checkpoint, every row exactly once."""
    home = tmp_path / "home"
    first = running(home, SCRIPT.replace(f"'limit'='{EVENTS}'", "'limit'='3000'"))
    wait_for_commits(home, 3, first)
    _, err = first.communicate("DROP JOB feed WITH SNAPSHOT s1;\n", timeout=300)
    assert first.returncode == 0, err
    wait_until_gone(first.pid)
    manifest = json.loads((home / "snapshots" / "s1" / "manifest.json").read_text())
    cut = manifest["stages"]["per_minute.aggregate"]["batch_id"]

    # More events in the same source (a larger limit), then the same job from the snapshot.
    create = SCRIPT.replace("CREATE MAPPING events", "CREATE OR REPLACE MAPPING events").replace(
        "CREATE MAPPING copies TYPE DuckDB;\nCREATE MAPPING per_minute TYPE DuckDB;\n", ""
    )
    create = create.replace("CREATE JOB feed AS", "CREATE JOB feed FROM SNAPSHOT s1 AS")
    second = running(home, create)
    deadline = time.monotonic() + 180
    native: Path | None = None
    while native is None or (checkpoint.latest_commit(native) or 0) < cut + 3:
        assert time.monotonic() < deadline, "the restored job committed no 3 batches"
        assert second.poll() is None, second.stderr.read() if second.stderr else ""
        runs = list(home.glob("runs/*"))
        native = runs[0] / "branches" / "1" / "checkpoint" if runs else None
        time.sleep(0.05)
    kill(second)
    assert checkpoint.progress(native, {}).positions.get("events", 0) < EVENTS, "finished before the kill"

    third = pitstop("run", "-c", "AWAIT JOB feed TIMEOUT INTERVAL '240' SECOND;", home=home)
    assert third.returncode == 0, third.stderr
    [run] = query(home, "SELECT restore->>'$.native' AS native FROM pitstop.runs WHERE restore IS NOT NULL")
    assert json.loads(str(run["native"])) == ["per_minute.aggregate"]
    [copies] = query(home, "SELECT count(*) AS n, count(DISTINCT id) AS d, max(id) AS hi FROM copies")
    assert copies == {"n": EVENTS, "d": EVENTS, "hi": EVENTS - 1}
    assert_closed_windows_match(home)


def test_killed_process_resumes_an_interval_join_on_both_streams_clocks(tmp_path: Path) -> None:
    """Issue 23: an interval join's watermark is the lesser of its two streams', and each stream's
    own lives in Spark's memory only. After a SIGKILL the next process goes on with both: views
    (01:55) idle since, clicks moves on to 02:55, so the click at 01:40 is late (dropped and
    counted), not paired with the view at 02:00."""
    home, cdir, vdir = tmp_path / "home", tmp_path / "clicks", tmp_path / "views"
    cdir.mkdir()
    vdir.mkdir()

    def write(folder: Path, name: str, row: dict[str, object]) -> None:
        (folder / f".{name}.tmp").write_text(json.dumps(row) + "\n")
        (folder / f".{name}.tmp").rename(folder / name)

    write(vdir, "1.json", {"id": 100, "k": "a", "vts": "2024-01-01 02:00:00"})
    write(cdir, "1.json", {"id": 1, "k": "a", "ts": "2024-01-01 01:00:00"})
    first = running(
        home,
        f"""CREATE MAPPING clicks (id BIGINT, k VARCHAR, ts TIMESTAMP,
                WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE) TYPE File OPTIONS ('path'='{cdir}');
        CREATE MAPPING views (id BIGINT, k VARCHAR, vts TIMESTAMP,
                WATERMARK FOR vts AS vts - INTERVAL '5' MINUTE) TYPE File OPTIONS ('path'='{vdir}');
        CREATE MAPPING pairs TYPE DuckDB;
        CREATE JOB j AS INSERT INTO pairs SELECT a.id, b.id AS vid FROM clicks a JOIN views b
            ON a.k = b.k AND b.vts BETWEEN a.ts AND a.ts + INTERVAL '30' MINUTE;
        """,
    )
    ckpt = wait_for_commits(home, 1, first)
    kill(first)
    committed = checkpoint.latest_commit(ckpt)
    assert committed is not None
    assert checkpoint.commit_watermark(ckpt, committed) == 1704070500000  # 00:55, the lesser

    write(cdir, "2.json", {"id": 2, "k": "a", "ts": "2024-01-01 03:00:00"})
    second = pitstop("run", "-c", "AWAIT JOB j TIMEOUT INTERVAL '240' SECOND;", home=home)
    assert second.returncode == 0, second.stderr
    write(cdir, "3.json", {"id": 3, "k": "a", "ts": "2024-01-01 01:40:00"})  # late: at 01:55
    third = pitstop("run", "-c", "AWAIT JOB j TIMEOUT INTERVAL '240' SECOND;", home=home)
    assert third.returncode == 0, third.stderr
    assert query(home, "SELECT count(*) AS n FROM pairs") == [{"n": 0}]
    assert query(home, "SELECT stage, rows FROM pitstop.late_rows") == [{"stage": "pairs.join", "rows": 1}]
