"""`pitstop check` reads the home and changes nothing in it, and follows the checked files' own
jobs and snapshots. Through the `pitstop` command on real DuckDB files (a real process where the
home must come out of the whole process as it went in); no Spark needed."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from command_helpers import pitstop
from conftest import orders_mapping, revenue_select
from pitstop.catalog.clock import now
from pitstop.catalog.rows import STOPPED, Job, Run, Snapshot
from pitstop.catalog.schema import MIGRATIONS, SCHEMA_VERSION
from pitstop.catalog.store import Catalog
from pitstop.driver import Driver
from pitstop.executor import Executor
from pitstop.manager import Manager
from pitstop.planner.build import plan_job
from pitstop.settings import Settings
from pitstop.sql import nodes
from pitstop.sql.parser import parse_statement


def tree(home: Path) -> dict[str, tuple[str, int] | str]:
    """Every file (hash, mtime) and folder under the home; {} when the home does not exist."""
    if not home.exists():
        return {}
    out: dict[str, tuple[str, int] | str] = {".": "folder"}
    for path in sorted(home.rglob("*")):
        key = path.relative_to(home).as_posix()
        if path.is_dir():
            out[key] = "folder"
        else:
            out[key] = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
    return out


def job_sql(name: str, size: str = "'1' HOUR", header: str = "") -> str:
    return f"CREATE JOB {name} {header} AS INSERT INTO daily_revenue {revenue_select(size)};\n"


SINK = "CREATE MAPPING daily_revenue TYPE DuckDB;\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home as `pitstop run` leaves it: mappings, a stopped job 'revenue' with its run folder,
    and a snapshot 'revenue_v0' of it (catalog row and manifest; no state files: check reads none)."""
    home = tmp_path / "home"
    manager = Manager(Settings(home=home))
    try:
        for _ in Driver(Executor(manager)).run_script(orders_mapping(tmp_path / "orders") + SINK):
            pass
        catalog = manager.catalog
        node = parse_statement(job_sql("revenue"))
        assert isinstance(node, nodes.CreateJob)
        plan = plan_job("revenue", list(node.args["body"]), catalog.get_mapping)
        folder = home / "runs" / "revenue-0001"
        folder.mkdir(parents=True)
        catalog.create_job(
            Job("revenue", job_sql("revenue"), STOPPED, "", "revenue-0001", None, now(), now()),
            Run("revenue-0001", "revenue", str(folder), plan.to_json(), None, now()),
        )
        # The manifest's entries as the export writes them for a cut before any input arrived.
        branches = plan.to_json()["branches"]
        stages = {
            b["stage"]["name"]: {"plan": b["stage"], "rows": 0, "batch_id": 0, "watermark_ms": 0}
            for b in branches
            if b["stage"]
        }
        manifest = {
            "snapshot": "revenue_v0",
            "job": "revenue",
            "stages": stages,
            "sources": {"orders": {"type": "file", "pos": 0}},
            "plan": plan.to_json(),
        }
        with catalog.transaction() as tx:
            folder = home / "snapshots" / "revenue_v0"
            catalog.add_snapshot(Snapshot("revenue_v0", "revenue", now(), str(folder), 0, 0, manifest), tx)
    finally:
        manager.close()
    return home


def every_statement(tmp_path: Path) -> Path:
    """A script that, run for real, would change everything a home holds."""
    return write(
        tmp_path / "all.sql",
        "CREATE MAPPING hourly TYPE DuckDB;\n"
        "CREATE SNAPSHOT revenue_v1 FOR JOB revenue;\n"
        "DROP SNAPSHOT revenue_v0;\n"
        "DROP JOB revenue WITH SNAPSHOT revenue_v2;\n"
        + job_sql("revenue", "'2' HOUR", "FROM SNAPSHOT revenue_v2")
        + "ALTER JOB revenue SUSPEND;\n"
        "CREATE VIEW big AS SELECT * FROM orders WHERE amount > 100;\n"
        "SELECT count(*) FROM pitstop.jobs;\n"
        "DROP MAPPING hourly;\n",
    )


# -- the home is only read ---------------------------------------------------------------------------
def test_check_leaves_every_file_and_folder_of_the_home_as_it_was(home: Path, tmp_path: Path) -> None:
    before = tree(home)
    assert "catalog.duckdb" in before and "runs/revenue-0001" in before
    time.sleep(0.01)  # a rewrite with the same bytes would still move the mtimes
    done = pitstop("check", str(every_statement(tmp_path)), home=home, process=True)
    assert done.returncode == 0, done.stderr
    assert "9 statement(s) OK" in done.stdout
    assert tree(home) == before


def test_check_of_a_home_that_does_not_exist_does_not_create_it(tmp_path: Path) -> None:
    home = tmp_path / "nowhere" / "home"
    script = write(tmp_path / "a.sql", orders_mapping(tmp_path / "orders") + SINK + job_sql("revenue"))
    done = pitstop("check", str(script), home=home)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "nowhere").exists()
    assert not (tmp_path / "orders").exists()  # a File mapping's folder is not made either


def test_check_beside_a_process_holding_the_catalog_says_so_and_changes_nothing(
    home: Path, tmp_path: Path
) -> None:
    # DuckDB (measured on 2.0.0) refuses a read-only open while another process holds the
    # file read-write: check reports it rather than wait or write.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time\n"
            f"db = duckdb.connect({str(home / 'catalog.duckdb')!r})\n"
            "print('open', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        before = tree(home)
        done = pitstop("check", str(write(tmp_path / "a.sql", "SHOW JOBS;\n")), home=home)
        assert done.returncode == 1
        assert f"cannot read the catalog of the pitstop home {home}" in done.stderr
        assert "Conflicting lock" in done.stderr and "pitstop serve" in done.stderr
        assert "Traceback" not in done.stderr
        assert tree(home) == before
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


# -- schema versions ---------------------------------------------------------------------------------
def _version(db: Path) -> str:
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute("SELECT value FROM pitstop.meta WHERE key = 'schema_version'").fetchone()
    assert row is not None
    return str(row[0])


def test_check_does_not_upgrade_an_older_catalog_and_says_how_to(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = home / "catalog.duckdb"
    with duckdb.connect(str(db)) as con:  # version 1, as the first pitstop wrote it
        for statement in MIGRATIONS[1]:
            con.execute(statement)
        con.execute("INSERT INTO pitstop.meta VALUES ('schema_version', '1')")
    before, mtime = tree(home), db.stat().st_mtime_ns
    time.sleep(0.01)
    done = pitstop("check", str(write(tmp_path / "a.sql", SINK)), home=home)
    assert done.returncode == 1
    assert f"the catalog of the pitstop home {home} is at schema version 1" in done.stderr
    assert "run -c 'SHOW JOBS'" in done.stderr and "Traceback" not in done.stderr
    assert (tree(home), db.stat().st_mtime_ns, _version(db)) == (before, mtime, "1")
    # What the message says to do works: pitstop (not check) upgrades it, then check passes.
    assert pitstop("run", "-c", "SHOW JOBS", home=home).returncode == 0
    assert _version(db) == str(SCHEMA_VERSION)
    assert pitstop("check", str(tmp_path / "a.sql"), home=home).returncode == 0


def test_check_refuses_a_catalog_from_a_newer_pitstop_and_leaves_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    db = home / "catalog.duckdb"
    Catalog(db).close()
    with duckdb.connect(str(db)) as con:
        newer = str(SCHEMA_VERSION + 1)
        con.execute("UPDATE pitstop.meta SET value = ? WHERE key = 'schema_version'", [newer])
    before = tree(home)
    done = pitstop("check", str(write(tmp_path / "a.sql", SINK)), home=home)
    assert done.returncode == 1
    assert f"was written by a newer pitstop (catalog version {SCHEMA_VERSION + 1})" in done.stderr
    assert (tree(home), _version(db)) == (before, str(SCHEMA_VERSION + 1))


# -- snapshots earlier in the checked files ------------------------------------------------------------
def test_a_snapshot_created_earlier_in_the_script_can_start_a_job(tmp_path: Path) -> None:
    script = write(
        tmp_path / "a.sql",
        orders_mapping(tmp_path / "orders")
        + SINK
        + job_sql("revenue")
        + "CREATE SNAPSHOT revenue_v1 FOR JOB revenue;\n"
        + job_sql("revenue_2h", "'2' HOUR", "FROM SNAPSHOT revenue_v1"),
    )
    done = pitstop("check", str(script), home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert "5 statement(s) OK" in done.stdout


def test_a_snapshot_dropped_earlier_in_the_script_is_reported_gone_at_its_use(tmp_path: Path) -> None:
    setup = orders_mapping(tmp_path / "orders") + SINK + job_sql("revenue")
    script = write(
        tmp_path / "a.sql",
        setup
        + "CREATE SNAPSHOT revenue_v1 FOR JOB revenue;\n"
        + "DROP SNAPSHOT revenue_v1;\n"
        + job_sql("revenue_2h", "'2' HOUR", "FROM SNAPSHOT revenue_v1"),
    )
    done = pitstop("check", str(script), home=tmp_path / "home")
    assert done.returncode == 1
    drop_line = setup.count("\n") + 2
    assert (
        f"ERROR at line {drop_line + 1}, col 37: unknown snapshot 'revenue_v1': "
        f"it is dropped at line {drop_line} of {script}, earlier in the checked files"
    ) in done.stderr
    assert "5 statement(s) OK, 1 error(s)" in done.stdout


def test_a_snapshot_of_the_catalog_dropped_in_one_file_is_gone_for_the_next(
    home: Path, tmp_path: Path
) -> None:
    first = write(tmp_path / "1.sql", "DROP SNAPSHOT revenue_v0;\n")
    second = write(tmp_path / "2.sql", "\n" + job_sql("revenue_2h", "'2' HOUR", "FROM SNAPSHOT revenue_v0"))
    done = pitstop("check", str(first), str(second), home=home)
    assert done.returncode == 1
    expected = f"ERROR at line 2, col 37: unknown snapshot 'revenue_v0': it is dropped at line 1 of {first}"
    assert f"{second}: {expected}" in done.stderr
    assert pitstop("check", str(second), home=home).returncode == 0, "the catalog still has it"


def test_a_snapshot_taken_earlier_carries_its_jobs_plan(home: Path, tmp_path: Path) -> None:
    # DROP JOB ... WITH SNAPSHOT of the catalog's job: the snapshot has that job's 1 h window,
    # which a 2 h window may fold but a 90 min one may not.
    stop = "DROP JOB revenue WITH SNAPSHOT revenue_v1;\n"
    good = write(tmp_path / "good.sql", stop + job_sql("revenue", "'2' HOUR", "FROM SNAPSHOT revenue_v1"))
    assert pitstop("check", str(good), home=home).returncode == 0
    bad = write(tmp_path / "bad.sql", stop + job_sql("revenue", "'90' MINUTE", "FROM SNAPSHOT revenue_v1"))
    done = pitstop("check", str(bad), home=home)
    assert done.returncode == 1
    assert "line 2, col 1: cannot start job 'revenue' from snapshot 'revenue_v1'" in done.stderr
    assert "INTERVAL '1' HOUR" in done.stderr


def test_snapshot_names_taken_earlier_in_the_script_are_refused_again(home: Path, tmp_path: Path) -> None:
    script = write(
        tmp_path / "a.sql",
        "CREATE SNAPSHOT revenue_v1 FOR JOB revenue;\n"
        "CREATE SNAPSHOT revenue_v1 FOR JOB revenue;\n"
        "CREATE OR REPLACE SNAPSHOT revenue_v1 FOR JOB revenue;\n"
        "DROP JOB revenue WITH SNAPSHOT revenue_v0;\n"
        "DROP JOB revenue WITH SNAPSHOT revenue_v2;\n"
        "CREATE SNAPSHOT revenue_v3 FOR JOB revenue;\n",
    )
    done = pitstop("check", str(script), home=home)
    errors = [line for line in done.stderr.splitlines() if ": ERROR at line" in line]
    assert len(errors) == 3, done.stderr
    assert "line 2, col 17: snapshot 'revenue_v1' already exists; use CREATE OR REPLACE SNAPSHOT" in errors[0]
    assert "line 4, col 32: snapshot 'revenue_v0' already exists; choose another name" in errors[1]
    assert "line 6, col 36: unknown job 'revenue': it is dropped at line 5" in errors[2]


def test_describe_and_explain_follow_the_jobs_and_snapshots_of_the_script(home: Path, tmp_path: Path) -> None:
    script = write(
        tmp_path / "a.sql",
        "DROP JOB revenue WITH SNAPSHOT revenue_v1;\n"  # 1
        "DESCRIBE SNAPSHOT revenue_v1;\n"  # 2: taken above
        "DESCRIBE JOB revenue;\n"  # 3: dropped above
        + job_sql("revenue", "'2' HOUR", "FROM SNAPSHOT revenue_v1").replace("\n", " ")  # 4
        + "\nDESCRIBE JOB revenue;\n"  # 5: created again above
        "DROP SNAPSHOT revenue_v0;\n"  # 6
        "EXPLAIN " + job_sql("again", "'2' HOUR", "FROM SNAPSHOT revenue_v0").replace("\n", " "),  # 7
    )
    done = pitstop("check", str(script), home=home)
    errors = [line.split(": ERROR at ")[1] for line in done.stderr.splitlines() if ": ERROR at line" in line]
    assert errors == [
        f"line 3, col 14: unknown job 'revenue': it is dropped at line 1 of {script}, earlier in the "
        "checked files; use it before that statement or create it again",
        f"line 7, col 40: unknown snapshot 'revenue_v0': it is dropped at line 6 of {script}, earlier "
        "in the checked files; use it before that statement or create it again",
    ], done.stderr
