"""kill -9 at every step of every protocol, and the truth afterwards (issue 10, points 6 and 8).

Real ``pitstop run`` processes are killed with SIGKILL at named steps (``PITSTOP_CRASH_AT``, see
:mod:`pitstop.faults`), then the home is opened again. After each crash:

- the process died of SIGKILL at that step (return code -9, ``crash point <step>`` in its log);
- the next open (a manager without Spark, as ``SHOW JOBS`` in a new ``pitstop run`` is) lists no
  half snapshot, and leaves no folder the catalog does not know in ``snapshots/`` or ``runs/``
  (what a crash left is moved to ``trash/``);
- ``SHOW JOBS`` and ``SHOW SNAPSHOTS`` tell the truth: each cell names the outcome it expects
  (a ``DROP JOB ... WITH SNAPSHOT`` either completed, or left the job resumable);
- the sink holds no window twice and no wrong window; once the next process has caught up, it
  equals a batch computation over all the input written so far.

A Spark process costs 15-35 s here, so the cells run as two chains, each on one home: the
process that resumes after a crash first catches up (which checks the previous cell) and then
runs the next cell's statement, which kills it. The two chains run side by side.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from command_helpers import Done, pitstop, start
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
    wait_until_gone,
)
from pitstop import faults
from pitstop.catalog.clock import now
from pitstop.catalog.rows import Job, Run, Snapshot
from pitstop.catalog.store import Catalog
from pitstop.manager import Manager

ROOT = Path(__file__).resolve().parent.parent
SIZE = timedelta(hours=1)
PER_FILE = 60  # orders per file: 90 s apart, 1.5 h of event time


def job_sql(restore: str = "") -> str:
    source = revenue_select("'1' HOUR")
    return f"CREATE JOB j {restore} AS INSERT INTO revenue {source};"


def setup_sql(folder: Path) -> str:
    return orders_mapping(folder) + "CREATE MAPPING revenue TYPE DuckDB;\n" + job_sql()


# -- the cells ------------------------------------------------------------------------------------
RESUMABLE = "job resumable (STOPPED after the open, RUNNING once Spark starts), no snapshot listed"
COMPLETED = "completed: snapshot listed, job gone"


@dataclass(frozen=True)
class Cell:
    """One crash: the statements the process runs, where it dies, and the truth expected after."""

    crash_at: str  # PITSTOP_CRASH_AT
    sql: str  # after the chain's previous process (the first cell: after the set-up)
    jobs: dict[str, str]  # job -> status after the next open
    snapshots: tuple[str, ...]  # listed after the next open
    truth: str  # the outcome in words (the matrix report)
    caught_up: bool = True  # the process caught up with all input before it died
    new_input: bool = True  # a new input file is written before the process starts
    holds: bool | None = None  # whether the sink holds any window after the crash (None: not checked)

    @property
    def step(self) -> str:
        return self.crash_at.partition(":")[0]


@dataclass(frozen=True)
class Chain:
    name: str
    cells: tuple[Cell, ...]
    final: str  # the last process: catches up and exits normally
    final_status: str


AWAIT = "AWAIT JOB j TIMEOUT INTERVAL '240' SECOND;"
DROP = AWAIT + "DROP JOB j WITH SNAPSHOT s;"
SNAP = AWAIT + "CREATE SNAPSHOT s FOR JOB j;"
REPLACE = AWAIT + "CREATE OR REPLACE SNAPSHOT s FOR JOB j;"
J = {"j": "STOPPED"}
CHAINS = (
    Chain(
        "DROP JOB WITH SNAPSHOT, then CREATE JOB FROM SNAPSHOT",
        (
            Cell("drain.fenced", DROP, J, (), RESUMABLE),
            Cell("export.stage_written", DROP, J, (), RESUMABLE),
            Cell("export.renamed", DROP, J, (), RESUMABLE),
            Cell("drop.recorded", DROP, {}, ("s",), COMPLETED),
            Cell(
                "restore.prepared",
                job_sql("FROM SNAPSHOT s"),
                {},
                ("s",),
                "no job (CREATE JOB never answered), snapshot listed",
                new_input=False,
            ),
            Cell(
                "restore.batch:2",
                job_sql("FROM SNAPSHOT s") + AWAIT,
                J,
                ("s",),
                "job created and resumable, snapshot listed",
                caught_up=False,
            ),
        ),
        AWAIT,
        "STOPPED",
    ),
    Chain(
        "micro-batches, SUSPEND, CREATE [OR REPLACE] SNAPSHOT of a running job",
        (
            # Batch 0 reads the input (no window closes at watermark 0); batch 1 emits the windows:
            # it dies before they commit in DuckDB, so the sink holds nothing yet.
            Cell("sink.before_commit:2", AWAIT, J, (), RESUMABLE, caught_up=False, holds=False),
            # The resumed run replays batch 1 first: it commits in DuckDB, not in the checkpoint; the
            # next run replays it again and finds it in the sink's bookkeeping.
            Cell("sink.after_commit:1", AWAIT, J, (), RESUMABLE, caught_up=False, holds=True),
            # SUSPEND records its intent first: killed while its queries stop, the job stays
            # suspended, as asked, and ALTER JOB RESUME (the next cell's first statement) resumes it.
            Cell(
                "suspend.recorded",
                AWAIT + "ALTER JOB j SUSPEND;",
                {"j": "SUSPENDED"},
                (),
                "suspended, as the statement asked; ALTER JOB j RESUME resumes it",
            ),
            Cell("drain.fenced", "ALTER JOB j RESUME;" + SNAP, J, (), RESUMABLE),
            Cell("export.stage_written", SNAP, J, (), RESUMABLE),
            Cell("export.renamed", SNAP, J, (), RESUMABLE),
            Cell("snapshot.recorded", SNAP, J, ("s",), "snapshot listed, job resumable"),
            Cell("export.renamed", REPLACE, J, ("s",), "old snapshot listed, its folder back; job resumable"),
            Cell(
                "snapshot.recorded", REPLACE, J, ("s",), "new snapshot listed, old folder gone; job resumable"
            ),
            # Killed between a replay's two runs: its folder goes to the trash, no diff is kept.
            Cell(
                "replay.captured",
                AWAIT + "EXPLAIN ANALYZE " + job_sql("FROM SNAPSHOT s"),
                J,
                ("s",),
                "replay folder trashed, no diff; job resumable",
            ),
        ),
        AWAIT + "ALTER JOB j SUSPEND;",
        "SUSPENDED",
    ),
)


# -- the steps and the tidy-up, without Spark --------------------------------------------------
def test_every_crash_point_is_a_listed_and_documented_step() -> None:
    called = set()
    for path in (ROOT / "src" / "pitstop").rglob("*.py"):
        called |= set(re.findall(r'crash_point\("([a-z_.]+)"', path.read_text()))
    assert called == set(faults.STEPS)
    assert faults.__doc__ is not None
    for step in faults.STEPS:
        assert f"``{step}" in faults.__doc__, step


def test_a_fault_spec_fails_the_nth_time_its_step_is_reached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(faults, "_hits", {})
    monkeypatch.setenv(faults.FAULT_ENV, "export.renamed:2:ENOSPC, drain.fenced:EACCES")
    faults.crash_point("export.renamed", "/x/one")  # the first time: nothing
    with pytest.raises(OSError, match=r"\[Errno 28\] No space left on device: '/x/two'"):
        faults.crash_point("export.renamed", "/x/two")
    with pytest.raises(PermissionError):
        faults.crash_point("drain.fenced")
    faults.crash_point("export.stage_written")  # not named: nothing


def test_opening_a_home_puts_back_what_a_crash_left(tmp_path: Path) -> None:
    """Without Spark: every leftover the matrix meets, made by hand, moved to the trash on open;
    a replaced snapshot's folder put back in place; a RUNNING job marked STOPPED."""
    home = tmp_path / "home"
    manager = Manager(settings(home))
    try:
        catalog = manager.catalog
        snapshots, runs = home / "snapshots", home / "runs"
        for folder, created in ((snapshots / "kept", "old"), (snapshots / ".kept.replaced-1", "older")):
            folder.mkdir(parents=True)
            (folder / "manifest.json").write_text(json.dumps({"created": created}))
        with catalog.transaction() as tx:  # the catalog still lists the replaced one
            catalog.add_snapshot(
                Snapshot("kept", "j", now(), str(snapshots / "kept"), 0, 0, {"created": "older"}), tx
            )
        for leftover in (snapshots / ".s.0a1b2c3d.tmp" / "stages", snapshots / "half", runs / "j-0a1b2c3d"):
            leftover.mkdir(parents=True)
        (runs / "j-live").mkdir()
        catalog.create_job(
            Job("j", "", "RUNNING", "", "j-live", None, now(), now()),
            Run("j-live", "j", str(runs / "j-live"), {}, None, now()),
        )
    finally:
        manager.close()

    seen = open_home(home)
    assert sorted(seen.trashed) == [
        "runs/j-0a1b2c3d",
        "snapshots/.s.0a1b2c3d.tmp",
        "snapshots/half",
        "snapshots/kept",
    ]
    assert json.loads((snapshots / "kept" / "manifest.json").read_text()) == {"created": "older"}
    assert seen.jobs["j"][0] == "STOPPED" and "ended without stopping it" in seen.jobs["j"][2]
    assert sorted(p.name for p in runs.iterdir()) == ["j-live"]


# -- processes ------------------------------------------------------------------------------------
def pitstop_run(home: Path, sql: str, **env: str) -> Done:
    """``pitstop run -c sql`` as a real process (in a session of its own); returns once the
    process and every process it started (Spark's JVM, Python workers) are gone."""
    home.parent.mkdir(parents=True, exist_ok=True)  # its working folder (command_helpers.start)
    return pitstop("run", "-c", sql, home=home, env=env, process=True, timeout=400)


# -- the truth ------------------------------------------------------------------------------------
@dataclass
class Input:
    folder: Path
    count: int = 0
    processed: int = 0  # orders the sink must account for once the job has caught up

    def add(self) -> None:
        make_orders.write_orders(
            self.folder, self.count, self.count + PER_FILE, files=1, prefix=f"o{self.count:05d}"
        )
        self.count += PER_FILE

    def expected(self, count: int) -> dict[Any, Any]:
        orders = [make_orders.order(i) for i in range(count)]
        watermark = max(make_orders.EPOCH + timedelta(seconds=90 * i) for i in range(count)) - DELAY
        return closed(batch_windows(orders, SIZE), SIZE, watermark)


@dataclass
class Seen:
    """What the first open after a crash found."""

    left: list[str]  # folders the crash left that the catalog does not know (before the open)
    trashed: list[str]
    jobs: dict[str, tuple[str, str | None, str]]  # name -> (status, from_snapshot, detail)
    snapshots: dict[str, dict[str, Any]]  # name -> manifest
    windows: dict[Any, Any] = field(default_factory=dict)


def unknown_folders(home: Path) -> list[str]:
    """Folders in ``snapshots/`` and ``runs/`` that the catalog does not know, and replays'
    folders (read-only look)."""
    db = Catalog(home / "catalog.duckdb", read_only=True)
    try:
        known = {Path(s.path).resolve() for s in db.snapshots()}
        known |= {Path(db.get_run(j.run_id).folder).resolve() for j in db.jobs()}
    finally:
        db.close()
    return sorted(
        f"{p.parent.name}/{p.name}"
        for kind in ("snapshots", "runs", "replays")
        for p in (home / kind).glob("*")
        if p.resolve() not in known
    )


def open_home(home: Path) -> Seen:
    """Open the home as the next process does (no Spark): what it tidies, and what it says."""
    left = unknown_folders(home)
    trash_before = set((home / "trash").glob("*/*/*"))
    manager = Manager(settings(home))
    try:
        jobs, snaps = run(manager, "SHOW JOBS; SHOW SNAPSHOTS;")
        seen = Seen(
            left,
            sorted(f"{p.parent.name}/{p.name}" for p in set((home / "trash").glob("*/*/*")) - trash_before),
            {r[0]: (r[1], r[2], r[jobs.columns.index("detail")]) for r in jobs.rows},
            {s.name: s.manifest for s in manager.catalog.snapshots()},
        )
        if manager.catalog.query(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'revenue'"
        )[1][0][0]:
            seen.windows = sink_windows(manager, "revenue")  # fails on a window written twice
        diffs = manager.catalog.query(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'diff'"
        )
        assert diffs[1] == [(0,)], "a replay that never finished kept a diff"
        for snap in manager.catalog.snapshots():
            on_disk = json.loads((Path(snap.path) / "manifest.json").read_text())
            assert on_disk == snap.manifest, f"snapshot '{snap.name}': its folder is not the one listed"
    finally:
        manager.close()
    assert unknown_folders(home) == [], "the open left folders the catalog does not know"
    assert not list((home / "snapshots").glob(".*")), "a temp folder is left in snapshots/"
    # What the crash left went to the trash (a replaced snapshot's folder went back into place).
    assert set(seen.left) - set(seen.trashed) <= {x for x in seen.left if ".replaced-" in x}
    return seen


def check_windows(seen: Seen, data: Input, caught_up: bool) -> None:
    expected = data.expected(data.processed) if data.processed else {}
    if caught_up:
        assert seen.windows == expected
    else:  # died mid-stream: what the sink holds is right, nothing is there twice
        everything = data.expected(data.count)
        assert {k: everything.get(k) for k in seen.windows} == seen.windows


@pytest.mark.spark
def test_crash_at_every_step_leaves_the_truth(tmp_path: Path) -> None:
    """The chains run side by side, each on a home of its own with processes of its own: most of a
    cell's time is its process starting Spark, a JVM busy on one core, so two chains take not
    much longer than the longer one (the suite's time is kept on two cores). A failing chain
    fails the test once both have ended; the matrix report is printed (pytest -s)."""
    with ThreadPoolExecutor(len(CHAINS)) as pool:
        running = [pool.submit(crash_chain, chain, tmp_path / f"chain{i}") for i, chain in enumerate(CHAINS)]
        reports = [r.result() for r in running]
    print("\n" + "\n".join(line for report in reports for line in report))


def crash_chain(chain: Chain, tmp_path: Path) -> list[str]:
    """Run one chain's cells and its final process, checking the truth after each; returns the
    matrix report's lines."""
    home, data = tmp_path / "home", Input(tmp_path / "orders")
    started = time.monotonic()
    matrix: list[str] = []  # the report: printed with pytest -s
    before_sql = setup_sql(data.folder)
    previous: dict[str, dict[str, Any]] = {}
    for cell in chain.cells:
        if cell.new_input:
            data.add()
        done = pitstop_run(home, before_sql + cell.sql, PITSTOP_CRASH_AT=cell.crash_at)
        assert done.returncode == -signal.SIGKILL, (
            f"{cell.crash_at}: exit {done.returncode}\n{done.stderr[-3000:]}"
        )
        assert f"crash point {cell.step} " in done.stderr, done.stderr[-3000:]
        if cell.caught_up:
            data.processed = data.count
        seen = open_home(home)
        assert {n: s[0] for n, s in seen.jobs.items()} == cell.jobs, (cell.crash_at, seen.jobs)
        assert sorted(seen.snapshots) == sorted(cell.snapshots), (cell.crash_at, seen.snapshots)
        for name, (status, _, detail) in seen.jobs.items():
            assert status != "STOPPED" or "resumes from its checkpoints" in detail
            assert status != "SUSPENDED" or f"ALTER JOB {name} RESUME continues" in detail
        check_windows(seen, data, cell.caught_up)
        assert cell.holds is None or bool(seen.windows) == cell.holds, seen.windows
        if "REPLACE" in cell.sql and cell.step == "export.renamed":
            assert seen.snapshots["s"] == previous["s"], "the replaced snapshot is not the one listed"
        if "REPLACE" in cell.sql and cell.step == "snapshot.recorded":
            assert seen.snapshots["s"]["created"] > previous["s"]["created"]
        matrix.append(
            f"{chain.name} | {cell.crash_at} | left: {', '.join(seen.left) or 'nothing'} | "
            f"trashed: {', '.join(seen.trashed) or 'nothing'} | "
            f"jobs { ({n: s[0] for n, s in seen.jobs.items()}) } snapshots {sorted(seen.snapshots)} | "
            f"{cell.truth} | {done.took_s:.0f} s (+{done.gone_s:.1f} s until its JVM was gone)"
        )
        previous = seen.snapshots
        before_sql = ""
    data.add()
    done = pitstop_run(home, chain.final + "SHOW JOBS;")
    assert done.returncode == 0, done.stderr[-3000:]
    assert ("SUSPENDED" if chain.final_status == "SUSPENDED" else "RUNNING") in done.stdout  # SHOW JOBS
    data.processed = data.count
    seen = open_home(home)
    check_windows(seen, data, caught_up=True)
    assert {n: s[0] for n, s in seen.jobs.items()} == {"j": chain.final_status}
    matrix.append(f"{chain.name} | done in {time.monotonic() - started:.0f} s")
    return matrix


# -- a full disk while exporting (point 8) --------------------------------------------------------
def wait_for(path: Path, text: str, proc: subprocess.Popen[str], timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in path.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, path.read_text()[-3000:]
        time.sleep(0.2)


@pytest.mark.spark
def test_a_full_disk_while_exporting_fails_the_statement_and_the_job_goes_on(tmp_path: Path) -> None:
    """Tests may run as root, for whom a read-only folder is writable, and a small full file system
    needs a mount: the disk fills up by injection (``PITSTOP_FAULT_AT``), at the two writes of an
    export: the Parquet rows, and the catalog row after the files are in place. An unwritable
    snapshots folder is real: a file in its place, which stops root too."""
    home, data = tmp_path / "home", Input(tmp_path / "orders")
    data.add()
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    fault = "export.stage_written:1:ENOSPC,export.renamed:1:ENOSPC"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = start(
            "run",
            "--on-error",
            "continue",
            "-",
            home=home,
            env={faults.FAULT_ENV: fault},
            stdin=subprocess.PIPE,
            stdout=stdout,
            stderr=stderr,
        )
    assert proc.stdin is not None
    try:
        # stdin runs each statement once its line is complete.
        proc.stdin.write(
            "\n".join([setup_sql(data.folder), AWAIT, DROP[len(AWAIT) :], SNAP[len(AWAIT) :], ""])
        )
        proc.stdin.flush()
        wait_for(err, "could not be recorded", proc)
        snapshots = home / "snapshots"
        assert list(snapshots.iterdir()) == []  # nothing half-written is left
        snapshots.rmdir()
        snapshots.write_text("not a folder")
        proc.stdin.write(DROP[len(AWAIT) :] + "\n")
        proc.stdin.flush()
        wait_for(err, "Not a directory", proc)
        snapshots.unlink()
        data.add()  # the job reads on after the three failures
        proc.stdin.write("\n".join([AWAIT, "SHOW SNAPSHOTS;", DROP[len(AWAIT) :], ""]))
        proc.stdin.close()
        assert proc.wait(timeout=300) == 1, err.read_text()[-3000:]  # three statements failed
    finally:
        wait_until_gone(proc.pid)
    said = err.read_text()
    snapshots = home.resolve() / "snapshots"
    # The Parquet rows: the reason, naming the folder being written; the job not dropped.
    assert re.search(
        rf"snapshot 's' of job 'j' could not be written: \[Errno 28\] No space left on device: "
        rf"'{re.escape(str(snapshots))}/\.s\.[0-9a-f]+\.tmp/stages/[^'/]+'\. Nothing of it was kept; "
        rf"free space in {re.escape(str(snapshots))} \(or make it writable\) and try again\. "
        r"Job 'j' was not dropped; it goes on",
        said,
    ), said
    # The catalog row, after the files: the reason, and the files removed.
    assert (
        f"snapshot 's' of job 'j' could not be recorded in the catalog: [Errno 28] No space left on device: "
        f"'{snapshots / 's'}'. Its files were removed. Job 'j' goes on" in said
    ), said
    # The unwritable folder: the OS's reason, naming the folder; the job not dropped.
    assert re.search(
        rf"snapshot 's' of job 'j' could not be written: \[Errno 20\] Not a directory: "
        rf"'{re.escape(str(snapshots))}/\.s\.[0-9a-f]+\.tmp'\. Nothing of it was kept; .*"
        r"Job 'j' was not dropped; it goes on",
        said,
    ), said
    printed = out.read_text()
    assert "0 snapshot(s)" in printed or "(0 rows)" in printed  # SHOW SNAPSHOTS after both failures
    assert "job 'j' dropped with snapshot 's'" in printed
    data.processed = data.count
    seen = open_home(home)
    assert seen.left == [] and seen.trashed == []  # nothing half-written was left behind
    assert sorted(seen.snapshots) == ["s"] and seen.jobs == {}
    check_windows(seen, data, caught_up=True)  # the input written after the failures is in the sink
