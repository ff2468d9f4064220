"""What a run holds: its job, run row, plan, mappings, folder and positions, its branches' queries,
and what it is started with; the dataclass the run's parts (:mod:`.starting`, :mod:`.watching`,
:mod:`.stopping`, :mod:`.lateness`) derive from."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pitstop.catalog.rows import Mapping, Run
from pitstop.connectors.base import Sink
from pitstop.engine.frames import StageSeed
from pitstop.engine.runs.branch import BranchQuery
from pitstop.plan.model import Branch, JobPlan


@dataclass
class RunState:
    """The fields of an :class:`~pitstop.engine.runs.ActiveRun`."""

    job: str
    run: Run
    plan: JobPlan
    mappings: dict[str, Mapping]
    folder: Path
    start_positions: dict[str, Any]
    seeds: dict[str, StageSeed] = field(default_factory=dict)
    branches: list[BranchQuery] = field(default_factory=list)
    bounds: dict[str, Any] = field(default_factory=dict)
    """Sources read no further than these positions (a fence from the start: a replay's span, or
    where a suspended job stands when it is woken to be stopped with a snapshot)."""
    sinks: Callable[[Branch, Mapping, tuple[str, ...]], Sink] | None = None
    """Where the branches write instead of their sinks' connectors (a replay's capture)."""
    fail_fast: bool = False
    """A branch that stops has failed the run (no supervisor restarts it: a replay)."""
    failed_for_good: str | None = None
    """Why the run failed, once the manager has recorded it and stopped the run: a wait that
    polls it after that says so (the stopped run's queries no longer tell)."""
    _spark: Any = field(default=None, init=False, repr=False)
    _trigger_ms: int = field(default=500, init=False, repr=False)
    _catalog: Any = field(default=None, init=False, repr=False)
    _parallelism: int = field(default=2, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _stopping: bool = field(default=False, init=False, repr=False)
    _logged: set[tuple[int, int]] = field(default_factory=set, init=False, repr=False)
    _keyed: set[int] = field(default_factory=set, init=False, repr=False)
    """The branches whose sink replaces rows by key (its upsert keys, or a window table an
    early-results job keyed): their HAVING marks rows rather than drops them."""
