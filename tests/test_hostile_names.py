"""Names are names: a job, snapshot, mapping, view or stage name that could address anything
outside its folder is refused when its statement is parsed or planned, by every statement that
takes one, and nothing is written: no file, no folder, no catalog row.

Every statement runs through the real parser and executor on a real DuckDB catalog in a tmp home;
none of them may start Spark. The Spark test at the end runs a job whose names are unusual but
allowed, and checks where its folders landed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import orders_mapping, run, settings
from pitstop.driver import Driver
from pitstop.errors import BadNameError, PitstopError
from pitstop.executor import Executor
from pitstop.manager import Manager
from pitstop.names import MAX_BYTES, NAME_RULE, check_name, inside, name_problem, safe_path
from pitstop.server.sqlstate import code_of
from pitstop.sql import nodes
from pitstop.sql.parser import NAME_ARGS, parse_statement, stage_hint

# (name, what the message says is wrong with it)
HOSTILE: list[tuple[str, str]] = [
    ("..", "it starts with '.'"),
    ("../x", "it contains '/'"),
    ("../../../../tmp/pwned", "it contains '/'"),
    ("a/b", "it contains '/'"),
    ("a\\b", "it contains '\\\\'"),
    ("/etc", "it contains '/'"),
    ("x\x00y", "it contains '\\x00' (a control character)"),
    ("a\nb", "it contains '\\n' (a control character)"),
    ("tab\there", "it contains '\\t' (a control character)"),
    ("x" * 10_000, f"it is 10000 bytes long; the longest name is {MAX_BYTES} bytes"),
    ("é" * 65, f"it is 130 bytes long; the longest name is {MAX_BYTES} bytes"),
    (".", "it starts with '.'"),
    ("...", "it starts with '.'"),
    (".hidden", "it starts with '.'"),
    ("   ", "it starts with ' ' (space)"),
    (" lead", "it starts with ' ' (space)"),
    ("trail ", "it ends with ' ' (space)"),
    ("dot.", "it ends with '.'"),
    ("", "it is empty"),
    ("-rf", "it starts with '-'"),
    ("C:x", "it contains ':'"),
    ('a"b', "it contains '\"'"),
    ("a'b", 'it contains "\'"'),
    ("a*b", "it contains '*'"),
    ("rev\u202eenue", "it contains '\\u202e' (right-to-left override)"),
    ("zero\u200bwidth", "it contains '\\u200b' (zero width space)"),
    ("e\u0301", "it is not in Unicode's composed form (NFC)"),
]
HOSTILE_IDS = [repr(name[:12]) + ("..." if len(name) > 12 else "") for name, _ in HOSTILE]

# Unusual but harmless names that users write, and that must keep working.
HARMLESS = [
    "daily_revenue",
    "revenue_v1",
    "Daily Revenue",
    "Umsätze",
    "日次売上",
    "revenue-v1.2",
    "2024 q1",
    "_private$",
    "x" * MAX_BYTES,
]

GOOD_JOB_BODY = (
    "INSERT INTO daily_revenue SELECT window_start, window_end, region, COUNT(*) AS orders "
    "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
    "GROUP BY window_start, window_end, region"
)
AGGREGATE = (
    "SELECT {hint} window_start, window_end, region, COUNT(*) AS orders "
    "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
    "GROUP BY window_start, window_end, region"
)

# Every statement that takes a name: (kind named in the message, template). {n} is the name as a
# quoted identifier, {s} the name as a string literal.
STATEMENTS: list[tuple[str, str]] = [
    ("mapping", "CREATE MAPPING {n} (k VARCHAR, ts TIMESTAMP) TYPE File OPTIONS ('path'='{data}')"),
    ("mapping", "CREATE OR REPLACE MAPPING IF NOT EXISTS {n} (k VARCHAR) TYPE Generator"),
    ("mapping", "CREATE MAPPING {n} TYPE DuckDB"),
    ("sink table", "CREATE MAPPING totals TYPE DuckDB OPTIONS ('table'={s})"),
    ("mapping", "DROP MAPPING {n}"),
    ("mapping", "DROP MAPPING IF EXISTS {n}"),
    ("view", "CREATE VIEW {n} AS SELECT * FROM orders"),
    ("view", "CREATE OR REPLACE VIEW {n} AS SELECT * FROM orders"),
    ("view", "DROP VIEW {n}"),
    ("view", "DROP VIEW IF EXISTS {n}"),
    ("job", "CREATE JOB {n} AS " + GOOD_JOB_BODY),
    ("job", "CREATE JOB IF NOT EXISTS {n} AS " + GOOD_JOB_BODY),
    ("snapshot", "CREATE JOB revenue FROM SNAPSHOT {n} AS " + GOOD_JOB_BODY),
    ("snapshot", "CREATE JOB revenue OPTIONS ('initialSnapshotName'={s}) AS " + GOOD_JOB_BODY),
    ("job", "EXPLAIN CREATE JOB {n} AS " + GOOD_JOB_BODY),
    ("snapshot", "EXPLAIN CREATE JOB revenue FROM SNAPSHOT {n} AS " + GOOD_JOB_BODY),
    (
        "stage",
        "CREATE JOB revenue AS INSERT INTO daily_revenue " + AGGREGATE.format(hint="/*+ STAGE({n}) */"),
    ),
    (
        "stage",
        "CREATE JOB revenue AS WITH {n} AS (" + AGGREGATE.format(hint="") + ") "
        "INSERT INTO daily_revenue SELECT * FROM {n}",
    ),
    (
        "stage",
        "CREATE JOB revenue AS INSERT INTO daily_revenue WITH {n} AS (" + AGGREGATE.format(hint="") + ") "
        "SELECT * FROM {n}",
    ),
    (
        "stage",
        "EXPLAIN CREATE JOB revenue AS BEGIN INSERT INTO daily_revenue "
        + AGGREGATE.format(hint="/*+ STAGE(fine) */")
        + "; INSERT INTO daily_revenue "
        + AGGREGATE.format(hint="/*+ STAGE({n}) */")
        + "; END",
    ),
    ("job", "DROP JOB {n}"),
    ("job", "DROP JOB IF EXISTS {n}"),
    ("snapshot", "DROP JOB revenue WITH SNAPSHOT {n}"),
    ("job", "ALTER JOB {n} SUSPEND"),
    ("job", "ALTER JOB {n} RESUME"),
    ("job", "ALTER JOB {n} RESTART"),
    ("job", "ALTER JOB {n} OPTIONS ('strictRestore'='true')"),
    ("snapshot", "ALTER JOB revenue OPTIONS ('initialSnapshotName'={s})"),
    ("job", "AWAIT JOB {n}"),
    ("job", "AWAIT JOB {n} TIMEOUT INTERVAL '1' SECOND"),
    ("job", "DESCRIBE JOB {n}"),
    ("snapshot", "CREATE SNAPSHOT {n} FOR JOB revenue"),
    ("snapshot", "CREATE OR REPLACE SNAPSHOT {n} FOR JOB revenue"),
    ("job", "CREATE SNAPSHOT revenue_v1 FOR JOB {n}"),
    ("snapshot", "DROP SNAPSHOT {n}"),
    ("snapshot", "DROP SNAPSHOT IF EXISTS {n}"),
    ("snapshot", "DESCRIBE SNAPSHOT {n}"),
]


def quoted_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def string_literal(name: str) -> str:
    return "'" + name.replace("'", "''") + "'"


def statement(template: str, name: str, data: Path) -> str:
    return template.format(n=quoted_identifier(name), s=string_literal(name), data=data) + ";"


def shown(name: str) -> str:
    """The name as messages quote it: cut short, unprintable characters escaped."""
    text = name if len(name) <= 40 else name[:40] + "..."
    return "'" + (text if text.isprintable() else ascii(text)[1:-1]) + "'"


# -- what is on disk and in the catalog --------------------------------------------------------------
def disk_state(folder: Path) -> tuple[frozenset[str], ...]:
    """Everything under the test's folder, and the entries of the folders a hostile name could reach
    outside it (its parent, the working folder, /, /etc, and /tmp/pwned and /x themselves)."""
    inside_tmp = frozenset(str(p) for p in folder.rglob("*"))
    outside = [folder.parent, Path.cwd(), Path("/"), Path("/etc")]
    escaped = frozenset(str(p) for p in (Path("/tmp/pwned"), Path("/x")) if os.path.lexists(p))
    return (inside_tmp, escaped, *(frozenset(os.listdir(folder)) for folder in outside))


CATALOG_TABLES = ("mappings", "jobs", "runs", "snapshots", "sink_batches", "views")


def catalog_state(manager: Manager) -> dict[str, list[tuple[object, ...]]]:
    state = {}
    for table in CATALOG_TABLES:
        _, rows = manager.catalog.query(f"SELECT * FROM pitstop.{table} ORDER BY ALL")
        state[table] = rows
    return state


def prepared(manager: Manager, folder: Path) -> Manager:
    """A home with an orders source and a DuckDB sink, as the statements above expect."""
    (folder / "data").mkdir()
    run(manager, orders_mapping(folder / "orders") + "CREATE MAPPING daily_revenue TYPE DuckDB;")
    return manager


@pytest.fixture
def home(manager: Manager, tmp_path: Path) -> Iterator[Manager]:
    yield prepared(manager, tmp_path)
    assert manager.spark_started is False


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Manager, Path]]:
    """One home for the ~1000 (statement, name) cases, each of which must leave it unchanged."""
    folder = tmp_path_factory.mktemp("hostile")
    manager = Manager(settings(folder / "home"))
    yield prepared(manager, folder), folder
    assert manager.spark_started is False
    manager.close()


# -- the rule ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "problem"), HOSTILE, ids=HOSTILE_IDS)
def test_hostile_name_is_refused_saying_what_is_wrong(name: str, problem: str) -> None:
    assert name_problem(name) == problem or (name_problem(name) or "").startswith(problem)
    with pytest.raises(BadNameError) as caught:
        check_name("snapshot", name)
    expected = f"snapshot name {shown(name)} is not allowed: {name_problem(name)}; {NAME_RULE}"
    assert caught.value.message == expected


@pytest.mark.parametrize("name", HARMLESS)
def test_harmless_unusual_name_is_allowed(name: str) -> None:
    assert name_problem(name) is None
    assert check_name("job", name) == name


def test_refused_name_reaches_clients_as_sqlstate_invalid_name() -> None:
    with pytest.raises(BadNameError) as caught:
        check_name("job", "../x")
    assert code_of(caught.value) == "42602"


def test_message_of_a_refused_name_never_holds_a_raw_control_character() -> None:
    with pytest.raises(BadNameError) as caught:
        check_name("job", "a\x1b[2Jb\x00")
    assert caught.value.message.isprintable()
    assert "'a\\x1b[2Jb\\x00'" in caught.value.message


# -- every statement that takes a name -----------------------------------------------------------------
def test_every_statement_that_takes_a_name_is_tried_here(tmp_path: Path) -> None:
    tried = set()
    for _, template in STATEMENTS:
        node = parse_statement(statement(template, "fine", tmp_path))
        tried.add(type(node.this) if isinstance(node, nodes.Explain) else type(node))
    takes_a_name = {kind for kind, args in NAME_ARGS.items() if args}
    assert takes_a_name <= tried
    assert set(nodes.STATEMENT_NODES) == set(NAME_ARGS)


@pytest.mark.parametrize(("kind", "template"), STATEMENTS, ids=[t[:40] for _, t in STATEMENTS])
@pytest.mark.parametrize(("name", "problem"), HOSTILE, ids=HOSTILE_IDS)
def test_statement_refuses_hostile_name_and_writes_nothing(
    shared_home: tuple[Manager, Path], kind: str, template: str, name: str, problem: str
) -> None:
    home, folder = shared_home
    sql = statement(template, name, folder / "data")
    before_disk, before_catalog = disk_state(folder), catalog_state(home)
    with pytest.raises(BadNameError) as caught:
        run(home, sql)
    error = caught.value
    assert error.message.startswith(f"{kind} name {shown(name)} is not allowed: {problem}")
    assert error.message.endswith(NAME_RULE)
    assert error.line is not None and error.col is not None  # the caret points at the name
    assert disk_state(folder) == before_disk
    assert catalog_state(home) == before_catalog


@pytest.mark.parametrize(("kind", "template"), STATEMENTS, ids=[t[:40] for _, t in STATEMENTS])
def test_check_mode_refuses_hostile_name_too(tmp_path: Path, kind: str, template: str) -> None:
    ok, errors = Driver(Executor(None)).check(statement(template, "../escape", tmp_path / "data"))
    assert ok == 0
    assert [type(e) for e in errors] == [BadNameError]
    assert errors[0].message.startswith(f"{kind} name '../escape' is not allowed: it contains '/'")


def test_error_points_at_the_name_in_the_script(home: Manager) -> None:
    script = 'SHOW JOBS;\nDROP JOB IF EXISTS revenue WITH SNAPSHOT "../x";'
    with pytest.raises(BadNameError) as caught:
        list(Driver(Executor(home)).run_script(script))
    second = 'DROP JOB IF EXISTS revenue WITH SNAPSHOT "../x"'
    col = second.index('"') + 1
    assert (caught.value.line, caught.value.col) == (2, col)
    assert str(caught.value).endswith(f"\n  {second};\n  {' ' * (col - 1)}^")


def test_stage_hint_position_points_into_the_hint(home: Manager) -> None:
    sql = "EXPLAIN CREATE JOB revenue AS INSERT INTO daily_revenue " + AGGREGATE.format(
        hint='/*+   STAGE("a/b") */'
    )
    with pytest.raises(BadNameError) as caught:
        run(home, sql + ";")
    assert caught.value.col == sql.index('"a/b"') + 1


def test_a_sink_whose_derived_stage_name_is_too_long_says_how_to_name_the_stage(
    home: Manager, tmp_path: Path
) -> None:
    sink = "s" * (MAX_BYTES - 2)  # a valid mapping name; '<sink>.aggregate' is too long
    run(home, f"CREATE MAPPING {sink} TYPE DuckDB;")
    before = catalog_state(home)
    with pytest.raises(BadNameError) as caught:
        run(home, "CREATE JOB revenue AS " + GOOD_JOB_BODY.replace("daily_revenue", sink) + ";")
    assert f"stage name '{'s' * 40}..." in caught.value.message
    assert caught.value.message.endswith(
        f"Name the stage of INSERT INTO {sink} with a CTE alias or /*+ STAGE(name) */"
    )
    assert catalog_state(home) == before


# -- names that must keep working ---------------------------------------------------------------------
@pytest.mark.parametrize("name", HARMLESS)
def test_harmless_names_work_in_every_statement_in_check_mode(tmp_path: Path, name: str) -> None:
    n = quoted_identifier(name)
    stage = quoted_identifier(name[: MAX_BYTES - 2] + "_s")
    script = f"""
        {orders_mapping(tmp_path / "orders")}
        CREATE MAPPING {n} TYPE DuckDB;
        CREATE VIEW {quoted_identifier(name[: MAX_BYTES - 2] + "_v")} AS SELECT * FROM orders;
        CREATE JOB {n} AS WITH {stage} AS ({AGGREGATE.format(hint="")}) INSERT INTO {n} SELECT * FROM {stage};
        AWAIT JOB {n};
        ALTER JOB {n} SUSPEND;
        DROP JOB {n} WITH SNAPSHOT {n};
        CREATE JOB again OPTIONS ('initialSnapshotName'={string_literal(name)}) AS
            INSERT INTO {n} {AGGREGATE.format(hint=f"/*+ STAGE({stage}) */")};
        CREATE OR REPLACE SNAPSHOT {n} FOR JOB again;
        EXPLAIN CREATE JOB other FROM SNAPSHOT {n} AS
            INSERT INTO {n} {AGGREGATE.format(hint=f"/*+ STAGE({stage}) */")};
    """
    ok, errors = Driver(Executor(None)).check(script)
    assert errors == []
    assert ok == 10


@pytest.mark.parametrize("name", HARMLESS)
def test_harmless_names_create_and_drop_mappings_and_views(
    manager: Manager, tmp_path: Path, name: str
) -> None:
    n = quoted_identifier(name)
    view = quoted_identifier(name[: MAX_BYTES - 2] + "_v")
    results = run(
        manager,
        f"""CREATE MAPPING {n} (k VARCHAR, ts TIMESTAMP) TYPE File OPTIONS ('path'='{tmp_path / "in"}');
        CREATE VIEW {view} AS SELECT * FROM {n};
        DROP VIEW {view};
        DROP MAPPING {n};""",
    )
    assert results[0].message.startswith(f"mapping '{name}' created; its folder ")
    assert results[-1].message == f"mapping '{name}' dropped"
    with pytest.raises(PitstopError, match="unknown job"):
        run(manager, f"DESCRIBE JOB {n};")  # a valid name: looked up, not refused
    assert manager.spark_started is False


def test_dotted_stage_hint_names_the_whole_dotted_name() -> None:
    node = parse_statement("SELECT /*+ STAGE(daily_revenue.aggregate) */ k FROM t")
    assert stage_hint(node) == "daily_revenue.aggregate"


# -- paths built from names ------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "problem"), HOSTILE, ids=HOSTILE_IDS)
def test_safe_path_refuses_a_hostile_name_before_building_a_path(
    tmp_path: Path, name: str, problem: str
) -> None:
    with pytest.raises(BadNameError, match="stage name"):
        safe_path(tmp_path / "stages", "stage", name)


def test_safe_path_stays_inside_its_root_even_through_a_symlink(tmp_path: Path) -> None:
    root = tmp_path / "snapshots"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (root / "s1").symlink_to(tmp_path / "elsewhere")
    assert safe_path(root, "snapshot", "s2") == root / "s2"
    assert safe_path(root, "snapshot", "s2", prefix=".", suffix=".tmp") == root / ".s2.tmp"
    with pytest.raises(BadNameError, match="would leave the folder"):
        safe_path(root, "snapshot", "s1")


def test_manifest_path_leading_out_of_the_snapshot_is_refused(tmp_path: Path) -> None:
    assert inside(tmp_path, "native/daily") == tmp_path / "native" / "daily"
    for altered in ("../other/native/daily", "/etc/passwd", "native/../../x"):
        with pytest.raises(PitstopError, match="leads outside the folder"):
            inside(tmp_path, altered)


# -- a real job with unusual names ------------------------------------------------------------------------
UNUSUAL_JOB = """
    CREATE JOB {job} {header} AS WITH "täglich 1" AS (
        SELECT window_start, window_end, region, COUNT(*) AS orders
        FROM TABLE(TUMBLE(TABLE "Bestellungen ü", DESCRIPTOR(ts), INTERVAL '1' HOUR))
        GROUP BY window_start, window_end, region)
    INSERT INTO "Daily Revenue" SELECT * FROM "täglich 1";
    AWAIT JOB {job};
"""


def order_line(order_id: int, region: str, ts: str) -> str:
    return f'{{"order_id": {order_id}, "region": "{region}", "amount": 1.0, "ts": "{ts}"}}\n'


@pytest.mark.spark
@pytest.mark.parametrize("restore_format", ["auto", "canonical"])
def test_job_and_snapshot_with_unusual_names_run_restore_and_stay_inside_the_home(
    manager: Manager, tmp_path: Path, restore_format: str
) -> None:
    orders = tmp_path / "orders"
    orders.mkdir()
    (orders / "part-0.json").write_text(
        order_line(1, "eu", "2024-01-01 00:10:00") + order_line(2, "us", "2024-01-01 00:20:00")
    )
    run(
        manager,
        orders_mapping(orders, '"Bestellungen ü"')
        + 'CREATE MAPPING "Daily Revenue" TYPE DuckDB;'
        + UNUSUAL_JOB.format(job='"Umsätze v1"', header="")
        + 'DROP JOB "Umsätze v1" WITH SNAPSHOT "Umsätze 2024-01.a";',
    )
    snapshot = manager.home / "snapshots" / "Umsätze 2024-01.a"
    assert (snapshot / "stages" / "täglich 1").is_dir()
    assert (snapshot / "sources" / "Bestellungen ü.files").read_text() == "part-0.json\n"

    # The 00:00 window is still open in the snapshot; the restored job closes it with new input.
    (orders / "part-1.json").write_text(
        order_line(3, "eu", "2024-01-01 00:50:00") + order_line(4, "eu", "2024-01-01 02:00:00")
    )
    header = f"""FROM SNAPSHOT "Umsätze 2024-01.a" OPTIONS ('restoreFormat'='{restore_format}')"""
    results = run(
        manager,
        UNUSUAL_JOB.format(job='"Umsätze v2"', header=header)
        + 'SELECT region, orders FROM "Daily Revenue" ORDER BY region;',
    )
    how = "from Spark's state files (native)" if restore_format == "auto" else "from the snapshot's rows"
    assert "stage 'täglich 1': restored" in results[0].message
    assert how in results[0].message
    assert results[-1].rows == (("eu", 2), ("us", 1))
    home = manager.home.resolve()
    for path in manager.home.rglob("*"):
        assert path.resolve().is_relative_to(home) or path.is_symlink()
