"""The pit stop on a real Spark standalone cluster: a master and two workers (1 core each) as
processes of their own on 127.0.0.1, pitstop's drivers as processes beside them.

Run with ``make cluster-test`` (these tests are skipped unless ``PITSTOP_CLUSTER_TEST=1``; they
start a cluster and several Spark drivers, minutes on 2 cores). ``PITSTOP_CLUSTER_PORT`` moves
the cluster's ports (default 17077: the master; see tests/tools/spark_cluster.py for the rest).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import DELAY, EPOCH, ROOT, Window, batch_windows, closed, make_orders, revenue_select

sys.path.insert(0, str(ROOT / "tests" / "tools"))
from spark_cluster import SparkCluster, can_hide  # noqa: E402

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(
        os.environ.get("PITSTOP_CLUSTER_TEST") != "1",
        reason="starts a Spark standalone cluster: run `make cluster-test` (PITSTOP_CLUSTER_TEST=1)",
    ),
]

DAY, HOUR, STEP = timedelta(hours=24), timedelta(hours=1), 90
PORT = int(os.environ.get("PITSTOP_CLUSTER_PORT", "17077"))
UI_PORT, PG_PORT = PORT + 40, PORT + 41  # the driver's web UI, pitstop serve


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """The cluster; its workers see ``hidden/`` empty where this machine allows it (can_hide)."""
    base = tmp_path_factory.mktemp("cluster")
    hide = base / "hidden" if can_hide() else None
    with SparkCluster(base, PORT, workers=2, cores=1, memory="1g", hide=hide) as c:
        yield c


def orders(first: int, last: int) -> list[dict[str, object]]:
    return [make_orders.order(i, STEP) for i in range(first, last)]


def watermark(last_id: int) -> datetime:
    return EPOCH + timedelta(seconds=(last_id - 1) * STEP) - DELAY


def driver_env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PITSTOP_HOME=str(home),
        SPARK_LOCAL_IP="127.0.0.1",
        PITSTOP_EXECUTOR_MEMORY="512m",
        PITSTOP_TRIGGER_MS="200",
        PYSPARK_SUBMIT_ARGS=(
            f'--driver-java-options "-XX:TieredStopAtLevel=1" --conf spark.ui.port={UI_PORT} pyspark-shell'
        ),
    )
    env.pop("PITSTOP_SPARK_MASTER", None)
    env.update(extra)
    return env


def pitstop(env: dict[str, str], *args: str, script: str | None = None) -> list[dict[str, Any]]:
    """Run ``pitstop ... run`` as its own process; its JSON rows and messages, in order."""
    cmd = [sys.executable, "-m", "pitstop.cli", *args, "run", "-", "--format", "json"]
    done = subprocess.run(cmd, input=script, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    return [json.loads(line) if line.startswith("{") else {"message": line} for line in lines]


def windows(rows: list[dict[str, Any]], table: str) -> dict[Window, tuple[Decimal, int]]:
    out: dict[Window, tuple[Decimal, int]] = {}
    for r in rows:
        if r.get("sink") != table:
            continue
        key = (datetime.fromisoformat(r["window_start"]), r["region"])
        assert key not in out, f"window {key} written twice to {table}"
        out[key] = (Decimal(r["revenue"]).quantize(Decimal("0.01")), int(r["orders"]))
    return out


def select_sinks(*tables: str) -> str:
    return "".join(
        f"SELECT '{t}' AS sink, CAST(window_start AS VARCHAR) AS window_start, region, "
        f"CAST(revenue AS VARCHAR) AS revenue, orders FROM {t};\n"
        for t in tables
    )


def messages(out: list[dict[str, Any]]) -> str:
    return "\n".join(str(r.get("message", "")) for r in out)


def test_pit_stop_and_a_lost_worker_on_a_standalone_cluster(cluster: SparkCluster, tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "orders"
    master = cluster.master_url
    make_orders.write_orders(data, 0, 2000, files=4)

    # 1. The windowed job on the cluster (--master), a snapshot while it runs, SUSPEND / RESUME,
    #    and DROP JOB ... WITH SNAPSHOT; SHOW JOBS and DESCRIBE JOB say where it runs.
    out = pitstop(
        driver_env(home),
        "--master",
        master,
        script=f"""
        CREATE MAPPING orders (order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
            WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE) TYPE File OPTIONS ('path'='{data}');
        CREATE MAPPING daily_revenue TYPE DuckDB;
        CREATE JOB revenue AS INSERT INTO daily_revenue {revenue_select("'24' HOUR")};
        AWAIT JOB revenue;
        CREATE SNAPSHOT while_running FOR JOB revenue;
        ALTER JOB revenue SUSPEND;
        ALTER JOB revenue RESUME;
        AWAIT JOB revenue;
        SHOW JOBS;
        DESCRIBE JOB revenue;
        DROP JOB revenue WITH SNAPSHOT revenue_v1;
        SHOW SNAPSHOTS;
        """,
    )
    (job,) = [r for r in out if r.get("name") == "revenue" and "runs_on" in r]
    assert job["runs_on"] == f"{master} (2 executor(s), 2 cores)"
    assert job["spark_ui"].endswith(f":{UI_PORT}")
    described = {r["property"]: r["value"] for r in out if "property" in r}
    assert described["runs on"] == master
    assert described["executors"].count("127.0.0.1:") == 2
    assert described["Spark UI"] == job["spark_ui"]
    assert {r["snapshot_name"] for r in out if "snapshot_name" in r} == {"while_running", "revenue_v1"}

    # 2. More input; the updated job (an hourly window more) FROM SNAPSHOT, natively, and a second
    #    job from the same snapshot's rows (canonical), under PITSTOP_SPARK_MASTER. The process
    #    exits with both running: they stop at a batch boundary (lossless restart, step 3).
    make_orders.write_orders(data, 2000, 4000, files=4, prefix="b")
    # The same stage, written into another sink: named after the snapshot's stage to restore it.
    hint = "SELECT /*+ STAGE(daily_revenue.aggregate) */"
    rows_select = revenue_select("'24' HOUR").replace("SELECT", hint, 1)
    out = pitstop(
        driver_env(home, PITSTOP_SPARK_MASTER=master),
        script=f"""
        CREATE MAPPING hourly_revenue TYPE DuckDB;
        CREATE MAPPING daily_rows TYPE DuckDB;
        CREATE JOB revenue FROM SNAPSHOT revenue_v1 AS BEGIN
            INSERT INTO daily_revenue {revenue_select("'24' HOUR")};
            INSERT INTO hourly_revenue {revenue_select("'1' HOUR")};
        END;
        CREATE JOB revenue_rows OPTIONS ('restoreFormat'='canonical') FROM SNAPSHOT revenue_v1 AS
            INSERT INTO daily_rows {rows_select};
        AWAIT JOB revenue;
        AWAIT JOB revenue_rows;
        {select_sinks("daily_revenue", "hourly_revenue", "daily_rows")}
        """,
    )
    text = messages(out)
    assert "stage 'daily_revenue.aggregate': restored" in text and "(native)" in text, text
    assert "starts empty" in text, text  # the hourly stage
    assert "from the snapshot's rows" in text and "'restoreFormat' is 'canonical'" in text, text
    check_sinks(out, last=4000)

    # 3. pitstop serve --master resumes both jobs. Input arrives in steps; one worker is SIGKILLed
    #    while one of its tasks runs; the jobs go on on the other one with every row exactly once.
    proc = subprocess.Popen(
        [sys.executable, "-m", "pitstop.cli", "serve", "--master", master, "--port", str(PG_PORT)],
        env=driver_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(f"pitstop serve: connecting to {master}"), line + proc.stderr.read()
        line = proc.stdout.readline()
        assert "listening on postgresql://127.0.0.1" in line, line + proc.stderr.read()
        url = f"postgresql://ops@127.0.0.1:{PG_PORT}/pitstop"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("AWAIT JOB revenue")  # resumed from its checkpoints
            # Small files arrive one after another until a task runs on worker 0's executor.
            executor = worker_executor(cluster, 0)
            last = 4000
            while not running_tasks(executor):
                assert last < 8000, "no task ran on worker 0's executor for 4,000 orders"
                make_orders.write_orders(data, last, last + 100, files=1, prefix="c")
                last += 100
                wait_for(lambda: running_tasks(executor), "a task on worker 0", timeout_s=1, fail=False)
            cluster.kill_worker(0)
            make_orders.write_orders(data, last, last + 1000, files=2, prefix="d")
            last += 1000
            conn.execute("AWAIT JOB revenue TIMEOUT INTERVAL '600' SECOND")
            conn.execute("AWAIT JOB revenue_rows TIMEOUT INTERVAL '600' SECOND")
            jobs = conn.execute("SHOW JOBS").fetchall()
            rows = []
            for statement in select_sinks("daily_revenue", "hourly_revenue", "daily_rows").split(";\n"):
                if statement.strip():
                    cur = conn.execute(statement)
                    names = [d.name for d in cur.description or []]
                    rows += [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        assert {j[0]: j[1] for j in jobs} == {"revenue": "RUNNING", "revenue_rows": "RUNNING"}
        assert all(j[8] == f"{master} (1 executor(s), 1 core)" for j in jobs), jobs  # runs_on
        check_sinks(rows, last=last)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(300) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def check_sinks(rows: list[dict[str, Any]], last: int) -> None:
    """Every sink against a batch computation over the orders read so far (0..last-1)."""
    final = watermark(last)
    cut = watermark(2000)
    all_days = batch_windows(orders(0, last), DAY)
    assert windows(rows, "daily_revenue") == closed(all_days, DAY, final)
    # The hourly stage started empty at the cut (order 2000 opens an hour): whole hours after it.
    assert windows(rows, "hourly_revenue") == closed(batch_windows(orders(2000, last), HOUR), HOUR, final)
    # The canonical restore emits the windows that closed after the cut.
    after_cut = {k: v for k, v in closed(all_days, DAY, final).items() if k[0] + DAY > cut}
    assert windows(rows, "daily_rows") == after_cut
    assert after_cut, "the test must close windows after the cut"


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)


def worker_executor(cluster: SparkCluster, i: int) -> str:
    """The id of the executor pitstop's driver has on worker ``i`` (the worker's status page)."""
    (executor,) = get_json(f"http://127.0.0.1:{cluster.port + 20 + i}/json/")["executors"]
    return str(executor["id"])


def running_tasks(executor: str) -> int:
    """Tasks running now on ``executor``, as the driver's monitoring API tells."""
    ui = f"http://127.0.0.1:{UI_PORT}/api/v1/applications"
    (app,) = get_json(ui)
    listed = get_json(f"{ui}/{app['id']}/executors")
    return sum(int(e["activeTasks"]) for e in listed if e["id"] == executor)


def wait_for(ready: Any, what: str, timeout_s: float = 300, fail: bool = True) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            assert not fail, f"{what} did not happen within {timeout_s:.0f} s"
            return
        time.sleep(0.02)  # the driver's task list raises no event a test can wait on


def refused_at_start(cluster: SparkCluster, tmp_path: Path, **env: str) -> str:
    """``pitstop serve`` on the cluster with ``env``: it must exit 1 before listening; its stderr."""
    cmd = [sys.executable, "-m", "pitstop.cli", "serve", "--master", cluster.master_url, "--port", "0"]
    done = subprocess.run(
        cmd, env=driver_env(tmp_path / "home", **env), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "listening" not in done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr


def test_a_worker_without_pitstop_beside_a_good_one_is_named_at_start(
    cluster: SparkCluster, tmp_path: Path
) -> None:
    # Worker 1's executors run Python without site-packages and with nothing but Spark's own zips
    # on PYTHONPATH (what a worker without pitstop runs: their tasks fail), worker 0's the
    # driver's. Spark's retries once let the good executor answer for both.
    python = tmp_path / "python-per-worker"
    python.write_text(
        "#!/bin/sh\n"
        'case "$PWD" in */worker-1/*)\n'
        "  kept=; IFS=:; for p in $PYTHONPATH; do case $p in *.zip) kept=${kept:+$kept:}$p ;; esac; done\n"
        f'  PYTHONPATH=$kept exec {sys.executable} -S "$@" ;;\n'
        "esac\n"
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    said = refused_at_start(cluster, tmp_path, PYSPARK_PYTHON=str(python))
    assert re.search(r"executor \d+ on 127\.0\.0\.1 cannot import 'pitstop': install pitstop", said), said


def test_executors_that_may_not_run_python_are_told_so(cluster: SparkCluster, tmp_path: Path) -> None:
    python = tmp_path / "python-not-executable"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o644)  # not even root may run it: errno 13
    said = refused_at_start(cluster, tmp_path, PYSPARK_PYTHON=str(python))
    assert re.search(rf"executor \d+ on 127\.0\.0\.1 may not run {python}: permission denied", said), said
    assert "(errno 13)" in said and "install" not in said, said


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the executors' Python as another user (root only)")
def test_an_executor_user_that_may_not_use_the_home_is_named(cluster: SparkCluster, tmp_path: Path) -> None:
    # The executors' Python runs as 'nobody'; the home is the driver's (root), under pytest's
    # tmp_path (mode 0700): nobody may not read the driver's token there.
    python = tmp_path / "python-as-nobody"
    python.write_text(
        f'#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    said = refused_at_start(cluster, tmp_path, PYSPARK_PYTHON=str(python))
    home = tmp_path / "home"
    assert re.search(
        rf"executor \d+ on 127\.0\.0\.1 runs as user 'nobody', who may not read and write the home "
        rf"{home} \({home}/\.cluster-probe/[0-9a-f]+/driver: Permission denied\): .*give that user "
        r"read and write access to the home",
        said,
    ), said


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the executors' Python as another user (root only)")
def test_a_source_folder_the_executors_user_may_not_read_is_named(
    cluster: SparkCluster, tmp_path: Path
) -> None:
    # The executors' Python runs as 'nobody'; the home is open to every user (the driver runs
    # with umask 0), the source folder is the driver's own (0700).
    python = tmp_path / "python-as-nobody"
    python.write_text(
        f'#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    base = Path(tempfile.mkdtemp(prefix="pitstop-open-"))
    try:
        base.chmod(0o755)
        home, data = base / "home", base / "orders"
        make_orders.write_orders(data, 0, 10, files=1)
        data.chmod(0o700)
        env = driver_env(home, PYSPARK_PYTHON=str(python))
        done = subprocess.run(
            ["sh", "-c", 'umask 0 && exec "$@"', "sh", sys.executable, "-m", "pitstop.cli"]
            + ["--master", cluster.master_url, "run", "-"],
            input=f"""
            CREATE MAPPING orders (order_id BIGINT, ts TIMESTAMP) TYPE File OPTIONS ('path'='{data}');
            CREATE MAPPING n TYPE DuckDB;
            CREATE JOB j AS INSERT INTO n SELECT order_id, ts FROM orders;
            """,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 1, done.stdout + done.stderr
        assert re.search(
            rf"job 'j': mapping 'orders' reads {data}, which executor \d+ on 127\.0\.0\.1 may not read "
            rf"as user 'nobody' \({data}: Permission denied\): let that user read the folder and its files",
            done.stderr,
        ), done.stderr
        assert "job 'j' started" not in done.stdout
    finally:
        shutil.rmtree(base)


def test_folders_the_workers_do_not_see_as_the_driver_does_are_refused_at_start(
    cluster: SparkCluster, tmp_path: Path
) -> None:
    if cluster.hide is None:
        pytest.skip("this machine does not let the workers run in a mount namespace of their own")
    clicks, users = tmp_path / "clicks", tmp_path / "users"
    make_orders.write_orders(clicks, 0, 30, files=2)
    users.mkdir()
    (users / "users.json").write_text("".join(f'{{"id": {i}, "name": "u{i}"}}\n' for i in range(30)))
    hidden_users = cluster.hide / "users"  # the driver's; the workers have no such folder
    shutil.copytree(users, hidden_users, dirs_exist_ok=True)
    copied = cluster.hide  # the driver sees the orders in it; the workers an empty folder
    make_orders.write_orders(copied, 0, 30, files=2)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pitstop.cli",
            "serve",
            "--master",
            cluster.master_url,
            "--port",
            str(PG_PORT),
        ],
        env=driver_env(tmp_path / "home"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # connecting
        line = proc.stdout.readline()
        assert "listening on postgresql://127.0.0.1" in line, line + proc.stderr.read()
        with psycopg.connect(f"postgresql://ops@127.0.0.1:{PG_PORT}/pitstop", autocommit=True) as conn:
            columns = "(order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP)"
            for name, folder in [("clicks", clicks), ("copied", copied)]:
                conn.execute(f"CREATE MAPPING {name} {columns} TYPE File OPTIONS ('path'='{folder}')")
            for name, folder in [("users", users), ("hidden_users", hidden_users)]:
                conn.execute(
                    f"CREATE MAPPING {name} (id BIGINT, name VARCHAR) TYPE File OPTIONS ('path'='{folder}')"
                )
            conn.execute("CREATE MAPPING enriched TYPE DuckDB")
            join = "SELECT c.order_id, u.name FROM clicks c JOIN {users} u ON c.order_id = u.id"

            # 1. A static join's folder the workers cannot see: refused, not read as an empty table.
            with pytest.raises(psycopg.Error) as refused:
                conn.execute(f"CREATE JOB hidden AS INSERT INTO enriched {join.format(users='hidden_users')}")
            said = str(refused.value)
            assert re.search(
                rf"job 'hidden': mapping 'hidden_users', which the job joins as a table, reads "
                rf"{hidden_users}, which executor \d+ on 127\.0\.0\.1 cannot see \(No such file or "
                r"directory\); File folders a job reads must be on a mount every worker sees",
                said,
            ), said
            # 2. A source folder the workers see, holding other files than the driver's: refused.
            with pytest.raises(psycopg.Error) as refused:
                conn.execute("CREATE JOB copies AS INSERT INTO enriched SELECT order_id, region FROM copied")
            said = str(refused.value)
            assert re.search(
                rf"job 'copies': mapping 'copied' reads {copied}, where executor \d+ on 127\.0\.0\.1 "
                r"sees other files than the driver: 2 of the driver's 2 files are not there "
                r"\(orders-0000000\.json, orders-0000015\.json\)",
                said,
            ), said
            assert not conn.execute("SHOW JOBS").fetchall()
            # 3. Folders every worker sees: the job starts, and every click is enriched.
            conn.execute(f"CREATE JOB shared AS INSERT INTO enriched {join.format(users='users')}")
            conn.execute("AWAIT JOB shared TIMEOUT INTERVAL '300' SECOND")
            rows = conn.execute("SELECT order_id, name FROM enriched ORDER BY order_id").fetchall()
            assert rows == [(i, f"u{i}") for i in range(30)]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(300) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_home_the_workers_cannot_see_is_refused_at_start(cluster: SparkCluster, tmp_path: Path) -> None:
    if cluster.hide is None:
        pytest.skip("this machine does not let the workers run in a mount namespace of their own")
    home = cluster.hide / "home"  # the driver's folder; the workers see an empty tmpfs there
    out = subprocess.run(
        [sys.executable, "-m", "pitstop.cli", "--master", cluster.master_url, "run", "-"],
        input=f"""
        CREATE MAPPING orders (order_id BIGINT, ts TIMESTAMP) TYPE File OPTIONS ('path'='{tmp_path}');
        CREATE MAPPING n TYPE DuckDB;
        CREATE JOB j AS INSERT INTO n SELECT order_id, ts FROM orders;
        """,
        env=driver_env(home),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 1
    assert re.search(rf"the home {home} is not the same folder on executor \d+ on 127\.0\.0\.1", out.stderr)
    assert "put the home on a mount every worker sees at the same path" in out.stderr
    assert "job 'j' started" not in out.stdout
    assert not list((home / "runs").glob("*")), "nothing of the job may be left in the home"
