"""Running aggregates (issue 11, section 2.1): ``GROUP BY`` without a window, planned as a stage kind
of its own, written to an upsert sink whose before-images rebuild the table at any batch, and
carried across a pit stop. Planner, compatibility and the DuckDB upsert sink without Spark; the
pit stop, both restore formats and the PostgreSQL sink on real Spark, checked against DuckDB."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from conftest import run
from pg_helpers import Postgres, postgres  # noqa: F401 - the fixture
from pitstop.catalog.rows import Mapping
from pitstop.connectors.duckdb.upsert import UpsertSink
from pitstop.connectors.generator.source import generate
from pitstop.connectors.upsert import KEEP
from pitstop.engine import checkpoint
from pitstop.errors import PitstopError, PlanError
from pitstop.executor import mapping_from_node
from pitstop.manager import Manager
from pitstop.plan.model import JobPlan, stage_from_json
from pitstop.planner import compat
from pitstop.snapshots.restore import NATIVE, ROWS
from pitstop.sql.parser import parse_statement
from pitstop.stages import registry
from test_planner import plan, refusal

RUNNING = "INSERT INTO daily_revenue SELECT region, COUNT(*) AS n, {more} FROM orders GROUP BY region"


# -- planning and compatibility, no Spark -----------------------------------------------------------
def test_group_by_without_a_window_plans_a_running_stage_whose_sink_rows_are_keyed_by_the_groups() -> None:
    job = plan(
        "INSERT INTO daily_revenue WITH totals AS (SELECT upper(region) AS area, COUNT(*) AS n, "
        "SUM(amount) AS total FROM orders WHERE qty > 0 GROUP BY upper(region) HAVING SUM(amount) > 10) "
        "SELECT area AS zone, n, total FROM totals WHERE n > 1"
    )
    (branch,) = job.branches
    stage = branch.stage
    assert stage is not None and stage.name == "totals" and stage.kind == "running"
    assert stage.window is None and stage.watermark_delay_micros == 0
    assert [(k.sql, k.type) for k in stage.keys] == [("UPPER(region)", "STRING")]
    assert [(a.kind, a.type) for a in stage.accumulators] == [("count", "BIGINT"), ("sum", "DECIMAL(22,2)")]
    assert branch.upsert_keys == ("zone",)  # the key as the sink names it, through the CTE
    assert [layer.where_sql for layer in branch.layers] == ["CAST(acc1 AS DECIMAL(22, 2)) > 10", "n > 1"]
    assert branch.where_sql == "qty > 0"
    assert JobPlan.from_json(job.to_json()) == job
    kind = registry.kind_of(stage)
    assert kind.updates and registry.manifest_entry(stage) == {"kind": "running", "format_version": 1}
    assert kind.state_schema(stage) == "`__k0` STRING, acc0 BIGINT, acc1 DECIMAL(22,2)"
    text = kind.describe(stage)
    assert (text.shape, text.keys) == ("running (no window)", "__k0 STRING")
    assert text.state == "count BIGINT, sum DECIMAL(22,2) for COUNT(*), SUM(amount)"
    # A window's branch still appends.
    windowed = plan(
        "INSERT INTO hourly SELECT window_start, window_end, region, COUNT(*) AS n FROM "
        "TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end, region"
    )
    assert windowed.branches[0].upsert_keys == ()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            "INSERT INTO daily_revenue SELECT COUNT(*) AS n FROM orders GROUP BY region",
            "so the SELECT must write each group key as a column of its own; region is not written",
        ),
        (
            "INSERT INTO daily_revenue SELECT upper(region) || '' AS r, COUNT(*) AS n FROM orders "
            "GROUP BY upper(region)",
            "UPPER(region) is not written as it is",
        ),
        (
            "INSERT INTO daily_revenue SELECT COUNT(*) AS n FROM orders",
            "a running aggregate needs GROUP BY at least one column",
        ),
    ],
)
def test_a_running_aggregate_whose_sink_rows_have_no_key_is_refused_saying_what_to_add(
    body: str, said: str
) -> None:
    assert said in refusal(body)


def test_running_stage_rules_across_an_update_follow_the_window_kinds() -> None:
    def job(more: str, keys: str = "region") -> JobPlan:
        return plan(RUNNING.format(more=more).replace("GROUP BY region", f"GROUP BY {keys}"))

    def stage(more: str, keys: str = "region") -> Any:
        return stage_from_json(job(more, keys).to_json()["branches"][0]["stage"])  # as a manifest keeps it

    def verdict(old: Any, new: JobPlan) -> compat.StageVerdict:
        (v,) = compat.check({old.name: old}, new)
        return v

    old = stage("SUM(amount) AS total")
    same = verdict(old, job("SUM(amount) AS total"))
    assert (same.outcome, same.reason, same.warnings) == (compat.RESTORED, "same keys and accumulators", ())
    added = verdict(old, job("SUM(amount) AS total, MAX(qty) AS top"))
    assert (added.outcome, added.reason) == (compat.RESTORED, "same keys; added: MAX(qty)")
    assert added.warnings == (
        "MAX(qty) starts empty for the groups seen before the cut: in their rows, it holds only the "
        "events after the cut",
    )
    removed = verdict(old, job("MIN(price) AS low"))
    assert removed.reason == "same keys; removed, their state dropped: SUM(amount); added: MIN(price)"
    seed = registry.kind_named("running").seed(old, stage("MAX(qty) AS top, SUM(amount) AS total"), "/s", 0)
    assert seed.columns == {"acc0": "acc0", "acc1": "CAST(NULL AS INT)", "acc2": "acc1"}
    rekeyed = verdict(stage("SUM(amount) AS total, qty", "region, qty"), job("SUM(amount) AS total"))
    assert rekeyed.outcome == compat.REFUSED and "group-by keys changed" in rekeyed.reason
    windowed = plan(
        "INSERT INTO daily_revenue SELECT window_start, window_end, region, COUNT(*) AS n, SUM(amount) AS "
        "total FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end, region"
    ).stages[0]
    across = verdict(windowed, job("SUM(amount) AS total"))
    assert across.outcome == compat.REFUSED
    assert across.reason.startswith("stage kind changed from TUMBLE to GROUP BY without a window")


def test_appending_sinks_refuse_a_running_aggregate_at_explain_and_create_job(manager: Manager) -> None:
    run(
        manager,
        """CREATE MAPPING clicks (page VARCHAR, x BIGINT) TYPE File OPTIONS ('path'='/tmp/pitstop-tests/c');
        CREATE MAPPING archive TYPE File OPTIONS ('path'='/tmp/pitstop-tests/archive');
        CREATE MAPPING topic TYPE Kafka OPTIONS ('bootstrap.servers'='127.0.0.1:1', 'topic'='t');""",
    )
    for sink, type_ in (("archive", "File"), ("topic", "Kafka")):
        body = f"j AS INSERT INTO {sink} SELECT page, SUM(x) AS total FROM clicks GROUP BY page"
        for statement in (f"EXPLAIN CREATE JOB {body}", f"CREATE JOB {body}"):
            with pytest.raises(PlanError) as caught:
                run(manager, statement)
            assert f"mapping '{sink}' is of type {type_}, which only appends" in caught.value.message
            assert "a TYPE DuckDB or TYPE Postgres mapping" in caught.value.message
    assert not run(manager, "SHOW JOBS")[0].rows


# -- the DuckDB upsert sink, on a real DuckDB file, no Spark -------------------------------------------
Row = tuple[Any, ...]


def table_at(
    current: dict[Any, Row], history: Iterable[tuple[tuple[int, int], bool, Any, Row]], cut: tuple[int, int]
) -> dict[Any, Row]:
    """The table as it stood after batch ``cut`` = (run number, batch), from its current rows and
    its before-images ((run number, batch), absent, key, row): each key's before-image in the
    first batch after the cut that wrote it, else its current row."""
    first: dict[Any, tuple[tuple[int, int], bool, Row]] = {}
    for at, absent, key, row in sorted(history, key=lambda h: h[0]):
        if at > cut and key not in first:
            first[key] = (at, absent, row)
    out = {k: v for k, v in current.items() if k not in first}
    out.update({k: row for k, (_, absent, row) in first.items() if not absent})
    return out


def upsert_batch(*rows: tuple[str, int, str, bool]) -> pa.Table:
    return pa.table(
        {
            "page": pa.array([r[0] for r in rows], pa.string()),
            "n": pa.array([r[1] for r in rows], pa.int64()),
            "total": pa.array([Decimal(r[2]) for r in rows], pa.decimal128(22, 2)),
            KEEP: pa.array([r[3] for r in rows], pa.bool_()),
        }
    )


def duck_rows(manager: Manager, sql: str) -> list[Row]:
    return manager.catalog.query(sql)[1]


def test_upsert_sink_keeps_one_row_per_group_and_before_images_rebuild_it_at_every_batch(
    manager: Manager,
) -> None:
    sql = "CREATE MAPPING totals TYPE DuckDB"
    mapping: Mapping = mapping_from_node(parse_statement(sql), sql)
    schema = [("page", "string"), ("n", "bigint"), ("total", "decimal(22,2)")]
    sink = UpsertSink(manager.catalog, mapping, "j", "r1", 0, ("page",))
    sink.prepare(schema)
    batches = [
        upsert_batch(("a", 1, "1.00", True), ("b", 1, "2.00", True)),
        upsert_batch(("a", 2, "3.00", True), ("c", 1, "-1.00", False)),  # c: not kept, never written
        upsert_batch(("b", 2, "-5.00", False), ("c", 2, "4.00", True)),  # b: no longer kept, removed
        upsert_batch(("a", 3, "4.00", True), ("b", 3, "1.00", True)),  # b back
    ]
    states: list[dict[Any, Row]] = [{}]
    for i, batch in enumerate(batches):
        sink.write(batch, i)
        states.append({r[0]: r for r in duck_rows(manager, "SELECT page, n, total FROM totals")})
    sink.write(upsert_batch(("a", 99, "0.00", True)), 1)  # Spark replays batch 1: skipped
    assert [sorted(s) for s in states] == [[], ["a", "b"], ["a", "b"], ["a", "c"], ["a", "b", "c"]]
    assert states[-1]["a"] == ("a", 3, Decimal("4.00"))
    # One row per group: the primary key, and no key twice.
    assert duck_rows(manager, "SELECT count(*), count(DISTINCT page) FROM totals") == [(3, 3)]
    assert duck_rows(
        manager,
        "SELECT constraint_column_names FROM duckdb_constraints() WHERE table_name = 'totals' "
        "AND constraint_type = 'PRIMARY KEY'",
    ) == [(["page"],)]
    assert duck_rows(manager, "SELECT batch_id, rows FROM pitstop.sink_batches ORDER BY 1") == [
        (0, 2),
        (1, 1),
        (2, 1),
        (3, 2),
    ]

    def history() -> list[tuple[tuple[int, int], bool, Any, Row]]:
        rows = duck_rows(
            manager,
            'SELECT run_id, batch_id, absent, page, n, total FROM pitstop."totals__before"',
        )
        return [((int(r[0][1:]), r[1]), r[2], r[3], (r[3], r[4], r[5])) for r in rows]

    current = states[-1]
    for b, state in enumerate(states):
        assert table_at(current, history(), (1, b - 1)) == state, b

    # A NULL key writes nothing of its batch and says what to do.
    with pytest.raises(PitstopError, match=r"group key 'page' is NULL in 1 row\(s\) of batch 4.*COALESCE"):
        sink.write(
            upsert_batch(("d", 1, "1.00", True)).set_column(0, "page", pa.array([None], pa.string())), 4
        )
    assert duck_rows(manager, "SELECT max(batch_id) FROM pitstop.sink_batches") == [(3,)]

    # A later run adds a column: the table and its history gain it; the history still rebuilds.
    later = UpsertSink(manager.catalog, mapping, "j", "r2", 0, ("page",))
    later.prepare([*schema, ("top", "bigint")])
    batch = upsert_batch(("c", 3, "5.00", True)).append_column("top", pa.array([7], pa.int64()))
    later.write(batch, 0)
    assert duck_rows(manager, "SELECT page, n, top FROM totals ORDER BY 1") == [
        ("a", 3, None),
        ("b", 3, None),
        ("c", 3, 7),
    ]
    current = {r[0]: r for r in duck_rows(manager, "SELECT page, n, total FROM totals")}
    assert table_at(current, history(), (1, 3)) == states[-1]
    assert table_at(current, history(), (1, 1)) == states[2]

    # An existing table without a key on the groups is refused when the job starts.
    with manager.catalog.transaction() as tx:
        tx.execute("CREATE TABLE main.flat (page VARCHAR, n BIGINT, total DECIMAL(22,2))")
    flat_sql = "CREATE MAPPING flat TYPE DuckDB"
    flat = UpsertSink(
        manager.catalog, mapping_from_node(parse_statement(flat_sql), flat_sql), "j", "r3", 0, ("page",)
    )
    with pytest.raises(PlanError, match=r"sink table 'flat' .* has no primary key on \(page\)"):
        flat.prepare(schema)


# -- across a pit stop, on real Spark ----------------------------------------------------------------
CLICKS = """CREATE OR REPLACE MAPPING clicks (id BIGINT, page VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP)
TYPE Generator OPTIONS ('rate'='1000000000000', 'limit'='{limit}', 'keys'='20', 'step_ms'='1000',
'max_per_batch'='100');
"""
TOTALS = """INSERT INTO totals SELECT /*+ STAGE(totals) */ page, COUNT(*) AS n, SUM(amount) AS total{more}
    FROM clicks GROUP BY page HAVING MIN(amount) > 2"""


def truth(first: int, last: int) -> dict[str, tuple[int, Decimal, Decimal, Decimal]]:
    """page -> (COUNT, SUM, MIN, MAX) of amount over events first..last-1, by DuckDB."""
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("page", pa.string()),
            ("amount", pa.decimal128(12, 2)),
            ("ts", pa.timestamp("us")),
        ]
    )
    options = {"keys": "20", "step_ms": "1000", "rate": "1000000000000"}
    con = duckdb.connect()
    con.register("clicks", pa.Table.from_batches([generate(schema, first, last, options)]))
    rows = con.execute(
        "SELECT page, COUNT(*), SUM(amount), MIN(amount), MAX(amount) FROM clicks GROUP BY ALL"
    )
    return {r[0]: tuple(r[1:]) for r in rows.fetchall()}


def kept(upto: int) -> dict[str, Row]:
    """The running totals' rows after the first ``upto`` events: the groups HAVING keeps."""
    return {p: (p, v[0], v[1]) for p, v in truth(0, upto).items() if v[2] > 2}


def batch_ends(manager: Manager, job: str) -> tuple[str, dict[int, int]]:
    """The job's run id, and where each batch committed in its checkpoint ended in the source (a
    run restored natively goes on from the old run's batch numbers)."""
    run_id = manager.catalog.get_job(job).run_id  # type: ignore[union-attr]
    ckpt = Path(manager.catalog.get_run(run_id).folder) / "branches" / "0" / "checkpoint"
    last = checkpoint.latest_commit(ckpt)
    assert last is not None
    offsets = [checkpoint.read_offsets(ckpt, b) for b in range(last + 1)]
    return run_id, {o.batch_id: int(o.positions["clicks"]) for o in offsets if o is not None}


def own_batches(manager: Manager, run_id: str) -> list[int]:
    """The batches a run wrote to its DuckDB sink (its bookkeeping rows)."""
    sql = f"SELECT batch_id FROM pitstop.sink_batches WHERE run_id = '{run_id}' ORDER BY 1"
    return [int(r[0]) for r in duck_rows(manager, sql)]


@pytest.mark.spark
@pytest.mark.parametrize(
    ("fmt", "more", "how"),
    [
        ("auto", ", COUNT(*) * 2 AS twice", NATIVE),  # a stateless change: Spark's own state files
        ("canonical", ", MAX(amount) AS top", ROWS),  # an added aggregate: seeded from the rows
    ],
)
def test_running_totals_after_a_pit_stop_equal_a_batch_computation_and_rebuild_at_every_batch(
    manager: Manager, fmt: str, more: str, how: str
) -> None:
    cut, last = 300, 600
    run(
        manager,
        CLICKS.format(limit=cut)
        + "CREATE MAPPING totals TYPE DuckDB;"
        + f"CREATE JOB running AS {TOTALS.format(more='')}; AWAIT JOB running;",
    )
    described = dict(run(manager, "DESCRIBE JOB running")[0].rows)
    assert described["branch 1"] == (
        "clicks -> stage 'totals' running (no window) by page STRING: count BIGINT, sum DECIMAL(22,2), "
        "min DECIMAL(12,2) for COUNT(*), SUM(amount), MIN(amount) -> totals (rows replaced by page)"
    )
    first_run, first_ends = batch_ends(manager, "running")
    assert first_ends == {0: 100, 1: 200, 2: 300}  # 'max_per_batch': three batches before the cut
    assert own_batches(manager, first_run) == [0, 1, 2]
    at_cut = {r[0]: r for r in duck_rows(manager, "SELECT page, n, total FROM totals")}
    assert at_cut == kept(cut) and len(at_cut) < 20  # HAVING left some groups out
    run(manager, "DROP JOB running WITH SNAPSHOT running_v1;")
    shown = dict(run(manager, "DESCRIBE SNAPSHOT running_v1")[0].rows)
    assert shown["stage totals"].startswith(
        f"{len(truth(0, cut))} rows (running, format 1); running (no window)"
    )

    updated = (
        f"running OPTIONS ('restoreFormat'='{fmt}') FROM SNAPSHOT running_v1 AS {TOTALS.format(more=more)}"
    )
    run(manager, CLICKS.format(limit=last))
    explained = run(manager, f"EXPLAIN CREATE JOB {updated}")[0]
    (row,) = [r for r in explained.rows if r[3] == "totals"]
    assert (row[4], row[7]) == ("running (no window)", "restored")
    assert how in row[8]
    if how == ROWS:
        assert row[8].startswith("same keys; added: MAX(amount); " + ROWS)
        assert "MAX(amount) starts empty for the groups seen before the cut" in row[8]
    run(manager, f"CREATE JOB {updated}; AWAIT JOB running;")
    second_run, ends = batch_ends(manager, "running")
    second_ends = {b: ends[b] for b in own_batches(manager, second_run)}
    assert sorted(second_ends.values()) == [400, 500, 600]

    # The running totals equal a batch computation over all input: one row per group HAVING keeps.
    extra = "twice" if how == NATIVE else "top"
    final = {r[0]: r for r in duck_rows(manager, f"SELECT page, n, total, {extra} FROM totals")}
    every, after = truth(0, last), truth(cut, last)
    assert {p: r[:3] for p, r in final.items()} == kept(last)
    assert duck_rows(manager, "SELECT count(*), count(DISTINCT page) FROM totals") == [(len(final),) * 2]
    removed = set(at_cut) - set(final)
    assert removed  # groups kept at the cut that a smaller amount after it took out of the sink
    for page, r in final.items():
        # The new column: its own value where the group changed after the cut (every group here);
        # the added MAX holds only the events after the cut, as EXPLAIN said.
        assert page in after
        assert r[3] == (every[page][0] * 2 if how == NATIVE else after[page][3]), page
    if how == ROWS:
        assert any(after[p][3] != every[p][3] for p in final)  # partial really differs somewhere

    # The before-images rebuild the table as it stood after any batch of either run.
    order = {first_run: 1, second_run: 2}
    history = [
        ((order[r[0]], r[1]), r[2], r[3], r[3:])
        for r in duck_rows(
            manager, 'SELECT run_id, batch_id, absent, page, n, total FROM pitstop."totals__before"'
        )
    ]
    current = {p: r[:3] for p, r in final.items()}
    assert table_at(current, history, (1, -1)) == {}
    for number, ends in ((1, first_ends), (2, second_ends)):
        for batch, end in ends.items():
            assert table_at(current, history, (number, batch)) == kept(end), (number, batch)
    assert any(absent is False and key in removed for at, absent, key, _ in history if at[0] == 2)
    run(manager, "DROP JOB running;")


@pytest.mark.spark
def test_a_running_aggregate_reaches_the_postgres_upsert_with_its_before_images(
    manager: Manager,
    postgres: Postgres,  # noqa: F811
) -> None:
    db = postgres.database()
    url = postgres.url(db)
    run(
        manager,
        CLICKS.format(limit=300)
        + f"CREATE MAPPING totals TYPE Postgres OPTIONS ('dsn'='{url}', 'table'='totals');"
        + f"CREATE JOB running AS {TOTALS.format(more='')}; AWAIT JOB running;",
    )
    _, ends = batch_ends(manager, "running")
    assert ends == {0: 100, 1: 200, 2: 300}
    rows = postgres.query(db, "SELECT page, n, total FROM totals")
    current = {r[0]: r for r in rows}
    assert current == kept(300) and len(rows) == len(current)
    assert postgres.query(
        db,
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'totals'::regclass AND i.indisprimary",
    ) == [("page",)]
    history = [
        ((1, r[0]), r[1], r[2], r[2:])
        for r in postgres.query(db, 'SELECT batch_id, absent, page, n, total FROM "totals__before"')
    ]
    for batch, end in ends.items():
        assert table_at(current, history, (1, batch)) == kept(end), batch
    assert table_at(current, history, (1, -1)) == {}
    run(manager, "DROP JOB running;")


@pytest.mark.spark
def test_kill_9_after_an_upsert_commits_replays_nothing_into_the_table_or_its_before_images(
    tmp_path: Path,
) -> None:
    """pitstop is killed right after batch 1's upsert commits in DuckDB, before Spark commits the
    batch: the next process replays batch 1, which the bookkeeping skips, so no before-image is
    taken twice (a second one would hold batch 1's own values as 'before') and the table ends as
    a batch computation; the before-images still rebuild every batch."""
    from command_helpers import pitstop
    from pitstop.catalog.store import Catalog

    home = tmp_path / "home"
    setup = CLICKS.format(limit=300) + "CREATE MAPPING totals TYPE DuckDB;"
    job = f"CREATE JOB running AS {TOTALS.format(more='')}; AWAIT JOB running;"
    crash = {"PITSTOP_CRASH_AT": "sink.after_commit:2"}
    done = pitstop("run", "-c", setup + job, home=home, env=crash, process=True)
    assert done.returncode == -9 and "crash point sink.after_commit" in done.stderr, done.stderr[-2000:]
    # Batch 1 is in the sink and not committed by Spark: the next process must replay it.
    left = Catalog(home / "catalog.duckdb", read_only=True)
    try:
        assert [b for (b,) in left.query("SELECT batch_id FROM pitstop.sink_batches ORDER BY 1")[1]] == [0, 1]
        job = left.get_job("running")
        assert job is not None
        ckpt = Path(left.get_run(job.run_id).folder) / "branches" / "0" / "checkpoint"
    finally:
        left.close()
    assert (checkpoint.latest_commit(ckpt), checkpoint.latest_planned(ckpt)) == (0, 1)
    done = pitstop("run", "-c", "AWAIT JOB running; DROP JOB running;", home=home)  # in this process
    assert done.returncode == 0, done.stderr[-2000:]
    catalog = Catalog(home / "catalog.duckdb")
    try:
        _, rows = catalog.query("SELECT page, n, total FROM totals")
        current = {r[0]: r for r in rows}
        assert current == kept(300) and len(rows) == len(current)
        _, rows = catalog.query('SELECT batch_id, absent, page, n, total FROM pitstop."totals__before"')
        history = [((1, r[0]), r[1], r[2], r[2:]) for r in rows]
        assert len({(at, key) for at, _, key, _ in history}) == len(history)  # none taken twice
        _, batches = catalog.query("SELECT batch_id FROM pitstop.sink_batches ORDER BY 1")
        assert [b for (b,) in batches] == [0, 1, 2]
        for batch, end in {0: 100, 1: 200, 2: 300}.items():
            assert table_at(current, history, (1, batch)) == kept(end), batch
    finally:
        catalog.close()
