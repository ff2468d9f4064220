"""Metrics for operators (issue 26): the manager samples its running jobs into ``pitstop.metrics``
(the last PITSTOP_METRICS_KEEP samples) and ``pitstop serve --metrics-port`` serves the last sample
in Prometheus's text format. Real Spark, a real DuckDB file, real psycopg and psql clients against
the server, a real HTTP GET over loopback."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from command_helpers import pitstop
from conftest import settings, until
from pitstop.catalog.rows import MetricSample
from pitstop.catalog.store import Catalog
from pitstop.errors import PitstopError
from pitstop.manager import Manager
from pitstop.server.metrics import MetricsEndpoint, family_lines
from pitstop.settings import Settings
from server_helpers import psql, serving

COLUMNS = [
    "sampled", "job", "run_id", "branch", "sink", "stage", "batch_id", "input_rows", "input_rows_per_s",
    "processed_rows_per_s", "batch_ms", "watermark", "state_rows", "state_bytes", "late_rows",
    "lag_records", "lag", "restarts",
]  # fmt: skip
CLICKS = """CREATE MAPPING clicks (id BIGINT, page VARCHAR, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
    TYPE Generator OPTIONS ('rate'='50', 'keys'='3', 'step_ms'='1000')"""
JOB = """CREATE JOB "click counts" AS INSERT INTO wins
    SELECT /*+ STAGE(per_minute) */ window_start, window_end, page, COUNT(*) AS n
    FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
    GROUP BY window_start, window_end, page"""
JOB_NAME = "click counts"


# -- a small parser of Prometheus's text format 0.0.4 ---------------------------------------------
_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def parse_exposition(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Metric name -> its series (labels, value); every line must be well formed, and every
    sample's metric must be declared (# TYPE) before it."""
    typed: set[str] = set()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    assert text.endswith("\n"), "the page ends with a line feed"
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("gauge", "counter"), line
            typed.add(name)
            out.setdefault(name, [])
            continue
        match = _SAMPLE.fullmatch(line)
        assert match, f"not a sample line: {line!r}"
        name, body, value = match.groups()
        assert name in typed, f"{name} has no # TYPE before it"
        labels: dict[str, str] = {}
        rest = body or ""
        while rest:
            pair = _LABEL.match(rest)
            assert pair, f"bad labels in {line!r}"
            labels[pair[1]] = pair[2].replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
            rest = rest[pair.end() :]
        out[name].append((labels, float(value)))
    return out


def scrape(url: str) -> tuple[str, str]:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.headers["Content-Type"], answer.read().decode()


def sample_row(sampled: datetime, job: str = "j") -> MetricSample:
    return MetricSample(
        sampled, job, "r1", 0, "sink", "s", 1, 10, 5.0, 6.0, 100, sampled, None, 1024, 0, None, None, 0
    )


# -- no Spark ------------------------------------------------------------------------------------
def test_pitstop_metrics_is_a_catalog_table_that_run_queries(tmp_path: Path) -> None:
    done = pitstop("run", "-c", "SELECT * FROM pitstop.metrics", "--format", "csv", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split(",") == COLUMNS


def test_metrics_keep_only_the_last_samples(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog.duckdb")
    try:
        t0 = datetime(2026, 11, 27, 8, 0)
        for i in range(5):  # two jobs in each round: the bound is on rounds, every job keeps 3
            at = t0 + timedelta(seconds=10 * i)
            catalog.add_metrics([sample_row(at, "a"), sample_row(at, "b")], keep=3)
        _, rows = catalog.query(
            "SELECT job, count(*), min(sampled) FROM pitstop.metrics GROUP BY job ORDER BY job"
        )
        assert rows == [("a", 3, t0 + timedelta(seconds=20)), ("b", 3, t0 + timedelta(seconds=20))]
        _, [(lag,)] = catalog.query("SELECT lag FROM pitstop.metrics LIMIT 1")
        assert lag is None
    finally:
        catalog.close()


def test_kafka_lag_per_partition_is_what_show_jobs_sums(tmp_path: Path) -> None:
    """Without a broker: the files a running Kafka source keeps (its start, what the broker said)."""
    from pitstop.catalog.rows import Mapping
    from pitstop.connectors.kafka.connector import CONNECTOR
    from pitstop.connectors.kafka.names import BROKER, INITIAL

    mapping = Mapping("orders", "kafka", (), None, {"bootstrap.servers": "127.0.0.1:1", "topic": "t"})
    assert CONNECTOR.lag_records(tmp_path, mapping, {}) is None  # the ends are not known yet
    (tmp_path / INITIAL).write_text(json.dumps({"0": 2, "1": 0, "10": 40}))
    (tmp_path / BROKER).write_text(json.dumps({"ends": {"0": 10, "1": 7, "10": 40}, "checked": time.time()}))
    assert CONNECTOR.lag_records(tmp_path, mapping, {"0": 5}) == {"0": 5, "1": 7, "10": 0}
    assert CONNECTOR.lag(tmp_path, mapping, {"0": 5}) == "12 records behind (3 partitions)"
    (tmp_path / BROKER).write_text(json.dumps({"down_since": 1.0, "error": "timed out", "checked": 1.0}))
    assert CONNECTOR.lag_records(tmp_path, mapping, {"0": 5}) is None  # not known while it is down


@pytest.mark.parametrize("value", ["0", "-1", "ten", "1.5"])
def test_metrics_settings_take_whole_numbers(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for env in ("PITSTOP_METRICS_S", "PITSTOP_METRICS_KEEP"):
        with monkeypatch.context() as patched:
            patched.setenv(env, value)
            with pytest.raises(
                PitstopError, match=f"{env} is '{re.escape(value)}'; it takes a whole number > 0"
            ):
                Settings.resolve(tmp_path)
    monkeypatch.setenv("PITSTOP_METRICS_S", "2")
    monkeypatch.setenv("PITSTOP_METRICS_KEEP", "7")
    assert (Settings.resolve(tmp_path).metrics_s, Settings.resolve(tmp_path).metrics_keep) == (2, 7)


def test_the_endpoint_answers_at_metrics_only_and_starts_no_spark(manager: Manager) -> None:
    endpoint = MetricsEndpoint(manager, "127.0.0.1", 0)
    url = endpoint.listen()
    try:
        kind, text = scrape(url)
        assert kind == "text/plain; version=0.0.4; charset=utf-8"
        families = parse_exposition(text)
        assert families["pitstop_job_currentInputWatermark"] == []  # no job runs
        assert families["pitstop_job_running"] == []
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(url.replace("/metrics", "/"), timeout=30)
        assert missing.value.code == 404
    finally:
        endpoint.shutdown()
    assert not manager.spark_started


def test_label_values_are_escaped_and_read_back() -> None:
    value = 'a "b" \\ c\nd'
    text = family_lines(
        "pitstop_x", "help with \\ and\na line feed", [({"job": value}, 1.5), ({"job": "e"}, 2)]
    )
    assert parse_exposition(text) == {"pitstop_x": [({"job": value}, 1.5), ({"job": "e"}, 2.0)]}


def test_a_metrics_port_in_use_is_refused_naming_it(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = pitstop("serve", "--port", "0", "--metrics-port", str(port), home=tmp_path / "home")
    assert done.returncode == 1
    said = f"ERROR: cannot serve metrics on 127.0.0.1:{port}: Address already in use; choose another port"
    assert said in done.stderr


def test_serve_with_a_metrics_port_says_where_and_serves_until_it_stops(tmp_path: Path) -> None:
    from command_helpers import start

    proc = start(
        "serve", "--port", "0", "--metrics-port", "0", home=tmp_path / "home", stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("pitstop serve: listening on postgresql://127.0.0.1:"), line
        url = re.search(r"; metrics on (http://127\.0\.0\.1:\d+/metrics)$", line.strip())
        assert url, line
        assert "pitstop_job_running" in parse_exposition(scrape(url[1])[1])
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    with pytest.raises(urllib.error.URLError):  # the endpoint stopped with the server
        scrape(url[1])


# -- a running job -------------------------------------------------------------------------------
@pytest.mark.spark
def test_a_running_windowed_job_is_sampled_into_pitstop_metrics_and_the_endpoint(tmp_path: Path) -> None:
    with serving(replace(settings(tmp_path / "home"), metrics_s=1, metrics_keep=3)) as served:
        endpoint = MetricsEndpoint(served.manager, "127.0.0.1", 0)
        url = endpoint.listen()
        try:
            with psycopg.connect(served.url(), autocommit=True) as conn:
                for statement in (CLICKS, "CREATE MAPPING wins TYPE DuckDB", JOB):
                    conn.execute(statement)

                def samples() -> list[dict[str, Any]]:
                    cur = conn.execute("SELECT * FROM pitstop.metrics ORDER BY sampled")
                    names = [d.name for d in cur.description or []]
                    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

                first = until("a first sample", samples)[0]["sampled"]

                def later() -> list[dict[str, Any]] | None:
                    """More samples than are kept (the first one is gone), each of a batch Spark
                    reported on, the watermark moving between the first kept and the last."""
                    rows = samples()
                    marks = [r["watermark"] for r in rows]
                    moved = None not in marks and marks[-1] > marks[0]
                    return rows if rows[0]["sampled"] > first and moved else None

                rows = until("the first sample removed and the watermark moving", later)
                listing = psql(served, "-c", "\\dt pitstop.*")
            text = scrape(url)[1]
        finally:
            endpoint.shutdown()
    assert len({r["sampled"] for r in rows}) == 3  # retention: the last 3 samples
    assert [c for c in COLUMNS if c not in rows[0]] == []
    for r in rows:
        where = (r["job"], r["branch"], r["sink"], r["stage"], r["restarts"])
        assert where == (JOB_NAME, 0, "wins", "per_minute", 0)
        assert r["state_rows"] is None  # Spark does not count them as pitstop runs RocksDB
        assert r["state_bytes"] > 0  # what RocksDB's state store holds in memory
        assert r["late_rows"] == 0 and r["lag"] is None and r["lag_records"] is None
        assert r["batch_id"] is not None and r["batch_ms"] is not None
    assert any(r["input_rows"] > 0 for r in rows)
    assert max(r["input_rows_per_s"] for r in rows) > 0
    marks = [r["watermark"] for r in rows]
    assert marks == sorted(marks) and marks[0] > datetime(2024, 1, 1)  # the generator's first event
    assert "metrics" in listing.stdout and listing.returncode == 0, listing.stderr

    families = parse_exposition(text)
    branch = {"job": JOB_NAME, "branch": "0", "sink": "wins"}
    [(labels, mark)] = families["pitstop_job_currentInputWatermark"]
    assert labels == branch and mark >= marks[-1].replace(tzinfo=UTC).timestamp() * 1000
    assert families["pitstop_job_numRestarts"] == [(branch, 0.0)]
    assert [v for _, v in families["pitstop_job_lastBatchId"]] and families["pitstop_job_lastBatchDuration"]
    assert families["pitstop_job_stage_numLateRecordsDropped"] == [({**branch, "stage": "per_minute"}, 0.0)]
    assert families["pitstop_job_stage_stateRows"] == []  # not known, so not shown as 0
    assert families["pitstop_job_running"] == [({"job": JOB_NAME, "status": "RUNNING"}, 1.0)]
    assert families["pitstop_job_numRecordsInErrors"] == [({"job": JOB_NAME}, 0.0)]
