"""pitstop serve under load, beside a real PostgreSQL: ``python bench/server.py [--quick]``.

1. Load: ``pitstop serve`` (its own process) runs a windowed job that keeps receiving order files,
   while N psycopg clients (threads of this process: psycopg waits on the socket without the GIL)
   issue ``SHOW JOBS``, ``SHOW SNAPSHOTS``, ``DESCRIBE JOB`` and SELECTs over the job's sink and
   the catalog for T seconds: one
   client back to back; N clients each sending a statement every ``--pace`` seconds (what N
   dashboards or BI users do); N clients back to back (a stress test: with no pause, latency is N
   divided by the throughput). Reported: p50/p95/p99 per statement kind over the wire, errors
   (must be 0), CPU of both processes; then ``AWAIT JOB`` and the sink compared with a batch
   computation (must be exact). 1b: the same N clients against a PostgreSQL server on this
   machine holding the same answers (the sink's rows, and each listing's rows in a table of its
   own), paced and back to back, in the same run.
2. A 1M-row SELECT streamed to psycopg (text and binary), from pitstop serve and from a real
   PostgreSQL server on this machine holding the same rows, in the same run: rows/s and ratio.
3. A new session's pg_catalog: what each connection pays before its first statement.
4. Cancel and a client that stops reading (were wall-clock assertions in tests/test_server.py and
   tests/test_server_jobs.py): ms from a cancel request to the client's error, for a DuckDB query
   and for an ``AWAIT JOB`` of a job whose next trigger is minutes away; and 20 clients' statements
   (connect, count the big table's rows, SHOW JOBS) with and without a client that leaves the big
   table's SELECT unread.

Full: 50 clients for 60 s; ``--quick``: 10 clients for 10 s and 200k rows. PostgreSQL comes from
Debian's ``postgresql`` package (run as root, or as a user who may run initdb); without it, part 2
reports pitstop alone.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "examples"))
import make_orders  # noqa: E402

PITSTOP = str(Path(sys.executable).parent / "pitstop")
STEP = 90
DAY = timedelta(hours=24)
DELAY = timedelta(minutes=5)
KINDS = {
    "SHOW JOBS": "SHOW JOBS",
    "SHOW SNAPSHOTS": "SHOW SNAPSHOTS",
    "DESCRIBE JOB": "DESCRIBE JOB revenue",
    "SELECT sink": "SELECT region, sum(revenue) AS revenue, sum(orders) AS orders FROM daily GROUP BY region",
    "SELECT catalog": "SELECT name, status FROM pitstop.jobs",
}
"""What dashboards send, again and again (the 50-client phases)."""
TWINS = {
    "SHOW JOBS": "SELECT * FROM show_jobs",
    "SHOW SNAPSHOTS": "SELECT * FROM show_snapshots",
    "DESCRIBE JOB": "SELECT * FROM describe_job",
    "SELECT sink": KINDS["SELECT sink"],
    "SELECT catalog": "SELECT name, status FROM show_jobs",
}
"""The same rows from a PostgreSQL server (part 1b): each pitstop statement's answer, copied into a
table of its own when the load starts, read back by a plain SELECT."""
AD_HOC = {
    # a text never sent before (an analyst's query): parsed, translated and run every time
    "SELECT sink, new text": (
        "SELECT region, sum(revenue) AS revenue FROM daily WHERE orders > -{n} GROUP BY region"
    ),
}
"""Measured in the one-client phase only: 50 clients each sending a new query 10 times a second
is no one's workload."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class PitstopServer:
    def __init__(self, home: Path) -> None:
        self.port = free_port()
        env = {**os.environ, "PITSTOP_TRIGGER_MS": "500"}
        self.proc = subprocess.Popen(
            [PITSTOP, "--home", str(home), "serve", "--port", str(self.port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=ROOT,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            raise SystemExit(f"pitstop serve did not start: {line}")
        self.url = f"postgresql://bench@127.0.0.1:{self.port}/pitstop"

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(300)


class Postgres:
    """A throwaway PostgreSQL cluster on a free port (initdb as the postgres user when root)."""

    def __init__(self, folder: Path) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found:
            raise FileNotFoundError("PostgreSQL is not installed (Debian: apt-get install postgresql)")
        self.bin = Path(found[-1]).parent
        self.folder = folder
        self.port = free_port()
        folder.mkdir(parents=True)
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(folder, "postgres")
        self._run(f"{self.bin}/initdb -D {folder}/data -A trust -U bench")
        self._run(
            f"{self.bin}/pg_ctl -D {folder}/data -l {folder}/log -w "
            f"-o '-p {self.port} -k {folder} -c listen_addresses=127.0.0.1' start"
        )
        self.url = f"postgresql://bench@127.0.0.1:{self.port}/postgres"

    def cpu(self) -> float:
        """The CPU of every process of the cluster (the postmaster and a backend per client)."""
        postmaster = int((self.folder / "data" / "postmaster.pid").read_text().split()[0])
        total = 0.0
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                fields = Path(stat).read_text().rsplit(")", 1)[1].split()
                pid = int(Path(stat).parent.name)
            except (OSError, ValueError):
                continue  # a process that ended meanwhile
            if pid == postmaster or int(fields[1]) == postmaster:  # fields[1]: the parent's pid
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def _run(self, command: str) -> None:
        cmd = ["su", "postgres", "-c", command] if self.as_postgres else ["sh", "-c", command]
        subprocess.run(cmd, check=True, capture_output=True)

    def stop(self) -> None:
        self._run(f"{self.bin}/pg_ctl -D {self.folder}/data -m fast stop")


def setup(server: PitstopServer, orders: Path) -> None:
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(
            f"""CREATE MAPPING orders (order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
                WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE)
                TYPE File OPTIONS ('path'='{orders}', 'format'='json')"""
        )
        conn.execute("CREATE MAPPING daily TYPE DuckDB")
        conn.execute(
            """CREATE JOB revenue AS INSERT INTO daily
               SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders
               FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '24' HOUR))
               GROUP BY window_start, window_end, region"""
        )
        conn.execute("AWAIT JOB revenue")


def load(
    server: PitstopServer | Postgres,
    orders: Path,
    clients: int,
    seconds: float,
    first: int,
    pace: float = 0.0,
    kinds: dict[str, str] = KINDS,
) -> dict[str, Any]:
    """Part 1: N clients for T seconds while the job keeps working; then the sink must be exact.

    ``pace`` 0: each client sends its next statement as soon as the last one is answered (a
    stress test: latency is then N / throughput, whatever the server). ``pace`` > 0: each client
    sends one statement every ``pace`` seconds (clients start spread over one interval), and a
    statement's latency runs from when it was due, so a server that falls behind is charged for
    the wait (no coordinated omission).

    Steady state, as a pool of dashboard connections: every client connects and sends each of its
    statements once before the clock starts (a connection's start-up and its first statements,
    all 50 at the same instant, are a burst of their own that no pooled client sees twice).

    A :class:`Postgres` ``server`` answers the same rows (:data:`TWINS`); no job runs there, so
    nothing is fed and nothing is checked after."""
    stop = threading.Event()
    job = isinstance(server, PitstopServer)
    last = [first]

    def feed() -> None:  # the job keeps working: a new file of orders every second
        while not stop.wait(1.0):
            make_orders.write_orders(orders, last[0], last[0] + 500, files=1, prefix=f"f{last[0]:07d}")
            last[0] += 500

    latencies: dict[str, list[float]] = defaultdict(list)
    from_send: dict[str, list[float]] = defaultdict(list)
    """From when the client sent it: without the time a paced client's thread took to wake up
    when the statement was due (on 2 busy cores, part of what ``latencies`` holds)."""
    errors: list[str] = []
    lock = threading.Lock()
    ready = threading.Barrier(clients + 1)

    def client(index: int) -> None:
        mix = list(kinds.items())
        try:
            with psycopg.connect(server.url, autocommit=True) as conn:
                for sql in kinds.values():  # warm: not counted
                    conn.execute(sql.replace("{n}", str(10**9 + index))).fetchall()
                ready.wait(300)
                n = index
                due = time.perf_counter() + pace * index / clients
                while not stop.is_set():
                    kind, sql = mix[n % len(mix)]
                    n += 1
                    if pace:
                        wait = due - time.perf_counter()
                        if wait > 0 and stop.wait(wait):
                            break
                        started = due
                        due += pace
                    else:
                        started = time.perf_counter()
                    sent = time.perf_counter()
                    conn.execute(sql.replace("{n}", str(n * 1000 + index))).fetchall()
                    answered = time.perf_counter()
                    with lock:
                        latencies[kind].append(answered - started)
                        from_send[kind].append(answered - sent)
        except Exception as exc:  # every error is counted and shown
            ready.abort()
            with lock:
                errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    try:
        ready.wait(300)
    except threading.BrokenBarrierError:
        stop.set()
    server_cpu0, bench_cpu0 = server.cpu(), time.process_time()
    if job:
        threads.append(threading.Thread(target=feed))
        threads[-1].start()
    started = time.monotonic()
    time.sleep(0 if stop.is_set() else seconds)
    stop.set()
    for t in threads:
        t.join(120)
    wall = time.monotonic() - started
    server_cpu = server.cpu() - server_cpu0
    bench_cpu = time.process_time() - bench_cpu0
    got: dict[Any, tuple[Decimal, int]] = {}
    exact = True
    if job:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("AWAIT JOB revenue")
            rows = conn.execute("SELECT window_start, region, revenue, orders FROM daily").fetchall()
        got = {(r[0], r[1]): (Decimal(r[2]), int(r[3])) for r in rows}
        exact = got == expected_windows(last[0]) and len(rows) == len(got)
    return {
        "pace": pace,
        "clients": clients,
        "seconds": wall,
        "latencies": latencies,
        "from_send": from_send,
        "errors": errors,
        "exact": exact,
        "windows": len(got),
        "orders": last[0],
        "server_cpu": server_cpu,
        "bench_cpu": bench_cpu,
    }


def twin(server: PitstopServer, pg: Postgres) -> None:
    """Part 1b's rows: what each of :data:`KINDS` answers now, copied into PostgreSQL (the sink's
    rows as its table, each listing as a table of text columns)."""
    with (
        psycopg.connect(server.url, autocommit=True) as ours,
        psycopg.connect(pg.url, autocommit=True) as theirs,
    ):
        daily = ours.execute("SELECT window_start, window_end, region, revenue, orders FROM daily").fetchall()
        theirs.execute(
            "CREATE TABLE daily (window_start timestamp, window_end timestamp, region text, "
            "revenue numeric(38,2), orders bigint)"
        )
        with theirs.cursor().copy("COPY daily FROM STDIN") as copy:
            for row in daily:
                copy.write_row(row)
        for table, statement in (
            ("show_jobs", "SHOW JOBS"),
            ("show_snapshots", "SHOW SNAPSHOTS"),
            ("describe_job", "DESCRIBE JOB revenue"),
        ):
            cur = ours.execute(statement)
            names = [d.name for d in cur.description or []]
            rows = cur.fetchall()
            theirs.execute(f"CREATE TABLE {table} ({', '.join(f'{n} text' for n in names)})")
            with theirs.cursor().copy(f"COPY {table} FROM STDIN") as copy:
                for row in rows:
                    copy.write_row([None if v is None else str(v) for v in row])
        theirs.execute("ANALYZE")


def expected_windows(last: int) -> dict[Any, tuple[Decimal, int]]:
    out: dict[Any, list[Any]] = defaultdict(lambda: [Decimal(0), 0])
    watermark = make_orders.EPOCH + timedelta(seconds=(last - 1) * STEP) - DELAY
    for i in range(last):
        o = make_orders.order(i, STEP)
        ts = datetime.fromisoformat(str(o["ts"]))
        start = make_orders.EPOCH + ((ts - make_orders.EPOCH) // DAY) * DAY
        if start + DAY <= watermark:
            acc = out[(start, o["region"])]
            acc[0] += Decimal(str(o["amount"])).quantize(Decimal("0.01"))
            acc[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


BIG_DUCKDB = """CREATE TABLE main.big AS SELECT range AS id, ['eu', 'us', 'apac'][range % 3 + 1] AS region,
    CAST((range * 37) % 100000 / 100 AS DECIMAL(12,2)) AS amount,
    TIMESTAMP '2024-01-01' + to_seconds(range * 90) AS ts FROM range({rows})"""
BIG_POSTGRES = """CREATE TABLE big AS SELECT g::bigint AS id, (ARRAY['eu','us','apac'])[g % 3 + 1] AS region,
    ((g * 37) % 100000 / 100.0)::numeric(12,2) AS amount,
    TIMESTAMP '2024-01-01' + g * INTERVAL '90 seconds' AS ts FROM generate_series(0, {last}) AS g"""


def stream(url: str, binary: bool, reps: int) -> list[float]:
    """rows/s of ``SELECT * FROM big`` fetched in chunks of 10,000 rows."""
    rates = []
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(reps):
            cur = conn.cursor(binary=binary)
            started = time.perf_counter()
            cur.execute("SELECT id, region, amount, ts FROM big")
            count = 0
            while chunk := cur.fetchmany(10_000):
                count += len(chunk)
            rates.append(count / (time.perf_counter() - started))
    return rates


def session_prepare_ms(folder: Path) -> float:
    """Median time to prepare a session's pg_catalog views on a fresh DuckDB cursor (was a
    wall-clock assertion in tests/test_pgcatalog.py)."""
    from pitstop.catalog.store import Catalog
    from pitstop.server.pgcatalog import PgCatalog

    folder.mkdir(parents=True, exist_ok=True)
    catalog = Catalog(folder / "catalog.duckdb")
    try:
        times = []
        for _ in range(20):
            cur = catalog.connect()
            started = time.perf_counter()
            PgCatalog().prepare(cur, "pitstop")
            times.append((time.perf_counter() - started) * 1000)
            catalog.disconnect(cur)
        return statistics.median(times)
    finally:
        catalog.close()


NEVER_ENDS = (
    "SELECT count(*) FROM generate_series(1, 100000000000) AS a(x), "
    "generate_series(1, 1000) AS b(y) WHERE a.x % 7 = b.y"
)


def cancel_ms(url: str, statement: str, reps: int = 5, setup: tuple[str, ...] = ()) -> list[float]:
    """ms from a cancel request (sent 0.5 s after ``statement``) to the client's QueryCanceled;
    a statement_timeout of 60 s ends a statement whose cancel was lost (reported as an error)."""
    times = []
    with psycopg.connect(url, autocommit=True) as conn:

        def cancel(sent: list[float]) -> None:
            sent.append(time.perf_counter())
            conn.cancel_safe()

        for sql in setup:
            conn.execute(sql)
        conn.execute("SET statement_timeout = '60s'")
        for _ in range(reps):
            sent: list[float] = []
            timer = threading.Timer(0.5, cancel, args=(sent,))
            timer.start()
            try:
                conn.execute(statement)
                raise SystemExit(f"{statement!r} ended without being cancelled")
            except psycopg.errors.QueryCanceled as exc:
                if "statement timeout" in str(exc):
                    raise SystemExit(f"the cancel of {statement!r} was lost") from None
                times.append((time.perf_counter() - sent[0]) * 1000)
            finally:
                timer.join()
    return times


def others_s(url: str, rounds: int, stalled: bool) -> float:
    """Seconds for ``rounds`` clients one after another (connect, count rows of the big table with
    a text never sent before, so no kept result answers it, SHOW JOBS), beside a client that sent
    ``SELECT * FROM big`` and reads nothing of it (``stalled``)."""
    slow = psycopg.connect(url, autocommit=True) if stalled else None
    try:
        if slow is not None:
            slow.pgconn.send_query(b"SELECT * FROM big")
            time.sleep(0.5)  # its first rows are on their way
        started = time.perf_counter()
        for i in range(rounds):
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"SELECT count(*) AS n_{i}_{int(stalled)} FROM big").fetchone()  # a new text
                conn.execute("SHOW JOBS")
        return time.perf_counter() - started
    finally:
        if slow is not None:
            slow.close()


def awaiting_a_slow_job() -> tuple[str, ...]:
    """A second job whose windows close at its next trigger, two minutes on: AWAIT JOB waits."""
    return (
        "CREATE MAPPING daily_slow TYPE DuckDB",
        "SET 'trigger_ms' = '120000'",
        """CREATE JOB slow AS INSERT INTO daily_slow
           SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders
           FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '24' HOUR))
           GROUP BY window_start, window_end, region""",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 clients for 10 s, 200k rows")
    parser.add_argument("--clients", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--rows", type=int)
    parser.add_argument(
        "--pace", type=float, default=0.1, help="seconds between a paced client's statements (default 0.1)"
    )
    args = parser.parse_args()
    clients = args.clients or (10 if args.quick else 50)
    seconds = args.seconds or (10.0 if args.quick else 60.0)
    rows = args.rows or (200_000 if args.quick else 1_000_000)
    work = Path(tempfile.mkdtemp(prefix="pitstop-bench-server-"))
    work.chmod(0o755)  # PostgreSQL's own user must reach its folder inside
    home, orders = work / "home", work / "orders"
    make_orders.write_orders(orders, 0, 4000, files=4)
    import duckdb

    home.mkdir(parents=True)
    db = duckdb.connect(str(home / "catalog.duckdb"))  # a table users query, beside the sinks
    db.execute(BIG_DUCKDB.format(rows=rows))
    db.close()
    print(f"# pitstop serve under load ({clients} clients, {seconds:g} s) and a {rows:,}-row SELECT")
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; psycopg {psycopg.__version__}")
    server = PitstopServer(home)
    pg: Postgres | None = None
    twins: list[dict[str, Any]] = []
    try:
        setup(server, orders)
        quiet = load(server, orders, 1, min(seconds, 10.0), 4000, kinds={**KINDS, **AD_HOC})
        paced = load(server, orders, clients, seconds, quiet["orders"], pace=args.pace)
        result = load(server, orders, clients, seconds, paced["orders"])
        try:
            pg = Postgres(work / "pg")
        except (FileNotFoundError, subprocess.CalledProcessError) as exc:
            print(f"(PostgreSQL not measured: {exc})")
        if pg is not None:
            twin(server, pg)
            twins = [
                load(pg, orders, clients, seconds, 0, pace=args.pace, kinds=TWINS),
                load(pg, orders, clients, seconds, 0, kinds=TWINS),
            ]
        ours = {b: stream(server.url, b, 3) for b in (False, True)}
        cancel_query = cancel_ms(server.url, NEVER_ENDS)
        cancel_await = cancel_ms(server.url, "AWAIT JOB slow", 3, awaiting_a_slow_job())
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("DROP JOB slow")
        alone = others_s(server.url, 20, stalled=False)
        beside = others_s(server.url, 20, stalled=True)
    except BaseException:
        if pg is not None:
            pg.stop()
        raise
    finally:
        server.stop()
    print()
    print("## 1. Statements over the wire while a job runs")
    print()
    print("| statement | clients | each client sends | count | p50 ms | p95 ms | p99 ms | p99 ms from send |")
    print("|---|---|---|---|---|---|---|---|")
    for run in (quiet, paced, result):
        sends = f"every {run['pace'] * 1e3:g} ms" if run["pace"] else "back to back"
        for kind, values in sorted(run["latencies"].items()):
            print(
                f"| {kind} | {run['clients']} | {sends} | {len(values):,} | "
                f"{statistics.median(values) * 1e3:.1f} | {percentile(values, 0.95) * 1e3:.1f} | "
                f"{percentile(values, 0.99) * 1e3:.1f} | "
                f"{percentile(run['from_send'][kind], 0.99) * 1e3:.1f} |"
            )
    print()
    for run in (quiet, paced, result):
        count = sum(len(v) for v in run["latencies"].values())
        print(
            f"{run['clients']} clients, {'paced' if run['pace'] else 'back to back'}: {count:,} statements "
            f"in {run['seconds']:.1f} s ({count / run['seconds']:,.0f}/s); errors: {len(run['errors'])}; "
            f"server CPU {run['server_cpu']:.1f} s, clients' CPU {run['bench_cpu']:.1f} s; job output "
            f"after AWAIT exact: {run['exact']} ({run['windows']} closed windows over "
            f"{run['orders']:,} orders)"
        )
        for error in run["errors"][:5]:
            print(f"  error: {error}")

    def catalog_p99(run: dict[str, Any]) -> float:
        return percentile(run["latencies"]["SHOW JOBS"] + run["latencies"]["SHOW SNAPSHOTS"], 0.99) * 1e3

    def p(run: dict[str, Any], kind: str, q: float) -> float:
        return percentile(run["latencies"][kind], q) * 1e3

    if twins:
        print()
        print(f"### 1b. The same answers from PostgreSQL (each listing's rows in a table), {clients} clients")
        print()
        print(
            "| statement | each client sends | pitstop p50 ms | pitstop p99 ms "
            "| PostgreSQL p50 ms | PostgreSQL p99 ms |"
        )
        print("|---|---|---|---|---|---|")
        for ours_run, theirs_run in zip((paced, result), twins, strict=True):
            sends = f"every {ours_run['pace'] * 1e3:g} ms" if ours_run["pace"] else "back to back"
            for kind in KINDS:
                print(
                    f"| {kind} | {sends} | {p(ours_run, kind, 0.5):.1f} | {p(ours_run, kind, 0.99):.1f} | "
                    f"{p(theirs_run, kind, 0.5):.1f} | {p(theirs_run, kind, 0.99):.1f} |"
                )
        print()
        for run in twins:
            count = sum(len(v) for v in run["latencies"].values())
            print(
                f"PostgreSQL, {run['clients']} clients, {'paced' if run['pace'] else 'back to back'}: "
                f"{count:,} statements in {run['seconds']:.1f} s ({count / run['seconds']:,.0f}/s); "
                f"errors: {len(run['errors'])}; server CPU {run['server_cpu']:.1f} s"
            )

    print()
    print(f"## 2. {rows:,}-row SELECT streamed to psycopg (median of 3, rows/s)")
    print()
    theirs: dict[bool, list[float]] | None = None
    if pg is not None:
        try:
            with psycopg.connect(pg.url, autocommit=True) as conn:
                conn.execute(BIG_POSTGRES.format(last=rows - 1))
            theirs = {b: stream(pg.url, b, 3) for b in (False, True)}
        finally:
            pg.stop()
    print("| format | pitstop serve | PostgreSQL | ratio |")
    print("|---|---|---|---|")
    for binary in (False, True):
        mine = statistics.median(ours[binary])
        other = statistics.median(theirs[binary]) if theirs else float("nan")
        print(f"| {'binary' if binary else 'text'} | {mine:,.0f} | {other:,.0f} | {mine / other:.2f} |")
    print()
    prepare_ms = session_prepare_ms(work / "prepare")
    print("## 3. A new session's pg_catalog (what each connection pays before its first statement)")
    print()
    print(f"{prepare_ms:.2f} ms per session (median of 20)")
    print()
    print("## 4. Cancel, and a client that stops reading")
    print()
    for what, times in (("a DuckDB query", cancel_query), ("AWAIT JOB", cancel_await)):
        print(
            f"cancel to error, {what}: {statistics.median(times):.0f} ms "
            f"(median of {len(times)}, max {max(times):.0f})"
        )
    print(
        f"20 clients' statements: {alone:.2f} s alone, {beside:.2f} s beside a client that reads "
        f"nothing of a {rows:,}-row SELECT ({beside / alone:.2f}x)"
    )
    print()
    print(
        f"session_prepare_ms={prepare_ms:.2f} "
        f"cancel_query_ms={statistics.median(cancel_query):.0f} "
        f"cancel_await_ms={statistics.median(cancel_await):.0f} "
        f"stalled_reader_ratio={beside / alone:.2f} "
        f"server_catalog_p99_ms_paced={catalog_p99(paced):.1f} "
        f"server_catalog_p99_ms_back_to_back={catalog_p99(result):.1f} "
        f"server_catalog_p99_ms_1_client={catalog_p99(quiet):.1f} "
        f"server_describe_p99_ms_paced={p(paced, 'DESCRIBE JOB', 0.99):.1f} "
        f"server_worst_p99_ms_paced={max(p(paced, k, 0.99) for k in KINDS):.1f} "
        f"server_errors={len(result['errors']) + len(paced['errors']) + len(quiet['errors'])} "
        f"server_exact={result['exact'] and paced['exact'] and quiet['exact']} "
        f"select_rows_per_s={statistics.median(ours[False]):.0f}"
    )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
