"""The seam for stage kinds (issue 11, point 1): every kind declares itself in one module, and a
snapshot's manifest names each stage's kind and format; no Spark needed."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from pitstop.errors import CompatibilityError, PlanError
from pitstop.executor import mapping_from_node
from pitstop.plan.model import AggregateStage, DedupSpec, IntervalSpec, JobPlan, RunningSpec, stage_from_json
from pitstop.planner.build import plan_job
from pitstop.sql.parser import parse_statement
from pitstop.stages import registry
from pitstop.stages.base import StageKind
from test_compat import branch, plan

DATA = Path(__file__).resolve().parent / "data"
OLD_MANIFEST = DATA / "snapshot_format_1" / "windows_v1" / "manifest.json"
# An interval join, a running aggregate, a ROW_NUMBER and a DISTINCT deduplication as pitstop wrote
# their plans (in the catalog's runs, in manifests) before each kind had its own record.
BEFORE_RECORDS = DATA / "stages_before_kind_records.json"
BEFORE_RECORDS_JOB = """CREATE JOB j AS BEGIN
INSERT INTO out SELECT a.k, a.ts, b.vts, b.page FROM clicks a JOIN views b
    ON a.k = b.k AND b.vts BETWEEN a.ts AND a.ts + INTERVAL '1' HOUR;
INSERT INTO counts SELECT k, COUNT(*) AS n, SUM(user_id) AS s FROM clicks GROUP BY k;
INSERT INTO firsts SELECT k, user_id, ts FROM (
    SELECT k, user_id, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn FROM clicks) WHERE rn = 1;
INSERT INTO seen SELECT DISTINCT k FROM clicks;
END"""

HOP = branch().replace(
    "TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)",
    "HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '2' HOUR, INTERVAL '1' HOUR)",
)
SESSION = branch().replace(
    "TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)",
    "SESSION(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' MINUTE)",
)


def only(job: JobPlan) -> AggregateStage:
    (stage,) = job.stages
    return stage


@pytest.mark.parametrize(("body", "kind"), [(branch(), "tumble"), (HOP, "hop"), (SESSION, "session")])
def test_each_window_function_plans_a_stage_of_its_own_kind(body: str, kind: str) -> None:
    stage = only(plan(body))
    assert stage.kind == kind
    assert registry.kind_of(stage).name == kind
    assert registry.manifest_entry(stage) == {"kind": kind, "format_version": 1}


RUNNING = "INSERT INTO hourly SELECT region, SUM(amount) AS revenue FROM orders GROUP BY region"
DISTINCT = "INSERT INTO hourly SELECT DISTINCT country, region FROM orders"
STATELESS = "INSERT INTO hourly SELECT country, region FROM orders WHERE amount > 1"


@pytest.mark.parametrize(
    ("body", "kind"),
    [(branch(), "tumble"), (HOP, "hop"), (SESSION, "session"), (RUNNING, "running"), (DISTINCT, "dedup")],
)
def test_exactly_one_kind_recognises_each_stateful_select(body: str, kind: str) -> None:
    """Issue 24: a kind recognises its own SELECT (StageKind.recognize); the planner asks the
    registry, and no kind claims a stateless SELECT."""
    from pitstop.sql.parser import parse_statement

    def core(sql: str):  # the INSERT's SELECT and its FROM's window function
        select = parse_statement(f"CREATE JOB j AS {sql}").args["body"][0].expression
        from_ = select.args["from_"].this
        return select, (from_ if type(from_).__name__ == "WindowTvf" else None)

    select, tvf = core(body)
    assert [k.name for k in registry.KINDS if k.recognize(select, tvf)] == [kind]
    assert registry.recognize(select, tvf) is registry.kind_named(kind)
    assert only(plan(body)).kind == kind
    assert registry.recognize(*core(STATELESS)) is None


def test_a_kind_added_to_the_registry_is_planned_without_touching_the_planner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Adding a kind is one module and one row of KINDS: a TUMBLE kind of its own (here in place
    of pitstop's) plans every TUMBLE aggregation, names its stages, and is found by name."""
    from pitstop.stages.tumble import Tumble

    class Tumble2(Tumble):
        name = "tumble2"
        suffix = "agg2"

    mine = Tumble2()
    kinds = tuple(mine if k.name == "tumble" else k for k in registry.KINDS)
    monkeypatch.setattr(registry, "KINDS", kinds)
    monkeypatch.setattr(registry, "_BY_NAME", {k.name: k for k in kinds})
    body = branch().replace("/*+ STAGE(daily) */ ", "")
    stage = only(plan(body))
    assert (stage.kind, stage.name) == ("tumble2", "daily_revenue.agg2")
    assert registry.kind_of(stage) is mine


@pytest.mark.parametrize("kind", registry.KINDS, ids=lambda k: k.name)
def test_every_kind_writes_its_state_contract_in_its_module_docstring(kind: StageKind) -> None:
    module = importlib.import_module(type(kind).__module__)
    doc = module.__doc__ or ""
    assert "State contract" in doc, module.__name__
    assert "Compatibility" in doc, module.__name__
    assert kind.format_version in kind.reads_formats


def test_a_manifest_from_before_stage_kinds_reads_as_window_stages_in_format_1() -> None:
    manifest = json.loads(OLD_MANIFEST.read_text())
    formats = {name: registry.entry_format(entry) for name, entry in manifest["stages"].items()}
    assert formats == {
        "per_minute.aggregate": ("tumble", 1),
        "sliding.aggregate": ("hop", 1),
        "sessions.aggregate": ("session", 1),
    }
    stages = registry.manifest_stages("windows_v1", manifest)
    assert {n: s.kind for n, s in stages.items()} == {n: k for n, (k, _) in formats.items()}


def test_a_plan_from_before_each_kind_had_its_own_record_reads_as_the_same_stages() -> None:
    mappings = {}
    for sql in (
        "CREATE MAPPING clicks (k VARCHAR, user_id BIGINT, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' HOUR) TYPE File OPTIONS ('path'='/tmp/pitstop-tests/c')",
        "CREATE MAPPING views (k VARCHAR, vts TIMESTAMP, page VARCHAR, "
        "WATERMARK FOR vts AS vts - INTERVAL '10' MINUTE) TYPE File OPTIONS ('path'='/tmp/pitstop-tests/v')",
        *(f"CREATE MAPPING {sink} (k VARCHAR) TYPE DuckDB" for sink in ("out", "counts", "firsts", "seen")),
    ):
        mapping = mapping_from_node(parse_statement(sql), sql)
        mappings[mapping.name] = mapping
    node = parse_statement(BEFORE_RECORDS_JOB)
    now = plan_job("j", list(node.args["body"]), mappings.get).stages
    before = tuple(stage_from_json(s) for s in json.loads(BEFORE_RECORDS.read_text()))
    assert before == now
    assert [type(s.params) for s in now] == [IntervalSpec, RunningSpec, DedupSpec, DedupSpec]
    assert [(s.kind, s.time_column) for s in now] == [
        ("interval_join", "ts"),
        ("running", None),
        ("dedup", "ts"),
        ("dedup", None),
    ]
    # Written again, each stage's JSON is its kind's record, and reads back the same.
    plan = plan_job("j", list(node.args["body"]), mappings.get)
    written = json.loads(json.dumps(plan.to_json()))
    stages = [b["before"][0]["stage"] if b["before"] else b["stage"] for b in written["branches"]]
    assert [sorted(s) for s in stages] == [
        ["accumulators", "functions", "keys", "name", "params", "watermark_delay_micros"]
    ] * 4
    assert [s["params"]["kind"] for s in stages] == ["interval_join", "running", "dedup", "dedup"]
    assert JobPlan.from_json(written) == plan


def test_a_stage_in_a_format_this_pitstop_cannot_read_is_refused_by_name() -> None:
    manifest = json.loads(OLD_MANIFEST.read_text())
    manifest["stages"]["sliding.aggregate"].update(kind="hop", format_version=7)
    with pytest.raises(CompatibilityError) as caught:
        registry.manifest_stages("windows_v9", manifest)
    assert caught.value.message.startswith(
        "snapshot 'windows_v9', stage 'sliding.aggregate': its state is in format 7 of kind 'hop', "
        "and this pitstop reads format(s) 1"
    )


def test_a_stage_of_a_kind_this_pitstop_lacks_is_refused_by_name() -> None:
    manifest = json.loads(OLD_MANIFEST.read_text())
    manifest["stages"]["per_minute.aggregate"]["kind"] = "match_recognize"
    with pytest.raises(CompatibilityError) as caught:
        registry.manifest_stages("future", manifest)
    assert "stage 'per_minute.aggregate': stage kind 'match_recognize' is unknown" in caught.value.message
    with pytest.raises(PlanError):
        registry.kind_named("match_recognize")


def test_a_branch_numbers_its_stages_operators_from_the_sink() -> None:
    (b,) = plan(branch()).branches
    assert registry.operator_ids(b) == {"daily": [0]}
    (stateless,) = plan(
        "INSERT INTO daily_revenue SELECT ts AS window_start, region FROM orders WHERE amount > 1"
    ).branches
    assert registry.operator_ids(stateless) == {}
