"""The seam for stage kinds (issue 11, point 1): every kind declares itself in one module, and a
snapshot's manifest names each stage's kind and format; no Spark needed."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from pitstop.errors import CompatibilityError, PlanError
from pitstop.plan.model import AggregateStage, JobPlan
from pitstop.stages import registry
from pitstop.stages.base import StageKind
from test_compat import branch, plan

OLD_MANIFEST = Path(__file__).resolve().parent / "data" / "snapshot_format_1" / "windows_v1" / "manifest.json"

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
