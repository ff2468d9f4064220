"""Objects an older pitstop created under names the name rule now refuses stay reachable: SHOW
lists them, DESCRIBE shows them and DROP removes them by their exact catalog name; a folder of
theirs is deleted only if it lies inside the home's own folder for it, and reported otherwise.
A refused name that the catalog does not hold is still refused, at its position.

The older home is written as an older pitstop wrote it: catalog rows through the catalog's own
INSERTs, with the names as given and folders built from them without any check (no Spark)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import orders_mapping, run, settings
from pitstop.catalog.clock import now
from pitstop.catalog.rows import ColumnDef, Job, Mapping, Run, Snapshot, View
from pitstop.driver import Driver
from pitstop.errors import BadNameError
from pitstop.executor import Executor
from pitstop.manager import Manager
from pitstop.planner.build import plan_job
from pitstop.sql import nodes
from pitstop.sql.parser import parse_statement

JOB, SNAP_INSIDE, SNAP_OUTSIDE, MAPPING, VIEW = "rev/2024", "q1/final", "../escaped", "in/put", "v/1"
BODY = (
    "INSERT INTO daily_revenue SELECT window_start, window_end, region, COUNT(*) AS orders "
    "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
    "GROUP BY window_start, window_end, region"
)


def older_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    manager = Manager(settings(home))
    try:
        run(manager, orders_mapping(tmp_path / "orders") + "CREATE MAPPING daily_revenue TYPE DuckDB;")
        catalog = manager.catalog
        node = parse_statement(f"CREATE JOB fine AS {BODY}")
        assert isinstance(node, nodes.CreateJob)
        plan = plan_job(JOB, list(node.args["body"]), catalog.get_mapping)
        folder = home / "runs" / f"{JOB}-0a1b2c3d"  # as an older pitstop built it: runs/rev/2024-...
        (folder / "branches" / "0" / "checkpoint").mkdir(parents=True)
        catalog.create_job(
            Job(JOB, f"CREATE JOB {JOB} AS {BODY}", "STOPPED", "", f"{JOB}-0a1b2c3d", None, now(), now()),
            Run(f"{JOB}-0a1b2c3d", JOB, str(folder), plan.to_json(), None, now()),
        )
        for name in (SNAP_INSIDE, SNAP_OUTSIDE):
            path = home / "snapshots" / name  # snapshots/q1/final, and snapshots/../escaped
            path.mkdir(parents=True)
            manifest = {"snapshot": name, "job": JOB, "sources": {}, "stages": {}, "versions": {}}
            (path / "manifest.json").write_text(json.dumps(manifest))
            with catalog.transaction() as tx:
                catalog.add_snapshot(Snapshot(name, JOB, now(), str(path), 10, 0, manifest), tx)
        catalog.put_mapping(Mapping(MAPPING, "file", (ColumnDef("k", "STRING"),), None, {"path": "/d"}))
        catalog.put_view(View(VIEW, f'CREATE VIEW "{VIEW}" AS SELECT * FROM orders', now()))
    finally:
        manager.close()
    return home


def test_objects_with_names_the_rule_refuses_can_be_shown_described_and_dropped(tmp_path: Path) -> None:
    home = older_home(tmp_path)
    run_folder = home / "runs" / "rev" / "2024-0a1b2c3d"
    inside, outside = home / "snapshots" / "q1" / "final", home / "escaped"
    manager = Manager(settings(home))  # the open leaves the nested folders: they are in use
    try:
        assert run_folder.is_dir() and inside.is_dir() and outside.is_dir()
        assert not (home / "trash").exists()
        jobs, snaps, views = run(manager, "SHOW JOBS; SHOW SNAPSHOTS; SHOW VIEWS;")
        assert [r[0] for r in jobs.rows] == [JOB]
        assert sorted(r[3] for r in snaps.rows) == sorted([SNAP_INSIDE, SNAP_OUTSIDE])
        assert [r[0] for r in views.rows] == [VIEW]
        described = dict(run(manager, f'DESCRIBE JOB "{JOB}";')[0].rows)
        assert described["name"] == JOB and described["run"].endswith(str(run_folder))
        assert dict(run(manager, f'DESCRIBE SNAPSHOT "{SNAP_INSIDE}";')[0].rows)["path"] == str(inside)

        said = [r.message for r in run(manager, f'DROP JOB "{JOB}"; DROP SNAPSHOT "{SNAP_INSIDE}";')]
        assert said == [f"job '{JOB}' dropped", f"snapshot '{SNAP_INSIDE}' dropped"]
        assert not run_folder.exists() and not inside.exists()
        assert (home / "runs").is_dir() and (home / "snapshots").is_dir()

        [dropped] = run(manager, f'DROP SNAPSHOT "{SNAP_OUTSIDE}";')
        assert dropped.message == (
            f"snapshot '{SNAP_OUTSIDE}' dropped; its folder {home / 'snapshots' / '..' / 'escaped'} "
            f"lies outside {home / 'snapshots'}, so pitstop left it in place: delete it yourself once "
            "nothing else uses it"
        )
        assert (outside / "manifest.json").is_file()

        said = [r.message for r in run(manager, f'DROP VIEW "{VIEW}"; DROP MAPPING "{MAPPING}";')]
        assert said == [f"view '{VIEW}' dropped", f"mapping '{MAPPING}' dropped"]
        for table in ("jobs", "snapshots", "views"):
            assert manager.catalog.query(f"SELECT count(*) FROM pitstop.{table}")[1] == [(0,)]
        assert sorted(m.name for m in manager.catalog.mappings()) == ["daily_revenue", "orders"]

        # Gone now: the same names are refused again, at the name, as any refused name is.
        for sql in (f'DROP JOB "{JOB}";', f'DROP SNAPSHOT IF EXISTS "{SNAP_OUTSIDE}";'):
            with pytest.raises(BadNameError) as caught:
                list(Driver(Executor(manager)).run_script("SHOW JOBS;\n  " + sql))
            assert (caught.value.line, caught.value.col) == (2, 3 + sql.index('"'))
            assert "is not allowed: it contains '/'" in caught.value.message
            caret = " " * (2 + sql.index('"'))
            assert str(caught.value).endswith(f"\n    {sql[:-1]}\n  {caret}^")
    finally:
        manager.close()
    assert manager.spark_started is False


def test_check_mode_knows_the_older_objects_too(tmp_path: Path) -> None:
    home = older_home(tmp_path)
    from pitstop.catalog.store import Catalog

    catalog = Catalog(home / "catalog.duckdb", read_only=True)
    try:
        script = f'DESCRIBE JOB "{JOB}"; DROP JOB "{JOB}"; DROP SNAPSHOT "{SNAP_OUTSIDE}"; DROP JOB "{JOB}";'
        ok, errors = Driver(Executor(None, catalog)).check(script)
    finally:
        catalog.close()
    assert ok == 3
    [error] = errors
    assert isinstance(error, BadNameError) and error.col == script.rindex(f'"{JOB}"') + 1  # dropped before
    assert os.path.isdir(home / "runs" / "rev" / "2024-0a1b2c3d")  # check mode changed nothing
