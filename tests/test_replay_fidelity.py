"""EXPLAIN ANALYZE checks the replay against the live job's sinks (issue 27): the job's own SQL,
replayed over the span, must write what the job wrote over it (the hashes its DuckDB sink kept per
run, branch and batch). A non-deterministic expression cannot be reproduced: the summary says so
rather than report the difference as the update's effect, and ``pitstop test`` calls such an
outcome inconclusive (exit 3), not a pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from command_helpers import pitstop
from conftest import make_orders, orders_mapping, run, settings
from pitstop.manager import Manager

JOB = """CREATE JOB j AS BEGIN
    INSERT INTO noisy SELECT order_id, rand() AS r FROM orders;
    INSERT INTO plain SELECT order_id, amount FROM orders WHERE amount >= 50;
END;"""


@pytest.mark.spark
def test_the_job_s_own_sql_replayed_is_checked_against_what_the_job_wrote(tmp_path: Path) -> None:
    data = tmp_path / "orders"
    manager = Manager(settings(tmp_path / "home"))
    try:
        make_orders.write_orders(data, 0, 200, files=2)
        run(
            manager,
            orders_mapping(data)
            + "CREATE MAPPING noisy TYPE DuckDB; CREATE MAPPING plain TYPE DuckDB;"
            + JOB
            + "AWAIT JOB j; CREATE SNAPSHOT s1 FOR JOB j;",
        )
        make_orders.write_orders(data, 200, 500, files=3, prefix="b")
        run(manager, "AWAIT JOB j; CREATE SNAPSHOT s2 FOR JOB j;")
        kept = sum(1 for i in range(200, 500) if float(str(make_orders.order(i)["amount"])) >= 50)

        same = JOB.replace(
            "CREATE JOB j AS", "EXPLAIN ANALYZE CREATE JOB j FROM SNAPSHOT s1 UNTIL SNAPSHOT s2 AS"
        )
        result = run(manager, same)[0]
        by = {(r[7], r[2] or r[1]): r[8] for r in result.rows}
        assert by[("reproduced", "plain")] == (
            f"the job's own SQL, replayed, writes the {kept} row(s) the job wrote over the span"
        )
        assert by[("not reproduced", "noisy")].startswith(
            "the job's own SQL, replayed, does not write what the job wrote over the span: 300 of the "
            "job's 300 row(s) not in the replay, 300 of the replay's 300 not written by the job"
        )
        assert by[("same", "plain")].startswith(f"{kept} row(s) identical")
        assert by[("differs", "noisy")].startswith("0 row(s) identical, 300 only old, 300 only new")
        assert (
            "the new SQL is the job's own, yet 1 of 2 sink(s) differ between two replays of it (noisy): "
            "a non-deterministic expression, not an update's effect" in result.message
        )
        assert (
            "the job's own SQL, replayed, does not write what the job wrote over the span to sink(s) "
            "noisy (see 'not reproduced')" in result.message
        )

        # Up to where the job stands, the same.
        upto = run(
            manager, JOB.replace("CREATE JOB j AS", "EXPLAIN ANALYZE CREATE JOB j FROM SNAPSHOT s1 AS")
        )[0]
        outcomes = {(r[7], r[2]) for r in upto.rows if r[7] in ("reproduced", "not reproduced")}
        assert outcomes == {("reproduced", "plain"), ("not reproduced", "noisy")}
    finally:
        manager.close()

    # `pitstop test`: 'noisy' differs, but as noise: --expect changes is not passed by it (it was,
    # exit 0, before), --expect same fails as before.
    job = tmp_path / "j.sql"
    job.write_text(JOB)
    home = tmp_path / "home"
    done = pitstop("test", str(job), "--snapshot", "s1", "--until", "s2", "--expect", "changes", home=home)
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().endswith(
        "inconclusive: the outcome is the one expected (changes), but the job's own SQL, replayed, "
        "does not write what the job wrote (see 'not reproduced')"
    )
    done = pitstop("test", str(job), "--snapshot", "s1", "--until", "s2", home=home)
    assert done.returncode == 1, done.stderr
    assert "inconclusive" not in done.stderr

    # A replay that fails says it is the replay that failed, and that it stopped (before: "job 'j'
    # failed: ...", as if the live job had).
    job.write_text(JOB.replace("order_id, amount", "order_id + CAST(region AS INT) AS order_id, amount"))
    done = pitstop("test", str(job), "--snapshot", "s1", "--until", "s2", home=home)
    assert done.returncode == 2, done.stdout
    # One line: neither PySpark's JSON echo of Spark's error nor the job's failure line ("job 'j':
    # INSERT INTO plain failed") on the terminal before it (both went to stderr before).
    [line] = done.stderr.strip().split("\n")
    assert line.startswith("ERROR: EXPLAIN ANALYZE's replay of the changed SQL (job 'j') failed: ")
    assert "CAST_INVALID_INPUT" in done.stderr
    assert done.stderr.strip().endswith("it was stopped; the job, its sinks and the catalog are untouched")
