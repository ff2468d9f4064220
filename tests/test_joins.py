"""Joins (issue 11, section 2.4): a stream joined to a static table (stateless; a changed table is
seen by later micro-batches), and an interval join of two streams, a stateful stage whose buffered
rows survive a pit stop so that a pair straddling the cut is emitted exactly once, restored from
the snapshot's rows and natively. Planner and rules without Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import run, settings
from pitstop.catalog.rows import Mapping
from pitstop.engine.checkpoint import copy_checkpoint
from pitstop.engine.clocks import Clock, clocks_dir, read_clocks, write_clocks
from pitstop.errors import PlanError
from pitstop.executor import mapping_from_node
from pitstop.manager import Manager
from pitstop.plan.model import JobPlan, stage_from_json
from pitstop.planner import compat
from pitstop.planner.build import plan_job
from pitstop.snapshots.restore import NATIVE, ROWS
from pitstop.sql.parser import parse_statement
from pitstop.stages import registry

MAPPINGS_SQL = [
    """CREATE MAPPING clicks (k VARCHAR, user_id BIGINT, ts TIMESTAMP,
        WATERMARK FOR ts AS ts - INTERVAL '1' HOUR) TYPE File OPTIONS ('path'='/tmp/pitstop-tests/c')""",
    """CREATE MAPPING views (k VARCHAR, vts TIMESTAMP, page VARCHAR,
        WATERMARK FOR vts AS vts - INTERVAL '10' MINUTE) TYPE File OPTIONS ('path'='/tmp/pitstop-tests/v')""",
    "CREATE MAPPING users (id BIGINT, name VARCHAR, k VARCHAR, seen TIMESTAMP) TYPE DuckDB",
    "CREATE MAPPING noclock (k VARCHAR, t TIMESTAMP) TYPE File OPTIONS ('path'='/tmp/pitstop-tests/n')",
    "CREATE MAPPING gen (id BIGINT) TYPE Generator OPTIONS ('rate'='1')",
    "CREATE MAPPING out (k VARCHAR) TYPE DuckDB",
]
MAPPINGS: dict[str, Mapping] = {}
for _sql in MAPPINGS_SQL:
    _m = mapping_from_node(parse_statement(_sql), _sql)
    MAPPINGS[_m.name.lower()] = _m

INTERVAL = (
    "INSERT INTO out SELECT a.k, a.ts, b.vts, b.page FROM clicks a JOIN views b "
    "ON a.k = b.k AND b.vts BETWEEN a.ts AND a.ts + INTERVAL '1' HOUR"
)


def joined_to(mapping: str, time: str) -> str:
    """The interval join with another right side, bounded by its column ``time``."""
    return INTERVAL.replace("views b", f"{mapping} b").replace("b.vts", f"b.{time}").replace(", b.page", "")


def plan(body: str) -> JobPlan:
    node = parse_statement(f"CREATE JOB j AS {body}")
    return plan_job("j", list(node.args["body"]), lambda name: MAPPINGS.get(name.lower()))


def refusal(body: str) -> str:
    with pytest.raises(PlanError) as caught:
        plan(body)
    return caught.value.message


# -- planning and rules, no Spark ----------------------------------------------------------------------
def test_a_join_on_equalities_reads_the_other_mapping_as_a_static_table_without_state() -> None:
    job = plan(
        "INSERT INTO out SELECT c.*, u.name, u.k AS uk FROM clicks c LEFT JOIN users u "
        "ON c.user_id = u.id WHERE u.name <> 'x'"
    )
    (b,) = job.branches
    assert b.stages == () and b.join is not None
    assert (b.join.kind, b.join.how, b.join.right, b.sources) == ("table", "left", "users", ("clicks",))
    assert b.mappings == ("clicks", "users", "out")
    # Flat names: the right side's k clashes with the left's, so it is u_k inside the branch.
    assert [c.name for c in b.join.right_columns] == ["id", "name", "u_k", "seen"]
    assert b.join.on_sql == "`user_id` = `id`"
    assert b.where_sql == "`name` <> 'x'"
    assert [c.name for c in b.output] == ["k", "user_id", "ts", "name", "uk"]
    assert JobPlan.from_json(job.to_json()) == job
    explained = {r[1] for r in __import__("pitstop.describe").describe.explain_rows(job, None)}
    assert explained == {"clicks LEFT JOIN table users (static: stateless, read again every micro-batch)"}


def test_a_join_bounded_in_time_is_an_interval_join_stage_of_two_streams() -> None:
    job = plan(INTERVAL)
    (b,) = job.branches
    (stage,) = b.stages
    assert (stage.name, stage.kind, b.sources) == ("out.join", "interval_join", ("clicks", "views"))
    assert job.sources == ("clicks", "views")
    iv = stage.interval
    assert iv is not None
    assert ([k.name for k in stage.keys], iv.right_keys, stage.time_column, iv.right_time) == (
        ["k"],
        ("b_k",),
        "ts",
        "vts",
    )
    assert (iv.lower_micros, iv.upper_micros, iv.right_delay_micros) == (0, 3_600_000_000, 600_000_000)
    assert JobPlan.from_json(job.to_json()) == job
    kind = registry.kind_of(stage)
    assert kind.state_schema(stage) == (
        "side STRING, `k` STRING, `ts` TIMESTAMP, `b_k` STRING, `vts` TIMESTAMP, `page` STRING"
    )
    assert kind.describe(stage).shape == "INTERVAL JOIN views ON vts BETWEEN ts AND ts + INTERVAL '1' HOUR"
    # The same bound written the other way round, and as two comparisons, plans the same stage.
    for other in (
        "ON b.k = a.k AND a.ts BETWEEN b.vts - INTERVAL '60' MINUTE AND b.vts",
        "ON a.k = b.k AND b.vts >= a.ts AND b.vts <= a.ts + INTERVAL '1' HOUR",
    ):
        again = plan(INTERVAL.split(" ON ")[0] + " " + other).stages[0]
        assert again == stage, other
    hinted = plan(INTERVAL.replace("SELECT a.k", "SELECT /*+ STAGE(pairs) */ a.k")).stages[0]
    assert hinted.name == "pairs"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (INTERVAL.replace("JOIN views", "LEFT JOIN views"), "INNER only"),
        (INTERVAL.replace("a.k = b.k AND ", ""), "needs at least one key equality"),
        (INTERVAL + " AND b.page = 'x'", "move b.page = 'x' to WHERE"),
        (joined_to("users", "seen"), "cannot be read as a stream"),
        (joined_to("noclock", "t"), "mapping 'noclock' needs WATERMARK FOR t"),
        (joined_to("clicks", "ts"), "a JOIN of mapping 'clicks' with itself is not supported"),
        ("INSERT INTO out SELECT a.k FROM clicks a JOIN clicks a ON a.user_id = a.id", "alias one"),
        ("INSERT INTO out SELECT c.k FROM clicks c JOIN gen g ON c.user_id = g.id", "cannot be read whole"),
        ("INSERT INTO out SELECT k FROM clicks c JOIN users u ON c.user_id = u.id", "in both sides"),
        ("INSERT INTO out SELECT c.k FROM clicks c RIGHT JOIN users u ON c.user_id = u.id", "not supported"),
        (
            "INSERT INTO out WITH e AS (SELECT c.k FROM clicks c JOIN users u ON c.user_id = u.id) "
            "SELECT k FROM e JOIN users u ON e.k = u.k",
            "SELECT that reads the sources only",
        ),
        (INTERVAL.replace("SELECT a.k,", "SELECT a.k, COUNT(*) AS n,") + " GROUP BY a.k", "not supported"),
    ],
)
def test_joins_pitstop_cannot_run_are_refused_saying_what_to_write(body: str, said: str) -> None:
    assert said in refusal(body)


def test_interval_join_rules_across_an_update() -> None:
    def verdict(old: str, new: str) -> compat.StageVerdict:
        before = stage_from_json(plan(old).to_json()["branches"][0]["stage"])
        (v,) = compat.check({before.name: before}, plan(new))
        return v

    same = verdict(INTERVAL, INTERVAL.replace(", b.page FROM", " FROM") + " WHERE b.page <> 'x'")
    assert (same.outcome, same.reason) == (compat.RESTORED, "same keys, sides and columns")
    more = verdict(
        INTERVAL, INTERVAL.replace("SELECT a.k,", "SELECT a.k, a.user_id,").replace(", b.page", "")
    )
    assert (
        more.outcome == compat.RESTORED
        and "column(s) page of the right side no longer buffered" in more.reason
    )
    assert more.warnings == (
        "column(s) user_id of the left side were not buffered before the cut: a pair made with a row "
        "buffered then holds NULL in them",
    )
    narrowed = verdict(INTERVAL, INTERVAL.replace("'1' HOUR", "'30' MINUTE"))
    assert narrowed.outcome == compat.RESTORED and not narrowed.warnings
    assert "bound narrowed from vts BETWEEN ts AND ts + INTERVAL '1' HOUR to" in narrowed.reason
    widened = verdict(INTERVAL, INTERVAL.replace("'1' HOUR", "'2' HOUR"))
    assert widened.outcome == compat.RESTORED and "bound widened" in widened.reason
    assert "may be missed" in widened.warnings[0]
    rekeyed = verdict(INTERVAL, INTERVAL.replace("a.k = b.k", "a.k = b.page"))
    assert rekeyed.outcome == compat.REFUSED and rekeyed.reason.startswith("join keys changed")
    retimed = verdict(INTERVAL, INTERVAL.replace("a.ts AND a.ts +", "a.ts - INTERVAL '1' MINUTE AND a.ts +"))
    assert retimed.outcome == compat.RESTORED  # a bound change, not a time column change
    # New in a restored job, it starts on the job's clock (rows late for the old job are late for it).
    clock = registry.kind_of(plan(INTERVAL).stages[0]).clock(plan(INTERVAL).stages[0], 5_000)
    assert clock is not None and (clock.clock_only, clock.old_watermark_ms) == (True, 5_000)
    running = "INSERT INTO out SELECT /*+ STAGE(out.join) */ k, COUNT(*) AS n FROM clicks GROUP BY k"
    across = verdict(INTERVAL, running)
    assert across.outcome == compat.REFUSED and "kind changed" in across.reason


def test_a_duckdb_table_is_published_as_it_stands_after_every_commit(tmp_path: Path) -> None:
    """What a static join's table reader reads: the table as committed last (empty, with the
    mapping's columns, before anything created it), written again by a hook after each commit."""
    import pyarrow.parquet as pq

    from pitstop.catalog.store import Catalog
    from pitstop.connectors import tables

    catalog = Catalog(tmp_path / "catalog.duckdb")
    users = MAPPINGS["users"]
    run_dir = str(tmp_path / "run")

    def published() -> list[dict[str, Any]]:
        return pq.read_table(tables.published(run_dir, "r_0", users) / tables.TABLE_FILE).to_pylist()

    try:
        tables.publish(catalog, users, run_dir, "r_0")
        assert published() == []
        assert pq.read_schema(tables.published(run_dir, "r_0", users) / tables.TABLE_FILE).names == [
            "id",
            "name",
            "k",
            "seen",
        ]
        catalog.add_commit_hook(lambda: tables.publish(catalog, users, run_dir, "r_0"))
        with catalog.transaction() as tx:
            tx.execute("CREATE TABLE users (seen TIMESTAMP, id BIGINT, name VARCHAR, k VARCHAR, extra INT)")
            tx.execute("INSERT INTO users VALUES (NULL, 1, 'ann', 'a', 7)")
        assert published() == [{"id": 1, "name": "ann", "k": "a", "seen": None}]
        with catalog.transaction() as tx:
            tx.execute("UPDATE users SET name = 'anna'")
        assert [r["name"] for r in published()] == ["anna"]
    finally:
        catalog.close()


def test_stream_clocks_as_of_a_batch_are_the_newest_at_or_below_it_and_go_with_a_checkpoint_copy(
    tmp_path: Path,
) -> None:
    """pitstop.engine.clocks: each file holds every stream's greatest time as of its batch; the
    newest at or below a batch counts, older ones go once RETAIN batches have passed (the newest of
    those stays), and a snapshot's copy of the checkpoint takes those up to its cut only."""
    ckpt = tmp_path / "checkpoint"
    at = {b: (Clock("ts", 1000 * b), None if b < 120 else Clock("vts", 7 * b)) for b in (0, 50, 120, 230)}
    assert read_clocks(ckpt) == ()
    for b in (0, 50, 120):
        write_clocks(ckpt, b, at[b])
    assert read_clocks(ckpt) == at[120]
    assert read_clocks(ckpt, upto=119) == at[50]
    assert read_clocks(ckpt, upto=50) == at[50]
    assert read_clocks(ckpt, upto=49) == at[0]
    write_clocks(ckpt, 230, at[230])  # 0 and 50 are RETAIN batches old, 120 is the newest such
    assert sorted(p.name for p in clocks_dir(ckpt).iterdir()) == ["120", "230"]
    assert read_clocks(ckpt, upto=229) == at[120]

    for log in ("offsets", "commits"):
        for b in (120, 230):
            (ckpt / log).mkdir(exist_ok=True)
            (ckpt / log / str(b)).write_text("v1\n{}\n")
    copy = tmp_path / "copy"
    copy_checkpoint(ckpt, 229, copy)
    assert sorted(p.name for p in clocks_dir(copy).iterdir()) == ["120"]
    assert read_clocks(copy) == at[120]


# -- on real Spark -------------------------------------------------------------------------------------
def write(folder: Path, name: str, rows: list[dict[str, Any]]) -> None:
    (folder / f".{name}.tmp").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / f".{name}.tmp").rename(folder / name)


JOB = """p {options} AS BEGIN
    INSERT INTO pairs SELECT a.k, a.ts, b.vts FROM clicks a JOIN views b
        ON a.k = b.k AND b.vts BETWEEN a.ts AND a.ts + INTERVAL '1' HOUR;
    INSERT INTO named SELECT c.k, c.ts, u.name FROM clicks c LEFT JOIN users u ON c.user_id = u.id;
    INSERT INTO tiered SELECT c.k, c.ts, t.tier FROM clicks AS c JOIN tiers AS t ON t.id = c.user_id;
END"""
STATIC = "(static: stateless, read again every micro-batch)"
PAIRS_ONLY = JOB.split(";")[0].replace("AS BEGIN", "AS")


@pytest.mark.spark
def test_joins_across_pit_stops_pairs_once_and_static_tables_as_changed(
    manager: Manager, tmp_path: Path
) -> None:
    """One job, three pit stops' worth of runs: the interval join emits every pair once, those
    straddling a cut included (restored from the rows, then natively from a seeded run), equal
    to DuckDB's batch truth; the static joins see their tables as changed in later batches."""
    cdir, vdir, tiers = tmp_path / "clicks", tmp_path / "views", tmp_path / "tiers"
    run(
        manager,
        f"""CREATE MAPPING clicks (k VARCHAR, user_id BIGINT, ts TIMESTAMP,
                WATERMARK FOR ts AS ts - INTERVAL '1' HOUR) TYPE File OPTIONS ('path'='{cdir}');
        CREATE MAPPING views (k VARCHAR, vts TIMESTAMP, WATERMARK FOR vts AS vts - INTERVAL '1' HOUR)
            TYPE File OPTIONS ('path'='{vdir}');
        CREATE MAPPING users (id BIGINT, name VARCHAR) TYPE DuckDB;
        CREATE MAPPING tiers (id BIGINT, tier VARCHAR) TYPE File OPTIONS ('path'='{tiers}');
        CREATE MAPPING pairs TYPE DuckDB;
        CREATE MAPPING named TYPE DuckDB;
        CREATE MAPPING tiered TYPE DuckDB;""",
    )
    with manager.catalog.transaction() as tx:
        tx.execute("CREATE TABLE users (id BIGINT, name VARCHAR)")
        tx.execute("INSERT INTO users VALUES (1, 'ann'), (2, 'bob')")
    write(tiers, "t1.json", [{"id": 1, "tier": "gold"}])

    def clicks(name: str, *rows: tuple[str, str, int]) -> None:
        write(cdir, name, [{"k": k, "ts": f"2024-01-01 {t}", "user_id": u} for k, t, u in rows])

    def views(name: str, *rows: tuple[str, str]) -> None:
        write(vdir, name, [{"k": k, "vts": f"2024-01-01 {t}"} for k, t in rows])

    def rows(table: str, column: str) -> list[tuple[Any, ...]]:
        sql = f"SELECT k, strftime(ts, '%H:%M'), {column} FROM {table} ORDER BY ALL"
        return manager.catalog.query(sql)[1]

    # Run 1: the pair (a 00:00, a 00:20) is emitted; click b and view c wait in the buffers. Then
    # the tables change while the job runs: bob renamed, user 3 added, a tier rewritten, one added.
    clicks("1.json", ("a", "00:00", 1), ("b", "00:10", 2))
    views("1.json", ("a", "00:20"), ("c", "00:30"))
    explained = run(manager, f"EXPLAIN CREATE JOB {JOB.format(options='')}")[0].rows
    assert [(r[1], r[7], r[8]) for r in explained] == [
        ("clicks JOIN stream views", "starts empty", "no snapshot: starts empty"),
        (f"clicks LEFT JOIN table users {STATIC}", "stateless", "no state to restore"),
        (f"clicks JOIN table tiers {STATIC}", "stateless", "no state to restore"),
    ]
    run(manager, f"CREATE JOB {JOB.format(options='')}; AWAIT JOB p;")
    with manager.catalog.transaction() as tx:
        tx.execute("UPDATE users SET name = 'bobby' WHERE id = 2")
        tx.execute("INSERT INTO users VALUES (3, 'cy')")
    write(tiers, "t1.json.new", [{"id": 1, "tier": "platinum"}])
    (tiers / "t1.json.new").rename(tiers / "t1.json")
    write(tiers, "t2.json", [{"id": 3, "tier": "iron"}])
    clicks("2.json", ("c", "00:15", 2), ("d", "00:45", 3))
    run(manager, "AWAIT JOB p; DROP JOB p WITH SNAPSHOT p1;")
    assert rows("named", "name") == [
        ("a", "00:00", "ann"),
        ("b", "00:10", "bob"),
        ("c", "00:15", "bobby"),
        ("d", "00:45", "cy"),
    ]
    assert rows("tiered", "tier") == [("a", "00:00", "gold"), ("d", "00:45", "iron")]
    shown = dict(run(manager, "DESCRIBE SNAPSHOT p1")[0].rows)
    assert shown["stage pairs.join"].startswith("6 rows (interval_join, format 1); INTERVAL JOIN views ON")
    state = "SELECT side, k, strftime(coalesce(ts, vts), '%H:%M') FROM snapshot_state('p1', 'pairs.join')"
    assert sorted(run(manager, state)[0].rows) == [
        ("left", "a", "00:00"),
        ("left", "b", "00:10"),
        ("left", "c", "00:15"),
        ("left", "d", "00:45"),
        ("right", None, "00:20"),
        ("right", None, "00:30"),
    ]

    # Run 2, from the rows, without the static branches (a stateless change): each new view pairs
    # with a buffered click (straddling the cut); click a 00:00 and view a 00:20, both buffered,
    # are not paired again.
    views("2.json", ("b", "00:40"), ("a", "00:50"))
    explained = run(manager, f"EXPLAIN CREATE JOB {PAIRS_ONLY.format(options='FROM SNAPSHOT p1')}")[0].rows
    assert [(r[3], r[7]) for r in explained if r[3]] == [("pairs.join", "restored")]
    canonical = "OPTIONS ('restoreFormat'='canonical') FROM SNAPSHOT p1"
    started = run(manager, f"CREATE JOB {PAIRS_ONLY.format(options=canonical)}; AWAIT JOB p;")[0].message
    assert ROWS in started
    run(manager, "DROP JOB p WITH SNAPSHOT p2;")

    # Run 3, natively from a run that was itself seeded: the same holds across the second cut; the
    # static branches are back, reading from the snapshot's positions.
    views("3.json", ("d", "01:00"), ("a", "01:10"))
    clicks("3.json", ("a", "00:55", 1), ("b", "00:35", 3))
    started = run(manager, f"CREATE JOB {JOB.format(options='FROM SNAPSHOT p2')}; AWAIT JOB p;")[0].message
    assert NATIVE in started
    run(manager, "DROP JOB p;")

    # The batch truth, computed by DuckDB over every event file.
    truth = (
        duckdb.connect()
        .execute(
            f"""SELECT a.k, strftime(a.ts, '%H:%M'), strftime(b.vts, '%H:%M')
        FROM read_json('{cdir}/*.json', columns={{k: 'VARCHAR', ts: 'TIMESTAMP'}}) a
        JOIN read_json('{vdir}/*.json', columns={{k: 'VARCHAR', vts: 'TIMESTAMP'}}) b
        ON a.k = b.k AND b.vts BETWEEN a.ts AND a.ts + INTERVAL 1 HOUR ORDER BY ALL"""
        )
        .fetchall()
    )
    assert (
        rows("pairs", "strftime(vts, '%H:%M')")
        == truth
        == [
            ("a", "00:00", "00:20"),
            ("a", "00:00", "00:50"),
            ("a", "00:55", "01:10"),
            ("b", "00:10", "00:40"),
            ("b", "00:35", "00:40"),
            ("c", "00:15", "00:30"),
            ("d", "00:45", "01:00"),
        ]
    )
    # The static joins: each click once (3.json by run 3), joined with the table of its batch.
    assert rows("named", "name") == [
        ("a", "00:00", "ann"),
        ("a", "00:55", "ann"),
        ("b", "00:10", "bob"),
        ("b", "00:35", "cy"),
        ("c", "00:15", "bobby"),
        ("d", "00:45", "cy"),
    ]
    assert rows("tiered", "tier") == [
        ("a", "00:00", "gold"),
        ("a", "00:55", "platinum"),
        ("b", "00:35", "iron"),
        ("d", "00:45", "iron"),
    ]


LESSER = """j {options} AS INSERT INTO pairs SELECT a.id, b.id AS vid FROM clicks a JOIN views b
    ON a.k = b.k AND b.vts BETWEEN a.ts AND a.ts + INTERVAL '30' MINUTE"""


@pytest.mark.spark
@pytest.mark.parametrize(
    "restart", ["none", "resumed", "new process", "restored natively", "restored from rows, resumed"]
)
def test_an_interval_joins_watermark_is_the_lesser_streams_across_a_restart(
    tmp_path: Path, restart: str
) -> None:
    """README: the watermark is the lesser of the two streams', and a row at or below it is late,
    also after a restart (issue 23). Spark keeps each stream's watermark in memory only (its offset
    log holds the query's), so a restarted query (RESUME, a new process, a native restore from the
    snapshot's copy of the checkpoint) counted a stream that had no rows since as none, and the
    join's watermark stayed where it was until both had: here views (01:55) is idle after the
    restart, clicks moves on to 02:55, and the click at 01:40 was paired with the view at 02:00
    instead of dropped as late. pitstop keeps each stream's clock (pitstop.engine.clocks)."""
    home, cdir, vdir = tmp_path / "home", tmp_path / "clicks", tmp_path / "views"
    manager = Manager(settings(home))
    try:
        run(
            manager,
            f"""CREATE MAPPING clicks (id BIGINT, k VARCHAR, ts TIMESTAMP,
                    WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE) TYPE File OPTIONS ('path'='{cdir}');
            CREATE MAPPING views (id BIGINT, k VARCHAR, vts TIMESTAMP,
                    WATERMARK FOR vts AS vts - INTERVAL '5' MINUTE) TYPE File OPTIONS ('path'='{vdir}');
            CREATE MAPPING pairs TYPE DuckDB;""",
        )
        write(vdir, "1.json", [{"id": 100, "k": "a", "vts": "2024-01-01 02:00:00"}])
        write(cdir, "1.json", [{"id": 1, "k": "a", "ts": "2024-01-01 01:00:00"}])
        run(manager, f"CREATE JOB {LESSER.format(options='')}; AWAIT JOB j;")  # the watermark: 00:55
        if restart == "resumed":
            run(manager, "ALTER JOB j SUSPEND; ALTER JOB j RESUME; AWAIT JOB j;")
        elif restart == "new process":
            manager.close()
            manager = Manager(settings(home))  # the job resumes from its checkpoint
        elif restart == "restored natively":
            started = run(
                manager, f"DROP JOB j WITH SNAPSHOT s; CREATE JOB {LESSER.format(options='FROM SNAPSHOT s')};"
            )[-1].message
            assert NATIVE in started
        elif restart == "restored from rows, resumed":
            options = "OPTIONS ('restoreFormat'='canonical') FROM SNAPSHOT s"
            started = run(
                manager, f"DROP JOB j WITH SNAPSHOT s; CREATE JOB {LESSER.format(options=options)};"
            )
            assert ROWS in started[-1].message
            run(manager, "AWAIT JOB j; ALTER JOB j SUSPEND; ALTER JOB j RESUME; AWAIT JOB j;")
        write(cdir, "2.json", [{"id": 2, "k": "a", "ts": "2024-01-01 03:00:00"}])
        run(manager, "AWAIT JOB j")  # the watermark: the lesser of 02:55 and 01:55
        write(cdir, "3.json", [{"id": 3, "k": "a", "ts": "2024-01-01 01:40:00"}])  # late
        run(manager, "AWAIT JOB j")
        assert manager.catalog.query("SELECT id, vid FROM pairs")[1] == []
        assert manager.catalog.query("SELECT stage, rows FROM pitstop.late_rows")[1] == [("pairs.join", 1)]
    finally:
        manager.close()
