"""Plays a chain on a pitstop home (in process, through the server, or a process per statement)
and checks every sink, and the job's late rows per stage, against the model after every step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from chains.model import (
    EARLY,
    FILE_SINKS,
    FUNCTIONS,
    GROUPS,
    KAFKA_SINKS,
    PG_SINKS,
    SINKS,
    Job,
    Model,
    job_sql,
)
from chains.steps import (
    CRASH_OUTCOMES,
    Analyze,
    Crash,
    Input,
    Kill,
    Restore,
    Resume,
    Serve,
    Snapshot,
    Start,
    Step,
    Suspend,
    Update,
)
from pitstop.manager import Manager


# -- the runner ----------------------------------------------------------------------------------
def mappings(folder: Path, pg_url: str | None, kafka: str | None = None, topic: str = "k1") -> str:
    """The source, the second stream ``cl`` that interval joins read (``{folder}-cl``), every sink
    a chain may write (PostgreSQL's with a server's URL, Kafka's with a broker's address, into
    ``topic``), and the static table ``grp`` that joins read (its file written here)."""
    groups = Path(f"{folder}-grp")
    groups.mkdir(parents=True, exist_ok=True)
    (groups / "groups.json").write_text(
        "".join(json.dumps({"k": k, "g": g}) + "\n" for k, g in GROUPS.items())
    )
    out = f"""{ev_mapping(folder, 5)};
CREATE MAPPING cl (id BIGINT, k VARCHAR, v BIGINT, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE) TYPE File OPTIONS ('path'='{folder}-cl', 'format'='json');
CREATE MAPPING grp (k VARCHAR, g VARCHAR) TYPE File OPTIONS ('path'='{groups}', 'format'='json');
"""
    out += "".join(f"CREATE MAPPING {s} TYPE DuckDB;\n" for s in SINKS if s not in FILE_SINKS)
    out += "".join(
        f"CREATE MAPPING {s} TYPE File OPTIONS ('path'='{folder}-{s}', 'format'='parquet');\n"
        for s in FILE_SINKS
    )
    if pg_url is not None:
        out += "".join(
            f"CREATE MAPPING {s} TYPE Postgres OPTIONS ('dsn'='{pg_url}', 'table'='public.{s}');\n"
            for s in PG_SINKS
        )
    if kafka is not None:
        out += "".join(
            f"CREATE MAPPING {s} TYPE Kafka OPTIONS ('bootstrap.servers'='{kafka}', 'topic'='{topic}');\n"
            for s in KAFKA_SINKS
        )
    return out


def ev_mapping(folder: Path, delay: int, replace: bool = False) -> str:
    """The source ``ev`` with a WATERMARK delay of ``delay`` minutes."""
    create = "CREATE OR REPLACE" if replace else "CREATE"
    return (
        f"{create} MAPPING ev (id BIGINT, k VARCHAR, v BIGINT, ts TIMESTAMP,\n    WATERMARK FOR ts AS ts - "
        f"INTERVAL '{delay}' MINUTE) TYPE File OPTIONS ('path'='{folder}', 'format'='json')"
    )


class ChainFailure(AssertionError):
    def __init__(self, step: int, message: str, script: str) -> None:
        super().__init__(f"step {step}: {message}")
        self.step = step
        self.message = message
        self.script = script


class Player:
    """Plays a chain on a pitstop home: statements through an in-process manager
    (``open_manager()``), a ``pitstop run`` process killed with SIGKILL (:class:`Kill`), a
    ``pitstop serve`` process and a PostgreSQL client (:class:`Serve`); input files into
    ``folder``. Checks every sink against the model after every step."""

    def __init__(
        self,
        open_manager: Callable[[], Manager],
        folder: Path,
        home: Path,
        via: str = "process",
        pg_url: str | None = None,
        kafka: str | None = None,
    ) -> None:
        """``via``: where statements go: ``process`` (an in-process manager), ``server`` (one
        ``pitstop serve`` and a psycopg connection for the whole chain) or ``cli`` (a
        ``pitstop run -c`` process per statement, which resumes the job and stops it at exit)."""
        self.open_manager = open_manager
        self.manager: Manager | None = None
        self.via = via
        self.pg_url = pg_url  # a PostgreSQL database for the p1 and p2 sinks
        self.kafka = kafka  # a Kafka broker's address for the k1 sink, a topic of the chain's own
        self.topic = f"k1_{uuid.uuid4().hex[:12]}"
        self.server: subprocess.Popen[str] | None = None
        self.conn: Any = None
        self.folder = folder
        self.home = home
        self.model = Model()
        self.script: list[str] = []
        self.snapshots: list[str] = []
        self.taken_of: list[tuple[Job, bool]] = []  # each snapshot's job and its early results
        self.running: tuple[Job, bool] = ((), False)
        self.pending_step: Input | None = None  # the Input whose ev file is next

    def sql(self, text: str) -> list[Any]:
        from pitstop.driver import Driver
        from pitstop.executor import Executor

        self.script.append(text.strip().rstrip(";") + ";")
        if self.via == "server":
            import psycopg

            with psycopg.ClientCursor(self.connection()) as cur:  # the simple protocol, as psql
                cur.execute(text)
            return []
        if self.via == "cli":
            done = subprocess.run(
                [sys.executable, "-m", "pitstop.cli", "--home", str(self.home), "run", "-c", text],
                capture_output=True,
                text=True,
                env=subprocess_env(),
                timeout=600,
            )
            if done.returncode != 0:
                raise AssertionError(f"pitstop run exited {done.returncode}: {done.stderr.strip()}")
            return []
        if self.manager is None:
            self.manager = self.open_manager()
        return [r for _, r in Driver(Executor(self.manager)).run_script(text)]

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        if self.via == "server":
            cur = self.connection().execute(sql)
            return [d.name for d in cur.description or []], list(cur.fetchall())
        if self.manager is None:
            self.manager = self.open_manager()
        try:
            columns, rows = self.manager.catalog.query(sql)
        finally:
            if self.via == "cli":  # the next statement's process needs the home
                self.close()
        return list(columns), list(rows)

    def connection(self) -> Any:
        """The chain's psycopg connection to its ``pitstop serve`` (started on first use)."""
        import psycopg

        if self.conn is None:
            self.close()
            self.server, port = start_server(self.home)
            self.conn = psycopg.connect(f"postgresql://127.0.0.1:{port}/pitstop", autocommit=True)
        return self.conn

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.server is not None:
            stop_server(self.server)
            self.server = None
        if self.manager is not None:
            self.manager.close()
            self.manager = None

    def play(self, chain: list[Step]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            if self.kafka is not None:  # the sink's topic, made as a user makes it: 2 partitions
                from confluent_kafka.admin import AdminClient, NewTopic

                admin = AdminClient({"bootstrap.servers": self.kafka})
                admin.create_topics([NewTopic(self.topic, 2, 1)])[self.topic].result(10)
            self.sql(mappings(self.folder, self.pg_url, self.kafka, self.topic))
            for i, step in enumerate(chain):
                try:
                    self.step(step)
                    self.check()
                except ChainFailure as failure:
                    raise ChainFailure(i, failure.message, self.text()) from None
                except Exception as exc:  # noqa: BLE001 - any failure of a step is the chain's
                    raise ChainFailure(i, f"{type(exc).__name__}: {exc}", self.text()) from exc
        finally:
            self.close()

    def text(self) -> str:
        return "\n".join(self.script)

    def write_other(self, step: Input) -> None:
        """The model draws ``step``'s events of both streams; the second stream's file is written
        (it is read before ``ev``'s: the player awaits the job between the two, or writes it
        before a process starts the job)."""
        self.model.arrive(step)
        self._write(Path(f"{self.folder}-cl"), self.model.others[-1], f"{step}, stream cl")

    def write_events(self) -> None:
        self._write(self.folder, self.model.events[-1], str(self.pending_step))

    def _write(self, folder: Path, events: list[Any], what: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        name = f"f{len(self.model.events):04d}.json"
        tmp = folder / f".{name}.tmp"
        tmp.write_text("".join(e.json() + "\n" for e in events))
        os.replace(tmp, folder / name)
        self.script.append(f"-- input: {folder.name}/{name}, {len(events)} events ({what})")

    def step(self, step: Step) -> None:
        m = self.model
        if isinstance(step, Input):
            self.pending_step = step
            self.write_other(step)
            if m.state == "running":
                self.sql("AWAIT JOB c")
                m.batch(ev=False)
            self.write_events()
            if m.state == "running":
                self.sql("AWAIT JOB c")
                m.batch()
        elif isinstance(step, Start):
            early = f" OPTIONS ('{EARLY}'='200')" if step.early else ""
            self.sql(f"CREATE JOB c{early} AS {job_sql(step.job)}")
            self.sql("AWAIT JOB c")
            m.start(step.job, step.early)
            self.running = (step.job, step.early)
        elif isinstance(step, Update):
            name = f"s{len(self.snapshots)}"
            self.snapshots.append(name)
            self.taken_of.append(self.running)
            self.sql(f"DROP JOB c WITH SNAPSHOT {name}")
            c = m.cut(name)
            self.remap(step.delay)
            self.sql(self._create(name, step.job, step.fmt, False, step.early))
            self.sql("AWAIT JOB c")
            m.restore(c, step.job, rollback=False, fmt=step.fmt, early=step.early)
            self.running = (step.job, step.early)
        elif isinstance(step, Snapshot):
            name = f"s{len(self.snapshots)}"
            self.snapshots.append(name)
            self.taken_of.append(self.running)
            self.sql(f"CREATE SNAPSHOT {name} FOR JOB c")
            m.cut(name)
        elif isinstance(step, Restore):
            c = m.cuts[step.which]
            self.sql("DROP JOB c")
            self.remap(step.delay)
            self.sql(self._create(c.name, step.job, step.fmt, step.rollback, step.early, step.accept_gap))
            self.sql("AWAIT JOB c")
            m.restore(c, step.job, step.rollback, step.fmt, step.early)
            self.running = (step.job, step.early)
        elif isinstance(step, Suspend):
            self.sql("ALTER JOB c SUSPEND")
            m.state = "suspended"
        elif isinstance(step, Resume):
            self.sql("ALTER JOB c RESUME")
            self.sql("AWAIT JOB c")
            m.state = "running"
            m.batch()
        elif isinstance(step, Kill):
            self.kill(step)
        elif isinstance(step, Serve):
            self.serve(step)
        elif isinstance(step, Analyze):
            self.analyze(step)
        elif isinstance(step, Crash):
            self.crash(step)

    def remap(self, delay: int) -> None:
        """``ev``'s WATERMARK delay changed to ``delay`` minutes, between two jobs."""
        if delay * 60 != self.model.delay:
            self.sql(ev_mapping(self.folder, delay, replace=True))
            self.model.delay = delay * 60

    def analyze(self, step: Analyze) -> None:
        """The replay of a snapshot's own SQL (issue 27): every sink and every stage the same."""
        job, early = self.taken_of[step.which]
        options = f" OPTIONS ('{EARLY}'='200')" if early else ""
        snapshot = self.snapshots[step.which]
        text = f"EXPLAIN ANALYZE CREATE JOB c{options} FROM SNAPSHOT {snapshot} AS {job_sql(job)}"
        if self.via != "process":  # its rows are read here: through the in-process executor
            self.close()
        self.script.append(text.strip() + ";")
        if self.manager is None:
            self.manager = self.open_manager()
        from pitstop.driver import Driver
        from pitstop.executor import Executor

        ((_, result),) = Driver(Executor(self.manager)).run_script(text)
        differ = [r for r in result.rows if r[7] in ("differs", "state differs")]
        if differ or "the same" not in result.message:
            raise ChainFailure(
                -1,
                f"the replay of snapshot {snapshot}'s own SQL differs: {result.message}\n"
                + "".join(f"  {r[2] or r[3]}: {r[8]}\n" for r in differ),
                self.text(),
            )
        if self.via != "process":
            self.close()

    def kill(self, step: Kill) -> None:
        """This process lets go of the home (its jobs stop at a batch boundary); a ``pitstop run``
        process resumes the job, input arrives, and the process is killed with SIGKILL
        ``step.after_ms`` later; this process opens the home again and resumes the job."""
        self.close()
        self.pending_step = step.input
        self.write_other(step.input)  # pending when the process starts the job
        self.script.append(
            f"-- a pitstop run process resumes the job; SIGKILL {step.after_ms} ms after input"
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "pitstop.cli", "--home", str(self.home), "run", "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=subprocess_env(),
            start_new_session=True,
        )
        try:
            assert proc.stdin is not None
            proc.stdin.write("AWAIT JOB c;\n")  # stdin stays open: the process runs its jobs
            proc.stdin.flush()
            self.write_events()
            time.sleep(step.after_ms / 1000)  # the kill lands where the process happens to be
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        self.sql("AWAIT JOB c")
        self.model.batch()

    def crash(self, step: Crash) -> None:
        """A ``pitstop run`` process resumes the job and runs the pit stop ``step.step``, killed
        with SIGKILL at ``step.at``; this process opens the home, finds what
        :data:`~chains.steps.CRASH_OUTCOMES` says a crash there leaves, and finishes the pit stop."""
        inner, m = step.step, self.model
        self.close()
        if isinstance(inner, Snapshot):
            snapshot = f"s{len(self.snapshots)}"
            drop, create = f"CREATE SNAPSHOT {snapshot} FOR JOB c", ""
        elif isinstance(inner, Update):
            snapshot = f"s{len(self.snapshots)}"
            drop = f"DROP JOB c WITH SNAPSHOT {snapshot}"
            create = self._create(snapshot, inner.job, inner.fmt, False, inner.early)
        else:
            snapshot = m.cuts[inner.which].name
            drop = "DROP JOB c"
            create = self._create(
                snapshot, inner.job, inner.fmt, inner.rollback, inner.early, inner.accept_gap
            )
        delay = m.delay // 60 if isinstance(inner, Snapshot) else inner.delay
        remap = ev_mapping(self.folder, delay, replace=True) if delay * 60 != m.delay else ""
        wait = "AWAIT JOB c" if m.state == "running" else ""  # (a suspended job is not resumed)
        text = "".join(f"{s};\n" for s in (wait, drop, remap, create) if s)
        self.script.append(f"-- a pitstop run process runs these, killed with SIGKILL at {step.at}:")
        self.script.append(text.rstrip())
        done = subprocess.run(
            [sys.executable, "-m", "pitstop.cli", "--home", str(self.home), "run", "-c", text],
            capture_output=True,
            text=True,
            env={**subprocess_env(), "PITSTOP_CRASH_AT": step.at},
            timeout=600,
        )
        if done.returncode == -signal.SIGKILL and f"crash point {step.at} " in done.stderr:
            outcome = CRASH_OUTCOMES[step.at]
        elif done.returncode == 0 and step.at.startswith("rollback."):
            outcome = "job created"  # no sink held rows after the cut: nothing rolled back
            self.script.append(f"-- ({step.at} not reached: no sink held rows after the cut)")
        else:
            raise ChainFailure(
                -1,
                f"the process was to die at {step.at}: exit {done.returncode}\n{done.stderr[-3000:]}",
                self.text(),
            )
        self.script.append(f"-- ({outcome}); this process opens the home and finishes the pit stop:")
        _, jobs = self.query("SELECT name FROM pitstop.jobs")
        _, listed = self.query("SELECT lower(name) FROM pitstop.snapshots")
        found = ("job" if jobs else "no job", snapshot in {n for (n,) in listed})
        want = ("no job" if "no job" in outcome else "job", "no snapshot" not in outcome)
        if found != want:
            raise ChainFailure(
                -1,
                f"after a crash at {step.at}, expected {outcome}; found {found[0]}, snapshot "
                f"{snapshot} {'listed' if found[1] else 'not listed'}",
                self.text(),
            )
        if outcome == "job resumable, no snapshot":
            self.sql(drop)
        if isinstance(inner, Snapshot):  # the job goes on
            self.snapshots.append(snapshot)
            self.taken_of.append(self.running)
            m.cut(snapshot)
            self.sql("AWAIT JOB c")
            return
        if isinstance(inner, Update):  # the cut, before ev's mapping changes (as Update's)
            self.snapshots.append(snapshot)
            self.taken_of.append(self.running)
            cut = m.cut(snapshot)
        else:
            cut = m.cuts[inner.which]
        if outcome == "job created":  # the dead process replaced ev's mapping before its CREATE
            m.delay = delay * 60
        else:
            self.remap(delay)
            self.sql(create)
        self.sql("AWAIT JOB c")
        rollback = isinstance(inner, Restore) and inner.rollback
        m.restore(cut, inner.job, rollback, inner.fmt, inner.early)
        self.running = (inner.job, inner.early)

    def serve(self, step: Serve) -> None:
        """``pitstop serve`` takes the home over and resumes the job; input arrives, a PostgreSQL
        client awaits the job through it; the server stops on SIGTERM, and this process resumes."""
        import psycopg

        self.close()
        self.pending_step = step.input
        self.write_other(step.input)  # pending when the server resumes the job
        proc, port = start_server(self.home)
        try:
            self.write_events()
            self.script.append("-- through pitstop serve and psycopg:")
            with psycopg.connect(f"postgresql://127.0.0.1:{port}/pitstop", autocommit=True) as conn:
                self.script.append("AWAIT JOB c;")
                conn.execute("AWAIT JOB c")
        finally:
            stop_server(proc)
        self.model.batch()
        self.sql("AWAIT JOB c")

    def _create(
        self, snapshot: str, job: Job, fmt: str, rollback: bool, early: bool = False, gap: bool = False
    ) -> str:
        options = [f"'restoreFormat'='{fmt}'"] if fmt != "auto" else []
        if rollback:
            options.append("'sinkRollback'='true'")
        if gap:
            options.append("'acceptSinkGap'='true'")
        if early:
            options.append(f"'{EARLY}'='200'")
        opts = f" OPTIONS ({', '.join(options)})" if options else ""
        return f"CREATE JOB c{opts} FROM SNAPSHOT {snapshot} AS {job_sql(job)}"

    def check(self) -> None:
        for sink in self.model.columns:
            expected = self.model.rows(sink)
            got = self.sink_rows(sink)
            want = Counter(self.truth(sink, expected))
            if got != want:
                missing = want - got
                extra = got - want
                raise ChainFailure(
                    -1,
                    f"sink {sink}: {sum(missing.values())} row(s) missing, {sum(extra.values())} unexpected\n"
                    + "".join(f"  missing    {r}\n" for r in sorted(missing, key=str)[:8])
                    + "".join(f"  unexpected {r}\n" for r in sorted(extra, key=str)[:8]),
                    self.text(),
                )
        self.check_late()

    def check_late(self) -> None:
        """The job's late rows per stage (``pitstop.late_rows``) are the model's, exactly, after
        every step. Two places where pitstop documents less than rows, and why exact holds here:

        - a stage later in a chain (a window after a ROW_NUMBER) is counted as Spark counts
          (late windows and keys, not rows) plus the rows its own restore filter drops (rows).
          Spark's part is always 0 here: an event the ROW_NUMBER passes is after the query's
          watermark, so its window ends after it too. What the model counts under such a
          window is what its restore filter drops (its old window had closed at the cut), row
          by row, so any figure of Spark's there fails the check;
        - a process killed with SIGKILL (:class:`Kill`): each batch's counts are on disk before
          its rows are written (pitstop.engine.late, step 4), so the next process records those
          of the batches the killed one committed; no slack is allowed after a kill either."""
        if self.model.state == "none":
            return
        _, rows = self.query(
            "SELECT stage, CAST(sum(rows) AS BIGINT) FROM pitstop.late_rows WHERE job = 'c' GROUP BY stage"
        )
        got = {str(stage): int(n) for stage, n in rows if n}
        want = {stage: n for stage, n in self.model.late.items() if n}
        if got != want:
            stages = sorted(set(got) | set(want))
            raise ChainFailure(
                -1,
                "late rows (pitstop.late_rows) differ from the model's:\n"
                + "".join(
                    f"  stage {s}: {got.get(s, 0)} counted, {want.get(s, 0)} expected\n"
                    for s in stages
                    if got.get(s, 0) != want.get(s, 0)
                ),
                self.text(),
            )

    def sink_rows(self, sink: str) -> Counter[tuple[Any, ...]]:
        cols = self.model.columns[sink]
        if sink in KAFKA_SINKS:
            assert self.kafka is not None
            return Counter(
                tuple(_plain(_kafka_value(c, record.get(c))) for c in cols)
                for record in read_topic(self.kafka, self.topic)
            )
        if sink in PG_SINKS:
            assert self.pg_url is not None
            import psycopg

            with psycopg.connect(self.pg_url, autocommit=True) as conn:
                have = {
                    r[0]
                    for r in conn.execute(
                        "SELECT column_name FROM information_schema.columns WHERE table_name = %s", [sink]
                    ).fetchall()
                }
                if not have:
                    return Counter()
                picked = ", ".join(c if c in have else f"NULL AS {c}" for c in cols)
                rows = conn.execute(f"SELECT {picked} FROM public.{sink}").fetchall()
            return Counter(tuple(_plain(v) for v in r) for r in rows)
        if sink in FILE_SINKS:  # the batches' files, read by DuckDB
            files = sorted(Path(f"{self.folder}-{sink}").glob("part-*.parquet"))
            if not files:
                return Counter()
            con = duckdb.connect()
            try:
                have = {
                    r[0]
                    for r in con.execute(
                        "DESCRIBE SELECT * FROM read_parquet(?, union_by_name=true)",
                        [[str(f) for f in files]],
                    ).fetchall()
                }
                picked = ", ".join(c if c in have else f"NULL AS {c}" for c in cols)
                rows = con.execute(
                    f"SELECT {picked} FROM read_parquet(?, union_by_name=true)", [[str(f) for f in files]]
                ).fetchall()
            finally:
                con.close()
            return Counter(tuple(_plain(v) for v in r) for r in rows)
        try:
            _, rows = self.query(f"SELECT {', '.join(cols)} FROM {sink}")
        except Exception as exc:  # noqa: BLE001 - a table not there yet holds no row
            if "does not exist" in str(exc) or "not found" in str(exc).lower():
                return Counter()
            raise
        return Counter(tuple(_plain(v) for v in r) for r in rows)

    def truth(self, sink: str, rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        """The expected rows, as DuckDB computes them from the model's rows (one per window
        written, with NULL for a column the branch that wrote it does not have)."""
        cols = self.model.columns[sink]
        if not rows:
            return []
        con = duckdb.connect()
        fixed = ["window_start", "window_end", "k", "id", "ts", "early", "v", "g", "cid", "cts"]
        con.execute(
            "CREATE TABLE t (window_start TIMESTAMP, window_end TIMESTAMP, k VARCHAR, id BIGINT, "
            + "ts TIMESTAMP, early BOOLEAN, v BIGINT, g VARCHAR, cid BIGINT, cts TIMESTAMP, "
            + ", ".join(f"{a} {'DOUBLE' if a == 'mean' else 'BIGINT'}" for a in FUNCTIONS)
            + ")"
        )
        names = fixed + list(FUNCTIONS)
        given = pa.table({c: [r.get(c) for r in rows] for c in names})  # (row by row: ~50 ms a call)
        con.register("given", given)
        con.execute(f"INSERT INTO t SELECT {', '.join(names)} FROM given")
        out = con.execute(f"SELECT {', '.join(cols)} FROM t").fetchall()
        con.close()
        return [tuple(_plain(v) for v in r) for r in out]


def start_server(home: Path) -> tuple[subprocess.Popen[str], int]:
    """``pitstop serve`` on a free loopback port, as its own process group."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pitstop.cli", "--home", str(home), "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "127.0.0.1:" not in line:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(
            f"pitstop serve did not start: {line}{proc.stderr.read() if proc.stderr else ''}"
        )
    return proc, int(line.split("127.0.0.1:")[1].split("/")[0])


def stop_server(proc: subprocess.Popen[str]) -> None:
    """SIGTERM: jobs stop at a batch boundary and the server exits 0."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        code = proc.wait(120)
        if code != 0:
            raise AssertionError(
                f"pitstop serve exited {code} on SIGTERM: {proc.stderr.read() if proc.stderr else ''}"
            )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def subprocess_env() -> dict[str, str]:
    return dict(
        os.environ,
        PITSTOP_TRIGGER_MS="200",
        PITSTOP_SPARK_MASTER="local[2]",
        PITSTOP_SHUFFLE_PARTITIONS="2",
    )


def read_topic(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """Every record's JSON value that a read_committed consumer sees (none if no topic yet)."""
    import json

    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "pitstop-chains",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    out = []
    try:
        found = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            return []
        partitions = sorted(found.partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        left = set(partitions)
        while left:
            m = consumer.poll(30)
            if m is None:
                raise AssertionError(f"no end of partitions {left} of topic '{topic}' within 30 s")
            if m.error() is not None:
                if m.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(str(m.error()))
                left.discard(m.partition())
                continue
            out.append(json.loads(m.value()))
    finally:
        consumer.close()
    return out


def _kafka_value(column: str, value: Any) -> Any:
    if column in ("window_start", "window_end", "ts") and isinstance(value, str):
        return datetime.fromisoformat(value)
    return value


def _plain(v: Any) -> Any:
    if isinstance(v, datetime) and v.tzinfo is not None:
        return v.astimezone(UTC).replace(tzinfo=None)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if hasattr(v, "as_integer_ratio") and not isinstance(v, int | float):
        return int(v) if v == int(v) else float(v)
    return v
